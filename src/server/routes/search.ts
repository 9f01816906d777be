/**
 * `GET /search`: full-text search over the results feed and the built-in notes, blog posts and
 * podcast episodes (docs/api/service.md, "GET /search"), for a key with the `read` scope.
 *
 * @module
 */

import { NOT_BLANK } from "../../util/patterns.ts";
import { z } from "zod";
import { HttpError } from "../../errors.ts";
import { SearchUnavailableError } from "../../search/search_index.ts";
import type { ZodOpenApiOperationObject } from "zod-openapi";
import {
  MARK_END,
  MARK_START,
  MAX_QUERY_CHARS,
  parseQuery,
  SEARCH_KINDS,
} from "../../search/text.ts";
import { json } from "../responses.ts";
import type { RelaySearch } from "../searching.ts";
import type { Routes } from "../route.ts";
import { parseOr400 } from "../schemas.ts";

/** Hits `GET /search` lists when no `limit` is given. */
export const SEARCH_LIMIT_DEFAULT = 20;
/** Hits `GET /search` lists at most. */
export const SEARCH_LIMIT_MAX = 50;

/** The query of `GET /search`: `q` (1–1,000 characters), `kind`, `limit` (1–50). */
export const searchQuerySchema = z.object({
  q: z.string({ error: 'parameter "q" is required: the words to look for' })
    .refine((q) => q.trim() !== "", { error: 'parameter "q" must not be empty' })
    .refine((q) => q.length <= MAX_QUERY_CHARS, {
      error: `parameter "q" may have at most ${MAX_QUERY_CHARS} characters`,
    }),
  kind: z.enum(SEARCH_KINDS, {
    error: `parameter "kind" must be one of ${SEARCH_KINDS.join(", ")}`,
  }).optional(),
  limit: z.pipe(
    z.transform((value: unknown) => typeof value === "string" ? value : String(value)),
    z.string().regex(/^0*[1-9][0-9]{0,5}$/, {
      error: `parameter "limit" must be a whole number from 1 to ${SEARCH_LIMIT_MAX}`,
    }),
  ).transform((value) => Math.min(Number(value), SEARCH_LIMIT_MAX)).optional(),
});

/**
 * The search route, served when the relay keeps a search index.
 *
 * @param search The relay's search index.
 */
export function searchRoutes(search: RelaySearch): Routes {
  return {
    "/search": {
      scope: "read",
      methods: ["GET", "HEAD"],
      handler: async (_c, url) => {
        const params: Record<string, string> = {};
        for (const name of ["q", "kind", "limit"]) {
          const value = url.searchParams.get(name);
          if (value !== null && (value !== "" || name === "q")) params[name] = value;
        }
        const { q, kind, limit } = parseOr400(searchQuerySchema, params, "search");
        const query = parseQuery(q);
        if (query === undefined) return json({ items: [] });
        try {
          const items = await search.find({
            query,
            kind,
            limit: limit ?? SEARCH_LIMIT_DEFAULT,
          });
          return json({ items });
        } catch (error) {
          if (!(error instanceof SearchUnavailableError)) throw error;
          throw new HttpError(503, `Cannot search: ${error.message}`, {
            "retry-after": String(error.retryAfterS),
          });
        }
      },
    },
  };
}

/**
 * `GET /search` in the API document (`openapi.ts`), which adds each path's methods, scope and
 * key errors from the route table.
 *
 * @param problems The document's entries of the problems the route gives besides the key's.
 */
export function searchOperation(problems: Record<string, unknown>): ZodOpenApiOperationObject {
  const param = (name: string, schema: z.ZodType, example: string, description: string) =>
    schema.meta({ description, param: { in: "query", name, example } });
  const shape = searchQuerySchema.shape;
  const hit = z.object({
    kind: z.enum(SEARCH_KINDS),
    title: z.string(),
    url: z.string().meta({
      description: "The page a result came from, else a path on the relay (`/blog/<id>`, …)",
    }),
    snippet: z.string().meta({
      description: `Text around the first match, each match between ${MARK_START} and ${MARK_END}`,
    }),
    t: z.number().int().meta({ description: "When it was made or pushed, epoch ms" }),
  });
  return {
    summary: "Search notes, blog posts, podcast episodes and results",
    description: "Every word must match, in any language: words of three or more characters " +
      "anywhere (inside unspaced Chinese or Japanese too), shorter ones as whole words. " +
      "Operators, quotes and `*` are taken as text. While the index is being built the answer " +
      "is 503 with Retry-After.",
    parameters: [
      // What the check takes: more than white space (a rule the refinements hide).
      param(
        "q",
        z.string().regex(NOT_BLANK).max(MAX_QUERY_CHARS),
        "tomato",
        "The words to look for",
      ),
      param("kind", shape.kind, "post", "Only this kind: note, post, episode or result"),
      param("limit", shape.limit, "20", `At most this many (1–${SEARCH_LIMIT_MAX}; default 20)`),
    ],
    responses: {
      "200": {
        description: "The hits, best first",
        content: { "application/json": { schema: z.object({ items: z.array(hit) }) } },
      },
      ...problems,
    } as ZodOpenApiOperationObject["responses"],
  };
}

/**
 * The built-in services' API under `/downstream`: the same paths, requests and answers as
 * an external notes store, blog and podcast queue (docs/publishing-builtin.md), for
 * callers outside the relay; `POST /publish` calls the services directly (`publish.ts`).
 * Writing takes the relay's app id (`X-App-ID`) or a key with the `publish` scope,
 * checked by the app like every other route's key.
 *
 * @module
 */

import { z } from "zod";
import { HttpError } from "../../errors.ts";
import { builtinTargets } from "../../builtin/publishing.ts";
import { CONTENT_MAX, TAGS_MAX, TITLE_MAX } from "../../publish/target_kind.ts";
import { readBody } from "../body.ts";
import { whileRoomLeft } from "../faults.ts";
import { json } from "../responses.ts";
import type { BuiltinPublishing, RouteContext, Routes } from "../route.ts";
import { parseOr400 } from "../schemas.ts";

/** The prefix of the downstream API: the default `{publish_url}` is `{base}/downstream`. */
export const DOWNSTREAM_PATH = "/downstream";

function text(name: string) {
  return z
    .string({ error: `field "${name}" must be a string` })
    .refine((t) => t.isWellFormed(), { error: `field "${name}" is not valid Unicode` });
}

function required(name: string, max: number) {
  return text(name)
    .refine((t) => t.trim() !== "", { error: `field "${name}" must not be empty` })
    .refine((t) => t.length <= max, { error: `field "${name}" is longer than ${max} characters` });
}

const tagsField = text("tags").refine((t) => t.length <= TAGS_MAX, {
  error: `field "tags" is longer than ${TAGS_MAX} characters`,
});

/** `POST /downstream/api/notes/import`: a note in Markdown. */
export const noteSchema = z.object({
  title: required("title", TITLE_MAX),
  content: required("content", CONTENT_MAX),
  content_format: z.literal(1, { error: 'field "content_format" must be 1 (Markdown)' })
    .optional(),
  tags: tagsField.optional(),
  folder_id: z.unknown().optional(),
});

/** `POST /downstream/api/publish`: a blog post, a read-aloud episode, or both. */
export const postSchema = z.object({
  title: required("title", TITLE_MAX),
  content: required("content", CONTENT_MAX),
  content_md: text("content_md").optional(),
  tags: tagsField.optional(),
  targets: z.array(z.enum(["blog", "nas"], { error: 'a target is "blog" or "nas"' }), {
    error: 'field "targets" must be an array holding "blog" or "nas"',
  }).min(1, { error: 'field "targets" must hold "blog" or "nas"' }),
  transform: z.literal("read", { error: 'field "transform" must be "read"' }).optional(),
}).refine((b) => !b.targets.includes("nas") || b.transform === "read", {
  error: 'target "nas" (read aloud) needs "transform": "read"',
}).refine((b) => b.targets.includes("nas") || b.transform === undefined, {
  error: 'the blog takes no "transform"',
});

/** A post as {@linkcode postSchema} takes it. */
export type PostRequest = z.infer<typeof postSchema>;

/**
 * The origin links point at: `--public-url`, else the address the relay listens on; never
 * a request's `Host` (src/builtin/site.ts says why).
 */
export function siteOrigin(builtin: BuiltinPublishing): string {
  return builtin.services.site.origin;
}

/**
 * Publishes what `post` asks for: a blog post and/or a read-aloud episode.
 *
 * @param targets The built-in services as publish targets.
 * @param post A validated request.
 * @returns The answer of `POST /downstream/api/publish`.
 */
async function publishPost(
  targets: ReturnType<typeof builtinTargets>,
  post: PostRequest,
): Promise<Record<string, unknown>> {
  const answer: Record<string, unknown> = {};
  const article = {
    title: post.title,
    content: post.content,
    ...(post.content_md === undefined ? {} : { content_md: post.content_md }),
    ...(post.tags === undefined ? {} : { tags: post.tags }),
  };
  if (post.targets.includes("blog")) {
    const saved = await targets.publishPost(article);
    answer.blog = { status: "success", post_id: saved.post_id, redirect_url: saved.url };
  }
  if (post.targets.includes("nas")) {
    const episode = await targets.queueEpisode(article);
    answer.status = "success";
    answer.message = episode.message;
    answer.episode_id = episode.id;
  }
  return answer;
}

/** Reads a JSON object body within the relay's limit, or throws the 415/413/400 problem. */
async function jsonObject(relay: RouteContext, request: Request, action: string) {
  const body = await readBody(request, relay.maxBodyBytes, {
    action,
    accepted: ["application/json"],
  });
  if (body.kind !== "fields") {
    throw new HttpError(
      400,
      `Cannot ${action}: the body must be a JSON object`,
      {},
      "malformed-body",
    );
  }
  return body.fields;
}

/**
 * The downstream API's routes: saving a note and publishing a post or an episode take
 * the app id or a `publish` key; deleting a post takes a `publish` key (its cookie, for an
 * identity gateway's clients, only from the relay's own pages or without a browser).
 *
 * @param relay What the handlers share; `relay.builtin` must be set.
 */
export function downstreamRoutes(relay: RouteContext & { builtin: BuiltinPublishing }): Routes {
  const builtin = relay.builtin;
  const { services } = builtin;
  // Refused while the store is in disk-full mode: what it gave up is for pulls and acks.
  const targets = whileRoomLeft(builtinTargets(services), relay.store);
  return {
    [`${DOWNSTREAM_PATH}/api/notes/import`]: {
      scope: "publish",
      appId: true,
      methods: ["POST"],
      handler: async (c) => {
        const fields = await jsonObject(relay, c.req.raw, "save the note");
        const note = parseOr400(noteSchema, fields, "save the note");
        const saved = await targets.saveNote({
          title: note.title,
          content: note.content,
          ...(note.tags === undefined ? {} : { tags: note.tags }),
        });
        return json({ code: 0, doc_id: saved.doc_id });
      },
    },
    [`${DOWNSTREAM_PATH}/api/publish`]: {
      scope: "publish",
      appId: true,
      methods: ["POST"],
      handler: async (c) => {
        const fields = await jsonObject(relay, c.req.raw, "publish");
        const post = parseOr400(postSchema, fields, "publish");
        return json(await publishPost(targets, post));
      },
    },
    [`${DOWNSTREAM_PATH}/delete/:post_id`]: {
      scope: "publish",
      methods: ["POST"],
      handler: async (c) => {
        if (!(await services.blog.delete(c.req.param("post_id") ?? ""))) {
          throw new HttpError(404, "No such blog post");
        }
        const location = `${siteOrigin(builtin)}/blog/`;
        return new Response(null, { status: 303, headers: { location } });
      },
    },
  };
}

/**
 * The writes answered without Hono's dispatch: `POST /submit` and `POST /push`, the routes
 * with a `direct` answer (`route.ts`). Hono's dispatch and its middleware cost a
 * write about a tenth of its JavaScript (docs/benchmarks.md, "Writes").
 *
 * @module
 */

import type { Access, Authorize } from "./auth.ts";
import { COMPRESS_ABOVE_BYTES, encoded } from "./representation.ts";
import { sizeOf } from "./responses.ts";
import { accessOf, type Routes } from "./route.ts";

/** The connection a request came on (the app's `RequestInfo`): the client's address. */
interface Connection {
  readonly remoteAddr?: { readonly hostname?: string } | undefined;
}

/** What answers an error: Hono's `onError`, given the request's method and path. */
export type ErrorResponder = (
  error: unknown,
  c?: { req: { method: string; path: string } },
) => Response;

/**
 * Answers the writes whose routes have a `direct` answer (submit, push) without Hono's
 * dispatch, after the same checks in the same order: a known path and an allowed method
 * (any other method is left to Hono, which answers 405 or a preflight), then Origin, key
 * and scope, then the route's own. Errors are answered as Hono's `onError` answers them,
 * and every answer is compressed as Hono's middleware would (a POST gets neither
 * validators nor a HEAD's length).
 *
 * @param routes Every route; those with `direct` are answered here.
 * @param authorize The one authorisation path of every route.
 * @param errorResponse What answers an error, as Hono's `onError`.
 * @returns What answers a request: the answer, or `undefined` when the request is not such
 *   a write (Hono answers it).
 */
export function directWrites(
  routes: Readonly<Routes>,
  authorize: Authorize,
  errorResponse: ErrorResponder,
): (request: Request, url: URL, info?: Connection) => Promise<Response> | undefined {
  const writes = new Map<
    string,
    {
      methods: readonly string[];
      access: Access | undefined;
      direct: (request: Request, url: URL) => Promise<Response>;
    }
  >();
  for (const [path, route] of Object.entries(routes)) {
    if (route.direct === undefined) continue;
    writes.set(path, { methods: route.methods, access: accessOf(route), direct: route.direct });
  }
  const write = async (
    route: NonNullable<ReturnType<typeof writes.get>>,
    request: Request,
    url: URL,
    info: Connection | undefined,
  ): Promise<Response> => {
    let response: Response;
    try {
      if (route.access !== undefined) {
        authorize(request, url, info?.remoteAddr?.hostname, route.access, url.pathname);
      }
      response = await route.direct(request, url);
    } catch (error) {
      response = errorResponse(error, { req: { method: request.method, path: url.pathname } });
    }
    // An answer too short to compress ("OK (qa)", most problems) is sent as it is: then
    // neither the client's Accept-Encoding nor the answer's headers are read.
    const size = sizeOf(response);
    return size !== undefined && size < COMPRESS_ABOVE_BYTES
      ? response
      : await encoded(request, response);
  };
  return (request, url, info) => {
    const route = writes.get(url.pathname);
    if (route === undefined || !route.methods.includes(request.method)) return undefined;
    return write(route, request, url, info);
  };
}

/**
 * CORS (the Fetch standard's "CORS protocol") for the origins the relay lets in besides
 * its own pages: those `--allow-origin` names and browser extensions. A page on such an
 * origin may read the relay's answers and send the headers the API takes (`X-Auth-Key`,
 * `Last-Event-ID` for a results stream); every other origin gets no CORS header at all,
 * so that its pages can neither read an answer nor send a key header.
 *
 * @module
 */

import { isExtensionOrigin } from "./auth.ts";

/** How long a browser may keep a preflight's answer, seconds (Chromium caps it at 7200). */
const PREFLIGHT_MAX_AGE_S = 600;

/** The request headers a page may send: the key, a body's type, a stream's resume point. */
const ALLOWED_HEADERS = "X-Auth-Key, Content-Type, Last-Event-ID, X-App-ID";

/** Answer headers a page may read besides the CORS-safelisted ones. */
const EXPOSED_HEADERS = "Retry-After, Allow, Location, Content-Range, Accept-Ranges";

/**
 * Makes the check of which `Origin` a response may be granted to.
 *
 * @param allowed `--allow-origin`, as `URL.origin` gives them.
 * @returns A function of the request headers: the `Origin` to grant, or `undefined` for a
 *   request without one or from an origin not let in (the relay's own pages need no CORS).
 */
export function corsOrigin(
  allowed: readonly string[],
): (headers: Headers) => string | undefined {
  const granted = new Set(allowed);
  return (headers) => {
    const origin = headers.get("origin");
    if (origin === null) return undefined;
    return granted.has(origin) || isExtensionOrigin(origin) ? origin : undefined;
  };
}

/**
 * Whether `request` is a CORS preflight: an `OPTIONS` naming the method it asks about.
 *
 * @param request The request.
 */
export function isPreflight(request: Request): boolean {
  return request.method === "OPTIONS" && request.headers.has("access-control-request-method");
}

/**
 * The answer to a preflight from a granted origin: 204 with the route's methods and the
 * headers the API takes.
 *
 * @param origin The granted origin ({@linkcode corsOrigin}).
 * @param methods The methods the route answers, e.g. `["GET", "HEAD"]`.
 */
export function preflightResponse(origin: string, methods: readonly string[]): Response {
  return new Response(null, {
    status: 204,
    headers: {
      "access-control-allow-origin": origin,
      "access-control-allow-methods": methods.join(", "),
      "access-control-allow-headers": ALLOWED_HEADERS,
      "access-control-max-age": String(PREFLIGHT_MAX_AGE_S),
      vary: "Origin",
    },
  });
}

/**
 * `response` granted to `origin`: `Access-Control-Allow-Origin`, the headers a page may
 * read, and `Vary: Origin` for caches. Refusals are granted too, so that the page can show
 * why (a 401's detail, a 429's `Retry-After`).
 *
 * @param response The answer; its headers are changed when they may be, else it is copied.
 * @param origin The granted origin ({@linkcode corsOrigin}).
 */
export function granted(response: Response, origin: string): Response {
  if (response.headers.has("access-control-allow-origin")) return response; // a preflight's
  let answer = response;
  try {
    answer.headers.set("access-control-allow-origin", origin);
  } catch {
    // The headers of a fetched Response are immutable: copy it.
    answer = new Response(response.body, response);
    answer.headers.set("access-control-allow-origin", origin);
  }
  answer.headers.set("access-control-expose-headers", EXPOSED_HEADERS);
  answer.headers.append("vary", "Origin");
  return answer;
}

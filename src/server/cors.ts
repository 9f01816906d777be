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
 * headers the API takes; or, for a resource anyone may read (`Route.anyOrigin`), to any
 * origin: `*`, with the conditional and range headers a player or feed reader sends
 * ({@linkcode PUBLIC_ALLOWED_HEADERS}).
 *
 * @param origin The granted origin ({@linkcode corsOrigin}), or `*`.
 * @param methods The methods the route answers, e.g. `["GET", "HEAD"]`.
 * @param allowed The request headers allowed; default the API's.
 */
export function preflightResponse(
  origin: string,
  methods: readonly string[],
  allowed: string = ALLOWED_HEADERS,
): Response {
  return new Response(null, {
    status: 204,
    headers: {
      "access-control-allow-origin": origin,
      "access-control-allow-methods": methods.join(", "),
      "access-control-allow-headers": allowed,
      "access-control-max-age": String(PREFLIGHT_MAX_AGE_S),
      vary: "Origin",
    },
  });
}

/** Request headers a page of any origin may send to a public resource: conditions and ranges. */
export const PUBLIC_ALLOWED_HEADERS =
  "Range, If-None-Match, If-Modified-Since, If-Match, If-Unmodified-Since, If-Range";

/**
 * `response` granted to `origin`: `Access-Control-Allow-Origin`, the headers a page may
 * read, and `Vary: Origin` for caches. Refusals are granted too, so that the page can show
 * why (a 401's detail, a 429's `Retry-After`).
 *
 * @param response The answer; its headers are changed when they may be, else it is copied.
 * @param origin The granted origin ({@linkcode corsOrigin}).
 */
export function granted(response: Response, origin: string): Response {
  // A preflight's answer, or a public one granted to every origin (`*`).
  if (response.headers.has("access-control-allow-origin")) return varyOrigin(response);
  return varyOrigin(edited(response, (headers) => {
    headers.set("access-control-allow-origin", origin);
    headers.set("access-control-expose-headers", EXPOSED_HEADERS);
  }));
}

/**
 * `response` with `Origin` in its `Vary`. Every answer carries it, granted or not: the
 * relay grants an answer to some origins and not to others (nor to a request without
 * `Origin`), so a shared cache that kept an answer made for one request must not hand it
 * to a request from another origin (the Fetch standard, "CORS protocol and HTTP caches").
 *
 * @param response The answer; its headers are changed when they may be, else it is copied.
 * @returns The answer with `Vary: Origin`, added once.
 */
export function varyOrigin(response: Response): Response {
  const vary = response.headers.get("vary");
  if (vary !== null && /(^|,)\s*(origin|\*)\s*(,|$)/i.test(vary)) return response;
  return edited(response, (headers) => headers.append("vary", "Origin"));
}

/**
 * `response` readable by a page of any origin (`Access-Control-Allow-Origin: *`): for the
 * public podcast's feed, transcripts and audio and the public blog's feed, which browser
 * players and web feed readers fetch from their own sites. Only for what anyone may read
 * without a key; an answer that needed one is never given `*`.
 *
 * @param response A public resource's answer; its headers are changed, or it is copied.
 */
export function grantedToAll(response: Response): Response {
  return edited(response, (headers) => {
    headers.set("access-control-allow-origin", "*");
    headers.set("access-control-expose-headers", EXPOSED_HEADERS);
  });
}

/** `response` with `edit` applied to its headers; a copy when they are immutable. */
function edited(response: Response, edit: (headers: Headers) => void): Response {
  try {
    edit(response.headers);
    return response;
  } catch {
    // The headers of a fetched Response are immutable: copy it.
    const copy = new Response(response.body, response);
    edit(copy.headers);
    return copy;
  }
}

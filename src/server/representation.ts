/**
 * What every answer of the relay gets on its way out, whatever route made it: the
 * `Content-Length` of a `HEAD` answer, and compression of text bodies for clients that
 * ask for it.
 *
 * Hono answers `HEAD` by running the `GET` route and dropping its body; a body whose
 * length was not declared then left as `Content-Length: 0`, which says the `GET` answer
 * is empty (HTTP semantics, RFC 9110: a `HEAD` answer carries the headers the `GET`
 * answer would). {@linkcode headLength} measures the body before it is dropped.
 *
 * @module
 */

import type { MiddlewareHandler } from "hono";
import { sizeOf } from "./responses.ts";

/**
 * Whether a body of this media type is a stream without end or a file: never read in
 * memory to measure, tag or compress it (an event stream never ends; audio is sent from
 * its file, with ranges).
 *
 * @param type The answer's `Content-Type`, if any.
 */
export function isStreamed(type: string | null): boolean {
  return type !== null && (type.startsWith("text/event-stream") || type.startsWith("audio/"));
}

/**
 * Middleware that gives a `HEAD` answer the `Content-Length` its `GET` answer has: the
 * size the route recorded, else the body measured (bodies of app files, pages, feeds and
 * documents, all made in memory). Streams ({@linkcode isStreamed}) and answers that declare
 * their length are left alone.
 *
 * @returns Hono middleware; registered before the routes.
 */
export function headLength(): MiddlewareHandler {
  return async (c, next) => {
    await next();
    if (c.req.method !== "HEAD") return;
    const res = c.res;
    if (res.body === null || res.headers.has("content-length")) return;
    if (isStreamed(res.headers.get("content-type"))) return;
    const bytes = sizeOf(res) ?? (await res.arrayBuffer()).byteLength;
    const headers = new Headers(res.headers);
    headers.set("content-length", String(bytes));
    // Hono drops the body of a HEAD answer; the length is what it keeps of it.
    c.res = undefined;
    c.res = new Response(null, { status: res.status, statusText: res.statusText, headers });
  };
}

/**
 * Whether a request came without a `Host` header (or with an empty one), which an
 * HTTP/1.1 server must refuse with 400 (RFC 9112, "Request Target"). Deno's request does
 * not say which HTTP version carried it, and an HTTP/2 request has no `Host` header (its
 * host travels as `:authority`, which Deno puts in the URL); without either, Deno makes
 * the URL's host `localhost`. So a request lacks its host when it has no `Host` header
 * and its URL says `localhost` over plain HTTP. An HTTPS request may be HTTP/2 and is let
 * through; a cleartext HTTP/2 client that names `localhost` looks the same and is refused.
 *
 * @param request A request that came over the network (in-process requests have no host).
 * @param url Its URL as parsed.
 * @returns `true` when it must be refused with 400.
 */
export function lacksHost(request: Request, url: URL): boolean {
  if (url.protocol !== "http:") return false;
  const host = request.headers.get("host");
  if (host === "") return true;
  return host === null && url.hostname === "localhost";
}

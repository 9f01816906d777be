/**
 * What every answer of the relay gets on its way out, whatever route made it: the
 * `Content-Length` of a `HEAD` answer, compression of text bodies for clients that ask
 * for it, and the refusal of requests without a host.
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
 * `node:zlib`, loaded with the first answer to compress: a relay that is never asked for
 * compression does not carry it (docs/benchmarks.md, "Idle memory").
 */
let zlib: Promise<typeof import("node:zlib")> | undefined;

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
 * HTTP/1.1 server must refuse with 400 (RFC 9112, "Request Target"). An HTTP/2 request has
 * no `Host` header (its host travels as `:authority`, which Deno puts in the URL); without
 * either, Deno makes the URL's host `localhost`. So a request lacks its host when it has no
 * `Host` header and its URL says `localhost` over plain HTTP. An HTTPS request may be
 * HTTP/2 and is let through; a cleartext HTTP/2 client that names `localhost` looks the
 * same and is refused.
 *
 * HTTP/1.0 has no `Host` requirement, and health checkers use it without one (HAProxy's
 * default `option httpchk` sends `OPTIONS / HTTP/1.0` and nothing else). Deno's request
 * does not say which version carried it (an HTTP/1.0 and an HTTP/1.1 request without
 * headers reach the handler alike), so such a probe is told by its shape
 * ({@linkcode isProbe}) and answered; any HTTP/1.1 client sends more than that.
 *
 * @param request A request that came over the network (in-process requests have no host).
 * @param url Its URL as parsed.
 * @returns `true` when it must be refused with 400.
 */
export function lacksHost(request: Request, url: URL): boolean {
  if (url.protocol !== "http:") return false;
  const host = request.headers.get("host");
  if (host === "") return true;
  return host === null && url.hostname === "localhost" && !isProbe(request);
}

/** The only headers a health probe without `Host` may send. */
const PROBE_HEADERS = new Set(["connection", "user-agent"]);

/**
 * Whether a request without `Host` has the shape of an HTTP/1.0 health check: a `GET`,
 * `HEAD` or `OPTIONS` with no header but `Connection` and `User-Agent`. Every HTTP/1.1
 * client (curl, browsers, fetch, HTTP libraries) sends `Host`, and those made to leave it
 * out still send `Accept` or a key, so they stay refused.
 *
 * @param request A request without a `Host` header.
 */
export function isProbe(request: Request): boolean {
  const method = request.method;
  if (method !== "GET" && method !== "HEAD" && method !== "OPTIONS") return false;
  for (const name of request.headers.keys()) if (!PROBE_HEADERS.has(name)) return false;
  return true;
}

/** Bodies smaller than this, bytes, are sent as they are: compressing saves too little. */
export const COMPRESS_ABOVE_BYTES = 1024;

/** Bodies larger than this, bytes, are sent as they are: not held twice in memory. */
const COMPRESS_AT_MOST_BYTES = 8 * 1024 * 1024;

/**
 * Brotli quality: 5 of 11 gives most of its gain over gzip (the API document: 64 KB to
 * about 7 KB) in a few ms on a Raspberry Pi; 11 takes a hundred times longer.
 */
const BROTLI_QUALITY = 5;

/** Media types worth compressing: text, JSON, XML and JavaScript (SVG is XML). */
const COMPRESSIBLE = /^(text\/|application\/([\w.-]+\+)?(json|xml|javascript)\b|image\/svg\+xml)/i;

/**
 * The encoding to send to a client, from its `Accept-Encoding` (RFC 9110): `br` when it
 * takes it, else `gzip`, else none. A coding with `q=0` is refused; `*` counts for both.
 */
function chosenEncoding(accept: string | undefined): "br" | "gzip" | undefined {
  if (accept === undefined) return undefined;
  const weights = new Map<string, number>();
  for (const part of accept.split(",")) {
    const [name = "", ...params] = part.split(";").map((piece) => piece.trim().toLowerCase());
    const q = params.find((param) => param.startsWith("q="));
    weights.set(name, q === undefined ? 1 : Number(q.slice(2)) || 0);
  }
  const weight = (name: string) => weights.get(name) ?? weights.get("*") ?? 0;
  if (weight("br") > 0 && weight("br") >= weight("gzip")) return "br";
  return weight("gzip") > 0 ? "gzip" : undefined;
}

/** `body` compressed with `encoding`, off the main thread (zlib's own threads). */
async function compress(
  body: Uint8Array,
  encoding: "br" | "gzip",
): Promise<Uint8Array<ArrayBuffer>> {
  const { brotliCompress, constants, gzip } = await (zlib ??= import("node:zlib"));
  const out = await new Promise<Uint8Array>((resolve, reject) => {
    const done = (error: Error | null, result: Uint8Array) =>
      error === null ? resolve(result) : reject(error);
    if (encoding === "gzip") gzip(body, done);
    else {
      brotliCompress(body, {
        params: {
          [constants.BROTLI_PARAM_QUALITY]: BROTLI_QUALITY,
          [constants.BROTLI_PARAM_SIZE_HINT]: body.byteLength,
        },
      }, done);
    }
  });
  return Uint8Array.from(out); // a copy of the (small) result, on an ArrayBuffer of its own
}

/**
 * `headers` with `Accept-Encoding` added to its `Vary` (a copy).
 *
 * @param headers The answer's headers; not changed.
 */
export function varied(headers: Headers): Headers {
  const out = new Headers(headers);
  const vary = out.get("vary");
  if (vary === null) out.set("vary", "Accept-Encoding");
  else if (!/accept-encoding|\*/i.test(vary)) out.set("vary", `${vary}, Accept-Encoding`);
  return out;
}

/**
 * `response` as it goes to the client that sent `request`: its text body compressed with
 * `br` or `gzip` when the client asks (`Accept-Encoding`) and it is over
 * {@linkcode COMPRESS_ABOVE_BYTES}, with `Vary: Accept-Encoding`. Never compressed: event
 * streams and audio ({@linkcode isStreamed}), answers other than 2xx (and 206 parts),
 * answers marked `no-transform`, bodies over 8 MiB. An answer sent as it is carries no
 * `Vary`: whichever client a cache gives it to can read it. A `HEAD` gets the
 * `Content-Length` and `Content-Encoding` its `GET` would. A strong `ETag` becomes weak:
 * the compressed bytes are not the bytes it names (the tags made from content are weak
 * already).
 *
 * @param request The request, for its method and `Accept-Encoding`.
 * @param response The answer as the route made it.
 * @returns `response` itself when it is sent as it is, synchronously; else a promise of
 *   the compressed answer.
 */
export function encoded(request: Request, response: Response): Response | Promise<Response> {
  // First what the client takes: a client that asks for no compression (a benchmark, a
  // script) costs nothing more, not even a look at the answer's headers.
  const encoding = chosenEncoding(request.headers.get("accept-encoding") ?? undefined);
  if (encoding === undefined) return response;
  const { status } = response;
  if (status < 200 || status > 299 || status === 204 || status === 206) return response;
  // The recorded size before the body: asking a response for its `body` turns a body held
  // in memory into a stream, which Deno then sends chunked once the headers are read.
  const recorded = sizeOf(response);
  if (recorded !== undefined && recorded < COMPRESS_ABOVE_BYTES) return response;
  if (response.body === null || !compressible(response.headers)) return response;
  const declared = recorded ?? Number(response.headers.get("content-length") ?? NaN);
  if (declared < COMPRESS_ABOVE_BYTES || declared > COMPRESS_AT_MOST_BYTES) return response;
  return compressedResponse(response, encoding);
}

/** Whether an answer with these headers may be compressed, whatever its size. */
function compressible(headers: Headers): boolean {
  const type = headers.get("content-type");
  if (type === null || !COMPRESSIBLE.test(type) || isStreamed(type)) return false;
  if (headers.has("content-encoding")) return false;
  return !/no-transform/i.test(headers.get("cache-control") ?? "");
}

/**
 * Whether the `200` of a body of `bytes` with `headers` goes to the client of `request`
 * compressed ({@linkcode encoded}), and so with `Vary: Accept-Encoding`: what a `304` that
 * stands for it must carry too (RFC 9110, "304 Not Modified").
 *
 * @param request The request, for its `Accept-Encoding`.
 * @param headers The `200`'s headers.
 * @param bytes The `200`'s body size, bytes.
 */
export function compressedFor(request: Request, headers: Headers, bytes: number): boolean {
  return chosenEncoding(request.headers.get("accept-encoding") ?? undefined) !== undefined &&
    compressible(headers) && bytes >= COMPRESS_ABOVE_BYTES && bytes <= COMPRESS_AT_MOST_BYTES;
}

/** `response` with its body compressed, when it turns out to be large enough. */
async function compressedResponse(response: Response, encoding: "br" | "gzip"): Promise<Response> {
  const { status, statusText } = response;
  const body = new Uint8Array(await response.arrayBuffer());
  const headers = varied(response.headers);
  let sent = body;
  if (body.byteLength >= COMPRESS_ABOVE_BYTES && body.byteLength <= COMPRESS_AT_MOST_BYTES) {
    sent = await compress(body, encoding);
    headers.set("content-encoding", encoding);
    const etag = headers.get("etag");
    if (etag !== null && !etag.startsWith("W/")) headers.set("etag", `W/${etag}`);
  }
  headers.set("content-length", String(sent.byteLength));
  return new Response(sent, { status, statusText, headers });
}

/**
 * Middleware that sends every answer {@linkcode encoded} for its client.
 *
 * @returns Hono middleware; registered before the routes.
 */
export function compressed(): MiddlewareHandler {
  return async (c, next) => {
    await next();
    const out = encoded(c.req.raw, c.res);
    if (out === c.res) return;
    c.res = undefined;
    c.res = await out;
  };
}

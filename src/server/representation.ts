/**
 * What every answer of the relay gets on its way out, whatever route made it (the
 * pipeline's representation step, pipeline.ts): the `Content-Length` of a `HEAD` answer,
 * compression of text bodies for clients that ask for it, `Cache-Control` from the route's
 * access, and the refusal of requests without a host.
 *
 * A `HEAD` runs the `GET` route and its body is dropped; a body whose length was not
 * declared would then leave as `Content-Length: 0`, which says the `GET` answer is empty
 * (HTTP semantics, RFC 9110: a `HEAD` answer carries the headers the `GET` answer would).
 * {@linkcode headLength} measures the body before it is dropped.
 *
 * @module
 */

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
 * A `HEAD` answer with the `Content-Length` its `GET` answer has, and no body: the size the
 * route recorded, else the body measured (bodies of app files, pages, feeds and documents,
 * all made in memory). Streams ({@linkcode isStreamed}) and answers that declare their
 * length keep their headers as they are, without the body.
 *
 * @param response The answer the `GET` route made for a `HEAD`.
 * @returns The answer to send, without a body; a promise only when the body is measured.
 */
export function headLength(response: Response): Response | Promise<Response> {
  const { status, statusText } = response;
  const bytes = sizeOf(response);
  if (bytes === 0 || (bytes === undefined && response.body === null)) return response;
  if (bytes === undefined && !response.headers.has("content-length")) {
    if (!isStreamed(response.headers.get("content-type"))) {
      return response.arrayBuffer().then((body) =>
        new Response(null, { status, statusText, headers: lengthOf(response, body.byteLength) })
      );
    }
  }
  void response.body?.cancel().catch(() => {});
  const headers = bytes === undefined ? response.headers : lengthOf(response, bytes);
  return new Response(null, { status, statusText, headers });
}

/** `response`'s headers with `Content-Length: bytes`. */
function lengthOf(response: Response, bytes: number): Headers {
  const headers = new Headers(response.headers);
  headers.set("content-length", String(bytes));
  return headers;
}

/**
 * The `Cache-Control` an answer of a route gets from its access (RFC 9111, "private" and
 * "no-store"): `no-store` for routes whose answers no cache may keep; `private` for every
 * answer to a request that needed a key, whatever the route said (a route's `public`
 * becomes `private`; its `max-age` stays); an open route's answer is left as the route made
 * it. The key travels in `X-Auth-Key`, `?key=` or a cookie, none of which make a shared
 * cache treat the request as authenticated, so without this a proxy in front could give
 * one household's answer to anyone asking the same URL.
 *
 * @param response The answer; its headers are changed when they may be, else it is copied.
 * @param rule What the route's access asks for; `undefined` for an open route.
 * @returns The answer with its `Cache-Control`.
 */
export function cacheControlled(
  response: Response,
  rule: "private" | "no-store" | undefined,
): Response {
  if (rule === undefined) return response;
  // The API's own answers (they record their size) carry no Cache-Control of their own:
  // set without reading their headers first (reading them costs a few µs).
  const own = sizeOf(response) === undefined ? response.headers.get("cache-control") : null;
  let value: string = rule;
  if (own !== null && rule === "private" && !/no-store|private/i.test(own)) {
    const rest = own.split(",").map((part) => part.trim())
      .filter((part) => part !== "" && !/^public$/i.test(part));
    value = ["private", ...rest].join(", ");
  } else if (own !== null && rule === "private") value = own;
  return withHeader(response, "cache-control", value);
}

/**
 * `response` with header `name` set to `value`: in place when its headers may change (what
 * the relay makes), else on a copy (the headers of a fetched answer are immutable).
 */
export function withHeader(response: Response, name: string, value: string): Response {
  try {
    response.headers.set(name, value);
    return response;
  } catch {
    const copy = new Response(response.body, response);
    copy.headers.set(name, value);
    return copy;
  }
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

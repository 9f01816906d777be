/**
 * The successful answers the route handlers build: plain text and JSON, each with its
 * `Content-Length`. Errors are problem documents, made by `problemResponse` in errors.ts.
 *
 * @module
 */

/** The media type of every plain-text answer. */
export const TEXT_TYPE = "text/plain; charset=utf-8";

/** The media type of every JSON answer. */
export const JSON_TYPE = "application/json; charset=utf-8";

const encoder = new TextEncoder();

/**
 * Bodies larger than this, bytes, are handed to the runtime in pieces of this size as the
 * client takes them, rather than at once. A connection counts as busy until its answer
 * is handed over, and one idle for the idle timeout is closed (docs/faults.md,
 * "Connections and file descriptors"): a peek of megabytes handed over at once would make
 * a slow phone's connection look idle while it is still downloading.
 */
const STREAM_ABOVE_BYTES = 64 * 1024;

/** Bodies up to this many UTF-16 code units are sent as text ({@linkcode sized}). */
const SHORT_CHARS = 1024;

/** The size of `text` in UTF-8, bytes (an unpaired surrogate counts as U+FFFD: 3). */
export function utf8Length(text: string): number {
  let bytes = text.length;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code < 0x80) continue;
    if (code < 0x800) {
      bytes += 1;
    } else if (code >= 0xd800 && code <= 0xdbff && i + 1 < text.length) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        bytes += 2; // a pair: 4 bytes for 2 code units
        i++;
      } else bytes += 2;
    } else bytes += 2;
  }
  return bytes;
}

/** `bytes` as a stream that gives the next piece only when the previous one was taken. */
function piecewise(bytes: Uint8Array): ReadableStream<Uint8Array> {
  let offset = 0;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      controller.enqueue(bytes.subarray(offset, offset + STREAM_ABOVE_BYTES));
      offset += STREAM_ABOVE_BYTES;
      if (offset >= bytes.byteLength) controller.close();
    },
  }, { highWaterMark: 0 });
}

/**
 * A response with `body` encoded and its size recorded ({@linkcode withSize}), which the
 * access log and `HEAD` read instead of measuring the body again (a peek can be megabytes).
 * `Content-Type` is its only header unless the body is streamed: for a body in memory the
 * runtime sends `Content-Length` itself, and a response made with `Content-Type` alone is
 * made fastest (measured: 0.5 µs, against 2.4–6.5 µs with a second header in its init); the
 * representation step adds `Cache-Control` and `Vary` afterwards with `Headers.set`, which
 * costs less (docs/benchmarks.md, "Reads").
 *
 * @param body The body as text.
 * @param status The HTTP status.
 * @param type The `Content-Type`.
 */
function sized(body: string, status: number, type: string): Response {
  if (body.length <= SHORT_CHARS) {
    // Short answers ("OK (qa)", a small JSON) go as text: the runtime encodes them as it
    // writes, and their length is counted here without encoding them twice.
    const length = utf8Length(body);
    return withSize(new Response(body, { status, headers: { "content-type": type } }), length);
  }
  const bytes = encoder.encode(body);
  if (bytes.byteLength <= STREAM_ABOVE_BYTES) {
    return withSize(
      new Response(bytes, { status, headers: { "content-type": type } }),
      bytes.byteLength,
    );
  }
  // A stream's length is not known to the runtime: said here, so it is not sent chunked.
  return withSize(
    new Response(piecewise(bytes), {
      status,
      headers: { "content-type": type, "content-length": String(bytes.byteLength) },
    }),
    bytes.byteLength,
  );
}

/** Where {@linkcode withSize} keeps a response's body size, bytes. */
const SIZE = Symbol("bodyBytes");

/**
 * Records the size of `response`'s body, for {@linkcode sizeOf}.
 *
 * @param response A response just made.
 * @param bytes The size of its body, bytes.
 * @returns `response`.
 */
export function withSize(response: Response, bytes: number): Response {
  (response as Response & { [SIZE]?: number })[SIZE] = bytes;
  return response;
}

/**
 * The size of `response`'s body as recorded by {@linkcode withSize}, bytes, or `undefined`
 * when none was. The access log reads it instead of the response's headers: reading them
 * makes Deno build a `Headers` object for every response (measured: a few µs each).
 */
export function sizeOf(response: Response): number | undefined {
  return (response as Response & { [SIZE]?: number })[SIZE];
}

/**
 * A `text/plain; charset=utf-8` response.
 *
 * @param body The text.
 * @param status The HTTP status; default 200.
 */
export function text(body: string, status = 200): Response {
  return sized(body, status, TEXT_TYPE);
}

/**
 * An `application/json; charset=utf-8` response.
 *
 * @param value Anything `JSON.stringify` takes.
 * @param status The HTTP status; default 200.
 */
export function json(value: unknown, status = 200): Response {
  return sized(JSON.stringify(value), status, JSON_TYPE);
}

/**
 * Serving one file from disk as HTTP wants it, as the standard library's `serveFile` does: the
 * file streamed, never read whole; validators from its size and modification time (a strong
 * `ETag`, `Last-Modified`), `304 Not Modified` when the client has it and `412` when it names
 * another version (`If-Match`, `If-Unmodified-Since`); byte ranges
 * (`Accept-Ranges: bytes`, `206 Partial Content`, `416` past the end, `If-Range`) read by
 * `range-parser` through {@linkcode byteRange}; `HEAD` with the headers and no body. RFC 9110,
 * "Range Requests" and "Conditional Requests". The podcast's MP3s are served by it.
 *
 * @module
 */

import { HttpError, problemResponse } from "../errors.ts";
import {
  byteRange,
  fileTag,
  notModified,
  notModifiedResponse,
  preconditionFailed,
  preconditionFailedResponse,
} from "./validators.ts";

/** How to serve a file. */
export interface FileOptions {
  /** Its media type, e.g. `audio/mpeg`. */
  type: string;
  /** Its `Cache-Control`, e.g. `public, max-age=86400`. */
  cacheControl: string;
  /** The 404's detail when the file is not there, e.g. `No such episode audio`. */
  notFound: string;
}

/**
 * Answers a `GET` or `HEAD` of the file at `path`: 200 with the whole file, 206 with the one
 * range asked for, 304 when the client's copy is current, 412 (a problem document with the
 * file's validators) when the request names another version, 416 (a problem document whose
 * `Content-Range` gives the file's size) when the range starts past the end.
 *
 * @param request The request: its method, `Range`, `If-Range`, `If-Match`,
 *   `If-Unmodified-Since`, `If-None-Match`, `If-Modified-Since`.
 * @param path The file's path on disk.
 * @param options Its media type, caching and what to say when it is missing.
 * @throws {HttpError} 404 with `options.notFound` when the file is missing.
 * @throws the file system's other errors (a logged 500).
 */
export async function serveFile(
  request: Request,
  path: string,
  options: FileOptions,
): Promise<Response> {
  let file: Deno.FsFile;
  try {
    file = await Deno.open(path, { read: true });
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) throw new HttpError(404, options.notFound);
    throw error;
  }
  let streaming = false;
  try {
    const { size, mtime } = await file.stat();
    const validators = {
      etag: fileTag(size, mtime?.getTime() ?? 0),
      lastModified: mtime?.getTime(),
    };
    const headers: Record<string, string> = {
      "content-type": options.type,
      "accept-ranges": "bytes",
      "cache-control": options.cacheControl,
      etag: validators.etag,
      ...(mtime ? { "last-modified": mtime.toUTCString() } : {}),
    };
    if (preconditionFailed(request, validators)) {
      return preconditionFailedResponse({
        etag: headers.etag!,
        ...(mtime ? { "last-modified": headers["last-modified"]! } : {}),
      });
    }
    if (notModified(request, validators)) return notModifiedResponse(new Headers(headers));
    const range = await byteRange(request, size, validators);
    if (range === "unsatisfiable") {
      return problemResponse(416, `Cannot serve that range: the file has ${size} bytes`, {
        "content-range": `bytes */${size}`,
      });
    }
    const { start, end } = range ?? { start: 0, end: size - 1 };
    const length = end - start + 1;
    const sent = {
      ...headers,
      "content-length": String(length),
      ...(range ? { "content-range": `bytes ${start}-${end}/${size}` } : {}),
    };
    const status = range ? 206 : 200;
    if (request.method === "HEAD") return new Response(null, { status, headers: sent });
    if (start > 0) await file.seek(start, Deno.SeekMode.Start);
    streaming = true;
    return new Response(firstBytes(file.readable, length), { status, headers: sent });
  } finally {
    // The stream closes the file when it ends or is cancelled; every other way out, here.
    if (!streaming) file.close();
  }
}

/**
 * The first `length` bytes of `source`, which is cancelled once they are through (closing
 * the file under it) or when the reader goes away.
 */
function firstBytes(
  source: ReadableStream<Uint8Array>,
  length: number,
): ReadableStream<Uint8Array> {
  let left = length;
  return source.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      start(controller) {
        if (left === 0) controller.terminate();
      },
      transform(chunk, controller) {
        const kept = chunk.byteLength <= left ? chunk : chunk.subarray(0, left);
        left -= kept.byteLength;
        controller.enqueue(kept);
        if (left === 0) controller.terminate();
      },
    }),
  );
}

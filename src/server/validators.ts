/**
 * Validators and conditional requests (RFC 9110, "Conditional Requests"): an entity tag
 * and a modification time for what a `GET` answers, `304 Not Modified` when the client
 * already has it (`If-None-Match`, `If-Modified-Since`), and `If-Range`, which lets a
 * byte range be served only from the same file the client has the rest of.
 *
 * Every route's answers get them through {@linkcode validated}, a step of the pipeline's
 * representation (pipeline.ts) that tags
 * bodies made in memory (the web app's files, pages, feeds, notes, the API's documents)
 * by their content. Files sent as streams (the podcast's MP3s) are tagged by their size
 * and modification time by the file server (`file_server.ts`), which calls
 * {@linkcode notModified} and {@linkcode byteRange} itself.
 *
 * @module
 */

import { createHash } from "node:crypto";
import { compressedFor, isStreamed, varied } from "./representation.ts";
import { sizeOf } from "./responses.ts";

/** The validators of one representation. */
export interface Validators {
  /** Its entity tag, quoted as the `ETag` header carries it, e.g. `"3q2-9f"`. */
  readonly etag?: string | undefined;
  /** When it last changed, epoch ms; compared at the second, as HTTP dates are. */
  readonly lastModified?: number | undefined;
}

/**
 * An entity tag for a body: its SHA-256, shortened to 128 bits (base64url). The same
 * bytes always get the same tag, across restarts too. It is weak (`W/`): the same content
 * sent compressed or not is one tag, so that a `304` carries the tag the client holds
 * whichever encoding it got (`If-None-Match` compares tags weakly anyway).
 *
 * @param body The body's bytes.
 * @returns The tag, e.g. `W/"n4bQgYhMfWWaL-qgxVrQFa"`.
 */
export function contentTag(body: Uint8Array): string {
  return `W/"${createHash("sha256").update(body).digest("base64url").slice(0, 22)}"`;
}

/**
 * A strong entity tag for a file from its size and modification time, as file servers
 * make them: the file is not read. A file rewritten in place within the same millisecond
 * at the same size would keep its tag; the relay writes its files once, under new names.
 *
 * @param size Bytes.
 * @param mtimeMs Modification time, epoch ms.
 */
export function fileTag(size: number, mtimeMs: number): string {
  return `"${size.toString(36)}-${Math.trunc(mtimeMs).toString(36)}"`;
}

/** The entity tags of an `If-None-Match` or `If-Match` list, without `W/`; `*` as is. */
function listedTags(header: string): string[] {
  return [...header.matchAll(/\*|(?:W\/)?("[^"]*")/g)].map((match) => match[1] ?? "*");
}

/** The whole seconds of an epoch ms time, as an HTTP date holds it. */
function seconds(ms: number): number {
  return Math.floor(ms / 1000);
}

/**
 * Whether a `GET` or `HEAD` can be answered `304 Not Modified` (RFC 9110, "Evaluation of
 * Preconditions"): `If-None-Match` lists the representation's tag (weak comparison, or
 * `*`); without `If-None-Match`, `If-Modified-Since` is no earlier than its modification
 * time. Other methods are never.
 *
 * @param request The request and its conditional headers.
 * @param validators The representation's validators.
 */
export function notModified(request: Request, validators: Validators): boolean {
  if (request.method !== "GET" && request.method !== "HEAD") return false;
  const noneMatch = request.headers.get("if-none-match");
  if (noneMatch !== null) {
    if (validators.etag === undefined) return false;
    const tag = validators.etag.replace(/^W\//, "");
    return listedTags(noneMatch).some((listed) => listed === "*" || listed === tag);
  }
  const since = request.headers.get("if-modified-since");
  if (since === null || validators.lastModified === undefined) return false;
  const date = Date.parse(since);
  return !Number.isNaN(date) && seconds(validators.lastModified) <= seconds(date);
}

/**
 * Whether a `GET` or `HEAD` of a representation must be refused with `412 Precondition
 * Failed` (RFC 9110, "Evaluation of Preconditions", steps 1 and 2): `If-Match` lists
 * neither `*` nor the representation's tag, strongly compared (a weak tag never matches);
 * without `If-Match`, `If-Unmodified-Since` is earlier than its modification time (an
 * unreadable date is ignored). A client resuming a download sends them to learn that the
 * file changed.
 *
 * @param request The request and its conditional headers.
 * @param validators The representation's validators.
 */
export function preconditionFailed(request: Request, validators: Validators): boolean {
  const ifMatch = request.headers.get("if-match");
  if (ifMatch !== null) {
    const { etag } = validators;
    const strong = etag !== undefined && !etag.startsWith("W/") ? etag : undefined;
    return ![...ifMatch.matchAll(/\*|(W\/)?("[^"]*")/g)].some((match) =>
      match[0] === "*" || (match[1] === undefined && match[2] === strong)
    );
  }
  const since = request.headers.get("if-unmodified-since");
  if (since === null || validators.lastModified === undefined) return false;
  const date = Date.parse(since);
  return !Number.isNaN(date) && seconds(validators.lastModified) > seconds(date);
}

/** The headers a 304 keeps of the 200 it stands for (RFC 9110, "304 Not Modified"). */
const KEPT_BY_304 = ["etag", "last-modified", "cache-control", "vary", "expires", "date"];

/**
 * The `304 Not Modified` answer that stands for `full`: no body, its validators and
 * caching headers.
 *
 * @param headers The headers of the 200 it replaces.
 */
export function notModifiedResponse(headers: Headers): Response {
  const kept = new Headers();
  for (const name of KEPT_BY_304) {
    const value = headers.get(name);
    if (value !== null) kept.set(name, value);
  }
  return new Response(null, { status: 304, headers: kept });
}

/**
 * Whether a `Range` may be served (RFC 9110, "If-Range"): yes without `If-Range`; with an
 * entity tag, only when it is the representation's own, strongly compared (a weak tag
 * never matches); with a date, only when it is exactly the modification time. Otherwise
 * the client's part is of another version: it gets the whole file, 200.
 */
function rangeApplies(request: Request, validators: Validators): boolean {
  const ifRange = request.headers.get("if-range")?.trim();
  if (ifRange === undefined) return true;
  if (ifRange.startsWith('"') || ifRange.startsWith("W/")) {
    return validators.etag !== undefined && !validators.etag.startsWith("W/") &&
      ifRange === validators.etag;
  }
  const date = Date.parse(ifRange);
  return !Number.isNaN(date) && validators.lastModified !== undefined &&
    seconds(date) === seconds(validators.lastModified);
}

/** `range-parser`, once loaded. */
let parseRanges: typeof import("range-parser") | undefined;

/**
 * The byte range a `GET` asks of a representation of `size` bytes (RFC 9110, "Range"), as
 * `range-parser` reads the `Range` header, when it may be served ({@linkcode rangeApplies}).
 * Several ranges are joined when they touch; a request still for several gets the whole
 * file (the relay does not send multipart answers). `range-parser` is loaded with the first
 * `Range` header, not with the relay: it is a CommonJS package, and the first of those
 * brings Node's module loader (docs/benchmarks.md, "Idle memory").
 *
 * @param request The request with its `Range` and `If-Range` headers.
 * @param size The representation's size, bytes.
 * @param validators Its validators, for `If-Range`.
 * @returns The first and last byte; `"unsatisfiable"` (416) when every range starts past
 *   the end; `undefined` to send the whole (no `Range`, a malformed one, several ranges,
 *   or an `If-Range` of another version).
 */
export async function byteRange(
  request: Request,
  size: number,
  validators: Validators,
): Promise<{ start: number; end: number } | "unsatisfiable" | undefined> {
  const header = request.headers.get("range");
  if (header === null || request.method !== "GET" || !rangeApplies(request, validators)) {
    return undefined;
  }
  parseRanges ??= (await import("range-parser")).default;
  const ranges = parseRanges(size, header, { combine: true });
  if (ranges === -1) return "unsatisfiable";
  if (ranges === -2 || ranges.type !== "bytes" || ranges.length !== 1) return undefined;
  const [range] = ranges;
  return range === undefined ? undefined : { start: range.start, end: range.end };
}

/** Bodies larger than this, bytes, are not read to be tagged: they pass untagged. */
const MAX_TAGGED_BYTES = 8 * 1024 * 1024;

/**
 * Every `200` answer to a `GET` or `HEAD` made in memory, with an `ETag` from its content
 * ({@linkcode contentTag}), or `304` when the client has it ({@linkcode notModified}, which
 * also honours a `Last-Modified` the route set). Left alone: answers the route tagged
 * itself, streams ({@linkcode isStreamed}), `no-store` answers, bodies over 8 MiB, and the
 * API's own text and JSON answers (`responses.ts`, which record their size): reads of queues
 * and feeds that change with every write and are polled, where hashing each answer would
 * cost every read and rarely save one.
 *
 * @param request The request: its method and conditional headers.
 * @param response The answer as the route made it.
 * @param safe Whether the route's `GET` only reads: a `GET` that changes state (a pull)
 *   must never be answered `304`, which would drop what it took.
 * @returns `response` itself, synchronously, when it is left alone; else a promise of the
 *   tagged answer or its `304`.
 */
export function validated(
  request: Request,
  response: Response,
  safe: boolean,
): Response | Promise<Response> {
  const method = request.method;
  if ((method !== "GET" && method !== "HEAD") || response.status !== 200 || !safe) {
    return response;
  }
  // The API's own answers first, before their headers are read (that costs a few µs) or
  // their body is (which turns a body in memory into a stream, sent chunked).
  if (sizeOf(response) !== undefined || response.body === null) return response;
  const headers = response.headers;
  if (headers.has("etag") || headers.has("content-encoding")) return response;
  if (isStreamed(headers.get("content-type"))) return response;
  if (/no-store/i.test(headers.get("cache-control") ?? "")) return response;
  const declared = Number(headers.get("content-length") ?? 0);
  if (declared > MAX_TAGGED_BYTES) return response;
  return tagged(request, response);
}

/** `response` read, tagged by its content, and answered `304` when the client has it. */
async function tagged(request: Request, response: Response): Promise<Response> {
  const body = new Uint8Array(await response.arrayBuffer());
  const headers = new Headers(response.headers);
  headers.set("etag", contentTag(body));
  headers.set("content-length", String(body.byteLength));
  const lastModified = Date.parse(headers.get("last-modified") ?? "");
  const validators = {
    etag: headers.get("etag")!,
    lastModified: Number.isNaN(lastModified) ? undefined : lastModified,
  };
  if (!notModified(request, validators)) {
    return new Response(body, { status: 200, statusText: response.statusText, headers });
  }
  // A 304 carries the Vary its 200 would: that one is compressed for this client.
  const compressed = compressedFor(request, headers, body.byteLength);
  return notModifiedResponse(compressed ? varied(headers) : headers);
}

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
import { problemResponse } from "../errors.ts";
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

const DAY = "(Mon|Tue|Wed|Thu|Fri|Sat|Sun)";
const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
const MONTH = `(${MONTHS.join("|")})`;
const TIME = "(\\d{2}):(\\d{2}):(\\d{2})";
/** `Sun, 06 Nov 1994 08:49:37 GMT`: day, month, year, hour, minute, second. */
const IMF_FIXDATE = new RegExp(`^${DAY}, (\\d{2}) ${MONTH} (\\d{4}) ${TIME} GMT$`);
/** `Sunday, 06-Nov-94 08:49:37 GMT` (obsolete): day, month, two-digit year, time. */
const RFC_850 = new RegExp(`^${DAY}[a-z]{3,6}, (\\d{2})-${MONTH}-(\\d{2}) ${TIME} GMT$`);
/** `Sun Nov  6 08:49:37 1994` (obsolete, C's asctime): month, day, time, year. */
const ASCTIME = new RegExp(`^${DAY} ${MONTH} ([ \\d]\\d) ${TIME} (\\d{4})$`);

/**
 * An HTTP date (RFC 9110, "Date/Time Formats": the IMF-fixdate and the two obsolete forms a
 * recipient must also read) as epoch ms, or `undefined` for anything else. Conditional
 * headers holding something that is not such a date are ignored, as RFC 9110 requires;
 * `Date.parse` would read `2026` or `Nov 1` as dates.
 *
 * @param value The header's value, e.g. `Sun, 06 Nov 1994 08:49:37 GMT`.
 */
export function httpDate(value: string): number | undefined {
  const trimmed = value.trim();
  let parts: [string, string, string, string, string, string] | undefined;
  let match = IMF_FIXDATE.exec(trimmed);
  if (match !== null) parts = [match[4]!, match[3]!, match[2]!, match[5]!, match[6]!, match[7]!];
  else if ((match = RFC_850.exec(trimmed)) !== null) {
    // A two-digit year more than 50 years ahead is the last such year past (RFC 9110).
    const thisYear = new Date().getUTCFullYear();
    let year = Math.floor(thisYear / 100) * 100 + Number(match[4]);
    if (year > thisYear + 50) year -= 100;
    parts = [String(year), match[3]!, match[2]!, match[5]!, match[6]!, match[7]!];
  } else if ((match = ASCTIME.exec(trimmed)) !== null) {
    parts = [match[7]!, match[2]!, match[3]!.trim(), match[4]!, match[5]!, match[6]!];
  }
  if (parts === undefined) return undefined;
  const [year, month, day, hour, minute, second] = parts.map((part, i) =>
    i === 1 ? MONTHS.indexOf(part) : Number(part)
  ) as [number, number, number, number, number, number];
  const ms = Date.UTC(year, month, day, hour, minute, second);
  // 31 Feb or 25:00 roll over into another date: not a date that was sent.
  const back = new Date(ms);
  return back.getUTCDate() === day && back.getUTCHours() === hour &&
      back.getUTCMinutes() === minute && back.getUTCSeconds() === second
    ? ms
    : undefined;
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
  const date = httpDate(since);
  return date !== undefined && seconds(validators.lastModified) <= seconds(date);
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
  const date = httpDate(since);
  return date !== undefined && seconds(validators.lastModified) > seconds(date);
}

/**
 * Whether a request to a representation that has no entity tag must be refused with `412
 * Precondition Failed` (RFC 9110, "If-Match"): its `If-Match` names tags, and none can
 * match a representation without one (`*` passes: the resource exists). The API's own
 * answers and writes carry no tags; a write is checked before it is carried out.
 *
 * @param request The request, with or without `If-Match`.
 */
export function untaggedPreconditionFailed(request: Request): boolean {
  const ifMatch = request.headers.get("if-match");
  return ifMatch !== null && !listedTags(ifMatch).includes("*");
}

/**
 * The 412 of a request whose `If-Match` or `If-Unmodified-Since` names another state of
 * the resource: a problem document, with the resource's validators when it has them.
 */
export function preconditionFailedResponse(headers: Record<string, string> = {}): Response {
  return problemResponse(
    412,
    "The resource is not in the state the request names (If-Match, If-Unmodified-Since): " +
      "fetch it again without them",
    headers,
  );
}

/**
 * The headers a 304 keeps of the 200 it stands for (RFC 9110, "304 Not Modified"), and the
 * `Access-Control-Allow-Origin: *` of a public feed: a cache updates its stored headers
 * from a 304 (RFC 9111, "Freshening Stored Responses"), and would otherwise lose it.
 */
const KEPT_BY_304 = [
  "etag",
  "last-modified",
  "cache-control",
  "vary",
  "expires",
  "date",
  "access-control-allow-origin",
];

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
  const date = httpDate(ifRange);
  return date !== undefined && validators.lastModified !== undefined &&
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
  if (sizeOf(response) !== undefined) {
    return untaggedPreconditionFailed(request) ? preconditionFailedResponse() : response;
  }
  if (response.body === null) return response;
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
  const validators = {
    etag: headers.get("etag")!,
    lastModified: httpDate(headers.get("last-modified") ?? ""),
  };
  if (preconditionFailed(request, validators)) {
    const lastModified = headers.get("last-modified");
    return preconditionFailedResponse({
      etag: validators.etag,
      ...(validators.lastModified === undefined ? {} : { "last-modified": lastModified! }),
    });
  }
  if (!notModified(request, validators)) {
    return new Response(body, { status: 200, statusText: response.statusText, headers });
  }
  // A 304 carries the Vary its 200 would: that one is compressed for this client.
  const compressed = compressedFor(request, headers, body.byteLength);
  return notModifiedResponse(compressed ? varied(headers) : headers);
}

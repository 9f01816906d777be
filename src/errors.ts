/**
 * HTTP errors and RFC 9457 problem documents.
 *
 * Domain and HTTP code throw {@linkcode HttpError}; the app's single error handler turns
 * it into a problem response with {@linkcode problemResponse}.
 *
 * @module
 */

/**
 * The message of a thrown value, for one line of a log or a problem's detail: an `Error`'s
 * `message`, anything else as a string.
 */
export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The media type of every error body (RFC 9457). */
const PROBLEM_CONTENT_TYPE = "application/problem+json";

/**
 * The kind of problem each status stands for, unless the answer names a finer one: the
 * last part of the problem's `type` (docs/api.md, "Problem types", one heading each).
 */
const KIND_OF_STATUS: Readonly<Record<number, string>> = {
  400: "bad-request",
  401: "unauthorized",
  403: "forbidden",
  404: "not-found",
  405: "method-not-allowed",
  408: "request-timeout",
  413: "content-too-large",
  415: "unsupported-media-type",
  416: "range-not-satisfiable",
  429: "too-many-requests",
  500: "internal-error",
  502: "bad-gateway",
  503: "unavailable",
  507: "disk-full",
};

/** Kinds finer than their status: the storage faults (503 unless the disk is full). */
const FINER_KINDS = ["disk-read-only", "database-damaged", "disk-error"] as const;

/** Every kind of problem the relay answers with, each a heading of docs/api.md. */
export const PROBLEM_KINDS: readonly string[] = [
  ...new Set(Object.values(KIND_OF_STATUS)),
  ...FINER_KINDS,
];

/**
 * Where the problem types point: the catalogue in docs/api.md, as a path on the relay's
 * own origin (RFC 9457 takes a URI reference). It does not change between versions: a
 * client may tell kinds of errors apart by it.
 */
export const PROBLEM_TYPE_BASE = "/docs/api.md#";

/**
 * The `type` of a problem document: its kind in docs/api.md's catalogue.
 *
 * @param status The HTTP status, 400–599.
 * @param kind A kind finer than the status's own, one of {@linkcode PROBLEM_KINDS}.
 * @returns e.g. `/docs/api.md#content-too-large`; `about:blank` for a status without one.
 */
export function problemType(status: number, kind?: string): string {
  const named = kind ?? KIND_OF_STATUS[status];
  return named === undefined ? "about:blank" : `${PROBLEM_TYPE_BASE}${named}`;
}

/** An RFC 9457 problem document, as the relay writes it. */
export interface ProblemDocument {
  /** The kind of problem, a stable URI reference into docs/api.md ({@linkcode problemType}). */
  type: string;
  /** The status code's reason phrase, e.g. `"Bad Request"`. */
  title: string;
  /** The HTTP status code, 400–599. */
  status: number;
  /** One sentence a person can act on, e.g. `Cannot submit: content is empty`. */
  detail: string;
}

/**
 * An error that becomes a problem response with its own status and headers.
 *
 * @example
 * ```ts
 * throw new HttpError(400, "Cannot submit: content is empty");
 * ```
 */
export class HttpError extends Error {
  /** HTTP status, 400–599. */
  readonly status: number;
  /** Extra response headers, e.g. `Allow` on a 405. */
  readonly headers: Record<string, string>;

  /**
   * @param status HTTP status, 400–599.
   * @param detail One sentence a person can act on; becomes the problem's `detail`.
   * @param headers Extra response headers.
   */
  constructor(status: number, detail: string, headers: Record<string, string> = {}) {
    super(detail);
    this.name = "HttpError";
    this.status = status;
    this.headers = headers;
  }
}

/**
 * Builds the problem document for `status`.
 *
 * @param status HTTP status, 400–599.
 * @param detail One sentence a person can act on.
 * @param kind A kind finer than the status's own ({@linkcode problemType}).
 */
export function problem(status: number, detail: string, kind?: string): ProblemDocument {
  const title = REASON_PHRASES[status] ?? "Error";
  const type = problemType(status, kind);
  return { type, title, status, detail: truncate(detail, MAX_DETAIL_CHARS) };
}

/**
 * Longest `detail`, in characters: a detail quotes what was wrong, and a client must not be
 * able to make the relay echo half a megabyte back.
 */
const MAX_DETAIL_CHARS = 400;

/**
 * Shortens `text` to `max` characters, ending in `…` when it was cut.
 *
 * @param max Characters to keep, default 100: enough to recognise a quoted value.
 */
export function truncate(text: string, max = 100): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/**
 * Why a `fetch` failed, in one line. Deno's fetch throws "fetch failed" and keeps the real
 * reason (refused, DNS, reset) in `cause`, possibly several levels down.
 *
 * @returns `refused` when the peer refused the connection; `reason`, the innermost message's
 *   first line.
 */
export function fetchFailure(error: unknown): { refused: boolean; reason: string } {
  const messages: string[] = [];
  for (let e: unknown = error; e !== undefined && messages.length < 4;) {
    messages.push(e instanceof Error ? e.message : String(e));
    e = e instanceof Error ? e.cause : undefined;
  }
  return {
    refused: /refused/i.test(messages.join(": ")),
    reason: (messages.at(-1) ?? "unknown error").split("\n")[0]!,
  };
}

/**
 * The reason phrases of RFC 9110 (and RFC 6585 for 428, 429, 431, 511), as problem titles.
 * Written here rather than taken from `node:http`, whose polyfill costs the relay about
 * 4 MB of memory at start (docs/benchmarks.md, "Idle memory").
 */
const REASON_PHRASES: Record<number, string> = {
  400: "Bad Request",
  401: "Unauthorized",
  402: "Payment Required",
  403: "Forbidden",
  404: "Not Found",
  405: "Method Not Allowed",
  406: "Not Acceptable",
  407: "Proxy Authentication Required",
  408: "Request Timeout",
  409: "Conflict",
  410: "Gone",
  411: "Length Required",
  412: "Precondition Failed",
  413: "Content Too Large",
  414: "URI Too Long",
  415: "Unsupported Media Type",
  416: "Range Not Satisfiable",
  417: "Expectation Failed",
  421: "Misdirected Request",
  422: "Unprocessable Content",
  426: "Upgrade Required",
  428: "Precondition Required",
  429: "Too Many Requests",
  431: "Request Header Fields Too Large",
  451: "Unavailable For Legal Reasons",
  500: "Internal Server Error",
  501: "Not Implemented",
  502: "Bad Gateway",
  503: "Service Unavailable",
  504: "Gateway Timeout",
  505: "HTTP Version Not Supported",
  507: "Insufficient Storage",
  511: "Network Authentication Required",
};

/**
 * Builds an `application/problem+json` response.
 *
 * @param status HTTP status, 400–599.
 * @param detail One sentence a person can act on.
 * @param headers Extra response headers.
 * @param kind A kind finer than the status's own ({@linkcode problemType}).
 */
export function problemResponse(
  status: number,
  detail: string,
  headers: Record<string, string> = {},
  kind?: string,
): Response {
  return new Response(JSON.stringify(problem(status, detail, kind)), {
    status,
    headers: { ...headers, "content-type": PROBLEM_CONTENT_TYPE },
  });
}

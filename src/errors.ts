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
 * Every kind of refusal the relay answers with, and its status: the last part of a problem's
 * `type`, one heading each of docs/problems.md, which the relay serves at
 * {@linkcode PROBLEM_PAGE}. A kind is added here and there together (a test holds them in step).
 */
export const PROBLEM_STATUS = {
  "bad-request": 400,
  "unknown-queue": 400,
  "empty-content": 400,
  "bad-lease": 400,
  "malformed-body": 400,
  "unauthorized": 401,
  "forbidden": 403,
  "cross-site": 403,
  "not-found": 404,
  "method-not-allowed": 405,
  "request-timeout": 408,
  "precondition-failed": 412,
  "content-too-large": 413,
  "unsupported-media-type": 415,
  "range-not-satisfiable": 416,
  "too-many-requests": 429,
  "too-many-streams": 429,
  "internal-error": 500,
  "bad-gateway": 502,
  "unavailable": 503,
  "shutting-down": 503,
  "disk-full": 507,
  "disk-read-only": 503,
  "database-damaged": 503,
  "disk-error": 503,
} as const satisfies Record<string, number>;

/** A kind of refusal: a key of {@linkcode PROBLEM_STATUS}, e.g. `unknown-queue`. */
export type ProblemKind = keyof typeof PROBLEM_STATUS;

/** Every kind of problem the relay answers with, each a heading of docs/problems.md. */
export const PROBLEM_KINDS: readonly ProblemKind[] = Object.keys(PROBLEM_STATUS) as ProblemKind[];

/**
 * The kind a status stands for when the answer names no finer one: the first kind listed
 * with that status.
 */
const KIND_OF_STATUS: ReadonlyMap<number, ProblemKind> = new Map(
  [...PROBLEM_KINDS].reverse().map((kind) => [PROBLEM_STATUS[kind], kind]),
);

/** The path the relay serves the problem catalogue at: docs/problems.md as it is. */
export const PROBLEM_PAGE = "/docs/problems.md";

/**
 * Where the problem types point: a heading of the catalogue the relay serves, as a path on
 * the relay's own origin (RFC 9457 takes a URI reference, resolved against the request's
 * address). It does not change between versions: a client may tell kinds apart by it.
 */
export const PROBLEM_TYPE_BASE = `${PROBLEM_PAGE}#`;

/**
 * The `type` of a problem document: its kind in the catalogue.
 *
 * @param status The HTTP status, 400–599.
 * @param kind A kind finer than the status's own.
 * @returns e.g. `/docs/problems.md#content-too-large`; `about:blank` for a status without one.
 */
export function problemType(status: number, kind?: ProblemKind): string {
  const named = kind ?? KIND_OF_STATUS.get(status);
  return named === undefined ? "about:blank" : `${PROBLEM_TYPE_BASE}${named}`;
}

/** An RFC 9457 problem document, as the relay writes it. */
export interface ProblemDocument {
  /** The kind of problem, a stable URI reference into the catalogue ({@linkcode problemType}). */
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
  /** The kind of refusal, when finer than the status's own (e.g. `unknown-queue`). */
  readonly kind: ProblemKind | undefined;

  /**
   * @param status HTTP status, 400–599.
   * @param detail One sentence a person can act on; becomes the problem's `detail`.
   * @param headers Extra response headers.
   * @param kind The kind of refusal, when finer than the status's own.
   */
  constructor(
    status: number,
    detail: string,
    headers: Record<string, string> = {},
    kind?: ProblemKind,
  ) {
    super(detail);
    this.name = "HttpError";
    this.status = status;
    this.headers = headers;
    this.kind = kind;
  }
}

/**
 * Builds the problem document for `status`.
 *
 * @param status HTTP status, 400–599.
 * @param detail One sentence a person can act on.
 * @param kind A kind finer than the status's own ({@linkcode problemType}).
 */
export function problem(status: number, detail: string, kind?: ProblemKind): ProblemDocument {
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
  kind?: ProblemKind,
): Response {
  return new Response(JSON.stringify(problem(status, detail, kind)), {
    status,
    headers: { ...headers, "content-type": PROBLEM_CONTENT_TYPE },
  });
}

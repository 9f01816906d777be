/**
 * HTTP errors and RFC 9457 problem documents (contract C1).
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

/** The media type of every error body (RFC 9457, C1). */
const PROBLEM_CONTENT_TYPE = "application/problem+json";

/** An RFC 9457 problem document, as the relay writes it (C1). */
export interface ProblemDocument {
  /** Always `"about:blank"`: the status code says what kind of problem it is. */
  type: "about:blank";
  /** The status code's reason phrase, e.g. `"Bad Request"`. */
  title: string;
  /** The HTTP status code, 400–599. */
  status: number;
  /** One sentence a person can act on, e.g. `Cannot submit: content is empty`. */
  detail: string;
}

/**
 * An error that becomes a problem response with its own status and headers (C1).
 *
 * @example
 * ```ts
 * throw new HttpError(400, "Cannot submit: content is empty");
 * ```
 */
export class HttpError extends Error {
  /** HTTP status, 400–599. */
  readonly status: number;
  /** Extra response headers, e.g. `Allow` on a 405 (C3). */
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
 * Builds the problem document for `status` (C1).
 *
 * @param status HTTP status, 400–599.
 * @param detail One sentence a person can act on.
 */
export function problem(status: number, detail: string): ProblemDocument {
  const title = REASON_PHRASES[status] ?? "Error";
  return { type: "about:blank", title, status, detail: truncate(detail, MAX_DETAIL_CHARS) };
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
 * Builds an `application/problem+json` response (C1).
 *
 * @param status HTTP status, 400–599.
 * @param detail One sentence a person can act on.
 * @param headers Extra response headers.
 */
export function problemResponse(
  status: number,
  detail: string,
  headers: Record<string, string> = {},
): Response {
  return new Response(JSON.stringify(problem(status, detail)), {
    status,
    headers: { ...headers, "content-type": PROBLEM_CONTENT_TYPE },
  });
}

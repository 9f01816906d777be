/**
 * An HTTP client for the relay, used by the command-line client commands (`relay submit`,
 * `relay pull`, `relay work`, …). It speaks the API and turns every failure into
 * a {@linkcode RelayError} with one sentence a person can act on.
 *
 * @module
 */

import { Backoff, sleep } from "../util/backoff.ts";
import { fetchFailure } from "../errors.ts";
import { joinUrl } from "../util/url.ts";
import { RelayError } from "./relay_error.ts";

export { RelayError };

/** Default relay address for client commands: the relay on this machine. */
export const DEFAULT_RELAY_URL = "http://127.0.0.1:8787";

/** Timeout of one request to the relay, ms: generous for a Pi on a slow SD card. */
const REQUEST_TIMEOUT_MS = 30_000;

/** Where the relay is, for the calls that need no key (`GET /health`). */
export interface RelayAddress {
  /** Base URL, e.g. `http://nas.local:8787`. */
  readonly url: string;
}

/** Where the relay is and how to authenticate. */
export interface RelayClient extends RelayAddress {
  /** The API key, sent as `X-Auth-Key`. */
  readonly key: string;
}

/**
 * After a failed call in a long-running loop (`relay work`, `results --follow`): rethrows
 * `error` unless it is a retryable {@linkcode RelayError}; otherwise logs it and waits
 * `backoff`'s next delay (or until `signal` aborts).
 *
 * @throws `error` itself when waiting will not help (a 401, a 400, a bug).
 */
export async function waitToRetry(
  error: unknown,
  backoff: Backoff,
  log: (line: string) => void,
  signal: AbortSignal,
): Promise<void> {
  if (!(error instanceof RelayError) || !error.retryable) throw error;
  const wait = backoff.next();
  log(`relay: ${error.message}; trying again in ${wait} ms`);
  await sleep(wait, signal);
}

/**
 * Retries a call to the relay with a backoff while it fails in a retryable way. Even after
 * `signal` aborts it keeps trying a few times, because giving up would lose the item.
 *
 * @param attempt The call.
 * @param what What it does, for the log: `push the result`.
 * @throws {RelayError} when the relay refuses the call (a 4xx), or still fails a few tries
 *   after `signal` aborted.
 */
export async function retrying(
  attempt: () => Promise<unknown>,
  what: string,
  log: (line: string) => void,
  signal: AbortSignal,
): Promise<void> {
  const backoff = new Backoff();
  for (let afterAbort = 0;;) {
    try {
      await attempt();
      return;
    } catch (error) {
      if (!(error instanceof RelayError) || !error.retryable) throw error;
      if (signal.aborted && ++afterAbort > 3) {
        log(`relay: could not ${what} before stopping: ${error.message}`);
        throw error;
      }
      const wait = backoff.next();
      log(`relay: cannot ${what}: ${error.message}; trying again in ${wait} ms`);
      await sleep(wait);
    }
  }
}

/** One item of `GET /results`. */
export interface ResultEntry {
  /** Push time and cursor, epoch ms. */
  readonly t: number;
  /** The result's content. */
  readonly c: string;
}

/** The body of `GET /peek`. */
export interface PeekBody {
  readonly total: number;
  readonly queues: Record<
    string,
    Array<{ content: string; queue_type: string; created_at: string }>
  >;
}

/**
 * Sends one request to the relay.
 *
 * @param path Path and query, e.g. `/pull?queue=qa`.
 * @param init `method`, `body` and extra headers.
 * @returns The response, when its status is 2xx.
 * @throws {RelayError} for a refused connection, a timeout, or any status ≥ 300; the
 *   message carries the relay's problem `detail` when it sent one.
 */
async function call(
  client: RelayClient | RelayAddress,
  path: string,
  init: RequestOptions = {},
): Promise<Response> {
  const res = await send(client, path, init, REQUEST_TIMEOUT_MS);
  if (res.status < 300 && !isWebPage(res)) return res;
  throw await failure(client, res);
}

/**
 * Whether an answer is a web page: the relay's API answers JSON or plain text, never HTML, so
 * an HTML answer means that `--url` names some other server (a router, a web server, a proxy's
 * error page), whose page would otherwise end as "Unexpected token '<'".
 */
function isWebPage(res: Response): boolean {
  return /^\s*text\/html\b/i.test(res.headers.get("content-type") ?? "");
}

/** What {@linkcode call} and {@linkcode send} send besides the path. */
interface RequestOptions {
  method?: string;
  body?: string;
  /** Content type of `body`; default `text/plain`. */
  type?: string;
  /** Seconds the relay may hold the request (long-poll); added to the timeout. */
  waitS?: number | undefined;
  /** Abandons the request (the worker or follower is stopping). */
  signal?: AbortSignal | undefined;
}

/** Sends a request, with the client's key when it has one; only a network failure, timeout or abort throws. */
async function send(
  client: RelayClient | RelayAddress,
  path: string,
  init: RequestOptions,
  timeoutMs: number,
): Promise<Response> {
  timeoutMs += (init.waitS ?? 0) * 1000;
  const timeout = AbortSignal.timeout(timeoutMs);
  try {
    return await fetch(joinUrl(client.url, path), {
      method: init.method ?? "GET",
      headers: {
        ...("key" in client ? { "x-auth-key": client.key } : {}),
        ...(init.body === undefined ? {} : { "content-type": init.type ?? "text/plain" }),
      },
      ...(init.body === undefined ? {} : { body: init.body }),
      signal: init.signal === undefined ? timeout : AbortSignal.any([timeout, init.signal]),
    });
  } catch (error) {
    const reason = error instanceof DOMException && error.name === "TimeoutError"
      ? `no answer within ${timeoutMs / 1000} s`
      : describeCause(error);
    throw new RelayError(`Cannot reach the relay at ${client.url}: ${reason}`, undefined, true);
  }
}

/** Describes an unsuccessful answer, with the relay's problem `detail` when it sent one. */
async function failure(client: RelayAddress, res: Response): Promise<RelayError> {
  if (isWebPage(res)) {
    await res.body?.cancel();
    return new RelayError(
      `${client.url} is not a relay: it answered HTTP ${res.status} with a web page, not the ` +
        "relay's API; check --url (or RELAY_URL, or the config file of relay login): the " +
        "relay's address and port, e.g. http://127.0.0.1:8787",
      undefined,
      false,
    );
  }
  let detail = "";
  try {
    const problem = await res.json();
    if (typeof problem?.detail === "string") detail = problem.detail;
  } catch {
    // not a problem document
  }
  if (res.status === 401) {
    return new RelayError(
      `The relay at ${client.url} refused the API key (401${
        detail ? `: ${detail}` : ""
      }); set RELAY_API_KEY or --api-key-file`,
      401,
      false,
    );
  }
  return new RelayError(
    `The relay answered ${res.status}${detail ? `: ${detail}` : ""}`,
    res.status,
    res.status >= 500 || res.status === 429,
  );
}

/**
 * Why the relay could not be reached, with what to do: nothing listening, a name that does not
 * resolve, a TLS certificate refused.
 */
function describeCause(error: unknown): string {
  const { refused, reason } = fetchFailure(error);
  if (refused) {
    return "connection refused (is it running? start it with relay serve, or check the port " +
      "in --url)";
  }
  if (/dns|lookup|name or service|getaddrinfo|no address/i.test(reason)) {
    return `no such host (${reason}): check the host name in --url, or use the relay's IP address`;
  }
  if (/certificate|tls|ssl|handshake/i.test(reason)) {
    return `its TLS certificate was refused (${reason}): use the relay's https address whose ` +
      "certificate names that host, or http:// on the local network";
  }
  return reason;
}

/**
 * `POST /submit`.
 *
 * @param options.queue A queue to name, else the relay routes the content.
 * @param options.dedupe `false` puts an item back without the duplicate check.
 * @returns The relay's answer, e.g. `OK (qa)` or `OK (duplicate)`.
 * @throws {RelayError} as {@linkcode call}.
 */
export async function submitContent(
  client: RelayClient,
  content: string,
  options: { queue?: string | undefined; dedupe?: boolean } = {},
): Promise<string> {
  const query = new URLSearchParams();
  if (options.queue) query.set("queue", options.queue);
  if (options.dedupe === false) query.set("dedupe", "false");
  const suffix = query.size > 0 ? `?${query}` : "";
  return await (await call(client, `/submit${suffix}`, { method: "POST", body: content })).text();
}

/** A parsed answer of the relay, with its body exactly as the relay sent it. */
export interface Answer<T> {
  /** The parsed body. */
  readonly value: T;
  /** The body's text as it came (for `--json`), or the JSON of `value` for a 204. */
  readonly text: string;
}

/** Reads a JSON body, keeping its text; a 204 gives `empty` and its JSON. */
async function jsonAnswer<T>(res: Response, empty: T): Promise<Answer<T>> {
  if (res.status === 204) {
    await res.body?.cancel();
    return { value: empty, text: JSON.stringify(empty) };
  }
  const text = await res.text();
  return { value: JSON.parse(text) as T, text };
}

/**
 * `GET /pull`: takes and empties a queue.
 *
 * @returns The contents, oldest first (`[]` when the queue was empty: 204), and the body.
 * @throws {RelayError} as {@linkcode call}.
 */
export async function pullQueue(client: RelayClient, queue?: string): Promise<Answer<string[]>> {
  const res = await call(client, queue ? `/pull?queue=${encodeURIComponent(queue)}` : "/pull");
  return await jsonAnswer<string[]>(res, []);
}

/** An item handed out by a leased pull. */
export interface LeasedItem {
  /** `<queue>:<id>`, what {@linkcode ackItems} takes. */
  readonly id: string;
  readonly content: string;
  /** Submission time, `YYYY-MM-DD HH:MM:SS` UTC. */
  readonly created_at: string;
  /** When the lease ends and the item is handed out again unless acknowledged, epoch ms. */
  readonly lease_until: number;
}

/**
 * `GET /pull?lease=…`: a leased pull, long-polling up to `waitS` seconds for an
 * item to arrive.
 *
 * @param options.leaseS Lease, seconds (1–43200).
 * @param options.limit Most items, 1–50.
 * @param options.waitS Long-poll, seconds (0–60).
 * @param options.signal Abandons the request; the relay may still have leased items, which
 *   it hands out again when their lease ends.
 * @returns The leased items, oldest first; `[]` when none arrived (204).
 * @throws {RelayError} as {@linkcode call}.
 */
export async function leaseItems(
  client: RelayClient,
  queue: string,
  options: { leaseS: number; limit: number; waitS: number; signal?: AbortSignal },
): Promise<LeasedItem[]> {
  const query = new URLSearchParams({
    queue,
    lease: String(options.leaseS),
    limit: String(options.limit),
    wait: String(options.waitS),
  });
  const res = await call(client, `/pull?${query}`, options);
  if (res.status === 204) return [];
  return await res.json();
}

/**
 * `POST /ack`: acknowledges leased items, which deletes them.
 *
 * @param ids Item ids as a leased pull gave them, e.g. `general:17`.
 * @returns How many were deleted, and the ids the relay no longer held under a lease.
 * @throws {RelayError} as {@linkcode call}.
 */
export async function ackItems(
  client: RelayClient,
  ids: readonly string[],
): Promise<{ acked: number; unknown: string[] }> {
  const body = JSON.stringify({ ids });
  return await (await call(client, "/ack", { method: "POST", body, type: "application/json" }))
    .json();
}

/**
 * `GET /peek`.
 *
 * @returns The queues (`{total: 0, queues: {}}` when every queue asked for is empty: 204),
 *   and the body.
 * @throws {RelayError} as {@linkcode call}.
 */
export async function peekQueues(client: RelayClient, queue?: string): Promise<Answer<PeekBody>> {
  const res = await call(client, queue ? `/peek?queue=${encodeURIComponent(queue)}` : "/peek");
  return await jsonAnswer<PeekBody>(res, { total: 0, queues: {} });
}

/**
 * `POST /push`.
 *
 * @throws {RelayError} as {@linkcode call}.
 */
export async function pushResult(client: RelayClient, content: string): Promise<void> {
  await (await call(client, "/push", { method: "POST", body: content })).body?.cancel();
}

/**
 * `GET /results`.
 *
 * @param options.since Cursor, epoch ms; default 0.
 * @param options.limit 1–50; default 50.
 * @param options.waitS Long-poll: seconds to wait for a result, 0–60; default 0.
 * @param options.signal Abandons the request.
 * @returns The page (`gap` is `true` when results after `since` were evicted unread), and
 *   the body.
 * @throws {RelayError} as {@linkcode call}.
 */
export async function readResultsPage(
  client: RelayClient,
  options: {
    since?: number | undefined;
    limit?: number | undefined;
    waitS?: number;
    signal?: AbortSignal;
  } = {},
): Promise<Answer<ResultsPage>> {
  const query = new URLSearchParams();
  if (options.since !== undefined) query.set("since", String(options.since));
  if (options.limit !== undefined) query.set("limit", String(options.limit));
  if (options.waitS) query.set("wait", String(options.waitS));
  const path = `/results${query.size > 0 ? `?${query}` : ""}`;
  return await jsonAnswer<ResultsPage>(await call(client, path, options), {
    cursor: options.since ?? 0,
    items: [],
  });
}

/** One hit of `GET /search`. */
export interface SearchHit {
  /** `note`, `post`, `episode` or `result`. */
  readonly kind: string;
  /** Its title. */
  readonly title: string;
  /** The page a result came from, else a path on the relay. */
  readonly url: string;
  /** Text around the first match, each match between « and ». */
  readonly snippet: string;
  /** When it was made or pushed, epoch ms. */
  readonly t: number;
}

/**
 * `GET /search`.
 *
 * @param query The words to look for.
 * @param options.kind Only hits of this kind; options.limit at most this many (1–50).
 * @returns The hits, best first, and the body.
 * @throws {RelayError} as {@linkcode call} (503 while the relay builds its index).
 */
export async function searchRelay(
  client: RelayClient,
  query: string,
  options: { kind?: string | undefined; limit?: number | undefined; signal?: AbortSignal } = {},
): Promise<Answer<{ items: SearchHit[] }>> {
  const params = new URLSearchParams({ q: query });
  if (options.kind !== undefined) params.set("kind", options.kind);
  if (options.limit !== undefined) params.set("limit", String(options.limit));
  return await jsonAnswer<{ items: SearchHit[] }>(
    await call(client, `/search?${params}`, options),
    { items: [] },
  );
}

/** The body of `GET /results`. */
export interface ResultsPage {
  /** The cursor to pass as `since` next, epoch ms. */
  readonly cursor: number;
  /** The results after `since`, oldest first. */
  readonly items: ResultEntry[];
  /** `true` when results after `since` were evicted unread. */
  readonly gap?: boolean;
}

/**
 * `POST /clear`.
 *
 * @returns The relay's answer, `OK (all queues cleared)`.
 * @throws {RelayError} as {@linkcode call}.
 */
export async function clearAll(client: RelayClient): Promise<string> {
  return await (await call(client, "/clear", { method: "POST" })).text();
}

/**
 * `GET /health`, which needs no key: none is sent. A 503 is an answer
 * here, not an error.
 *
 * @throws {RelayError} when the relay cannot be reached or answers something else.
 */
export async function checkHealth(
  client: RelayAddress,
): Promise<{ ok: boolean; ts: number; db: string }> {
  try {
    return await (await call(client, "/health")).json();
  } catch (error) {
    if (error instanceof RelayError && error.status === 503) {
      return { ok: false, ts: Date.now(), db: "error" };
    }
    throw error;
  }
}

/**
 * `POST /publish`. 207 and 502 are answers here, not errors.
 *
 * @param body The publish request (or `{id}` for `/publish/retry`).
 * @param path `/publish`, or `/publish/retry` to send a kept failed publish again.
 * @returns The HTTP status and the `{status, results}` body.
 * @throws {RelayError} for 4xx, 503 and unreachable relays.
 */
export async function publishArticle(
  client: RelayClient,
  body: Record<string, unknown>,
  path: "/publish" | "/publish/retry" = "/publish",
): Promise<
  { httpStatus: number; body: { status: string; results: Record<string, Record<string, string>> } }
> {
  const res = await send(client, path, {
    method: "POST",
    body: JSON.stringify(body),
    type: "application/json",
  }, REQUEST_TIMEOUT_MS * 2);
  if (res.status === 200 || res.status === 207 || res.status === 502) {
    const parsed = await res.clone().json().catch(() => undefined);
    if (parsed && typeof parsed === "object" && "results" in parsed) {
      return { httpStatus: res.status, body: parsed };
    }
  }
  throw await failure(client, res);
}

/**
 * `GET /publish/failed`: the publishes with a failed target the relay keeps to be retried.
 *
 * @returns Oldest first: id, when, tries, title and the error of each failed target.
 * @throws {RelayError} as {@linkcode call}.
 */
export async function failedPublishes(client: RelayClient): Promise<
  { id: string; at: string; tries: number; title: string; errors: Record<string, string> }[]
> {
  const res = await call(client, "/publish/failed");
  return ((await res.json()) as { entries: never[] }).entries;
}

/**
 * `POST /publish/report`: asks the relay to keep a publish this client could not make, with
 * the failed publishes it lists and retries.
 *
 * @param body The publish request as it was last sent.
 * @param error Why it failed, one line.
 * @returns The kept entry's id.
 * @throws {RelayError} as {@linkcode call} (404 from a relay older than this route).
 */
export async function reportFailedPublish(
  client: RelayClient,
  body: Record<string, unknown>,
  error: string,
): Promise<string> {
  const res = await call(client, "/publish/report", {
    method: "POST",
    body: JSON.stringify({ ...body, error: error.slice(0, 2000) }),
    type: "application/json",
  });
  return ((await res.json()) as { id: string }).id;
}

/**
 * Checks that the relay accepts `client.key`, with a request that changes nothing
 * (`GET /results?limit=1`). A 403, a named key that lacks the `read` scope, counts as
 * accepted: the relay knows the key.
 *
 * @returns `true` when the key may read results, `false` when it is known but may not.
 * @throws {RelayError} 401 for a key the relay refuses; as {@linkcode call} otherwise.
 */
export async function verifyKey(client: RelayClient): Promise<boolean> {
  try {
    await (await call(client, "/results?limit=1")).body?.cancel();
    return true;
  } catch (error) {
    if (error instanceof RelayError && error.status === 403) return false;
    throw error;
  }
}

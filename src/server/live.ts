/**
 * Instant delivery: the long-poll of `GET /pull` and `GET /results` (`wait=`),
 * and the Server-Sent Events stream of `GET /results/stream`. Both wait on the store's
 * commit notifications ({@linkcode nextChange}), so a submit or push wakes them as soon as
 * it is durable, and waiting clients cost no reads of the store.
 *
 * @module
 */

import { sleep } from "../util/backoff.ts";
import { HttpError } from "../errors.ts";
import {
  type Collection,
  nextChange,
  readResults,
  type ResultsPage,
  type Store,
} from "../store/store.ts";

/** Options of {@linkcode longPoll}. */
export interface LongPollOptions {
  /** What the wait wakes for a change to: the queues pulled from, or `"feed"`. */
  collections: readonly Collection[];
  /** How long to wait for something to arrive, ms; 0 tries once. */
  waitMs: number;
  /** Ends the wait early (client gone, relay stopping). */
  signal: AbortSignal;
  /**
   * When something becomes available without a commit (a lease ending), epoch ms by the
   * store's clock, or `undefined`: the wait wakes then too.
   */
  wakeAt?: (() => Promise<number | undefined>) | undefined;
}

/**
 * Runs `attempt` now, and again after each commit that changes one of `collections`,
 * until it returns something, `waitMs` has passed, or `signal` aborts. Once
 * `signal` has aborted, `attempt` is not run again: for a pull it would take items for a
 * client that has gone.
 *
 * @returns What `attempt` returned, or `undefined` when the time ran out or `signal`
 *   aborted first.
 * @throws Whatever `attempt` throws.
 */
export async function longPoll<T>(
  store: Store,
  options: LongPollOptions,
  attempt: () => Promise<T | undefined>,
): Promise<T | undefined> {
  const deadline = performance.now() + options.waitMs;
  for (let first = true;; first = false) {
    if (!first && options.signal.aborted) return undefined;
    using changes = watchChanges(store, options.collections, options.signal);
    const found = await attempt();
    let left = deadline - performance.now();
    if (found !== undefined || left <= 0 || options.signal.aborted) return found;
    const wake = await options.wakeAt?.();
    if (wake !== undefined) left = Math.min(left, Math.max(0, wake - store.clock()));
    await changes.until(left);
  }
}

/**
 * Starts watching for the next commit that changes one of `collections`. Made before a
 * read, then waited on after it, so that a commit between the two is not missed. Dispose
 * of it after each round: that drops the registration and the timer.
 */
function watchChanges(
  store: Store,
  collections: readonly Collection[],
  signal: AbortSignal,
): Disposable & { until(ms: number): Promise<"change" | "timeout" | "stop"> } {
  const round = new AbortController();
  const stop = () => round.abort();
  signal.addEventListener("abort", stop, { once: true });
  const changed = nextChange(store, collections, round.signal).then(() => "change" as const);
  return {
    /** Waits for the change, `ms`, or `signal`, whichever comes first. */
    until: (ms) =>
      Promise.race([changed, sleep(ms, round.signal).then((full) => full ? "timeout" : "stop")]),
    [Symbol.dispose]() {
      round.abort();
      signal.removeEventListener("abort", stop);
    },
  };
}

/** Interval of keep-alive comments on an idle stream, ms. */
export const KEEP_ALIVE_MS = 30_000;

/**
 * Results a stream reads from the feed at a time. Few, because a stream holds what it read
 * until its client has taken it: 4 results of up to 768 KiB are 3 MB for a slow client,
 * where a full page of 50 would be 38 MB, times every stream catching up at once.
 */
const STREAM_PAGE = 4;

const encoder = new TextEncoder();

/** Where {@linkcode streamResults} writes: one Server-Sent Events response. */
export interface EventWriter {
  /**
   * Sends `text` (whole events or comments, as text or already encoded) as it is. Resolves
   * once the client has taken what was sent before, so that a slow client holds one event
   * in memory, not the feed.
   */
  write(text: string | Uint8Array): Promise<void>;
}

/**
 * One Server-Sent Event as text: `event:` when given, `data:` once per line of `data`
 * (SSE has no other way to send a line end), `id:` when given, and the blank line.
 *
 * @throws {Error} when `event` or `id` holds a line end.
 */
export function sseEvent(message: { event?: string; id?: string; data: string }): string {
  for (const field of [message.event, message.id]) {
    if (field !== undefined && /[\r\n]/.test(field)) throw new Error("a line end in event or id");
  }
  const data = `data: ${message.data.split(/\r\n|\r|\n/).join("\ndata: ")}\n`;
  return `${message.event === undefined ? "" : `event: ${message.event}\n`}${data}${
    message.id === undefined ? "" : `id: ${message.id}\n`
  }\n`;
}

/**
 * A `text/event-stream` response whose events `run` writes, for as long as it runs. One
 * stream object per subscriber, filled as the client reads (Hono's `streamSSE` stacks a
 * transform stream and a second readable on it: 12 KB more of JavaScript heap a
 * subscriber, measured; docs/faults.md, "Connections and file descriptors").
 *
 * @param run Writes the events; `gone` aborts when the client disconnects. The response
 *   ends when `run` settles; what it throws is for the caller to catch.
 * @returns The response to send.
 */
export function eventStreamResponse(
  run: (writer: EventWriter, gone: AbortSignal) => Promise<void>,
): Response {
  const gone = new AbortController();
  let room: PromiseWithResolvers<void> | undefined;
  let controller: ReadableStreamDefaultController<Uint8Array> | undefined;
  const body = new ReadableStream<Uint8Array>({
    start(c) {
      controller = c;
    },
    pull() {
      room?.resolve();
      room = undefined;
    },
    cancel() {
      gone.abort();
      room?.resolve();
      room = undefined;
    },
  }, { highWaterMark: 1 });
  const writer: EventWriter = {
    async write(text) {
      if (gone.signal.aborted || controller === undefined) return;
      controller.enqueue(typeof text === "string" ? encoder.encode(text) : text);
      if ((controller.desiredSize ?? 0) > 0) return;
      room ??= Promise.withResolvers<void>();
      await room.promise;
    },
  };
  void run(writer, gone.signal).finally(() => {
    if (gone.signal.aborted) return;
    gone.abort();
    try {
      controller?.close();
    } catch {
      // the client cancelled it already
    }
  });
  return new Response(body, {
    headers: { "content-type": "text/event-stream", "cache-control": "no-cache" },
  });
}

/** Results encoded as events lately, per store: each one is encoded once for all streams. */
const encodedResults = new WeakMap<Store, Map<number, { content: string; bytes: Uint8Array }>>();

/**
 * Encoded events kept per store: a push reaches every stream within moments, and a result
 * can be 768 KiB, which 64 streams would otherwise each hold a copy of (as text and bytes).
 */
const ENCODED_KEPT = 16;

/** The event of one result, encoded, shared by every stream that sends it. */
function encodedResult(store: Store, item: { t: number; content: string }): Uint8Array {
  let cache = encodedResults.get(store);
  if (cache === undefined) encodedResults.set(store, cache = new Map());
  const cached = cache.get(item.t);
  if (cached !== undefined && cached.content === item.content) return cached.bytes;
  const bytes = encoder.encode(sseEvent({ id: String(item.t), data: item.content }));
  cache.set(item.t, { content: item.content, bytes });
  if (cache.size > ENCODED_KEPT) cache.delete(cache.keys().next().value!);
  return bytes;
}

/**
 * Microtasks a shared read waits before it begins: more than the steps from a stream's
 * wake-up to its read, so that every stream woken with the first one joins it. (A timer
 * would do too, at about 2 ms more a delivery.)
 */
const JOIN_HOPS = 16;

/** Resolves after `hops` turns of the microtask queue. */
async function afterMicrotasks(hops: number): Promise<void> {
  for (let i = 0; i < hops; i++) await undefined;
}

/** Reads of the feed not yet begun, per store and cursor, that streams join. */
const pendingPages = new WeakMap<Store, Map<number, Promise<ResultsPage>>>();

/**
 * The page of the feed after `since`, read once for every stream that asks for it within
 * the same turn of the event loop. A push wakes every stream at once, and all of them are
 * at the same cursor: reading the new result once rather than once a stream keeps one
 * copy of it in memory instead of one per stream (a 500 KB result to 64 streams was
 * 32 MB a push). The read begins a few microtasks later, once the streams woken by the
 * same commit (which all take the same steps from their wake-up to here) have asked for it;
 * a stream only joins a read that has not begun, after it started watching for the next
 * change, so whatever was committed before it started watching is in the page.
 *
 * @throws KV errors of the read, to every stream that joined it.
 */
function sharedPage(store: Store, since: number): Promise<ResultsPage> {
  let pending = pendingPages.get(store);
  if (pending === undefined) pendingPages.set(store, pending = new Map());
  const joined = pending.get(since);
  if (joined !== undefined) return joined;
  const reads = pending;
  const page = afterMicrotasks(JOIN_HOPS).then(() => {
    reads.delete(since);
    return readResults(store, { since, limit: STREAM_PAGE });
  });
  reads.set(since, page);
  return page;
}

/**
 * Writes the results feed to an SSE stream from `since` on, then each new result as it is
 * pushed, until `signal` aborts. Each result is an event with `id: <t>` and its
 * content as `data` (line ends become `\n`: SSE has no other). When results after the
 * cursor were evicted, a `gap` event with the cursor as data comes first (not at the start
 * of a new reader's stream). An idle stream gets a `: keep-alive` comment every
 * `keepAliveMs`.
 *
 * @param options.since Cursor, epoch ms: results with `t > since` are sent.
 * @param options.resumed Whether the client gave the cursor (`since`, `Last-Event-ID`).
 * @throws KV errors (the caller reports them and ends the stream).
 */
export async function streamResults(
  store: Store,
  stream: EventWriter,
  options: { since: number; keepAliveMs: number; signal: AbortSignal; resumed: boolean },
): Promise<void> {
  const { signal, keepAliveMs } = options;
  let cursor = options.since;
  // A new reader (no cursor given) missed nothing: like /results without since.
  let gapAt: number | undefined = options.resumed ? undefined : cursor;
  await stream.write(": relay results stream\n\n");
  while (!signal.aborted) {
    using changes = watchChanges(store, ["feed"], signal);
    const page = await sharedPage(store, cursor);
    if (page.gap && gapAt !== cursor) {
      gapAt = cursor;
      await stream.write(sseEvent({ event: "gap", data: String(cursor) }));
    }
    for (const item of page.items) {
      if (signal.aborted) return;
      await stream.write(encodedResult(store, item));
    }
    cursor = page.cursor;
    if (page.items.length === STREAM_PAGE) continue;
    if (await changes.until(keepAliveMs) === "timeout") await stream.write(": keep-alive\n\n");
  }
}

/** Options of {@linkcode StreamLimits}. */
export interface StreamLimitOptions {
  /** Streams open at once, ≥ 1 (`--max-streams`). */
  readonly total: number;
  /** Streams one key may have open at once, ≥ 1 (`--max-streams-per-key`). */
  readonly perKey: number;
}

/** `Retry-After` of a stream refused for the total, seconds: streams end rarely. */
const STREAMS_FULL_RETRY_S = 30;

/** `Retry-After` of a stream refused for its key, seconds. */
const KEY_STREAMS_FULL_RETRY_S = 10;

/**
 * Counts open results streams, in total and per key, and refuses one past either limit
 * (docs/api/rules.md, "Instant, lossless delivery"), so that subscribers cannot use up the relay's memory.
 */
export class StreamLimits {
  readonly #options: StreamLimitOptions;
  readonly #byKey = new Map<string, number>();
  #open = 0;

  /** @param options The two limits. */
  constructor(options: StreamLimitOptions) {
    this.#options = options;
  }

  /** Streams open now. */
  get open(): number {
    return this.#open;
  }

  /**
   * Takes a place for a stream of `key`.
   *
   * @param key Which key the request presented, e.g. `main` or `named:phone`.
   * @returns A function that gives the place back (call it once, when the stream ends).
   * @throws {HttpError} 503 with `Retry-After` when {@linkcode StreamLimitOptions.total}
   *   streams are open; 429 with `Retry-After` when `key` has its
   *   {@linkcode StreamLimitOptions.perKey}.
   */
  take(key: string): () => void {
    const { total, perKey } = this.#options;
    if (this.#open >= total) {
      throw new HttpError(
        503,
        `Cannot open a results stream: ${total} are open, the most the relay serves ` +
          "(--max-streams); try again later",
        { "retry-after": String(STREAMS_FULL_RETRY_S) },
      );
    }
    const mine = this.#byKey.get(key) ?? 0;
    if (mine >= perKey) {
      throw new HttpError(
        429,
        `Cannot open a results stream: this key has ${mine} open, the most one key may ` +
          "(--max-streams-per-key); close one first",
        { "retry-after": String(KEY_STREAMS_FULL_RETRY_S) },
        "too-many-streams",
      );
    }
    this.#open++;
    this.#byKey.set(key, mine + 1);
    let given = false;
    return () => {
      if (given) return;
      given = true;
      this.#open--;
      const left = (this.#byKey.get(key) ?? 1) - 1;
      if (left === 0) this.#byKey.delete(key);
      else this.#byKey.set(key, left);
    };
  }
}

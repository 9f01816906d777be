/**
 * Instant delivery (issue 6): the long-poll of `GET /pull` and `GET /results` (`wait=`),
 * and the Server-Sent Events stream of `GET /results/stream`. Both wait on the store's
 * commit notifications ({@linkcode nextChange}), so a submit or push wakes them as soon as
 * it is durable, and waiting clients cost no reads of the store.
 *
 * @module
 */

import type { SSEStreamingApi } from "hono/streaming";
import { sleep } from "../util/backoff.ts";
import { type Collection, nextChange, readResults, type Store } from "../store/store.ts";

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
 * until it returns something, `waitMs` has passed, or `signal` aborts (issue 6). Once
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

/** Interval of keep-alive comments on an idle stream, ms (issue 6). */
export const KEEP_ALIVE_MS = 30_000;

/** Results written per read of the feed: the most one page holds (C41). */
const STREAM_PAGE = 50;

/**
 * Writes the results feed to an SSE stream from `since` on, then each new result as it is
 * pushed, until `signal` aborts (issue 6). Each result is an event with `id: <t>` and its
 * content as `data` (line ends become `\n`: SSE has no other). When results after the
 * cursor were evicted, a `gap` event with the cursor as data comes first (not at the start
 * of a new reader's stream). An idle stream gets a `: keep-alive` comment every
 * `keepAliveMs`.
 *
 * @param options.since Cursor, epoch ms: results with `t > since` are sent.
 * @param options.resumed Whether the client gave the cursor (`since`, `Last-Event-ID`).
 * @throws KV errors (the caller's stream helper reports them and closes the stream).
 */
export async function streamResults(
  store: Store,
  stream: SSEStreamingApi,
  options: { since: number; keepAliveMs: number; signal: AbortSignal; resumed: boolean },
): Promise<void> {
  const { signal, keepAliveMs } = options;
  let cursor = options.since;
  // A new reader (no cursor given) missed nothing: like /results without since.
  let gapAt: number | undefined = options.resumed ? undefined : cursor;
  await stream.write(": relay results stream\n\n");
  while (!signal.aborted && !stream.aborted) {
    using changes = watchChanges(store, ["feed"], signal);
    const page = await readResults(store, { since: cursor, limit: STREAM_PAGE });
    if (page.gap && gapAt !== cursor) {
      gapAt = cursor;
      await stream.writeSSE({ event: "gap", data: String(cursor) });
    }
    for (const item of page.items) {
      await stream.writeSSE({ id: String(item.t), data: item.content });
    }
    cursor = page.cursor;
    if (page.items.length === STREAM_PAGE) continue;
    if (await changes.until(keepAliveMs) === "timeout") await stream.write(": keep-alive\n\n");
  }
}

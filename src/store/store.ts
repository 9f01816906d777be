/**
 * The relay's store over Deno KV: queues, the results feed, duplicate records and the
 * counters of `GET /stats`. This folder is the only code that touches KV, and this module is
 * its entry (`database.ts` opens the file under its lock): every verb the relay uses is here, each running one write, one exclusive
 * job or one read of the writer. The key schema is documented in `kv_keys.ts`.
 *
 * **One writer, group commit.** A relay owns its KV file, so the store keeps the
 * committed state of every queue and of the feed in memory and funnels every write through
 * one writer. While a commit is in flight, new writes wait; the writer then applies all of
 * them, in arrival order, to a copy of the state and commits the lot as one atomic KV commit
 * (within KV's limits of 1000 mutations and 800 KiB). A write resolves only after the commit
 * that holds it is durable (platform notes: one fsync per commit, durable on resolve), and
 * the in-memory state changes only when that commit succeeded. One fsync then serves many
 * requests, which is where the throughput comes from; ordering and exactly-once
 * follow from the single writer.
 *
 * Every commit also checks the versionstamps of the four metadata entries (`["queues", q]`,
 * `["results_meta"]`): should anything else have written the file, the check fails, the
 * store reloads from KV and applies the batch again. A commit that throws leaves the
 * outcome unknown, so the batch is rejected and the state is reloaded before the next one.
 *
 * Reads (peek, results, stats) are served from the committed state; content of more than
 * one part ({@linkcode CHUNK_BYTES}) is not kept in memory and is read from KV. Content is
 * stored as UTF-8 bytes in parts, all parts of one item in the same commit.
 *
 * The folder, lowest first: `kv_keys.ts` (keys and stored values), `_parts.ts` (chunking),
 * `_state.ts` (the in-memory state, drafts and mutations), `_changes.ts` (waiters),
 * `_duplicates.ts` (duplicate records), `_load.ts` (reading the state from KV),
 * `_writer.ts` (the writer and its one commit path), `_queues.ts`, `_results.ts` and
 * `_stats.ts` (what each verb does to the state), and this module.
 *
 * @module
 */

import { type Clock, systemClock } from "../clock.ts";
import { MAX_LEASE_MS } from "../constants.ts";
import { QUEUE_NAMES, type QueueName } from "../queue_names.ts";
import { Changes } from "./_changes.ts";
import { dropSubmissionRecords, SEEN_IN_MEMORY } from "./_duplicates.ts";
import {
  ackOp,
  clearQueue,
  earliestLeaseEnd,
  type ItemRef,
  itemsWithContent,
  type QueuedItem,
  restoreItemOp,
  submitOp,
  type SubmitOutcome,
  takeOp,
} from "./_queues.ts";
import {
  clearFeed,
  pushOp,
  readPage,
  restoreHwmOp,
  restoreResultOp,
  type ResultItem,
  type ResultsPage,
} from "./_results.ts";
import { type Collection, QUEUE_CAPACITY, RESULTS_CAPACITY } from "./_state.ts";
import { statsOf, type StoreStats } from "./_stats.ts";
import { Writer } from "./_writer.ts";
import { type HealthVerdict, StoreHealth } from "./_health.ts";
import { COLLECTIONS, metaKey } from "./_state.ts";
import { healthProbeKey } from "./kv_keys.ts";

export type { Clock } from "../clock.ts";
export type { QueueName } from "../queue_names.ts";
export { CHUNK_BYTES } from "./_parts.ts";
export { SEEN_IN_MEMORY } from "./_duplicates.ts";
export type { ItemRef, QueuedItem, SubmitOutcome } from "./_queues.ts";
export type { ResultItem, ResultsPage } from "./_results.ts";
export { type Collection, QUEUE_CAPACITY, RESULTS_CAPACITY } from "./_state.ts";
export type { StoreStats } from "./_stats.ts";
export { StoreBusyError } from "./_writer.ts";
export { classifyFault, type FaultKind, StorageError, StoreFormatError } from "./_faults.ts";
export { type HealthVerdict, RESERVE_BYTES } from "./_health.ts";
export type { QueueCounters, ResultCounters } from "./kv_keys.ts";

/** Default duplicate window, ms: 5 minutes. */
export const DEFAULT_DEDUPE_WINDOW_MS = 5 * 60_000;

/** A store: a Deno KV handle plus the clock and the duplicate window it decides with. */
export interface Store {
  /** The open KV database; the caller owns it and closes it. */
  readonly kv: Deno.Kv;
  /** Source of time for `created_at`, `t` and the duplicate window. */
  readonly clock: Clock;
  /** Duplicate window in ms. */
  readonly dedupeWindowMs: number;
}

/** Options of {@linkcode createStore}. */
export interface StoreOptions {
  /** Source of time; default `Date.now`. */
  clock?: Clock;
  /** Duplicate window in ms, > 0; default 5 minutes. */
  dedupeWindowMs?: number;
  /**
   * Most duplicate records kept in memory, ≥ 1; default {@linkcode SEEN_IN_MEMORY}. Past
   * it, each content accepted gets a KV record of its own, looked up in KV (the window
   * stays exact; docs/benchmarks.md, "Memory under load").
   */
  seenInMemory?: number;
  /**
   * Called after every KV commit with its duration in ms and whether it succeeded
   * (`GET /metrics`).
   */
  onCommit?: (ms: number, ok: boolean) => void;
  /**
   * The database file's path, when `kv` was opened from one: enables the disk-full reserve
   * (`<path>.reserve`, at least {@linkcode RESERVE_BYTES}) and the file-system checks of
   * {@linkcode health}.
   */
  path?: string;
  /**
   * The largest item or result the relay accepts, bytes (`--max-body`): sizes the disk-full
   * reserve. Default the most any configuration allows, 768 KiB.
   */
  maxItemBytes?: number;
  /**
   * Told each change of {@linkcode health}'s verdict as commits, loads and probes find it: a
   * storage fault, another fault, or healthy again (the relay logs them).
   */
  onHealthChange?: (verdict: HealthVerdict) => void;
}

/** What {@linkcode createStore} keeps of each store, out of the callers' sight. */
const INTERNALS = new WeakMap<
  Store,
  { writer: Writer; changes: Changes; health: StoreHealth }
>();

/**
 * Wraps an open Deno KV database as the relay's store. Reads nothing yet: the state is
 * loaded from KV on first use. The caller passes `await Deno.openKv(path)` (or
 * `":memory:"` in tests) and closes it; one store per KV file.
 *
 * @throws {RangeError} when `dedupeWindowMs` or `seenInMemory` is not a positive integer.
 * @example
 * ```ts
 * const store = createStore(await Deno.openKv("./data/relay.kv"), { dedupeWindowMs: 2000 });
 * ```
 */
export function createStore(kv: Deno.Kv, options: StoreOptions = {}): Store {
  const dedupeWindowMs = options.dedupeWindowMs ?? DEFAULT_DEDUPE_WINDOW_MS;
  if (!Number.isSafeInteger(dedupeWindowMs) || dedupeWindowMs <= 0) {
    throw new RangeError(`Cannot create store: dedupe window ${dedupeWindowMs} is not > 0 ms`);
  }
  const clock = options.clock ?? systemClock;
  const changes = new Changes();
  const health = new StoreHealth(options.path, options.onHealthChange, options.maxItemBytes);
  const seenInMemory = options.seenInMemory ?? SEEN_IN_MEMORY;
  if (!Number.isSafeInteger(seenInMemory) || seenInMemory < 1) {
    throw new RangeError(`Cannot create store: ${seenInMemory} records in memory is not ≥ 1`);
  }
  const writer = new Writer(kv, {
    clock,
    dedupeWindowMs,
    seenInMemory,
    changes,
    onCommit: options.onCommit,
    health,
  });
  const store: Store = { kv, clock, dedupeWindowMs };
  INTERNALS.set(store, { writer, changes, health });
  return store;
}

/** The writer of `store`; throws a `TypeError` for a store not made by `createStore`. */
function writerOf(store: Store): Writer {
  return internals(store).writer;
}

function internals(store: Store): { writer: Writer; changes: Changes; health: StoreHealth } {
  const found = INTERNALS.get(store);
  if (found === undefined) throw new TypeError("Cannot use the store: not made by createStore()");
  return found;
}

/**
 * Queues `content` unless the same content was accepted less than the duplicate window
 * ago anywhere in the relay. Evicts the queue's oldest items past
 * {@linkcode QUEUE_CAPACITY} in the same commit. Resolves only once the commit is durable.
 * A duplicate is counted (`duplicate`) and queues nothing.
 *
 * @param content Trimmed, non-empty content, at most 768 KiB of UTF-8.
 * @param queue The queue chosen by the caller.
 * @param options.dedupe `false` queues the item without the duplicate check and without
 *   touching its duplicate record: how a worker puts back an item it could not process
 *   (an extension, `POST /submit?dedupe=false`). Default `true`.
 * @throws {StoreBusyError} when another process kept changing the file; KV errors as thrown
 *   by Deno (the write may or may not have happened).
 */
export async function submit(
  store: Store,
  content: string,
  queue: QueueName,
  options: { dedupe?: boolean } = {},
): Promise<SubmitOutcome> {
  const dedupe = options.dedupe ?? true;
  return await writerOf(store).write(
    submitOp(store.kv, content, queue, { dedupe, dedupeWindowMs: store.dedupeWindowMs }),
  );
}

/**
 * Returns every item of `queue`, oldest first, and empties the queue in the same commit
 * (each item is returned by exactly one pull). Items held by a leased pull
 * stay; items whose lease ended are returned like the others.
 *
 * @returns The items, or `[]` when the queue is empty.
 * @throws {StoreBusyError} when another process kept changing the file; KV errors.
 */
export async function pull(store: Store, queue: QueueName): Promise<QueuedItem[]> {
  return (await pullFirst(store, [queue]))?.items ?? [];
}

/**
 * Pulls the first non-empty queue of `order` and leaves the others untouched, all in one
 * step of the writer. Items a leased pull holds do not count and stay.
 *
 * @param order Queues to try; default `qa`, `article`, `general`.
 * @param limit Most items to take, ≥ 1, oldest first (the rest stay); default all.
 * @returns The queue pulled and its items, or `undefined` when all are empty.
 * @throws {StoreBusyError} when another process kept changing the file; KV errors.
 */
export async function pullFirst(
  store: Store,
  order: readonly QueueName[] = QUEUE_NAMES,
  limit?: number,
): Promise<{ queue: QueueName; items: QueuedItem[] } | undefined> {
  return await writerOf(store).write(takeOp(store.kv, order, undefined, limit));
}

/**
 * A leased pull (at-least-once): hands out the first `limit` available items of
 * the first queue of `order` that has any, and hides them from other pulls until
 * `now + leaseMs` instead of deleting them. {@linkcode ack} deletes them; an item not
 * acknowledged in time is available again, in its old place at the front of its queue.
 * Counted as `leased` (again on each re-delivery).
 *
 * @param leaseMs 1 ms to {@linkcode MAX_LEASE_MS}.
 * @param limit Most items to hand out, ≥ 1.
 * @returns The queue and its leased items (each with `lease_until`), or `undefined` when
 *   no queue of `order` has an available item.
 * @throws {RangeError} for a lease or limit out of range; {@linkcode StoreBusyError}; KV
 *   errors.
 */
export async function lease(
  store: Store,
  order: readonly QueueName[],
  options: { leaseMs: number; limit: number },
): Promise<{ queue: QueueName; items: QueuedItem[] } | undefined> {
  const { leaseMs, limit } = options;
  if (!Number.isSafeInteger(leaseMs) || leaseMs < 1 || leaseMs > MAX_LEASE_MS) {
    throw new RangeError(`Cannot lease: ${leaseMs} ms is not between 1 ms and 12 h`);
  }
  if (!Number.isSafeInteger(limit) || limit < 1) {
    throw new RangeError(`Cannot lease: limit ${limit} is not ≥ 1`);
  }
  return await writerOf(store).write(takeOp(store.kv, order, { leaseMs, limit }));
}

/**
 * Acknowledges items handed out by {@linkcode lease}: deletes them and counts them as
 * `delivered`. An item whose lease ended is still acknowledged, unless a plain
 * pull took it meanwhile. Items not held under a lease (never leased, already acknowledged,
 * evicted, cleared, pulled) are reported as unknown and change nothing.
 *
 * @returns The refs deleted now and the refs not found.
 * @throws {StoreBusyError} when another process kept changing the file; KV errors.
 */
export async function ack(
  store: Store,
  refs: readonly ItemRef[],
): Promise<{ acked: ItemRef[]; unknown: ItemRef[] }> {
  return await writerOf(store).write(ackOp(refs));
}

/**
 * When the earliest lease among `queues` ends, epoch ms, or `undefined` when none is held:
 * a waiting pull wakes then, since the item becomes available without a commit.
 * A lease that has already ended counts too (it may have ended after the waiter's last
 * attempt), so the waiter tries again at once.
 *
 * @throws KV errors while the state is first loaded.
 */
export async function nextLeaseEnd(
  store: Store,
  queues: readonly QueueName[],
): Promise<number | undefined> {
  return await writerOf(store).read((state) => earliestLeaseEnd(state, queues)) ?? undefined;
}

/**
 * Resolves at the next successful commit that changes one of `collections` (a submit,
 * pull, lease, ack, push, clear), or when `signal` aborts (long-poll and stream
 * wake-ups, without polling the store). Register before reading, then await: a change
 * between the read and the wait is not missed.
 */
export function nextChange(
  store: Store,
  collections: readonly Collection[],
  signal: AbortSignal,
): Promise<void> {
  return internals(store).changes.next(collections, signal);
}

/**
 * A number that grows whenever the committed state of one of `collections` changes (a
 * commit that touches it, or the state being loaded again); equal numbers mean that
 * {@linkcode peek} and {@linkcode readResults} of those collections answer the same, as
 * long as no lease has ended meanwhile (a lease ending changes what peek shows without a
 * commit). The routes cache their serialised answers under it.
 */
export function stateVersion(store: Store, collections: readonly Collection[]): number {
  return writerOf(store).version(collections);
}

/**
 * Reads queues without removing anything.
 *
 * @param queues Which queues to read, in the order the result lists them.
 * @returns Each queue's items, oldest first (empty arrays included).
 * @throws KV errors when content of more than one part could not be read.
 */
export async function peek(
  store: Store,
  queues: readonly QueueName[] = QUEUE_NAMES,
): Promise<Map<QueueName, QueuedItem[]>> {
  const out = new Map<QueueName, QueuedItem[]>();
  const now = Math.floor(store.clock());
  for (const queue of queues) {
    out.set(
      queue,
      await writerOf(store).read((state) =>
        itemsWithContent(store.kv, queue, state.queues[queue].items, now)
      ),
    );
  }
  return out;
}

/**
 * Appends `content` to the results feed with `t = max(now, previous t + 1)` and evicts
 * the oldest results past {@linkcode RESULTS_CAPACITY}.
 *
 * @param content Trimmed, non-empty content, at most 768 KiB of UTF-8.
 * @returns The stored result with its `t`.
 * @throws {StoreBusyError} when another process kept changing the file; KV errors.
 */
export async function push(store: Store, content: string): Promise<ResultItem> {
  return await writerOf(store).write(pushOp(content));
}

/**
 * Lists results with `t > since`, oldest first, at most `limit` of them. Paging with `since = cursor` sees every result exactly once, and `gap` says when
 * results after `since` were evicted before they could be read.
 *
 * @param options.since Cursor, epoch ms, ≥ 0.
 * @param options.limit Maximum items, 1–50.
 * @throws KV errors when content of more than one part could not be read.
 */
export async function readResults(
  store: Store,
  options: { since: number; limit: number },
): Promise<ResultsPage> {
  return await writerOf(store).read((state) => readPage(store.kv, state, options));
}

/**
 * Removes every queued item, every result and every duplicate record; keeps the results'
 * `t` high-water mark and the counters. Runs alone in the writer: no
 * submit lands between emptying the queues and dropping the duplicate records, so none
 * loses its record while its item stays queued. Each queue and the feed are emptied
 * in one commit of their own; duplicate records are deleted in batches.
 *
 * @throws {StoreBusyError} when another process kept changing the file; KV errors.
 */
export async function clear(store: Store): Promise<void> {
  await writerOf(store).exclusive("clear", async (writer) => {
    for (const queue of QUEUE_NAMES) await writer.commitAlone("clear", clearQueue(queue));
    await writer.commitAlone("clear", clearFeed);
    await dropSubmissionRecords(store.kv, (change) => writer.commitAlone("clear", change));
  });
}

/**
 * The results' `t` high-water mark: the largest `t` ever given out, 0 for a new store.
 *
 * @throws KV errors while the state is first loaded.
 */
export async function resultsHighWaterMark(store: Store): Promise<number> {
  return await writerOf(store).read((state) => state.feed.hwm);
}

/**
 * Tells whether the store holds no queued item and no result (backup import refuses to
 * overwrite anything else).
 *
 * @throws KV errors while the state is first loaded.
 */
export async function isEmpty(store: Store): Promise<boolean> {
  return await writerOf(store).read((state) =>
    QUEUE_NAMES.every((q) => state.queues[q].items.length === 0) &&
    state.feed.items.length === 0
  );
}

/**
 * The counters and depths of every queue and of the feed (`GET /stats`), as of the
 * last commit.
 *
 * @throws KV errors while the state is first loaded.
 */
export async function stats(store: Store): Promise<StoreStats> {
  const now = Math.floor(store.clock());
  return await writerOf(store).read((state) => statsOf(state, now));
}

/**
 * Restores a backup into an empty store: each queue's items with their `created_at`, each
 * result with its `t`, and the high-water mark (at least the largest restored `t`). Restored
 * items count as accepted and restored results as pushed. The caller checks
 * {@linkcode isEmpty} first (or clears).
 *
 * @param backup.queues Items per queue, oldest first; at most 50 per queue are kept.
 * @param backup.results Results, oldest first, with strictly increasing `t`.
 * @param backup.hwm The exported high-water mark.
 * @throws {StoreBusyError} when another process kept changing the file; KV errors.
 */
export async function restore(
  store: Store,
  backup: {
    queues: Partial<Record<QueueName, Array<{ content: string; created_at: number }>>>;
    results: Array<{ t: number; content: string }>;
    hwm: number;
  },
): Promise<void> {
  const writer = writerOf(store);
  const writes: Promise<unknown>[] = [];
  for (const queue of QUEUE_NAMES) {
    for (const item of (backup.queues[queue] ?? []).slice(-QUEUE_CAPACITY)) {
      writes.push(writer.write(restoreItemOp(queue, item)));
    }
  }
  for (const result of backup.results.slice(-RESULTS_CAPACITY)) {
    writes.push(writer.write(restoreResultOp(result)));
  }
  writes.push(writer.write(restoreHwmOp(backup.hwm)));
  await Promise.all(writes);
}

/**
 * Loads the committed state and, for a store with a path, sets the disk-full reserve aside
 * (best effort: on a disk without room there is no reserve, and the store starts in
 * disk-full mode, refusing new content until there is room for it). The relay calls it
 * before it listens, so that a database it cannot read stops it at once.
 *
 * @throws {StorageError} when the state cannot be read because of a storage fault (a
 *   damaged file: kind `damaged`); other KV errors.
 */
export async function prepare(store: Store): Promise<void> {
  await writerOf(store).read(() => true);
  const { health } = internals(store);
  if (!await health.ensureReserve()) health.enterFullWithoutRoom();
}

/**
 * Whether the store can commit (docs/faults.md, "Storage faults"): the
 * outcome of its last commit, checked by a probe at most once a second. The probe reads
 * the metadata entries from KV, looks at the file system (read-only, free space), and
 * commits one small entry only when the last commit failed or the disk is nearly full; so
 * an idle, healthy store polled every second writes nothing. A damaged database stays
 * reported until the store is opened again.
 *
 * @returns `{ok: true}`, or `{ok: false, kind, reason}` with a short reason such as
 *   `disk full`.
 */
export async function health(store: Store): Promise<HealthVerdict> {
  const { writer, health } = internals(store);
  return await health.check({
    read: async () => {
      await store.kv.getMany(COLLECTIONS.map(metaKey));
    },
    write: async () => {
      await writer.write({
        name: "check the store",
        cost: () => ({ mutations: 1, bytes: 100 }),
        apply: (draft, mutations) => mutations.set(healthProbeKey(), draft.now),
      });
    },
  });
}

/**
 * Whether the store has room for new content: `false` in disk-full mode (docs/faults.md,
 * "Storage faults"), which the store leaves by itself when a look, at most once a second,
 * finds the room to set its reserve aside again. The built-in services ask before they write
 * a note, a post or an episode, and automatic backups before they write one, so that what
 * the store gave up for pulls and acks on a full disk is not taken by their files.
 */
export async function roomForContent(store: Store): Promise<boolean> {
  const { health } = internals(store);
  if (!health.full) return true;
  await health.recheckFull();
  return !health.full;
}

/**
 * The verdict {@linkcode health} would give without probing, when its last probe is younger
 * than a second; else `undefined` (then call {@linkcode health}). Synchronous, for the
 * `/health` answered before routing.
 */
export function freshHealth(store: Store): HealthVerdict | undefined {
  return internals(store).health.freshVerdict();
}

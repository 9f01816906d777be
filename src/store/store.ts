/**
 * The relay's store over Deno KV: queues, the results feed, duplicate records and the
 * counters of `GET /stats`. This is the only module that touches KV; the key schema is
 * documented in `kv_keys.ts`.
 *
 * **One writer, group commit.** A relay owns its KV file (C73), so the store keeps the
 * committed state of every queue and of the feed in memory and funnels every write through
 * one writer. While a commit is in flight, new writes wait; the writer then applies all of
 * them, in arrival order, to a copy of the state and commits the lot as one atomic KV commit
 * (within KV's limits of 1000 mutations and 800 KiB). A write resolves only after the commit
 * that holds it is durable (platform notes: one fsync per commit, durable on resolve), and
 * the in-memory state changes only when that commit succeeded. One fsync then serves many
 * requests, which is where the throughput comes from (issue 5); ordering and exactly-once
 * (C22) follow from the single writer.
 *
 * Every commit also checks the versionstamps of the four metadata entries (`["queues", q]`,
 * `["results_meta"]`): should anything else have written the file, the check fails, the
 * store reloads from KV and applies the batch again. A commit that throws leaves the
 * outcome unknown, so the batch is rejected and the state is reloaded before the next one.
 *
 * Reads (peek, results, stats) are served from the committed state; content of more than
 * one part ({@linkcode CHUNK_BYTES}) is not kept in memory and is read from KV. Content is
 * stored as UTF-8 bytes in parts, all parts of one item in the same commit (C8).
 *
 * @module
 */

import { type Clock, systemClock } from "../clock.ts";
import {
  itemPartKey,
  itemPrefix,
  type QueueCounters,
  type ResultCounters,
  resultPartKey,
  resultPrefix,
  resultsMetaKey,
  submissionKey,
  type SubmissionRecord,
} from "./kv_keys.ts";
import { QUEUE_NAMES, type QueueName } from "../queues.ts";
import { Changes } from "./_changes.ts";
import { dropSubmissionRecords, sha256Hex } from "./_duplicates.ts";
import { readParts, splitParts } from "./_parts.ts";
import { Writer } from "./_writer.ts";
import {
  addCost,
  appendItem,
  appendItemCost,
  appendResult,
  appendResultCost,
  available,
  type Collection,
  deleteParts,
  Draft,
  type ItemState,
  QUEUE_CAPACITY,
  RESULTS_CAPACITY,
  totalParts,
} from "./_state.ts";

export type { QueueCounters, ResultCounters } from "./kv_keys.ts";
export { CHUNK_BYTES } from "./_parts.ts";
export { StoreBusyError } from "./_writer.ts";
export { type Collection, QUEUE_CAPACITY, RESULTS_CAPACITY } from "./_state.ts";

/** Default duplicate window, ms: 5 minutes (spec §8, C13). */
export const DEFAULT_DEDUPE_WINDOW_MS = 5 * 60_000;

/** A store: a Deno KV handle plus the clock and the duplicate window it decides with. */
export interface Store {
  /** The open KV database; the caller owns it and closes it. */
  readonly kv: Deno.Kv;
  /** Source of time for `created_at`, `t` and the duplicate window. */
  readonly clock: Clock;
  /** Duplicate window in ms (C13). */
  readonly dedupeWindowMs: number;
}

/** Options of {@linkcode createStore}. */
export interface StoreOptions {
  /** Source of time; default `Date.now`. */
  clock?: Clock;
  /** Duplicate window in ms, > 0; default 5 minutes (C13). */
  dedupeWindowMs?: number;
  /**
   * Called after every KV commit with its duration in ms and whether it succeeded
   * (`GET /metrics`, issue 6).
   */
  onCommit?: (ms: number, ok: boolean) => void;
}

/**
 * Wraps an open Deno KV database as the relay's store. Reads nothing yet: the state is
 * loaded from KV on first use. The caller passes `await Deno.openKv(path)` (or
 * `":memory:"` in tests) and closes it; one store per KV file (C73).
 *
 * @throws {RangeError} when `dedupeWindowMs` is not a positive integer.
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
  const writer = new Writer(kv, { clock, dedupeWindowMs, changes, onCommit: options.onCommit });
  const store: Store = { kv, clock, dedupeWindowMs };
  INTERNALS.set(store, { writer, changes });
  return store;
}

/** What {@linkcode createStore} keeps of each store, out of the callers' sight. */
const INTERNALS = new WeakMap<Store, { writer: Writer; changes: Changes }>();

/** The writer of `store`; throws a `TypeError` for a store not made by `createStore`. */
function writerOf(store: Store): Writer {
  return internals(store).writer;
}

function internals(store: Store): { writer: Writer; changes: Changes } {
  const found = INTERNALS.get(store);
  if (found === undefined) throw new TypeError("Cannot use the store: not made by createStore()");
  return found;
}

/** What {@linkcode submit} did: queued the item, or saw a duplicate and queued nothing. */
export type SubmitOutcome =
  | { readonly accepted: true; readonly queue: QueueName; readonly id: number }
  | { readonly accepted: false };

/** A queued item as read back (spec §2.2). */
export interface QueuedItem {
  /** Assigned by the store; grows with submission order within a queue. */
  readonly id: number;
  /** The trimmed content, exactly as submitted. */
  readonly content: string;
  /** The queue holding it (`queue_type` in spec §2.2). */
  readonly queue: QueueName;
  /** Submission time, epoch ms. */
  readonly created_at: number;
  /**
   * Epoch ms until which a leased pull holds the item (issue 6); absent when the item is
   * not leased or its lease has ended.
   */
  readonly lease_until?: number;
}

/** A result in the feed (spec §2.4): `t` is its push time and cursor (C40). */
export interface ResultItem {
  /** Epoch ms, strictly increasing over the life of the store (C40). */
  readonly t: number;
  /** The processed output, exactly as pushed. */
  readonly content: string;
}

/** A page of the results feed (spec §4.5, C41, C42). */
export interface ResultsPage {
  /** `t` of the last item listed, or `since` when none is. */
  readonly cursor: number;
  /** Items with `t > since`, oldest first. */
  readonly items: ResultItem[];
  /**
   * `true` when results with `t > since` were evicted by the 50-result overflow before
   * this read: the reader missed them (issue 6).
   */
  readonly gap: boolean;
}

/** What `GET /stats` reports: the counters and the current depths. */
export interface StoreStats {
  /**
   * Per queue: its counters, how many items it holds now (`depth`, leased ones included)
   * and how many of those are leased (`in_flight`).
   */
  queues: Record<QueueName, QueueCounters & { depth: number; in_flight: number }>;
  /** The feed's counters, how many results it holds and the cursor mark (C40). */
  results: ResultCounters & { depth: number; hwm: number };
}

/**
 * Queues `content` unless the same content was accepted less than the duplicate window
 * ago anywhere in the relay (spec §4.1; C13, C14). Evicts the queue's oldest items past
 * {@linkcode QUEUE_CAPACITY} in the same commit. Resolves only once the commit is durable.
 * A duplicate is counted (`duplicate`) and queues nothing.
 *
 * @param content Trimmed, non-empty content, at most 768 KiB of UTF-8 (C5).
 * @param queue The queue chosen by the caller (C10, C11).
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
  const hash = sha256Hex(content);
  const parts = splitParts(content);
  return await writerOf(store).write<SubmitOutcome>({
    name: "submit",
    // The item, the evictions, and the duplicate record.
    cost: (draft) => addCost(appendItemCost(draft, queue, parts), 1),
    apply(draft, mutations) {
      const q = draft.queues[queue];
      const now = draft.now;
      const seen = draft.seen(hash);
      mutations.touch(queue);
      // C13: compare the stored time; expired KV entries can still be read.
      if (dedupe && seen !== undefined && now - seen < store.dedupeWindowMs) {
        q.counters.duplicate++;
        return { accepted: false };
      }
      const id = appendItem(mutations, q, queue, parts, content, now);
      q.counters.accepted++;
      if (dedupe) {
        draft.see(hash, now);
        mutations.set(submissionKey(hash), { last_seen_at: now } satisfies SubmissionRecord, {
          expireIn: store.dedupeWindowMs,
        });
      }
      return { accepted: true, queue, id };
    },
  });
}

/**
 * Returns every item of `queue`, oldest first, and empties the queue in the same commit
 * (spec §4.2; C22: each item is returned by exactly one pull). Items held by a leased pull
 * stay (issue 6); items whose lease ended are returned like the others.
 *
 * @returns The items, or `[]` when the queue is empty.
 * @throws {StoreBusyError} when another process kept changing the file; KV errors.
 */
export async function pull(store: Store, queue: QueueName): Promise<QueuedItem[]> {
  return (await pullFirst(store, [queue]))?.items ?? [];
}

/**
 * Pulls the first non-empty queue of `order` and leaves the others untouched, all in one
 * step of the writer (spec §4.2 rule 2, C21, C22). Items a leased pull holds do not count
 * and stay (issue 6).
 *
 * @param order Queues to try; default `qa`, `article`, `general`.
 * @returns The queue pulled and its items, or `undefined` when all are empty.
 * @throws {StoreBusyError} when another process kept changing the file; KV errors.
 */
export async function pullFirst(
  store: Store,
  order: readonly QueueName[] = QUEUE_NAMES,
): Promise<{ queue: QueueName; items: QueuedItem[] } | undefined> {
  return await take(store, order, undefined);
}

/** Longest lease, ms: 12 hours (issue 6). */
export const MAX_LEASE_MS = 12 * 3_600_000;

/**
 * A leased pull (issue 6, at-least-once): hands out the first `limit` available items of
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
  return await take(store, order, { leaseMs, limit });
}

/** An item named by its queue and id, as {@linkcode ack} takes it. */
export interface ItemRef {
  readonly queue: QueueName;
  readonly id: number;
}

/**
 * Acknowledges items handed out by {@linkcode lease}: deletes them and counts them as
 * `delivered` (issue 6). An item whose lease ended is still acknowledged, unless a plain
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
  const held = (draft: Draft, ref: ItemRef) =>
    draft.queues[ref.queue].items.find((i) => i.id === ref.id && i.lease_until !== undefined);
  return await writerOf(store).write({
    name: "ack",
    cost: (draft) =>
      addCost({ mutations: 0, bytes: 0 }, totalParts(refs.flatMap((r) => held(draft, r) ?? []))),
    apply(draft, mutations) {
      const acked: ItemRef[] = [];
      const unknown: ItemRef[] = [];
      for (const ref of refs) {
        const item = held(draft, ref);
        if (item === undefined) {
          unknown.push(ref);
          continue;
        }
        const q = draft.queues[ref.queue];
        deleteParts(mutations, item.parts, (p) => itemPartKey(ref.queue, item.id, p));
        q.items = q.items.filter((i) => i !== item);
        q.counters.delivered++;
        mutations.touch(ref.queue);
        acked.push(ref);
      }
      return { acked, unknown };
    },
  });
}

/**
 * The plain pull (`lease` undefined: delete what is handed out) and the leased pull (mark
 * it leased), as one write of the writer.
 */
async function take(
  store: Store,
  order: readonly QueueName[],
  lease: { leaseMs: number; limit: number } | undefined,
): Promise<{ queue: QueueName; items: QueuedItem[] } | undefined> {
  const pick = (draft: Draft) => {
    for (const queue of order) {
      const items = draft.queues[queue].items.filter((i) => available(i, draft.now));
      if (items.length > 0) return { queue, items: items.slice(0, lease?.limit ?? items.length) };
    }
    return undefined;
  };
  return await writerOf(store).write({
    name: lease === undefined ? "pull" : "lease",
    cost(draft) {
      const items = pick(draft)?.items ?? [];
      const mutations = lease === undefined ? totalParts(items) : 0;
      return addCost({ mutations, bytes: 0 }, 1 + items.length);
    },
    async apply(draft, mutations) {
      const picked = pick(draft);
      if (picked === undefined) return undefined;
      const { queue } = picked;
      const q = draft.queues[queue];
      // Read first, change after: a failed read leaves the draft as it was.
      const items = await itemsWithContent(store.kv, queue, picked.items, draft.now);
      if (items === undefined) throw new Error(`Cannot pull ${queue}: content parts are missing`);
      const taken = new Set(picked.items);
      mutations.touch(queue);
      if (lease !== undefined) {
        const until = draft.now + lease.leaseMs;
        q.items = q.items.map((i) => taken.has(i) ? { ...i, lease_until: until } : i);
        q.counters.leased += items.length;
        return { queue, items: items.map((i) => ({ ...i, lease_until: until })) };
      }
      for (const item of picked.items) {
        deleteParts(mutations, item.parts, (p) => itemPartKey(queue, item.id, p));
      }
      q.items = q.items.filter((i) => !taken.has(i));
      q.counters.delivered += items.length;
      return { queue, items };
    },
  });
}

/**
 * When the earliest lease among `queues` ends, epoch ms, or `undefined` when none is held:
 * a waiting pull wakes then, since the item becomes available without a commit (issue 6).
 * A lease that has already ended counts too (it may have ended after the waiter's last
 * attempt), so the waiter tries again at once.
 *
 * @throws KV errors while the state is first loaded.
 */
export async function nextLeaseEnd(
  store: Store,
  queues: readonly QueueName[],
): Promise<number | undefined> {
  return await writerOf(store).read((state) => {
    let next = Infinity;
    for (const q of queues) {
      for (const i of state.queues[q].items) {
        if (i.lease_until !== undefined) next = Math.min(next, i.lease_until);
      }
    }
    return next === Infinity ? null : next;
  }) ?? undefined;
}

/**
 * Resolves at the next successful commit that changes one of `collections` (a submit,
 * pull, lease, ack, push, clear), or when `signal` aborts (issue 6: long-poll and stream
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
 * Reads queues without removing anything (spec §4.3, C30).
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
 * the oldest results past {@linkcode RESULTS_CAPACITY} (spec §4.4; C40).
 *
 * @param content Trimmed, non-empty content, at most 768 KiB of UTF-8 (C5).
 * @returns The stored result with its `t`.
 * @throws {StoreBusyError} when another process kept changing the file; KV errors.
 */
export async function push(store: Store, content: string): Promise<ResultItem> {
  const parts = splitParts(content);
  return await writerOf(store).write({
    name: "push",
    cost: (draft) => appendResultCost(draft, parts),
    apply(draft, mutations) {
      const t = Math.max(draft.now, draft.feed.hwm + 1);
      appendResult(mutations, draft.feed, parts, content, t);
      draft.feed.counters.pushed++;
      return { t, content };
    },
  });
}

/**
 * Lists results with `t > since`, oldest first, at most `limit` of them (spec §4.5; C41,
 * C42). Paging with `since = cursor` sees every result exactly once, and `gap` says when
 * results after `since` were evicted before they could be read (issue 6).
 *
 * @param options.since Cursor, epoch ms, ≥ 0.
 * @param options.limit Maximum items, 1–50.
 * @throws KV errors when content of more than one part could not be read.
 */
export async function readResults(
  store: Store,
  options: { since: number; limit: number },
): Promise<ResultsPage> {
  const { since, limit } = options;
  return await writerOf(store).read(async (state) => {
    const wanted = state.feed.items.filter((r) => r.t > since).slice(0, limit);
    const gap = state.feed.evicted_t > since;
    const last = wanted.at(-1);
    if (last === undefined) return { cursor: since, items: [], gap };
    const items: ResultItem[] = [];
    for (const r of wanted) {
      const content = r.content ?? await readParts(store.kv, resultPrefix(r.t));
      if (content === undefined) return undefined;
      items.push({ t: r.t, content });
    }
    return { cursor: last.t, items, gap };
  });
}

/**
 * Removes every queued item, every result and every duplicate record; keeps the results'
 * `t` high-water mark and the counters (spec §4.6; C50). Runs alone in the writer: no
 * submit lands between emptying the queues and dropping the duplicate records, so none
 * loses its record while its item stays queued (C13). Each queue and the feed are emptied
 * in one commit of their own; duplicate records are deleted in batches.
 *
 * @throws {StoreBusyError} when another process kept changing the file; KV errors.
 */
export async function clear(store: Store): Promise<void> {
  await writerOf(store).exclusive("clear", async (writer) => {
    for (const queue of QUEUE_NAMES) {
      await writer.commitAlone("clear", (draft, mutations) => {
        const q = draft.queues[queue];
        if (q.items.length === 0) return;
        for (const item of q.items) {
          deleteParts(mutations, item.parts, (p) => itemPartKey(queue, item.id, p));
        }
        q.counters.cleared += q.items.length;
        q.items = [];
        mutations.touch(queue);
      });
    }
    await writer.commitAlone("clear", (draft, mutations) => {
      const feed = draft.feed;
      if (feed.items.length === 0) return;
      for (const r of feed.items) deleteParts(mutations, r.parts, (p) => resultPartKey(r.t, p));
      feed.counters.cleared += feed.items.length;
      feed.items = [];
      mutations.touch("feed");
    });
    await dropSubmissionRecords(store.kv, (change) => writer.commitAlone("clear", change));
  });
}

/**
 * The results' `t` high-water mark: the largest `t` ever given out, 0 for a new store (C40).
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
 * The counters and depths of every queue and of the feed (issue 5, `GET /stats`), as of the
 * last commit.
 *
 * @throws KV errors while the state is first loaded.
 */
export async function stats(store: Store): Promise<StoreStats> {
  const now = Math.floor(store.clock());
  return await writerOf(store).read((state) => {
    const queues = {} as StoreStats["queues"];
    for (const q of QUEUE_NAMES) {
      const items = state.queues[q].items;
      queues[q] = {
        ...state.queues[q].counters,
        depth: items.length,
        in_flight: items.filter((i) => !available(i, now)).length,
      };
    }
    const feed = state.feed;
    return { queues, results: { ...feed.counters, depth: feed.items.length, hwm: feed.hwm } };
  });
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
  const writes: Promise<unknown>[] = [];
  for (const queue of QUEUE_NAMES) {
    for (const item of (backup.queues[queue] ?? []).slice(-QUEUE_CAPACITY)) {
      const parts = splitParts(item.content);
      writes.push(
        writerOf(store).write({
          name: "restore",
          cost: (draft) => appendItemCost(draft, queue, parts),
          apply(draft, mutations) {
            const q = draft.queues[queue];
            appendItem(mutations, q, queue, parts, item.content, item.created_at);
            q.counters.accepted++;
            return true;
          },
        }),
      );
    }
  }
  for (const result of backup.results.slice(-RESULTS_CAPACITY)) {
    const parts = splitParts(result.content);
    writes.push(
      writerOf(store).write({
        name: "restore",
        cost: (draft) => appendResultCost(draft, parts),
        apply(draft, mutations) {
          appendResult(mutations, draft.feed, parts, result.content, result.t);
          draft.feed.counters.pushed++;
          return true;
        },
      }),
    );
  }
  writes.push(
    writerOf(store).write({
      name: "restore",
      cost: () => addCost({ mutations: 0, bytes: 0 }, 1),
      apply(draft, mutations) {
        draft.feed.hwm = Math.max(draft.feed.hwm, backup.hwm);
        mutations.touch("feed");
        return true;
      },
    }),
  );
  await Promise.all(writes);
}

/**
 * Makes one real read from KV to tell whether the store answers (spec §4.7, C51).
 * Writes nothing, so an idle relay polled by a health check writes nothing to disk.
 *
 * @returns `true` when the read succeeded, `false` when KV threw (closed, I/O error).
 */
export async function probe(store: Store): Promise<boolean> {
  try {
    await store.kv.get(resultsMetaKey());
    return true;
  } catch {
    return false;
  }
}

/**
 * Items with their content: from memory, or read from KV for multi-part items; with
 * `lease_until` when leased at `now` (epoch ms).
 *
 * @returns `undefined` when an item's parts are gone (removed by a later commit).
 */
async function itemsWithContent(
  kv: Deno.Kv,
  queue: QueueName,
  items: readonly ItemState[],
  now: number,
): Promise<QueuedItem[] | undefined> {
  const out: QueuedItem[] = [];
  for (const item of items) {
    const content = item.content ?? await readParts(kv, itemPrefix(queue, item.id));
    if (content === undefined) return undefined;
    const { id, created_at } = item;
    out.push(
      available(item, now)
        ? { id, content, queue, created_at }
        : { id, content, queue, created_at, lease_until: item.lease_until! },
    );
  }
  return out;
}

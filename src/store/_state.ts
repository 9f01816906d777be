/**
 * The store's committed state as kept in memory, and the functions that change it.
 *
 * A write never changes the committed {@linkcode State} directly: it changes a
 * {@linkcode Draft} (a copy) and records in {@linkcode Mutations} the KV writes that make the
 * same change durable. The writer (`_writer.ts`) commits the mutations and, only when the
 * commit succeeded, settles the draft into the state. Nothing here touches KV.
 *
 * @module
 */

import { QUEUE_NAMES, type QueueName } from "../queue_names.ts";
import {
  itemPartKey,
  type QueueCounters,
  type QueueMeta,
  queueMetaKey,
  type ResultCounters,
  resultPartKey,
  type ResultsMeta,
  resultsMetaKey,
} from "./kv_keys.ts";

/** Items an input queue holds; the oldest are evicted past it. */
export const QUEUE_CAPACITY = 50;

/** Items the results feed holds; the oldest are evicted past it. */
export const RESULTS_CAPACITY = 50;

/**
 * Most KV mutations one commit holds: KV allows 1000 per commit (platform notes); the rest
 * is room for the metadata entries and their checks.
 */
export const BATCH_MAX_MUTATIONS = 900;

/** Most bytes (estimated) one commit holds: KV allows 800 KiB per commit. */
export const BATCH_MAX_BYTES = 700 * 1024;

// Approximate bytes of a key and serialisation framing, per mutation.
const MUTATION_OVERHEAD_BYTES = 100;

/** A queue, or `"feed"` for the results feed: what a commit changes and a waiter watches. */
export type Collection = QueueName | "feed";

/** Every collection, in the order their metadata entries are read and checked. */
export const COLLECTIONS: readonly Collection[] = [...QUEUE_NAMES, "feed"];

/** The key of a collection's metadata entry. */
export function metaKey(collection: Collection): Deno.KvKey {
  return collection === "feed" ? resultsMetaKey() : queueMetaKey(collection);
}

/** A queued item in memory; `content` is kept for single-part items only. */
export interface ItemState {
  readonly id: number;
  readonly parts: number;
  readonly created_at: number;
  readonly content: string | undefined;
  /** Set by a leased pull, epoch ms; kept after the lease ends until a pull or ack. */
  readonly lease_until?: number;
  /**
   * The id in the item's KV keys when it is not `id`: the key of the item it evicted, which
   * it took over ({@linkcode appendItem}).
   */
  readonly slot?: number;
}

/** The id in the KV keys of `item`'s parts (`["items", queue, id, part]`). */
export function keyIdOf(item: ItemState): number {
  return item.slot ?? item.id;
}

/** A result in memory; `content` is kept for single-part results only. */
export interface ResultState {
  readonly t: number;
  readonly parts: number;
  readonly content: string | undefined;
  /** The `t` in the result's KV keys when it is not `t`: that of the result it evicted. */
  readonly slot?: number;
}

/** The `t` in the KV keys of `result`'s parts (`["results", t, part]`). */
export function keyTOf(result: ResultState): number {
  return result.slot ?? result.t;
}

/** One queue in memory: its next id, its items oldest first, its counters. */
export interface QueueState {
  next_id: number;
  items: ItemState[];
  counters: QueueCounters;
}

/** The results feed in memory. */
export interface FeedState {
  hwm: number;
  /** The largest `t` the overflow ever evicted, 0 for none (the `gap` flag). */
  evicted_t: number;
  items: ResultState[];
  counters: ResultCounters;
}

/** The committed state: what KV holds, as of the last successful commit. */
export interface State {
  queues: Record<QueueName, QueueState>;
  feed: FeedState;
  /**
   * Duplicate records: SHA-256 hex → last accepted, epoch ms, oldest accepted first.
   * Every record held only in `["accepted", …]` entries is here; records held in
   * `["submissions", hash]` entries may be missing (`_duplicates.ts`).
   */
  seen: Map<string, number>;
  /**
   * The `["accepted", n, at]` entries in KV, in the order of `n`, with their time (epoch
   * ms): the relay's commits delete them once their window has passed
   * (`_duplicates.ts`, `SeenPruner.sweep`).
   */
  batches: Array<{ key: Deno.KvKey; at: number }>;
  /** The `n` of the next `["accepted", n, at]` entry. */
  nextBatch: number;
  /**
   * `["submissions", hash]` records in KV: hash → their time, epoch ms, oldest first, at
   * most `seenLimit` of them (more are left to KV's expiry). The relay's commits delete
   * them once their window has passed; a record written again moves to the end.
   */
  singles: Map<string, number>;
  /** Most duplicate records memory holds, and most entries of `singles`. */
  seenLimit: number;
  /**
   * Until when, epoch ms, a `["submissions", hash]` record missing from `seen` may still be
   * in force; 0 when `seen` holds every record in force.
   */
  seenIncompleteUntil: number;
  /** The file's `["format"]` as read (1 when absent); the next commit raises it to 2. */
  format: number;
  /** Versionstamps of the metadata entries as last read or written. */
  stamps: Record<Collection, string | null>;
}

/** Whether a pull may hand `item` out at `now`: not leased, or its lease has ended. */
export function available(item: ItemState, now: number): boolean {
  return item.lease_until === undefined || item.lease_until <= now;
}

/** KV mutations of one commit, one per key (the last one wins), with a size estimate. */
export class Mutations {
  /** Mutations by key (JSON of the key); no `value` means a delete. */
  readonly entries = new Map<string, { key: Deno.KvKey; value?: unknown; expireIn?: number }>();
  /** Collections whose metadata (order, counters, high-water mark) changed. */
  readonly touched = new Set<Collection>();
  /** Estimated bytes of the commit so far. */
  bytes = 0;

  /** Sets `key` to `value`; `expireIn` ms as in `Deno.Kv.set`. */
  set(key: Deno.KvKey, value: unknown, options: { expireIn?: number } = {}): void {
    this.bytes += MUTATION_OVERHEAD_BYTES + (value instanceof Uint8Array ? value.length : 0);
    const expireIn = options.expireIn;
    this.entries.set(
      JSON.stringify(key),
      expireIn === undefined ? { key, value } : { key, value, expireIn },
    );
  }

  /** Deletes `key`. */
  delete(key: Deno.KvKey): void {
    this.bytes += MUTATION_OVERHEAD_BYTES;
    this.entries.set(JSON.stringify(key), { key });
  }

  /** Marks a queue's or the feed's metadata (order, counters, high-water mark) as changed. */
  touch(collection: Collection): void {
    this.touched.add(collection);
  }
}

/** A copy of the state that a batch changes; becomes the state when its commit succeeds. */
export class Draft {
  /** Copies of every queue (their item arrays and counters too). */
  readonly queues: Record<QueueName, QueueState>;
  /** A copy of the feed. */
  readonly feed: FeedState;
  /** The clock, read once per batch, epoch ms. */
  readonly now: number;
  #state: State;
  /** Duplicate records added by this draft: SHA-256 hex → accepted at, epoch ms. */
  #seen = new Map<string, number>();
  /** Hashes of `#seen` that go to an `["accepted", …]` entry, and so to memory. */
  #inMemory: string[] = [];
  /** How many of `#inMemory` {@linkcode Draft.takeBatch} has taken. */
  #taken = 0;
  /** Until when, epoch ms, the `["submissions", hash]` records this draft wrote are in force. */
  #inKvUntil = 0;
  /** Hashes whose `["submissions", hash]` record this draft writes. */
  #singles: string[] = [];
  /** `["accepted", …]` entries this draft writes. */
  #batches: Array<{ key: Deno.KvKey; at: number }> = [];
  /** Whether every duplicate record of the state is forgotten. */
  #forgetAll = false;

  /**
   * @param state The committed state to copy.
   * @param now The time of this batch, epoch ms.
   */
  constructor(state: State, now: number) {
    const queues = {} as Record<QueueName, QueueState>;
    for (const q of QUEUE_NAMES) {
      const s = state.queues[q];
      queues[q] = { next_id: s.next_id, items: [...s.items], counters: { ...s.counters } };
    }
    this.queues = queues;
    this.feed = {
      hwm: state.feed.hwm,
      evicted_t: state.feed.evicted_t,
      items: [...state.feed.items],
      counters: { ...state.feed.counters },
    };
    this.now = now;
    this.#state = state;
  }

  /** When `hash` was last accepted, epoch ms, as far as memory knows, or `undefined`. */
  seen(hash: string): number | undefined {
    return this.#seen.get(hash) ?? (this.#forgetAll ? undefined : this.#state.seen.get(hash));
  }

  /**
   * Whether a record missing from {@linkcode Draft.seen}, or older there, may still be in
   * force in a `["submissions", hash]` entry, so that KV must be asked.
   */
  seenMayBeInKv(): boolean {
    const until = Math.max(this.#inKvUntil, this.#forgetAll ? 0 : this.#state.seenIncompleteUntil);
    return this.now < until;
  }

  /**
   * Whether memory has room for one more duplicate record once this draft is settled
   * (`State.seenLimit`).
   */
  seenHasRoom(): boolean {
    const held = (this.#forgetAll ? 0 : this.#state.seen.size) + this.#inMemory.length;
    return held < this.#state.seenLimit;
  }

  /**
   * Records `hash` as accepted at `at`: in memory and in this commit's `["accepted", …]`
   * entry when `inKvUntil` is undefined; else its `["submissions", hash]` record, in force
   * until `inKvUntil` (epoch ms), holds it and memory forgets it.
   */
  see(hash: string, at: number, inKvUntil?: number): void {
    this.#seen.set(hash, at);
    if (inKvUntil === undefined) {
      this.#inMemory.push(hash);
    } else {
      this.#singles.push(hash);
      this.#inKvUntil = Math.max(this.#inKvUntil, inKvUntil);
    }
  }

  /**
   * Takes the hashes accepted into memory since the last call, for the commit's
   * `["accepted", …]` entries (`_duplicates.ts`, `writeAcceptedBatch`): memory holds them
   * once the draft is settled.
   */
  takeBatch(): string[] {
    const hashes = this.#inMemory.slice(this.#taken);
    this.#taken = this.#inMemory.length;
    return hashes;
  }

  /** The `n` the next `["accepted", n, at]` entry of this draft gets. */
  nextBatch(): number {
    return this.#state.nextBatch + this.#batches.length;
  }

  /** Notes an `["accepted", …]` entry this draft's commit writes. */
  addBatch(key: Deno.KvKey): void {
    this.#batches.push({ key, at: this.now });
  }

  /** Forgets every duplicate record (their KV records are deleted by the same change). */
  forgetAll(): void {
    this.#forgetAll = true;
    this.#seen.clear();
    this.#inMemory = [];
    this.#taken = 0;
    this.#singles = [];
    this.#inKvUntil = 0;
  }

  /**
   * Makes this draft the committed state it was copied from, once `mutations` are
   * committed: the touched collections (multi-part content stays in KV only), their
   * versionstamps, and the duplicate records.
   *
   * @param versionstamp The commit's versionstamp; `null` when nothing was committed
   *   (nothing was touched).
   */
  settle(mutations: Mutations, versionstamp: string | null): void {
    const state = this.#state;
    const inKvOnly = <T extends { parts: number; content: string | undefined }>(i: T): T =>
      i.parts > 1 && i.content !== undefined ? { ...i, content: undefined } : i;
    for (const c of mutations.touched) {
      if (c === "feed") state.feed = { ...this.feed, items: this.feed.items.map(inKvOnly) };
      else state.queues[c] = { ...this.queues[c], items: this.queues[c].items.map(inKvOnly) };
      state.stamps[c] = versionstamp;
    }
    if (this.#forgetAll) {
      state.seen.clear();
      state.batches = [];
      state.singles.clear();
      state.seenIncompleteUntil = 0;
    }
    // Records held by `["submissions", hash]` entries leave memory (an older time kept there
    // would be outdated); those of an `["accepted", …]` entry are taken out and put back, so
    // that the map stays in the order of acceptance.
    for (const hash of this.#seen.keys()) state.seen.delete(hash);
    for (const hash of this.#inMemory) state.seen.set(hash, this.now);
    state.seenIncompleteUntil = Math.max(state.seenIncompleteUntil, this.#inKvUntil);
    for (const hash of this.#singles) {
      // Taken out first: an older time of the same record must not get it deleted early.
      state.singles.delete(hash);
      if (state.singles.size < state.seenLimit) state.singles.set(hash, this.now);
    }
    for (const batch of this.#batches) state.batches.push(batch);
    state.nextBatch += this.#batches.length;
  }
}

/** The metadata entry's value of `collection` in `draft`. */
export function metaValue(draft: Draft, collection: Collection): QueueMeta | ResultsMeta {
  return collection === "feed" ? feedMeta(draft.feed) : queueMeta(draft.queues[collection]);
}

/** One write waiting for the writer: its cost against the draft, then its effect. */
export interface WriteOp<T> {
  /** What is written, for errors: e.g. `"submit"`. */
  readonly name: string;
  /**
   * Whether it stores new content (submit, push, restore): such writes are refused while the
   * disk is full, the others (pull, lease, ack) still run (`_health.ts`).
   */
  readonly grows?: boolean;
  /** What applying it to `draft` would add to the commit. */
  cost(draft: Draft): Cost;
  /**
   * Reads what `apply` will need from KV, for every write of a batch at once before any is
   * applied (KV then holds exactly the committed state). Must not throw: an error is kept
   * for `apply` to throw.
   */
  prepare?(draft: Draft): Promise<void> | undefined;
  /**
   * Changes `draft` and records the KV mutations; throwing rejects this write only and
   * must leave `draft` as it was.
   */
  apply(draft: Draft, mutations: Mutations): T | Promise<T>;
}

/** A change committed on its own, inside an exclusive job of the writer. */
export type Change = (draft: Draft, mutations: Mutations) => void;

/** What one write adds to a commit: KV mutations and approximate bytes. */
export interface Cost {
  mutations: number;
  bytes: number;
}

/** `cost` plus `mutations` small mutations (a record, a delete). */
export function addCost(cost: Cost, mutations: number): Cost {
  return {
    mutations: cost.mutations + mutations,
    bytes: cost.bytes + mutations * MUTATION_OVERHEAD_BYTES,
  };
}

/** The number of parts of all `items`. */
export function totalParts(items: readonly { parts: number }[]): number {
  return items.reduce((n, i) => n + i.parts, 0);
}

/** Cost of {@linkcode appendItem}: the parts and the evicted items' parts. */
export function appendItemCost(
  draft: Draft,
  queue: QueueName,
  parts: readonly Uint8Array[],
): Cost {
  const evicted = evictedParts(draft.queues[queue].items, QUEUE_CAPACITY);
  return {
    mutations: parts.length + evicted,
    bytes: byteLength(parts) + (parts.length + evicted) * MUTATION_OVERHEAD_BYTES,
  };
}

/** Cost of {@linkcode appendResult}: the parts and the evicted results' parts. */
export function appendResultCost(draft: Draft, parts: readonly Uint8Array[]): Cost {
  const evicted = evictedParts(draft.feed.items, RESULTS_CAPACITY);
  return {
    mutations: parts.length + evicted,
    bytes: byteLength(parts) + (parts.length + evicted) * MUTATION_OVERHEAD_BYTES,
  };
}

/** Deletes parts 0 … parts-1 under `key(part)`. */
export function deleteParts(
  mutations: Mutations,
  parts: number,
  key: (part: number) => Deno.KvKey,
): void {
  for (let part = 0; part < parts; part++) mutations.delete(key(part));
}

/**
 * Adds a new item at the end of `q`: its parts, and the eviction (counted) of the oldest
 * items past {@linkcode QUEUE_CAPACITY}. Marks the queue's metadata as changed. A single-part
 * item that evicts a single-part item takes over its key ({@linkcode evict}): a submit into a
 * full queue, the usual case, is bound by the commit's mutations.
 *
 * @returns The new item's id.
 */
export function appendItem(
  mutations: Mutations,
  q: QueueState,
  queue: QueueName,
  parts: Uint8Array[],
  content: string,
  createdAt: number,
): number {
  const id = q.next_id;
  const evicted = q.items.splice(0, Math.max(0, q.items.length + 1 - QUEUE_CAPACITY));
  q.counters.evicted += evicted.length;
  const slot = evict(
    mutations,
    evicted,
    keyIdOf,
    parts.length,
    id,
    (k, p) => itemPartKey(queue, k, p),
  );
  setParts(mutations, parts, (part) => itemPartKey(queue, slot, part));
  const item = { id, parts: parts.length, created_at: createdAt, content };
  q.items.push(slot === id ? item : { ...item, slot });
  q.next_id = id + 1;
  mutations.touch(queue);
  return id;
}

/**
 * Adds a result with time `t` at the end of the feed: its parts, the eviction (counted) of
 * the oldest results past {@linkcode RESULTS_CAPACITY}, and the high-water mark raised to
 * `t`. Marks the feed's metadata as changed. A result of one part that evicts one takes
 * over its key ({@linkcode evict}).
 *
 * @param t Greater than every `t` in the feed, and so than every `t` in its keys.
 */
export function appendResult(
  mutations: Mutations,
  feed: FeedState,
  parts: Uint8Array[],
  content: string,
  t: number,
): void {
  const evicted = feed.items.splice(0, Math.max(0, feed.items.length + 1 - RESULTS_CAPACITY));
  feed.counters.evicted += evicted.length;
  for (const old of evicted) feed.evicted_t = Math.max(feed.evicted_t, old.t);
  const slot = evict(mutations, evicted, keyTOf, parts.length, t, resultPartKey);
  setParts(mutations, parts, (part) => resultPartKey(slot, part));
  const result = { t, parts: parts.length, content };
  feed.items.push(slot === t ? result : { ...result, slot });
  feed.hwm = Math.max(feed.hwm, t);
  mutations.touch("feed");
}

/**
 * Removes the `evicted` entries' parts for a new entry of `parts` parts whose own key id is
 * `own`, and says which key id the new entry is stored under: the first evicted entry of one
 * part gives a new entry of one part its key (one mutation, where a set and a delete would be
 * two); every other evicted entry's parts are deleted. Only entries of one part, whose content
 * memory holds: no reader ever reads their key, whose content another entry may have replaced.
 *
 * @param keyOf The key id of an entry's parts ({@linkcode keyIdOf}, {@linkcode keyTOf}).
 * @param partKey The KV key of part `part` under key id `keyId`.
 * @returns `own`, or the key id taken over.
 */
function evict<T extends { readonly parts: number }>(
  mutations: Mutations,
  evicted: readonly T[],
  keyOf: (entry: T) => number,
  parts: number,
  own: number,
  partKey: (keyId: number, part: number) => Deno.KvKey,
): number {
  let slot = own;
  for (const old of evicted) {
    if (slot === own && parts === 1 && old.parts === 1) slot = keyOf(old);
    else deleteParts(mutations, old.parts, (part) => partKey(keyOf(old), part));
  }
  return slot;
}

/** Writes each part as raw bytes (`_parts.ts`). */
function setParts(
  mutations: Mutations,
  parts: Uint8Array[],
  key: (part: number) => Deno.KvKey,
): void {
  parts.forEach((data, part) => mutations.set(key(part), data));
}

/** Parts that appending one more entry to `items` would evict past `capacity`. */
function evictedParts(items: readonly { parts: number }[], capacity: number): number {
  return items.length >= capacity ? totalParts(items.slice(0, items.length - capacity + 1)) : 0;
}

function byteLength(parts: readonly Uint8Array[]): number {
  return parts.reduce((n, p) => n + p.length, 0);
}

function queueMeta(q: QueueState): QueueMeta {
  return {
    next_id: q.next_id,
    items: q.items.map((i) =>
      i.slot !== undefined
        ? [i.id, i.parts, i.lease_until ?? null, i.slot]
        : i.lease_until === undefined
        ? [i.id, i.parts]
        : [i.id, i.parts, i.lease_until]
    ),
    created_at: q.items.map((i) => i.created_at),
    counters: q.counters,
  };
}

function feedMeta(feed: FeedState): ResultsMeta {
  return {
    hwm: feed.hwm,
    evicted_t: feed.evicted_t,
    items: feed.items.map((r) => r.slot === undefined ? [r.t, r.parts] : [r.t, r.parts, r.slot]),
    counters: feed.counters,
  };
}

/**
 * The relay's store over Deno KV: queues, the results feed and duplicate records.
 * This is the only module that touches KV; the key schema is documented in `keys.ts`.
 *
 * Every write is one atomic commit that checks the versionstamp of the collection's
 * metadata entry (`["queues", q]` or `["results_meta"]`) it read first, and is retried on
 * conflict. All writers of a collection change that entry, so a commit that passes its
 * check saw the collection exactly as it was: this is what makes pull exactly-once (C22)
 * and keeps every queue and the feed at 50 items (C14) under concurrency.
 * Reads that do not write (peek, results) read the metadata again after listing and
 * start over when it moved.
 *
 * Content is stored as UTF-8 bytes in parts of at most {@linkcode CHUNK_BYTES}, all
 * parts of one item in the same commit (C8).
 *
 * @module
 */

import { createHash } from "node:crypto";
import { type Clock, systemClock } from "./clock.ts";
import {
  type ItemHead,
  itemPartKey,
  queueItemsPrefix,
  type QueueMeta,
  queueMetaKey,
  type ResultHead,
  resultPartKey,
  type ResultsMeta,
  resultsMetaKey,
  submissionKey,
  type SubmissionRecord,
  submissionsPrefix,
} from "./keys.ts";
import { QUEUE_NAMES, type QueueName } from "./queues.ts";

/** Items an input queue holds; the oldest are evicted past it (spec §8, C14). */
export const QUEUE_CAPACITY = 50;

/** Items the results feed holds; the oldest are evicted past it (spec §8). */
export const RESULTS_CAPACITY = 50;

/**
 * Bytes of content per KV value. A KV value holds at most 65,536 bytes; the head part
 * also carries a few fields and V8 serialisation framing, so stay well below.
 */
export const CHUNK_BYTES = 60_000;

/** Default duplicate window, ms: 5 minutes (spec §8, C13). */
export const DEFAULT_DEDUPE_WINDOW_MS = 5 * 60_000;

/**
 * Commit attempts before a write gives up with {@linkcode StoreBusyError}. Each failed
 * attempt means another commit on the same collection won, so progress is being made;
 * the bound only stops a pathological livelock.
 */
const MAX_COMMIT_ATTEMPTS = 200;

// Duplicate records deleted per commit when clearing: each delete carries a check, and
// KV allows 100 checks per commit.
const DELETE_BATCH = 100;

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
}

/**
 * Wraps an open Deno KV database as the relay's store. Opens nothing: the caller passes
 * `await Deno.openKv(path)` (or `":memory:"` in tests) and closes it.
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
  return { kv, clock: options.clock ?? systemClock, dedupeWindowMs };
}

/** Thrown when a write lost its commit race {@linkcode MAX_COMMIT_ATTEMPTS} times in a row. */
export class StoreBusyError extends Error {
  /** @param operation What was being written, e.g. `"submit"`. */
  constructor(operation: string) {
    super(`Cannot ${operation}: the store stayed busy after ${MAX_COMMIT_ATTEMPTS} attempts`);
    this.name = "StoreBusyError";
  }
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
}

/**
 * Queues `content` unless the same content was accepted less than the duplicate window
 * ago anywhere in the relay (spec §4.1; C13, C14). Evicts the queue's oldest items past
 * {@linkcode QUEUE_CAPACITY} in the same commit. Resolves only once the commit is durable.
 *
 * @param content Trimmed, non-empty content.
 * @param queue The queue chosen by the caller (C10, C11).
 * @param options.dedupe `false` queues the item without the duplicate check and without
 *   touching its duplicate record: how a worker puts back an item it could not process
 *   (an extension, `POST /submit?dedupe=false`). Default `true`.
 * @throws {StoreBusyError} when the commit kept losing races; KV errors as thrown by Deno.
 */
export async function submit(
  store: Store,
  content: string,
  queue: QueueName,
  options: { dedupe?: boolean } = {},
): Promise<SubmitOutcome> {
  const { kv, dedupeWindowMs } = store;
  const dedupe = options.dedupe ?? true;
  const dedupeKey = submissionKey(sha256Hex(content));
  const parts = splitParts(content);
  return await retryCommit("submit", async () => {
    const [metaEntry, seen] = await kv.getMany<[QueueMeta, SubmissionRecord]>([
      queueMetaKey(queue),
      dedupeKey,
    ]);
    const now = now_(store);
    // C13: compare the stored time; expired KV entries can still be read.
    if (dedupe && seen.value !== null && now - seen.value.last_seen_at < dedupeWindowMs) {
      return { accepted: false } as const;
    }
    const op = kv.atomic().check(metaEntry).check(seen);
    const id = appendItem(op, queue, metaEntry.value, parts, now);
    if (dedupe) {
      op.set(dedupeKey, { last_seen_at: now } satisfies SubmissionRecord, {
        expireIn: dedupeWindowMs,
      });
    }
    const res = await op.commit();
    return res.ok ? { accepted: true, queue, id } as const : undefined;
  });
}

/**
 * Returns every item of `queue`, oldest first, and empties the queue in the same commit
 * (spec §4.2; C22: each item is returned by exactly one pull).
 *
 * @returns The items, or `[]` when the queue is empty.
 * @throws {StoreBusyError} when the commit kept losing races.
 */
export async function pull(store: Store, queue: QueueName): Promise<QueuedItem[]> {
  const { kv } = store;
  return await retryCommit("pull", async () => {
    const metaEntry = await kv.get<QueueMeta>(queueMetaKey(queue));
    const meta = metaEntry.value;
    if (meta === null || meta.items.length === 0) return [];
    const items = await readQueueItems(kv, queue, meta);
    if (items === undefined) return undefined;
    const op = kv.atomic().check(metaEntry);
    for (const [id, parts] of meta.items) deleteParts(op, parts, (p) => itemPartKey(queue, id, p));
    op.set(queueMetaKey(queue), { next_id: meta.next_id, items: [] } satisfies QueueMeta);
    const res = await op.commit();
    return res.ok ? items : undefined;
  });
}

/**
 * Pulls the first non-empty queue of `order` and leaves the others untouched (spec §4.2
 * rule 2, C21).
 *
 * @param order Queues to try; default `qa`, `article`, `general`.
 * @returns The queue that was emptied and its items, or `undefined` when all are empty.
 * @throws {StoreBusyError} when a commit kept losing races.
 */
export async function pullFirst(
  store: Store,
  order: readonly QueueName[] = QUEUE_NAMES,
): Promise<{ queue: QueueName; items: QueuedItem[] } | undefined> {
  for (const queue of order) {
    const items = await pull(store, queue);
    if (items.length > 0) return { queue, items };
  }
  return undefined;
}

/**
 * Reads queues without removing anything (spec §4.3, C30).
 *
 * @param queues Which queues to read, in the order the result lists them.
 * @returns Each queue's items, oldest first (empty arrays included).
 * @throws {StoreBusyError} when writers kept moving the queue while it was read.
 */
export async function peek(
  store: Store,
  queues: readonly QueueName[] = QUEUE_NAMES,
): Promise<Map<QueueName, QueuedItem[]>> {
  const { kv } = store;
  const out = new Map<QueueName, QueuedItem[]>();
  for (const queue of queues) {
    const items = await retryCommit("peek", async () => {
      const metaEntry = await kv.get<QueueMeta>(queueMetaKey(queue));
      if (metaEntry.value === null || metaEntry.value.items.length === 0) return [];
      const items = await readQueueItems(kv, queue, metaEntry.value);
      return await unchanged(kv, metaEntry) ? items : undefined;
    });
    out.set(queue, items);
  }
  return out;
}

/**
 * Appends `content` to the results feed with `t = max(now, previous t + 1)` and evicts
 * the oldest results past {@linkcode RESULTS_CAPACITY} (spec §4.4; C40).
 *
 * @param content Trimmed, non-empty content.
 * @returns The stored result with its `t`.
 * @throws {StoreBusyError} when the commit kept losing races.
 */
export async function push(store: Store, content: string): Promise<ResultItem> {
  const { kv } = store;
  const parts = splitParts(content);
  return await retryCommit("push", async () => {
    const metaEntry = await kv.get<ResultsMeta>(resultsMetaKey());
    const t = Math.max(now_(store), (metaEntry.value?.hwm ?? 0) + 1);
    const op = kv.atomic().check(metaEntry);
    appendResult(op, metaEntry.value, parts, t);
    const res = await op.commit();
    return res.ok ? { t, content } : undefined;
  });
}

/**
 * Lists results with `t > since`, oldest first, at most `limit` of them (spec §4.5; C41,
 * C42). Paging with `since = cursor` sees every result exactly once.
 *
 * @param options.since Cursor, epoch ms, ≥ 0.
 * @param options.limit Maximum items, 1–50.
 * @throws {StoreBusyError} when writers kept moving the feed while it was read.
 */
export async function readResults(
  store: Store,
  options: { since: number; limit: number },
): Promise<ResultsPage> {
  const { kv } = store;
  const { since, limit } = options;
  return await retryCommit("read results", async () => {
    const metaEntry = await kv.get<ResultsMeta>(resultsMetaKey());
    const wanted = (metaEntry.value?.items ?? []).filter(([t]) => t > since).slice(0, limit);
    const first = wanted[0];
    const last = wanted.at(-1);
    if (first === undefined || last === undefined) return { cursor: since, items: [] };
    const iter = kv.list<ResultHead | Uint8Array>({
      start: resultPartKey(first[0], 0),
      end: resultPartKey(last[0] + 1, 0),
    });
    const found = await collectParts(iter);
    const items: ResultItem[] = [];
    for (const [t, parts] of wanted) {
      const bytes = joinParts(found.get(t), parts);
      if (bytes === undefined) return undefined;
      items.push({ t, content: decodeUtf8(bytes) });
    }
    if (!await unchanged(kv, metaEntry)) return undefined;
    return { cursor: last[0], items };
  });
}

/**
 * Removes every queued item, every result and every duplicate record; keeps the results'
 * `t` high-water mark (spec §4.6; C50). Each queue and the feed are emptied in one commit
 * of their own; duplicate records are deleted in batches.
 *
 * @throws {StoreBusyError} when a commit kept losing races.
 */
export async function clear(store: Store): Promise<void> {
  const { kv } = store;
  const startedAt = now_(store);
  for (const queue of QUEUE_NAMES) {
    await retryCommit("clear", async () => {
      const metaEntry = await kv.get<QueueMeta>(queueMetaKey(queue));
      const meta = metaEntry.value;
      if (meta === null || meta.items.length === 0) return true;
      const op = kv.atomic().check(metaEntry);
      for (const [id, parts] of meta.items) {
        deleteParts(op, parts, (p) => itemPartKey(queue, id, p));
      }
      op.set(queueMetaKey(queue), { next_id: meta.next_id, items: [] } satisfies QueueMeta);
      return (await op.commit()).ok ? true : undefined;
    });
  }
  await retryCommit("clear", async () => {
    const metaEntry = await kv.get<ResultsMeta>(resultsMetaKey());
    const meta = metaEntry.value;
    if (meta === null || meta.items.length === 0) return true;
    const op = kv.atomic().check(metaEntry);
    for (const [t, parts] of meta.items) deleteParts(op, parts, (p) => resultPartKey(t, p));
    op.set(resultsMetaKey(), { hwm: meta.hwm, items: [] } satisfies ResultsMeta);
    return (await op.commit()).ok ? true : undefined;
  });
  // Only records of submissions accepted before the clear began: a submission racing the
  // clear may have queued its item after the queues were emptied, and its record must
  // then stay, or the same content could be queued twice within the window (C13).
  // Each delete checks the entry, so a record refreshed meanwhile is kept too.
  const entries: Deno.KvEntry<SubmissionRecord>[] = [];
  for await (const entry of kv.list<SubmissionRecord>({ prefix: submissionsPrefix() })) {
    if (entry.value.last_seen_at <= startedAt) entries.push(entry);
  }
  for (let i = 0; i < entries.length; i += DELETE_BATCH) {
    const op = kv.atomic();
    for (const entry of entries.slice(i, i + DELETE_BATCH)) op.check(entry).delete(entry.key);
    if (!(await op.commit()).ok) {
      // One of them changed: delete the unchanged ones one by one.
      for (const entry of entries.slice(i, i + DELETE_BATCH)) {
        await kv.atomic().check(entry).delete(entry.key).commit();
      }
    }
  }
}

/**
 * The results' `t` high-water mark: the largest `t` ever given out, 0 for a new store (C40).
 */
export async function resultsHighWaterMark(store: Store): Promise<number> {
  return (await store.kv.get<ResultsMeta>(resultsMetaKey())).value?.hwm ?? 0;
}

/**
 * Tells whether the store holds no queued item and no result (backup import refuses to
 * overwrite anything else).
 */
export async function isEmpty(store: Store): Promise<boolean> {
  const [qa, article, general, results] = await store.kv.getMany<
    [QueueMeta, QueueMeta, QueueMeta, ResultsMeta]
  >([
    queueMetaKey("qa"),
    queueMetaKey("article"),
    queueMetaKey("general"),
    resultsMetaKey(),
  ]);
  return [qa, article, general].every((e) => (e.value?.items.length ?? 0) === 0) &&
    (results.value?.items.length ?? 0) === 0;
}

/**
 * Restores a backup into an empty store: each queue's items with their `created_at`, each
 * result with its `t`, and the high-water mark (at least the largest restored `t`), one
 * commit per item. The caller checks {@linkcode isEmpty} first (or clears).
 *
 * @param backup.queues Items per queue, oldest first; at most 50 per queue are kept.
 * @param backup.results Results, oldest first, with strictly increasing `t`.
 * @param backup.hwm The exported high-water mark.
 * @throws {StoreBusyError} when a commit kept losing races.
 */
export async function restore(
  store: Store,
  backup: {
    queues: Partial<Record<QueueName, Array<{ content: string; created_at: number }>>>;
    results: Array<{ t: number; content: string }>;
    hwm: number;
  },
): Promise<void> {
  const { kv } = store;
  for (const queue of QUEUE_NAMES) {
    for (const item of (backup.queues[queue] ?? []).slice(-QUEUE_CAPACITY)) {
      const parts = splitParts(item.content);
      await retryCommit("restore", async () => {
        const metaEntry = await kv.get<QueueMeta>(queueMetaKey(queue));
        const op = kv.atomic().check(metaEntry);
        appendItem(op, queue, metaEntry.value, parts, item.created_at);
        return (await op.commit()).ok ? true : undefined;
      });
    }
  }
  for (const result of backup.results.slice(-RESULTS_CAPACITY)) {
    const parts = splitParts(result.content);
    await retryCommit("restore", async () => {
      const metaEntry = await kv.get<ResultsMeta>(resultsMetaKey());
      const op = kv.atomic().check(metaEntry);
      appendResult(op, metaEntry.value, parts, result.t);
      return (await op.commit()).ok ? true : undefined;
    });
  }
  await retryCommit("restore", async () => {
    const metaEntry = await kv.get<ResultsMeta>(resultsMetaKey());
    const meta = metaEntry.value ?? { hwm: 0, items: [] };
    if (meta.hwm >= backup.hwm) return true;
    const op = kv.atomic().check(metaEntry).set(resultsMetaKey(), { ...meta, hwm: backup.hwm });
    return (await op.commit()).ok ? true : undefined;
  });
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

// ---------------------------------------------------------------------------------------

const encoder = new TextEncoder();
const decoder = new TextDecoder();

function now_(store: Store): number {
  return Math.floor(store.clock());
}

function sha256Hex(content: string): string {
  return createHash("sha256").update(content, "utf8").digest("hex");
}

function decodeUtf8(bytes: Uint8Array): string {
  return decoder.decode(bytes);
}

/** Splits content into UTF-8 byte parts of at most CHUNK_BYTES; always at least one. */
function splitParts(content: string): Uint8Array[] {
  const bytes = encoder.encode(content);
  const parts: Uint8Array[] = [];
  for (let i = 0; i < bytes.length || parts.length === 0; i += CHUNK_BYTES) {
    // slice, not subarray: KV would serialise the whole underlying buffer of a view.
    parts.push(bytes.slice(i, i + CHUNK_BYTES));
  }
  return parts;
}

/** Writes part 0 as a head record (with `extra` fields) and the rest as raw bytes. */
function setParts(
  op: Deno.AtomicOperation,
  parts: Uint8Array[],
  key: (part: number) => Deno.KvKey,
  extra: Record<string, number>,
): void {
  parts.forEach((data, part) => {
    op.set(key(part), part === 0 ? { ...extra, parts: parts.length, data } : data);
  });
}

/**
 * Adds to `op` a new item at the end of `queue`: its parts, the eviction of the oldest items
 * past {@linkcode QUEUE_CAPACITY} (C14), and the queue's new metadata.
 *
 * @param meta The queue's metadata as read (and checked by `op`), `null` for a new queue.
 * @returns The new item's id.
 */
function appendItem(
  op: Deno.AtomicOperation,
  queue: QueueName,
  meta: QueueMeta | null,
  parts: Uint8Array[],
  createdAt: number,
): number {
  const id = meta?.next_id ?? 1;
  setParts(op, parts, (part) => itemPartKey(queue, id, part), { created_at: createdAt });
  const items: QueueMeta["items"] = [...(meta?.items ?? []), [id, parts.length]];
  for (const [oldId, oldParts] of items.splice(0, Math.max(0, items.length - QUEUE_CAPACITY))) {
    deleteParts(op, oldParts, (part) => itemPartKey(queue, oldId, part));
  }
  op.set(queueMetaKey(queue), { next_id: id + 1, items } satisfies QueueMeta);
  return id;
}

/**
 * Adds to `op` a result with time `t` at the end of the feed: its parts, the eviction of the
 * oldest results past {@linkcode RESULTS_CAPACITY}, and the feed's metadata with the
 * high-water mark raised to `t` (C40).
 *
 * @param meta The feed's metadata as read (and checked by `op`), `null` for a new store.
 * @param t Greater than every `t` in the feed.
 */
function appendResult(
  op: Deno.AtomicOperation,
  meta: ResultsMeta | null,
  parts: Uint8Array[],
  t: number,
): void {
  setParts(op, parts, (part) => resultPartKey(t, part), {});
  const items: ResultsMeta["items"] = [...(meta?.items ?? []), [t, parts.length]];
  for (const [oldT, oldParts] of items.splice(0, Math.max(0, items.length - RESULTS_CAPACITY))) {
    deleteParts(op, oldParts, (part) => resultPartKey(oldT, part));
  }
  op.set(resultsMetaKey(), { hwm: Math.max(meta?.hwm ?? 0, t), items } satisfies ResultsMeta);
}

function deleteParts(
  op: Deno.AtomicOperation,
  parts: number,
  key: (part: number) => Deno.KvKey,
): void {
  for (let part = 0; part < parts; part++) op.delete(key(part));
}

/** Parts of one item or result as listed: its head (part 0) and every part's bytes. */
interface PartSlot {
  head: ItemHead | ResultHead | undefined;
  data: Uint8Array[];
}

/** Groups listed part entries, whose keys end in `[…, id, part]`, by id. */
async function collectParts(
  iter: Deno.KvListIterator<ItemHead | ResultHead | Uint8Array>,
): Promise<Map<number, PartSlot>> {
  const found = new Map<number, PartSlot>();
  for await (const entry of iter) {
    const id = entry.key.at(-2) as number;
    const part = entry.key.at(-1) as number;
    const slot = found.get(id) ?? { head: undefined, data: [] };
    if (part === 0) {
      const head = entry.value as ItemHead | ResultHead;
      slot.head = head;
      slot.data[0] = head.data;
    } else {
      slot.data[part] = entry.value as Uint8Array;
    }
    found.set(id, slot);
  }
  return found;
}

/** Concatenates parts 0 … parts-1; `undefined` when any is missing (a torn read). */
function joinParts(
  slot: PartSlot | undefined,
  parts: number,
): Uint8Array | undefined {
  if (slot === undefined || slot.data.length !== parts) return undefined;
  let size = 0;
  for (let i = 0; i < parts; i++) {
    const data = slot.data[i];
    if (data === undefined) return undefined;
    size += data.length;
  }
  const out = new Uint8Array(size);
  let offset = 0;
  for (const data of slot.data) {
    out.set(data, offset);
    offset += data.length;
  }
  return out;
}

/** Reads the items `meta` lists; `undefined` when the listing disagrees with it. */
async function readQueueItems(
  kv: Deno.Kv,
  queue: QueueName,
  meta: QueueMeta,
): Promise<QueuedItem[] | undefined> {
  const found = await collectParts(
    kv.list<ItemHead | Uint8Array>({ prefix: queueItemsPrefix(queue) }),
  );
  const items: QueuedItem[] = [];
  for (const [id, parts] of meta.items) {
    const slot = found.get(id);
    const bytes = joinParts(slot, parts);
    if (slot === undefined || bytes === undefined) return undefined;
    const head = slot.head as ItemHead;
    items.push({ id, content: decodeUtf8(bytes), queue, created_at: head.created_at });
  }
  return items;
}

/** True when the entry's versionstamp is still the current one. */
async function unchanged(kv: Deno.Kv, entry: Deno.KvEntryMaybe<unknown>): Promise<boolean> {
  const again = await kv.get(entry.key);
  return again.versionstamp === entry.versionstamp;
}

/**
 * Runs `attempt` until it returns something other than `undefined` (which means "lost a
 * race, try again"), yielding to the event loop between attempts.
 */
async function retryCommit<T>(
  operation: string,
  attempt: () => Promise<T | undefined>,
): Promise<T> {
  for (let i = 0; i < MAX_COMMIT_ATTEMPTS; i++) {
    const result = await attempt();
    if (result !== undefined) return result;
    // Let the winner's follow-up work run before reading again.
    await new Promise((resolve) => setTimeout(resolve, i < 3 ? 0 : Math.random() * 2));
  }
  throw new StoreBusyError(operation);
}

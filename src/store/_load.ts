/**
 * Loading the committed state from KV: on first use, and again after a commit failed or
 * its outcome is unknown.
 *
 * @module
 */

import type { Clock } from "../clock.ts";
import { QUEUE_NAMES, type QueueName } from "../queue_names.ts";
import { readSeen } from "./_duplicates.ts";
import { collectParts, decodeSlot } from "./_parts.ts";
import {
  type Collection,
  COLLECTIONS,
  type FeedState,
  type ItemState,
  metaKey,
  type QueueState,
  type ResultState,
  type State,
} from "./_state.ts";
import { StoreFormatError } from "./_faults.ts";
import {
  formatKey,
  type ItemHead,
  queueItemsPrefix,
  type QueueMeta,
  type ResultHead,
  type ResultsMeta,
  resultsPrefix,
  STORE_FORMAT,
} from "./kv_keys.ts";

/**
 * Reads the whole committed state: every queue, the feed, the metadata versionstamps and
 * the duplicate records still inside the window. Content of more than one part stays in KV.
 * Reads files of every {@linkcode STORE_FORMAT} up to this code's.
 *
 * @param clock Read once, for the duplicate records' window.
 * @param dedupeWindowMs The duplicate window, ms.
 * @throws {StoreFormatError} when a later relay wrote the file; an `Error` when another
 *   process kept committing while it read; KV errors.
 */
export async function loadState(
  kv: Deno.Kv,
  clock: Clock,
  dedupeWindowMs: number,
  seenInMemory: number,
): Promise<State> {
  for (let attempt = 0; attempt < MAX_LOAD_ATTEMPTS; attempt++) {
    const state = await loadOnce(kv, clock, dedupeWindowMs, seenInMemory);
    // The metadata and the entries are separate reads, not one snapshot: a commit of another
    // process between them could pair an item with the content of the item that took over
    // its key. The same versionstamps after the entries were read mean none came between.
    const after = await kv.getMany(COLLECTIONS.map(metaKey));
    if (COLLECTIONS.every((c, i) => after[i]!.versionstamp === state.stamps[c])) return state;
  }
  throw new Error(
    `Cannot read the store: another process changed it during ${MAX_LOAD_ATTEMPTS} reads in a row`,
  );
}

/** Reads of the whole state made at most while another process keeps committing. */
const MAX_LOAD_ATTEMPTS = 20;

/** One read of the whole state, as {@linkcode loadState} describes it. */
async function loadOnce(
  kv: Deno.Kv,
  clock: Clock,
  dedupeWindowMs: number,
  seenInMemory: number,
): Promise<State> {
  const metas = await kv.getMany<unknown[]>([...COLLECTIONS.map(metaKey), formatKey()]);
  const format = metas[COLLECTIONS.length]!.value ?? 1;
  if (typeof format !== "number" || !(format <= STORE_FORMAT)) {
    throw new StoreFormatError(Number(format));
  }
  const stamps = {} as Record<Collection, string | null>;
  COLLECTIONS.forEach((c, i) => stamps[c] = metas[i]!.versionstamp);
  const queues = {} as Record<QueueName, QueueState>;
  for (const [i, queue] of QUEUE_NAMES.entries()) {
    const meta = metas[i]!.value as QueueMeta | null;
    const found = await collectParts(
      kv.list<ItemHead | Uint8Array>({ prefix: queueItemsPrefix(queue) }),
    );
    const items: ItemState[] = (meta?.items ?? []).map(([id, parts, leaseUntil, keyId], i) => {
      const stored = found.get(keyId ?? id);
      // Older files keep the time in each item's head record.
      const head = stored?.head as ItemHead | undefined;
      return {
        id,
        parts,
        created_at: meta?.created_at?.[i] ?? head?.created_at ?? 0,
        content: parts === 1 && stored !== undefined ? decodeSlot(stored, 1) : undefined,
        ...(leaseUntil === undefined || leaseUntil === null ? {} : { lease_until: leaseUntil }),
        ...(keyId === undefined ? {} : { slot: keyId }),
      };
    });
    queues[queue] = {
      next_id: meta?.next_id ?? 1,
      items,
      // Files written before the counters existed: their queued items count as accepted.
      counters: {
        accepted: items.length,
        duplicate: 0,
        delivered: 0,
        leased: 0,
        evicted: 0,
        cleared: 0,
        ...meta?.counters,
      },
    };
  }
  const feed = await loadFeed(kv, metas[QUEUE_NAMES.length]!.value as ResultsMeta | null);
  const { seen, batches, nextBatch, singles, incompleteUntil } = await readSeen(
    kv,
    Math.floor(clock()),
    dedupeWindowMs,
    seenInMemory,
  );
  return {
    queues,
    feed,
    seen,
    batches,
    nextBatch,
    singles,
    seenLimit: seenInMemory,
    format,
    seenIncompleteUntil: incompleteUntil,
    stamps,
  };
}

/** The results feed of `meta` (its entry's value, `null` when absent), with its content. */
async function loadFeed(kv: Deno.Kv, meta: ResultsMeta | null): Promise<FeedState> {
  const found = await collectParts(kv.list<ResultHead | Uint8Array>({ prefix: resultsPrefix() }));
  const items: ResultState[] = (meta?.items ?? []).map(([t, parts, keyT]) => {
    const stored = found.get(keyT ?? t);
    return {
      t,
      parts,
      content: parts === 1 && stored !== undefined ? decodeSlot(stored, 1) : undefined,
      ...(keyT === undefined ? {} : { slot: keyT }),
    };
  });
  return {
    hwm: meta?.hwm ?? 0,
    evicted_t: meta?.evicted_t ?? 0,
    items,
    counters: meta?.counters ?? { pushed: items.length, evicted: 0, cleared: 0 },
  };
}

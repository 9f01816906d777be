/**
 * The input queues and their leases: what submit, pull, lease, ack, peek, clear and
 * restore do to a queue, as writes for the writer ({@linkcode WriteOp}, {@linkcode Change})
 * and readers of the committed state. `store.ts` runs them.
 *
 * @module
 */

import type { QueueName } from "../queue_names.ts";
import {
  inWindow,
  lastAccepted,
  lastAcceptedInKv,
  recordAccepted,
  sha256Hex,
} from "./_duplicates.ts";
import { readParts, splitParts } from "./_parts.ts";
import {
  addCost,
  appendItem,
  appendItemCost,
  available,
  type Change,
  deleteParts,
  type Draft,
  type ItemState,
  keyIdOf,
  type State,
  totalParts,
  type WriteOp,
} from "./_state.ts";
import { itemPartKey, itemPrefix } from "./kv_keys.ts";

/** What `submit` did: queued the item, or saw a duplicate and queued nothing. */
export type SubmitOutcome =
  | { readonly accepted: true; readonly queue: QueueName; readonly id: number }
  | { readonly accepted: false };

/** A queued item as read back. */
export interface QueuedItem {
  /** Assigned by the store; grows with submission order within a queue. */
  readonly id: number;
  /** The trimmed content, exactly as submitted. */
  readonly content: string;
  /** The queue holding it (`queue_type`). */
  readonly queue: QueueName;
  /** Submission time, epoch ms. */
  readonly created_at: number;
  /**
   * Epoch ms until which a leased pull holds the item; absent when the item is
   * not leased or its lease has ended.
   */
  readonly lease_until?: number;
}

/** An item named by its queue and id, as `ack` takes it. */
export interface ItemRef {
  /** The queue holding the item. */
  readonly queue: QueueName;
  /** The item's id in that queue. */
  readonly id: number;
}

/** The submit write: the item, its evictions and its duplicate record (see `submit`). */
export function submitOp(
  kv: Deno.Kv,
  content: string,
  queue: QueueName,
  options: { dedupe: boolean; dedupeWindowMs: number },
): WriteOp<SubmitOutcome> {
  const { dedupe, dedupeWindowMs } = options;
  const parts = splitParts(content);
  // Only the duplicate check reads the hash.
  const hash = dedupe ? sha256Hex(parts) : "";
  let kvRead: { at: number | undefined } | { error: unknown } | undefined;
  return {
    name: "submit",
    grows: true,
    // The item, the evictions, and the duplicate record (at most one mutation: usually it
    // shares the commit's one `["accepted", …]` entry).
    cost: (draft) => addCost(appendItemCost(draft, queue, parts), 1),
    // Records left out of memory are read from KV before the batch is applied (all of the
    // batch's at once); what this batch accepts before it is in the draft's memory.
    prepare(draft) {
      kvRead = undefined;
      if (!dedupe || lastAccepted(draft, hash, dedupeWindowMs) !== "ask KV") return undefined;
      return lastAcceptedInKv(kv, hash).then(
        (at) => void (kvRead = { at }),
        (error) => void (kvRead = { error }),
      );
    },
    apply(draft, mutations) {
      const decide = (duplicate: boolean): SubmitOutcome => {
        const q = draft.queues[queue];
        mutations.touch(queue);
        if (duplicate) {
          q.counters.duplicate++;
          return { accepted: false };
        }
        const id = appendItem(mutations, q, queue, parts, content, draft.now);
        q.counters.accepted++;
        if (dedupe) recordAccepted(draft, mutations, hash, dedupeWindowMs);
        return { accepted: true, queue, id };
      };
      if (!dedupe) return decide(false);
      const known = lastAccepted(draft, hash, dedupeWindowMs);
      if (known !== "ask KV") return decide(inWindow(draft, known, dedupeWindowMs));
      const read = kvRead;
      if (read === undefined) {
        return lastAcceptedInKv(kv, hash).then((at) => decide(inWindow(draft, at, dedupeWindowMs)));
      }
      if ("error" in read) throw read.error;
      return decide(inWindow(draft, read.at, dedupeWindowMs));
    },
  };
}

/**
 * The plain pull (`lease` undefined: delete what is handed out, all of it or its first
 * `limit` items) and the leased pull (mark it leased), as one write: the first queue of
 * `order` with available items.
 */
export function takeOp(
  kv: Deno.Kv,
  order: readonly QueueName[],
  lease: { leaseMs: number; limit: number } | undefined,
  limit?: number,
): WriteOp<{ queue: QueueName; items: QueuedItem[] } | undefined> {
  const most = lease?.limit ?? limit;
  const pick = (draft: Draft) => {
    for (const queue of order) {
      const items = draft.queues[queue].items.filter((i) => available(i, draft.now));
      if (items.length > 0) return { queue, items: items.slice(0, most ?? items.length) };
    }
    return undefined;
  };
  return {
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
      const items = await itemsWithContent(kv, queue, picked.items, draft.now);
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
        deleteParts(mutations, item.parts, (p) => itemPartKey(queue, keyIdOf(item), p));
      }
      q.items = q.items.filter((i) => !taken.has(i));
      q.counters.delivered += items.length;
      return { queue, items };
    },
  };
}

/** The ack write: deletes the leased items among `refs` (see `ack`). */
export function ackOp(
  refs: readonly ItemRef[],
): WriteOp<{ acked: ItemRef[]; unknown: ItemRef[] }> {
  const held = (draft: Draft, ref: ItemRef) =>
    draft.queues[ref.queue].items.find((i) => i.id === ref.id && i.lease_until !== undefined);
  return {
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
        deleteParts(mutations, item.parts, (p) => itemPartKey(ref.queue, keyIdOf(item), p));
        q.items = q.items.filter((i) => i !== item);
        q.counters.delivered++;
        mutations.touch(ref.queue);
        acked.push(ref);
      }
      return { acked, unknown };
    },
  };
}

/** Restoring one backed-up item at the end of `queue`, counted as accepted. */
export function restoreItemOp(
  queue: QueueName,
  item: { content: string; created_at: number },
): WriteOp<true> {
  const parts = splitParts(item.content);
  return {
    name: "restore",
    grows: true,
    cost: (draft) => appendItemCost(draft, queue, parts),
    apply(draft, mutations) {
      const q = draft.queues[queue];
      appendItem(mutations, q, queue, parts, item.content, item.created_at);
      q.counters.accepted++;
      return true;
    },
  };
}

/** Empties `queue`, counting its items as cleared; changes nothing when it is empty. */
export function clearQueue(queue: QueueName): Change {
  return (draft, mutations) => {
    const q = draft.queues[queue];
    if (q.items.length === 0) return;
    for (const item of q.items) {
      deleteParts(mutations, item.parts, (p) => itemPartKey(queue, keyIdOf(item), p));
    }
    q.counters.cleared += q.items.length;
    q.items = [];
    mutations.touch(queue);
  };
}

/**
 * The earliest `lease_until` among the items of `queues`, ended leases included, epoch
 * ms; `null` when none is leased.
 */
export function earliestLeaseEnd(state: State, queues: readonly QueueName[]): number | null {
  let next = Infinity;
  for (const q of queues) {
    for (const i of state.queues[q].items) {
      if (i.lease_until !== undefined) next = Math.min(next, i.lease_until);
    }
  }
  return next === Infinity ? null : next;
}

/**
 * Items with their content: from memory, or read from KV for multi-part items; with
 * `lease_until` when leased at `now` (epoch ms).
 *
 * @returns `undefined` when an item's parts are gone (removed by a later commit).
 * @throws KV errors.
 */
export async function itemsWithContent(
  kv: Deno.Kv,
  queue: QueueName,
  items: readonly ItemState[],
  now: number,
): Promise<QueuedItem[] | undefined> {
  const out: QueuedItem[] = [];
  for (const item of items) {
    const content = item.content ??
      await readParts(kv, itemPrefix(queue, keyIdOf(item)), item.parts);
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

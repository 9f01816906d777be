/**
 * Every Deno KV key the relay uses, built in one place.
 *
 * Key schema (all prefixes snake_case and plural; ordered collections end in a sortable
 * integer):
 *
 * | key | value | what |
 * |---|---|---|
 * | `["queues", queue]` | {@linkcode QueueMeta} | a queue's order, parts and next id: every queue commit checks it |
 * | `["items", queue, id, 0]` | `Uint8Array` | a queued item's first ≤ 60,000 bytes (older files: an {@linkcode ItemHead}); `id` is the item's, or that of the item whose key it took over (its key id in {@linkcode QueueMeta}) |
 * | `["items", queue, id, n]` | `Uint8Array` | part `n` (1 …) of a long item's UTF-8 bytes |
 * | `["results_meta"]` | {@linkcode ResultsMeta} | the feed's order and the `t` high-water mark |
 * | `["results", t, 0]` | `Uint8Array` | a result's first ≤ 60,000 bytes (older files: a {@linkcode ResultHead}); `t` is the result's, or that of the result whose key it took over (its key t in {@linkcode ResultsMeta}) |
 * | `["results", t, n]` | `Uint8Array` | part `n` of a long result |
 * | `["accepted", n, at]` | `Uint8Array` | the duplicate records of one commit: the SHA-256 (hex, ASCII) of each content it accepted at `at` |
 * | `["submissions", sha256]` | {@linkcode SubmissionRecord} | last accepted time of one content: written when memory has no room for it, and for every content by format 1 |
 * | `["format"]` | `number` | the version of this layout the file holds: {@linkcode STORE_FORMAT}; absent before version 2 |
 * | `["health_probe"]` | `number` | when `/health` last had to commit to learn whether the store can (epoch ms) |
 *
 * The parts of one item sit next to each other, so one `list()` reads whole items.
 *
 * @module
 */

import type { QueueName } from "../queue_names.ts";

/**
 * Durable counters of one queue. At every moment
 * `accepted = delivered + evicted + cleared + depth`.
 */
export interface QueueCounters {
  /** Items queued by a submit (a put-back with `dedupe=false` counts again). */
  accepted: number;
  /** Submissions refused as duplicates; they queued nothing. */
  duplicate: number;
  /** Items handed out by a plain pull, or acknowledged after a leased pull. */
  delivered: number;
  /** Items handed out by a leased pull, each re-delivery after an ended lease again. */
  leased: number;
  /** Items dropped by the 50-item overflow. */
  evicted: number;
  /** Items removed by `/clear`. */
  cleared: number;
}

/** Durable counters of the results feed: `pushed = evicted + cleared + depth`. */
export interface ResultCounters {
  /** Results appended by a push. */
  pushed: number;
  /** Results dropped by the 50-result overflow. */
  evicted: number;
  /** Results removed by `/clear`. */
  cleared: number;
}

/** Order and bookkeeping of one input queue. `items` is oldest first: `[id, parts]`. */
export interface QueueMeta {
  /** The id the next submitted item gets; ids only grow. */
  next_id: number;
  /**
   * The queued items, oldest first, as `[id, number of parts]`, or
   * `[id, number of parts, lease_until]` for an item a leased pull handed out
   * (`lease_until` in epoch ms; kept after the lease ends, until the item is acknowledged or pulled), or
   * `[id, number of parts, lease_until or null, key id]` for an item stored under the key of
   * the item it evicted (format 3). At most 50.
   */
  items: Array<
    [number, number] | [number, number, number] | [number, number, number | null, number]
  >;
  /**
   * Each item's submission time, epoch ms, in the order of `items`. Absent in files written
   * before it existed, whose part 0 of each item is an {@linkcode ItemHead} holding it.
   */
  created_at?: number[];
  /** Durable counters; absent in files written before they existed. */
  counters?: QueueCounters;
}

/** Order of the results feed and its cursor high-water mark. */
export interface ResultsMeta {
  /** The largest `t` ever given out, kept across `/clear` and restarts. */
  hwm: number;
  /** The largest `t` the overflow evicted (the `gap` flag); absent in older files. */
  evicted_t?: number;
  /**
   * The results in the feed, oldest first, as `[t, number of parts]`, or `[t, number of
   * parts, key t]` for a result stored under the key of the result it evicted (format 3). At
   * most 50.
   */
  items: Array<[number, number] | [number, number, number]>;
  /** Durable counters; absent in files written before they existed. */
  counters?: ResultCounters;
}

/**
 * Part 0 of a queued item as files written before the queue's metadata held `created_at`
 * store it (read, never written: part 0 is now the content's first bytes alone).
 */
export interface ItemHead {
  /** Submission time, epoch ms. */
  created_at: number;
  /** How many parts hold the content's UTF-8 bytes, this one included. */
  parts: number;
  /** The first bytes of the content (at most `CHUNK_BYTES`). */
  data: Uint8Array;
}

/**
 * Part 0 of a result as older files store it (read, never written: part 0 is now the
 * content's first bytes alone). Its push time is the `t` in its key.
 */
export interface ResultHead {
  /** How many parts hold the content's UTF-8 bytes, this one included. */
  parts: number;
  /** The first bytes of the content (at most `CHUNK_BYTES`). */
  data: Uint8Array;
}

/** The duplicate-check record, keyed by the SHA-256 of the content. */
export interface SubmissionRecord {
  /** When this exact content was last *accepted*, epoch ms. */
  last_seen_at: number;
}

/** `["queues", queue]`: the queue's {@linkcode QueueMeta}. */
export function queueMetaKey(queue: QueueName): Deno.KvKey {
  return ["queues", queue];
}

/** `["items", queue]`: prefix of every part of every item in a queue. */
export function queueItemsPrefix(queue: QueueName): Deno.KvKey {
  return ["items", queue];
}

/** `["items", queue, id]`: prefix of every part of one queued item. */
export function itemPrefix(queue: QueueName, id: number): Deno.KvKey {
  return ["items", queue, id];
}

/** `["items", queue, id, part]`: one part of a queued item. */
export function itemPartKey(queue: QueueName, id: number, part: number): Deno.KvKey {
  return ["items", queue, id, part];
}

/** `["results_meta"]`: the feed's {@linkcode ResultsMeta}. */
export function resultsMetaKey(): Deno.KvKey {
  return ["results_meta"];
}

/** `["results"]`: prefix of every part of every result. */
export function resultsPrefix(): Deno.KvKey {
  return ["results"];
}

/** `["results", t]`: prefix of every part of one result. */
export function resultPrefix(t: number): Deno.KvKey {
  return ["results", t];
}

/** `["results", t, part]`: one part of a result. */
export function resultPartKey(t: number, part: number): Deno.KvKey {
  return ["results", t, part];
}

/**
 * `["accepted"]`: prefix of the duplicate records written one entry per commit (see
 * `_duplicates.ts`).
 */
export function acceptedPrefix(): Deno.KvKey {
  return ["accepted"];
}

/**
 * `["accepted", n, at]`: the duplicate records of one commit. Its value is the SHA-256 of
 * each content the commit accepted, as lowercase hex, concatenated (64 ASCII bytes each),
 * all accepted at `at` (epoch ms). `n` numbers these entries in the order they were written,
 * from 1.
 */
export function acceptedKey(n: number, at: number): Deno.KvKey {
  return ["accepted", n, at];
}

/** `["submissions"]`: prefix of every duplicate-check record of one content. */
export function submissionsPrefix(): Deno.KvKey {
  return ["submissions"];
}

/** `["submissions", sha256hex]`: the duplicate-check record of one content. */
export function submissionKey(sha256hex: string): Deno.KvKey {
  return ["submissions", sha256hex];
}

/**
 * The version of the layout above that this code writes. 1 (no `["format"]` entry): head
 * records as part 0, one `["submissions", hash]` record per content. 2: part 0 is bytes,
 * the queue's metadata holds `created_at`, and a commit's duplicate records share one
 * `["accepted", n, at]` entry. 3: an item or a result may be stored under the key of the
 * one it evicted, its metadata naming that key (a relay of format 2 would read the wrong
 * keys). This code reads all three; it refuses a file of a later version.
 */
export const STORE_FORMAT = 3;

/** `["format"]`: the {@linkcode STORE_FORMAT} of the file, written by the first commit. */
export function formatKey(): Deno.KvKey {
  return ["format"];
}

/** The entry a health probe commits when it must learn whether the store can commit. */
export function healthProbeKey(): Deno.KvKey {
  return ["health_probe"];
}

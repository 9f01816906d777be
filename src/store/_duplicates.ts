/**
 * Duplicate records: for each content accepted within the duplicate window, the
 * time it was last accepted, keyed by the SHA-256 of the content. The committed state keeps
 * them in memory (`State.seen`), and KV holds them in one of two ways:
 *
 * - **One entry per commit** (`["accepted", n, at]`): the hashes of every content one commit
 *   accepted, all at the commit's time `at`. A submit so adds no KV mutation of its own: a
 *   commit of 25 submits writes one entry, not 25 (each mutation costs the main thread about
 *   5 µs; docs/benchmarks.md, "Writes"). KV cannot find
 *   such a record by its hash, so memory holds every one of them.
 * - **One entry per content** (`["submissions", hash]`), when memory is full: past
 *   {@linkcode SEEN_IN_MEMORY} records (about 120 bytes each), a content accepted is
 *   recorded in its own entry instead, and memory does not hold it. The state remembers until
 *   when such a record is in force (`seenIncompleteUntil`: its acceptance plus the window);
 *   until then, a content not found in memory is looked up in KV before it is accepted. A
 *   burst of millions of unique contents so costs a KV read and write per submit instead of
 *   memory, and the window stays exact. Files written before the per-commit entries hold
 *   only these.
 *
 * Decisions compare the stored time with the clock. The relay's own commits delete entries
 * as their window ends: every `["accepted", …]` entry, and the `["submissions", hash]`
 * records the state lists (at most {@linkcode SEEN_IN_MEMORY}; a record written again
 * moves to the end of that list, so its older time cannot get it deleted). KV's `expireIn`
 * is only a backstop, for records past that list.
 *
 * @module
 */

import { createHash } from "node:crypto";
import {
  acceptedKey,
  acceptedPrefix,
  submissionKey,
  type SubmissionRecord,
  submissionsPrefix,
} from "./kv_keys.ts";
import {
  BATCH_MAX_MUTATIONS,
  type Change,
  type Draft,
  type Mutations,
  type State,
} from "./_state.ts";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Most duplicate records kept in memory (~120 bytes each: about 12 MB). */
export const SEEN_IN_MEMORY = 100_000;

/**
 * The SHA-256 of a content's UTF-8 bytes, as lowercase hex: a duplicate record's key.
 *
 * @param parts The content's UTF-8 bytes, in one or more parts (as {@linkcode splitParts}
 *   makes them, so that the content is encoded once).
 */
export function sha256Hex(parts: readonly Uint8Array[]): string {
  const hash = createHash("sha256");
  for (const part of parts) hash.update(part);
  return hash.digest("hex");
}

/**
 * When content with `hash` was last accepted, epoch ms, as far as memory knows: that time
 * when it is inside the window at `draft.now`; `"ask KV"` when it is not, but a
 * `["submissions", hash]` record may be in force (see the module doc); else the time memory
 * holds, if any.
 */
export function lastAccepted(
  draft: Draft,
  hash: string,
  windowMs: number,
): number | undefined | "ask KV" {
  const seen = draft.seen(hash);
  if (seen !== undefined && inWindow(draft, seen, windowMs)) return seen;
  return draft.seenMayBeInKv() ? "ask KV" : seen;
}

/**
 * When content with `hash` was last accepted according to its KV record, epoch ms, or
 * `undefined`.
 *
 * @throws KV errors.
 */
export async function lastAcceptedInKv(kv: Deno.Kv, hash: string): Promise<number | undefined> {
  return (await kv.get<SubmissionRecord>(submissionKey(hash))).value?.last_seen_at;
}

/** Whether a content last accepted at `at` is still a duplicate at `draft.now`. */
export function inWindow(draft: Draft, at: number | undefined, windowMs: number): boolean {
  // Compare the stored time; expired KV entries can still be read.
  return at !== undefined && draft.now - at < windowMs;
}

/**
 * Records content with `hash` as accepted at `draft.now`: in memory and the commit's
 * `["accepted", …]` entry ({@linkcode writeAcceptedBatch}) while memory has room, else in a
 * `["submissions", hash]` record of its own.
 *
 * @param windowMs The duplicate window, ms.
 */
export function recordAccepted(
  draft: Draft,
  mutations: Mutations,
  hash: string,
  windowMs: number,
): void {
  if (draft.seenHasRoom()) {
    draft.see(hash, draft.now);
    return;
  }
  draft.see(hash, draft.now, draft.now + windowMs);
  mutations.set(submissionKey(hash), { last_seen_at: draft.now } satisfies SubmissionRecord, {
    expireIn: windowMs + EXPIRY_BACKSTOP_MS,
  });
}

/** Hashes one `["accepted", …]` entry holds at most: 64 bytes each, 32 KiB in all. */
export const HASHES_PER_BATCH_ENTRY = 512;

/**
 * Adds to `mutations` the `["accepted", n, draft.now]` entries of the contents the draft
 * accepted into memory since the last call (none when it accepted none), at most
 * {@linkcode HASHES_PER_BATCH_ENTRY} hashes each. The writer calls it once per commit.
 *
 * @param windowMs The duplicate window, ms: the entries' KV expiry backstop follows it.
 */
export function writeAcceptedBatch(draft: Draft, mutations: Mutations, windowMs: number): void {
  const hashes = draft.takeBatch();
  for (let i = 0; i < hashes.length; i += HASHES_PER_BATCH_ENTRY) {
    const key = acceptedKey(draft.nextBatch(), draft.now);
    const chunk = hashes.slice(i, i + HASHES_PER_BATCH_ENTRY);
    mutations.set(key, encoder.encode(chunk.join("")), {
      expireIn: windowMs + EXPIRY_BACKSTOP_MS,
    });
    draft.addBatch(key);
  }
}

/** The hashes an `["accepted", …]` entry's value holds. */
export function batchHashes(value: Uint8Array): string[] {
  const text = decoder.decode(value);
  const hashes: string[] = [];
  for (let i = 0; i + 64 <= text.length; i += 64) hashes.push(text.slice(i, i + 64));
  return hashes;
}

/**
 * How long past its window a duplicate record may stay before Deno KV deletes it itself,
 * ms. The relay's commits delete records as their window ends (a few hundred per commit,
 * {@linkcode SWEEP_PER_COMMIT}); KV's own expiry deletes whatever has piled up in one go, on
 * the connection the commits use, which stalled commits for up to 100 ms
 * (docs/benchmarks.md, "Memory under load"). It is left for records of one
 * content past the {@linkcode SEEN_IN_MEMORY} the state lists (under a burst of millions),
 * and for a relay stopped for longer than this.
 */
export const EXPIRY_BACKSTOP_MS = 60 * 60_000;

/** Expired duplicate entries one commit deletes at most. */
export const SWEEP_PER_COMMIT = 256;

/** Records past their window memory forgets at most per commit (no KV work). */
const FORGET_PER_COMMIT = 4096;

/** The duplicate records {@linkcode readSeen} found. */
export interface SeenRecords {
  /** SHA-256 hex → last accepted, epoch ms, oldest first: what memory holds. */
  seen: Map<string, number>;
  /** Every `["accepted", …]` entry, in the order of `n`. */
  batches: Array<{ key: Deno.KvKey; at: number }>;
  /** The `n` the next `["accepted", n, at]` entry gets. */
  nextBatch: number;
  /** `["submissions", hash]` records, hash → time, oldest first: at most `limit`. */
  singles: Map<string, number>;
  /** 0 when memory holds every record in force, else until when one left in KV may be. */
  incompleteUntil: number;
}

/**
 * Reads the duplicate records at `now` (epoch ms): every `["accepted", …]` entry, whose
 * records in force memory holds (KV cannot find them by hash); of the
 * `["submissions", hash]` records, those in force that memory has room for within `limit`,
 * and up to `limit` of all of them for the relay to delete in time.
 *
 * @throws KV errors.
 */
export async function readSeen(
  kv: Deno.Kv,
  now: number,
  windowMs: number,
  limit: number,
): Promise<SeenRecords> {
  const inForce: Array<[string, number]> = [];
  const batches: Array<{ key: Deno.KvKey; at: number }> = [];
  let nextBatch = 1;
  for await (const entry of kv.list<Uint8Array>({ prefix: acceptedPrefix() })) {
    const n = entry.key[1] as number;
    const at = entry.key[2] as number;
    nextBatch = Math.max(nextBatch, n + 1);
    batches.push({ key: entry.key, at });
    if (now - at < windowMs) {
      for (const hash of batchHashes(entry.value)) inForce.push([hash, at]);
    }
  }
  const tracked: Array<[string, number]> = [];
  let incompleteUntil = 0;
  for await (const entry of kv.list<SubmissionRecord>({ prefix: submissionsPrefix() })) {
    const hash = entry.key[1] as string;
    const at = entry.value.last_seen_at;
    if (tracked.length < limit) tracked.push([hash, at]);
    if (now - at >= windowMs) continue;
    // Memory takes them while it has room: the entries' records are in it already.
    if (inForce.length < limit) inForce.push([hash, at]);
    else incompleteUntil = Math.max(incompleteUntil, at + windowMs);
  }
  // In the order of acceptance, which SeenPruner.sweep relies on (KV lists by key).
  const byTime = (a: [string, number], b: [string, number]) => a[1] - b[1];
  const seen = new Map<string, number>();
  for (const [hash, at] of inForce.sort(byTime)) {
    seen.delete(hash);
    seen.set(hash, at);
  }
  return { seen, batches, nextBatch, singles: new Map(tracked.sort(byTime)), incompleteUntil };
}

/**
 * Deletes duplicate records whose window has passed, a few hundred entries per commit
 * ({@linkcode SeenPruner.sweep}); memory forgets its records as their window passes.
 */
export class SeenPruner {
  #windowMs: number;

  /** @param windowMs The duplicate window, ms. */
  constructor(windowMs: number) {
    this.#windowMs = windowMs;
  }

  /**
   * Adds to `mutations` the deletion of at most {@linkcode SWEEP_PER_COMMIT} entries past
   * their window at `now` (epoch ms): the oldest `["accepted", …]` entries, then the oldest
   * `["submissions", hash]` records the state lists (each walk stops at the first entry
   * still in force). Called before a batch's writes are applied, so that a content accepted
   * again in the same commit is recorded again (the last mutation of a key wins). Memory
   * forgets its records past the window at once: such a record decides nothing
   * ({@linkcode lastAccepted}).
   *
   * @returns What to run once the commit holding `mutations` has succeeded: it forgets the
   *   deleted entries (not a record written again meanwhile). Until then they stay listed,
   *   so a batch that commits nothing loses nothing.
   */
  sweep(state: State, now: number, mutations: Mutations): () => void {
    const windowMs = this.#windowMs;
    let forget = FORGET_PER_COMMIT;
    for (const [hash, at] of state.seen) {
      if (forget-- <= 0 || now - at < windowMs) break;
      state.seen.delete(hash);
    }
    let left = SWEEP_PER_COMMIT;
    let batches = 0;
    for (const batch of state.batches) {
      if (left <= 0 || now - batch.at < windowMs) break;
      mutations.delete(batch.key);
      batches++;
      left--;
    }
    const singles: Array<[string, number]> = [];
    for (const single of state.singles) {
      if (left <= 0 || now - single[1] < windowMs) break;
      mutations.delete(submissionKey(single[0]));
      singles.push(single);
      left--;
    }
    if (batches === 0 && singles.length === 0) return () => {};
    return () => {
      state.batches.splice(0, batches);
      for (const [hash, at] of singles) {
        if (state.singles.get(hash) === at) state.singles.delete(hash);
      }
    };
  }
}

/**
 * Deletes every duplicate record, in KV and in memory, through `commitAlone` (the writer's
 * exclusive commits): as many commits as the records need, the last one also forgetting
 * the in-memory records.
 *
 * @throws What `commitAlone` throws; KV errors while listing.
 */
export async function dropSubmissionRecords(
  kv: Deno.Kv,
  commitAlone: (change: Change) => Promise<void>,
): Promise<void> {
  const keys: Deno.KvKey[] = [];
  for await (const entry of kv.list({ prefix: acceptedPrefix() })) keys.push(entry.key);
  for await (const entry of kv.list({ prefix: submissionsPrefix() })) keys.push(entry.key);
  for (let i = 0; i === 0 || i < keys.length; i += BATCH_MAX_MUTATIONS) {
    const batch = keys.slice(i, i + BATCH_MAX_MUTATIONS);
    const last = i + BATCH_MAX_MUTATIONS >= keys.length;
    await commitAlone((draft, mutations) => {
      for (const key of batch) mutations.delete(key);
      if (last) draft.forgetAll();
    });
  }
}

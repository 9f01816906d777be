/**
 * Duplicate records (C13): for each content accepted within the duplicate window, the
 * time it was last accepted, keyed by the SHA-256 of the content. The committed state keeps
 * them in memory (`State.seen`); each also has a KV record that expires after the window
 * (`expireIn` is only a garbage-collection hint, so decisions compare the stored time).
 *
 * **Bounded memory, exact window.** Memory holds at most {@linkcode SEEN_IN_MEMORY}
 * records (about 120 bytes each). Past that, the oldest are dropped from memory only, and
 * the state remembers until when a dropped record could still be in force
 * (`seenIncompleteUntil`: its acceptance time plus the window). Until then, a content not
 * found in memory is looked up in KV before it is accepted, so a burst of millions of
 * unique contents costs one KV read per submit instead of memory, and the window stays
 * exact. docs/benchmarks.md, "Memory under load".
 *
 * @module
 */

import { createHash } from "node:crypto";
import { submissionKey, type SubmissionRecord, submissionsPrefix } from "./kv_keys.ts";
import {
  BATCH_MAX_MUTATIONS,
  type Change,
  type Draft,
  type Mutations,
  type State,
} from "./_state.ts";

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
 * When content with `hash` was last accepted, epoch ms, as far as memory knows: `undefined`
 * when it is not in memory; `"ask KV"` when it is not in memory but records were left out
 * of memory (see the module doc).
 */
export function lastAccepted(draft: Draft, hash: string): number | undefined | "ask KV" {
  const seen = draft.seen(hash);
  return seen === undefined && draft.seenMayBeInKv() ? "ask KV" : seen;
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

/** Records content with `hash` as accepted at `draft.now`, in the draft and in KV. */
export function recordAccepted(
  draft: Draft,
  mutations: Mutations,
  hash: string,
  windowMs: number,
): void {
  draft.see(hash, draft.now);
  // The relay deletes the record itself once the window has passed (SeenPruner.sweep); KV's
  // own expiry is only a backstop for records it could not (see EXPIRY_BACKSTOP_MS).
  mutations.set(submissionKey(hash), { last_seen_at: draft.now } satisfies SubmissionRecord, {
    expireIn: windowMs + EXPIRY_BACKSTOP_MS,
  });
}

/**
 * How long past its window a duplicate record may stay before Deno KV deletes it itself,
 * ms. The relay's commits delete records as their window ends (a few hundred per commit,
 * {@linkcode SWEEP_PER_COMMIT}); KV's own expiry deletes whatever has piled up in one go, on
 * the connection the commits use, which stalled commits for up to 100 ms
 * (docs/benchmarks.md, "Push p99 over successive rounds"). It is left for records dropped
 * from memory under a burst, and for a relay stopped for longer than this.
 */
export const EXPIRY_BACKSTOP_MS = 60 * 60_000;

/** Expired duplicate records one commit deletes at most. */
export const SWEEP_PER_COMMIT = 256;

/**
 * Reads the duplicate records still inside the window at `now` (epoch ms), at most
 * `limit` of them, and the hashes of those past it (at most `limit`, to be deleted).
 *
 * @returns `seen`: SHA-256 hex → last accepted, epoch ms, oldest first; `incompleteUntil`:
 *   0 when every record in force was read, else until when one left in KV may be in force;
 *   `expired`: hashes of records past the window.
 * @throws KV errors.
 */
export async function readSeen(
  kv: Deno.Kv,
  now: number,
  windowMs: number,
  limit: number,
): Promise<{ seen: Map<string, number>; incompleteUntil: number; expired: string[] }> {
  const inForce: Array<[string, number]> = [];
  const expired: string[] = [];
  let incompleteUntil = 0;
  for await (const entry of kv.list<SubmissionRecord>({ prefix: submissionsPrefix() })) {
    const at = entry.value.last_seen_at;
    const hash = entry.key[1] as string;
    if (now - at >= windowMs) {
      if (expired.length < limit) expired.push(hash);
    } else if (inForce.length < limit) inForce.push([hash, at]);
    else incompleteUntil = Math.max(incompleteUntil, at + windowMs);
  }
  // In the order of acceptance, which SeenPruner.sweep relies on (KV lists by hash).
  inForce.sort((a, b) => a[1] - b[1]);
  return { seen: new Map(inForce), incompleteUntil, expired };
}

/**
 * Deletes duplicate records whose window has passed, in KV and in memory, a few hundred
 * per commit ({@linkcode SeenPruner.sweep}), and keeps at most `limit` records in memory:
 * past it, the oldest are dropped from memory only (down to nine tenths of `limit`, so that
 * this happens once per many commits) and `state.seenIncompleteUntil` says until when KV
 * must be asked.
 */
export class SeenPruner {
  #windowMs: number;
  #limit: number;

  /**
   * @param windowMs The duplicate window, ms.
   * @param limit Most records kept in memory, ≥ 1.
   */
  constructor(windowMs: number, limit: number) {
    this.#windowMs = windowMs;
    this.#limit = limit;
  }

  /**
   * Adds to `mutations` the deletion of at most {@linkcode SWEEP_PER_COMMIT} records past
   * their window at `now` (epoch ms): first those found so when the state was loaded, then
   * the oldest in memory (`state.seen` is in the order of acceptance, so the walk stops at
   * the first record still in force). Called before a batch's writes are applied, so that
   * a content accepted again in the same commit is recorded again (the last mutation of a
   * key wins).
   *
   * @returns What to run once the commit holding `mutations` has succeeded: it forgets the
   *   deleted records (not one accepted again meanwhile). Until then memory is unchanged,
   *   so a batch that commits nothing loses nothing.
   */
  sweep(state: State, now: number, mutations: Mutations): () => void {
    let left = SWEEP_PER_COMMIT;
    const expired = state.expiredInKv;
    const fromLoad = Math.min(left, expired.length);
    for (let i = expired.length - fromLoad; i < expired.length; i++) {
      mutations.delete(submissionKey(expired[i]!));
    }
    left -= fromLoad;
    const swept: Array<[string, number]> = [];
    for (const entry of state.seen) {
      if (left-- <= 0 || now - entry[1] < this.#windowMs) break;
      mutations.delete(submissionKey(entry[0]));
      swept.push(entry);
    }
    if (fromLoad === 0 && swept.length === 0) return () => {};
    return () => {
      expired.length -= Math.min(fromLoad, expired.length);
      for (const [hash, at] of swept) {
        if (state.seen.get(hash) === at) state.seen.delete(hash);
      }
    };
  }

  /** Drops the oldest records from memory (not from KV) past the limit. */
  prune(state: State): void {
    const seen = state.seen;
    if (seen.size <= this.#limit) return;
    let excess = seen.size - Math.floor(this.#limit * 0.9);
    // A Map iterates in insertion order: the oldest recorded first.
    for (const [hash, at] of seen) {
      if (excess-- <= 0) break;
      seen.delete(hash);
      state.seenIncompleteUntil = Math.max(state.seenIncompleteUntil, at + this.#windowMs);
    }
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

/**
 * Duplicate records (C13): for each content accepted within the duplicate window, the
 * time it was last accepted, keyed by the SHA-256 of the content. The committed state keeps
 * them in memory (`State.seen`); each also has a KV record that expires after the window
 * (`expireIn` is only a garbage-collection hint, so decisions compare the stored time).
 *
 * @module
 */

import { createHash } from "node:crypto";
import { submissionKey, type SubmissionRecord, submissionsPrefix } from "./kv_keys.ts";
import { BATCH_MAX_MUTATIONS, type Change, type Draft, type Mutations } from "./_state.ts";

/** The SHA-256 of `content`'s UTF-8 bytes, as lowercase hex: a duplicate record's key. */
export function sha256Hex(content: string): string {
  return createHash("sha256").update(content, "utf8").digest("hex");
}

/** Whether content with `hash` was accepted less than `windowMs` before `draft.now`. */
export function isDuplicate(draft: Draft, hash: string, windowMs: number): boolean {
  // Compare the stored time; expired KV entries can still be read.
  const seen = draft.seen(hash);
  return seen !== undefined && draft.now - seen < windowMs;
}

/** Records content with `hash` as accepted at `draft.now`, in the draft and in KV. */
export function recordAccepted(
  draft: Draft,
  mutations: Mutations,
  hash: string,
  windowMs: number,
): void {
  draft.see(hash, draft.now);
  mutations.set(submissionKey(hash), { last_seen_at: draft.now } satisfies SubmissionRecord, {
    expireIn: windowMs,
  });
}

/**
 * Reads the duplicate records still inside the window at `now` (epoch ms).
 *
 * @returns SHA-256 hex → last accepted, epoch ms.
 * @throws KV errors.
 */
export async function readSeen(
  kv: Deno.Kv,
  now: number,
  windowMs: number,
): Promise<Map<string, number>> {
  const seen = new Map<string, number>();
  for await (const entry of kv.list<SubmissionRecord>({ prefix: submissionsPrefix() })) {
    if (now - entry.value.last_seen_at < windowMs) {
      seen.set(entry.key[1] as string, entry.value.last_seen_at);
    }
  }
  return seen;
}

/** Forgets in-memory records older than the window, at most twice per window. */
export class SeenPruner {
  #windowMs: number;
  #prunedAt = 0;

  /** @param windowMs The duplicate window, ms. */
  constructor(windowMs: number) {
    this.#windowMs = windowMs;
  }

  /** Drops from `seen` the records older than the window at `now` (epoch ms), if due. */
  prune(seen: Map<string, number>, now: number): void {
    if (now - this.#prunedAt < this.#windowMs / 2) return;
    this.#prunedAt = now;
    for (const [hash, at] of seen) {
      if (now - at >= this.#windowMs) seen.delete(hash);
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

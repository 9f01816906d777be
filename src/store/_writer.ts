/**
 * The single writer of a store: group commit over the committed state.
 *
 * Writes wait in one queue. While a commit is in flight, new writes wait; the writer then
 * applies all of them, in arrival order, to a {@linkcode Draft} of the state and commits the
 * lot as one atomic KV commit (within KV's limits of 1000 mutations and 800 KiB). A write
 * resolves only after the commit that holds it is durable, and the state changes only when
 * that commit succeeded. An exclusive job has the writer to itself and commits its changes
 * one by one ({@linkcode Writer.commitAlone}).
 *
 * Every KV write of the store goes through one function, `#commit`: it checks the
 * versionstamps of the four metadata entries (`["queues", q]`, `["results_meta"]`), reports
 * the commit's duration to `onCommit`, settles the draft and wakes the waiters. Should
 * anything else have written the file, the check fails, the state is reloaded from KV and
 * the batch applied again. A commit that throws leaves the outcome unknown, so the batch is
 * rejected and the state is reloaded before the next one.
 *
 * Every commit's outcome goes to the store's {@linkcode StoreHealth}, and a KV error that
 * names a storage fault (disk full, read-only, damaged, I/O) reaches the waiters as a
 * {@linkcode StorageError}. When a commit fails because the disk is full, the health's
 * reserve is released once and the writes of the batch that store nothing new are tried
 * again; while the disk stays full, writes that store new content are refused before they
 * are applied (`_health.ts`).
 *
 * @module
 */

import type { Clock } from "../clock.ts";
import type { Changes } from "./_changes.ts";
import { SeenPruner, writeAcceptedBatch } from "./_duplicates.ts";
import { StorageError, StoreFormatError } from "./_faults.ts";
import type { StoreHealth } from "./_health.ts";
import { loadState } from "./_load.ts";
import { formatKey, STORE_FORMAT } from "./kv_keys.ts";
import {
  BATCH_MAX_BYTES,
  BATCH_MAX_MUTATIONS,
  type Change,
  type Collection,
  COLLECTIONS,
  Draft,
  metaKey,
  metaValue,
  Mutations,
  type State,
  type WriteOp,
} from "./_state.ts";

/** Times a batch is applied again after another process changed the file under it. */
const MAX_COMMIT_ATTEMPTS = 20;

/** Thrown when another process kept changing the KV file under a write. */
export class StoreBusyError extends Error {
  /**
   * Says what could not be written.
   *
   * @param operation What was being written, e.g. `"submit"`.
   */
  constructor(operation: string) {
    super(`Cannot ${operation}: the store changed under it ${MAX_COMMIT_ATTEMPTS} times`);
    this.name = "StoreBusyError";
  }
}

/** Options of {@linkcode Writer}. */
export interface WriterOptions {
  /** Source of time, epoch ms: read once per batch. */
  clock: Clock;
  /** Duplicate window, ms: which records are loaded and kept. */
  dedupeWindowMs: number;
  /** Most duplicate records kept in memory; the rest are looked up in KV. */
  seenInMemory: number;
  /** Woken after each commit. */
  changes: Changes;
  /** Told each KV commit's duration, ms, and whether it succeeded. */
  onCommit?: ((ms: number, ok: boolean) => void) | undefined;
  /** Told every commit's and failed load's outcome; holds the disk-full reserve. */
  health: StoreHealth;
}

/** A write or an exclusive job waiting for the writer. */
interface Pending {
  readonly op?: WriteOp<unknown>;
  readonly alone?: (writer: Writer) => Promise<unknown>;
  readonly name: string;
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

/** The single writer of a store and its committed state (see the module doc). */
export class Writer {
  #kv: Deno.Kv;
  #clock: Clock;
  #dedupeWindowMs: number;
  #changes: Changes;
  #onCommit: ((ms: number, ok: boolean) => void) | undefined;
  #health: StoreHealth;
  #pruner: SeenPruner;
  #seenInMemory: number;
  #state: State | undefined;
  #loading: Promise<State> | undefined;
  #pending: Pending[] = [];
  #running = false;
  /** Per collection: the value of `#counter` when it last changed (commit or reload). */
  #versions = new Map<Collection, number>();
  #counter = 0;

  /**
   * @param kv The open database.
   * @param options Clock, duplicate window, waiters and commit metric.
   */
  constructor(kv: Deno.Kv, options: WriterOptions) {
    this.#kv = kv;
    this.#clock = options.clock;
    this.#dedupeWindowMs = options.dedupeWindowMs;
    this.#changes = options.changes;
    this.#onCommit = options.onCommit;
    this.#health = options.health;
    this.#seenInMemory = options.seenInMemory;
    this.#pruner = new SeenPruner(options.dedupeWindowMs);
  }

  /**
   * Queues `op` for the writer; resolves with its result once its commit is durable.
   *
   * @throws {StoreBusyError}; {@linkcode StorageError} for a storage fault; other KV errors
   *   (the batch's outcome is then unknown); or what `op.apply` threw.
   */
  write<T>(op: WriteOp<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.#pending.push({
        op: op as WriteOp<unknown>,
        name: op.name,
        resolve: resolve as (v: unknown) => void,
        reject,
      });
      this.#kick();
    });
  }

  /**
   * Runs `job` with the writer to itself (no other write is applied meanwhile); `job`
   * commits through {@linkcode Writer.commitAlone}. When `job` throws, the state is
   * reloaded before the next write.
   */
  exclusive<T>(name: string, job: (writer: Writer) => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.#pending.push({ alone: job, name, resolve: resolve as (v: unknown) => void, reject });
      this.#kick();
    });
  }

  /**
   * Applies `change` to a draft and commits it on its own; only inside
   * {@linkcode Writer.exclusive}. The change must fit one commit and store nothing new (a
   * clear): on a full disk it is tried again once the reserve is released, the part kept for
   * a clear included.
   *
   * @throws {StoreBusyError} when the file kept changing under it; {@linkcode StorageError};
   *   other KV errors.
   */
  async commitAlone(name: string, change: Change): Promise<void> {
    for (let attempt = 0; attempt < MAX_COMMIT_ATTEMPTS; attempt++) {
      try {
        const state = await this.#load();
        const draft = new Draft(state, Math.floor(this.#clock()));
        const mutations = new Mutations();
        change(draft, mutations);
        if (await this.#commit(state, draft, mutations)) return;
      } catch (error) {
        if (
          error instanceof StorageError && error.kind === "full" &&
          this.#health.releaseReserve(true)
        ) {
          continue;
        }
        throw renamed(error, name);
      }
    }
    throw new StoreBusyError(name);
  }

  /**
   * Runs `reader` on the committed state; runs it again on the newer state when it returns
   * `undefined` (content it read from KV was removed meanwhile).
   *
   * @throws {StorageError} for a storage fault while the state or content is read; other KV
   *   errors; an `Error` when `reader` kept returning `undefined`.
   */
  async read<T>(reader: (state: State) => T | undefined | Promise<T | undefined>): Promise<T> {
    for (let attempt = 0; attempt < MAX_COMMIT_ATTEMPTS; attempt++) {
      let result: T | undefined;
      try {
        result = await reader(await this.#load());
      } catch (error) {
        if (error instanceof StorageError) throw renamed(error, "read the store");
        const kind = this.#health.readFailed(error);
        if (kind === undefined) throw error;
        throw new StorageError(kind, "read the store", error);
      }
      if (result !== undefined) return result;
    }
    throw new Error("Cannot read the store: stored content parts are missing");
  }

  /**
   * A number that grows whenever the committed state of one of `collections` changes: at
   * each commit that touches it, and whenever the state is dropped or loaded again. Equal
   * numbers mean an unchanged state, so a reader may reuse what it built from it.
   */
  version(collections: readonly Collection[]): number {
    let v = 0;
    for (const c of collections) v = Math.max(v, this.#versions.get(c) ?? 0);
    return v;
  }

  /** Marks `collections` as changed (see {@linkcode Writer.version}). */
  #changed(collections: Iterable<Collection>): void {
    const v = ++this.#counter;
    for (const c of collections) this.#versions.set(c, v);
  }

  /** Drops the committed state: it is loaded again before the next read or write. */
  #drop(): void {
    this.#state = undefined;
    this.#changed(COLLECTIONS);
  }

  #kick(): void {
    if (this.#running) return;
    this.#running = true;
    queueMicrotask(() => this.#drain());
  }

  async #drain(): Promise<void> {
    try {
      while (this.#pending.length > 0) await this.#step();
    } finally {
      this.#running = false;
    }
  }

  /** Runs one exclusive job, or applies and commits one batch of writes. */
  async #step(): Promise<void> {
    const first = this.#pending[0]!;
    if (first.alone !== undefined) {
      this.#pending.shift();
      try {
        first.resolve(await first.alone(this));
      } catch (error) {
        this.#drop();
        first.reject(error);
      }
      return;
    }
    let batch: Pending[] = [];
    for (let attempt = 0; attempt < MAX_COMMIT_ATTEMPTS; attempt++) {
      let state: State;
      try {
        state = await this.#load();
      } catch (error) {
        // The batch being retried was already taken out of the pending list.
        for (const p of [...batch, ...this.#pending.splice(0)]) p.reject(renamed(error, p.name));
        return;
      }
      const draft = new Draft(state, Math.floor(this.#clock()));
      const mutations = new Mutations();
      // Duplicate records whose window has passed go with the batch (before its writes).
      const swept = this.#pruner.sweep(state, draft.now, mutations);
      const results: unknown[] = [];
      const applied: Pending[] = [];
      // On a retry, the same batch again; otherwise every waiting write that fits.
      const candidates = batch.length > 0 ? batch : this.#takeBatchable();
      // Before refusing writes for a full disk, look whether space came back.
      if (this.#health.full && candidates.some((p) => p.op!.grows)) {
        await this.#health.recheckFull();
      }
      // KV reads the writes need (duplicate records not in memory), all at once.
      const reads = candidates.map((p) => p.op!.prepare?.(draft)).filter((r) => r !== undefined);
      if (reads.length > 0) await Promise.all(reads);
      let i = 0;
      for (; i < candidates.length; i++) {
        const p = candidates[i]!;
        if (p.op!.grows && this.#health.full) {
          p.reject(new StorageError("full", p.name));
          continue;
        }
        const cost = p.op!.cost(draft);
        if (
          applied.length > 0 &&
          (mutations.entries.size + cost.mutations > BATCH_MAX_MUTATIONS ||
            mutations.bytes + cost.bytes > BATCH_MAX_BYTES)
        ) break;
        try {
          results.push(await p.op!.apply(draft, mutations));
          applied.push(p);
        } catch (error) {
          p.reject(error);
        }
      }
      // What did not fit goes back to the front, in order.
      this.#pending.unshift(...candidates.slice(i));
      batch = applied;
      if (applied.length === 0) return;
      let ok: boolean;
      try {
        ok = await this.#commit(state, draft, mutations, swept);
      } catch (error) {
        if (
          error instanceof StorageError && error.kind === "full" &&
          this.#health.releaseReserve(false)
        ) {
          // Nothing was committed: what stores nothing new goes again, in the room released.
          const again = applied.filter((p) => !p.op!.grows);
          for (const p of applied) if (p.op!.grows) p.reject(renamed(error, p.name));
          this.#pending.unshift(...again);
          return;
        }
        for (const p of applied) p.reject(renamed(error, p.name));
        return;
      }
      if (ok) {
        applied.forEach((p, k) => p.resolve(results[k]));
        return;
      }
    }
    for (const p of batch) p.reject(new StoreBusyError(p.name));
  }

  /** Takes the waiting writes up to the next exclusive job. */
  #takeBatchable(): Pending[] {
    const end = this.#pending.findIndex((p) => p.alone !== undefined);
    return this.#pending.splice(0, end === -1 ? this.#pending.length : end);
  }

  /**
   * The one commit path: commits `mutations` plus the touched metadata, checking every
   * metadata versionstamp; on success makes `draft` the committed state and wakes the
   * waiters of what changed. A change with nothing to store (an empty pull) commits
   * nothing, so workers polling an empty queue cause no disk writes.
   *
   * @param committed Runs once the commit has succeeded and the draft is the state (the
   *   duplicate records it deleted are then forgotten).
   * @returns `false` when a check failed (the file changed under us; state reloaded).
   * @throws {StorageError} for a storage fault (its `operation` is `"commit"`); other KV
   *   errors. The state is then reloaded before the next write.
   */
  async #commit(
    state: State,
    draft: Draft,
    mutations: Mutations,
    committed?: () => void,
  ): Promise<boolean> {
    // The duplicate records of the contents this commit accepts: one entry for them all.
    writeAcceptedBatch(draft, mutations, this.#dedupeWindowMs);
    if (mutations.entries.size === 0 && mutations.touched.size === 0) {
      // Nothing to store; a draft may still forget records that KV no longer holds.
      draft.settle(mutations, null);
      return true;
    }
    const op = this.#kv.atomic();
    for (const c of COLLECTIONS) op.check({ key: metaKey(c), versionstamp: state.stamps[c] });
    for (const m of mutations.entries.values()) {
      if ("value" in m) {
        op.set(m.key, m.value, m.expireIn === undefined ? {} : { expireIn: m.expireIn });
      } else {
        op.delete(m.key);
      }
    }
    for (const c of mutations.touched) op.set(metaKey(c), metaValue(draft, c));
    // The first commit after an upgrade says which layout the file may now hold.
    if (state.format !== STORE_FORMAT) op.set(formatKey(), STORE_FORMAT);
    let res: Deno.KvCommitResult | Deno.KvCommitError;
    const started = performance.now();
    try {
      res = await op.commit();
    } catch (error) {
      this.#drop();
      this.#onCommit?.(performance.now() - started, false);
      const kind = this.#health.failed(error);
      // The commit may have been applied: let every waiter look again.
      this.#changes.notifyAll();
      throw kind === undefined ? error : new StorageError(kind, "commit", error);
    }
    this.#health.succeeded();
    this.#onCommit?.(performance.now() - started, res.ok);
    if (!res.ok) {
      this.#drop();
      return false;
    }
    // Committed: the changed collections of the draft become the state (every change
    // touches its collection).
    draft.settle(mutations, res.versionstamp);
    state.format = STORE_FORMAT;
    committed?.();
    this.#changed(mutations.touched);
    this.#changes.notify(mutations.touched);
    return true;
  }

  /** The committed state, loaded from KV on first use and after a failed commit. */
  #load(): Promise<State> {
    if (this.#state !== undefined) return Promise.resolve(this.#state);
    this.#loading ??= loadState(
      this.#kv,
      this.#clock,
      this.#dedupeWindowMs,
      this.#seenInMemory,
    ).then(
      (state) => {
        this.#state = state;
        this.#changed(COLLECTIONS);
        this.#loading = undefined;
        return state;
      },
      (error) => {
        this.#loading = undefined;
        // Not a fault of the disk: the file is whole, of a later layout.
        if (error instanceof StoreFormatError) throw error;
        const kind = this.#health.failed(error);
        throw kind === undefined ? error : new StorageError(kind, "read the store", error);
      },
    );
    return this.#loading;
  }
}

/** `error` with the operation it failed named, when it is a {@linkcode StorageError}. */
function renamed(error: unknown, operation: string): unknown {
  return error instanceof StorageError && error.operation !== operation
    ? new StorageError(error.kind, operation, error.cause)
    : error;
}

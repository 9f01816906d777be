/**
 * Whether the store can commit (`GET /health`, docs/faults.md, "Storage faults"): the
 * outcome of the last commit, a probe at most once a second, and the disk-full reserve.
 *
 * **The verdict** comes from the last commit the writer made (or the last state load that
 * failed), not from a read per request: a read also competes with the commits. A probe runs
 * when a verdict is asked for and the last probe is older than a second; it checks what
 * changes without a commit (the file system turned read-only, the disk filled up by another
 * program) and makes a small commit of its own only when the last one failed or the disk is
 * nearly full, so an idle, healthy relay polled by a health check writes nothing.
 *
 * **The reserve.** SQLite appends every commit to its write-ahead log, deletes included, so
 * on a full disk a pull or a clear fails like a submit (measured on a full tmpfs: every
 * delete fails with `database or disk is full`). A store with a path keeps a file beside its
 * database of two parts, each sized from the largest item it may hold
 * ({@linkcode reserveSizes}): room for pulls and acks, and room for one clear of everything.
 * The first commit that fails because the disk is full gives up the first part and puts the
 * store in **disk-full mode**: writes that store new content (submit, push, restore) are
 * refused at once, and the rest (pull, lease, ack, clear) are tried again in the room left.
 * The second part only a clear gives up: once pulls have used up theirs, a clear still works
 * (measured on a full tmpfs: pulls and acks of 400 KB items took about 48 KB of log each, a
 * clear of 150 such items and 50 results 552 KB; with one 1 MiB reserve for both, the clear
 * after 19 such pulls failed). Disk-full mode ends when a probe finds the space to set the
 * whole reserve aside again.
 *
 * @module
 */

import { statfsSync } from "node:fs";
import { MAX_BODY_LIMIT_BYTES } from "../constants.ts";
import { QUEUE_NAMES } from "../queue_names.ts";
import { PRIVATE_FILE_MODE } from "../util/files.ts";
import { CHUNK_BYTES } from "./_parts.ts";
import { QUEUE_CAPACITY, RESULTS_CAPACITY } from "./_state.ts";
import { classifyFault, type FaultKind, faultReason, fileSystemReadOnly } from "./_faults.ts";
import { quickCheck } from "./_quick_check.ts";

/** The least room set aside for pulls and acks on a full disk, bytes: 1 MiB. */
export const RESERVE_BYTES = 1024 * 1024;

/**
 * Log bytes a clear writes per KV entry it deletes, with room to spare: measured 394 (552 KB
 * for 1,400 entries of 60,000 bytes).
 */
const CLEAR_BYTES_PER_ENTRY = 512;

/** Log bytes a clear writes besides its entries: metadata, duplicate records, margin. */
const CLEAR_BYTES_FIXED = 256 * 1024;

/**
 * The two parts of the reserve for items of at most `maxItemBytes`: room for pulls and acks
 * (twice the largest item, at least {@linkcode RESERVE_BYTES}), and room for a clear of full
 * queues and a full results feed, each item in parts of {@linkcode CHUNK_BYTES}.
 *
 * @param maxItemBytes The largest item or result the relay accepts, bytes.
 * @returns Bytes of each part.
 */
export function reserveSizes(maxItemBytes: number): { pulls: number; clear: number } {
  const entries = (QUEUE_NAMES.length * QUEUE_CAPACITY + RESULTS_CAPACITY) *
    Math.max(1, Math.ceil(maxItemBytes / CHUNK_BYTES));
  return {
    pulls: Math.max(RESERVE_BYTES, 2 * maxItemBytes),
    clear: CLEAR_BYTES_FIXED + entries * CLEAR_BYTES_PER_ENTRY,
  };
}

/** Shortest time between two probes, ms. */
export const PROBE_INTERVAL_MS = 1000;

/** Shortest time between two checks of the file's pages after failures, ms. */
const QUICK_CHECK_INTERVAL_MS = 10_000;

/**
 * What `/health` reports: whether the store can commit, and if not, why: `reason` is short
 * (`disk full`); `cause` is the error that showed the fault, when one did (SQLite's words).
 */
export type HealthVerdict =
  | { readonly ok: true }
  | {
    readonly ok: false;
    readonly kind: FaultKind;
    readonly reason: string;
    readonly cause?: unknown;
  };

/** What a probe may do with the store: read a little, or commit a little. */
export interface ProbeActions {
  /** Reads a few entries from KV. @throws KV errors. */
  read(): Promise<void>;
  /** Commits one small entry through the writer, which reports the outcome. */
  write(): Promise<void>;
}

const OK: HealthVerdict = { ok: true };

/** The health of one store (see the module doc). */
export class StoreHealth {
  readonly #path: string | undefined;
  #last: HealthVerdict = OK;
  #damaged: HealthVerdict | undefined;
  #full = false;
  #probedAt = Number.NEGATIVE_INFINITY;
  #fullCheckedAt = Number.NEGATIVE_INFINITY;
  #probing: Promise<void> | undefined;
  #reported: HealthVerdict = OK;
  readonly #onChange: ((verdict: HealthVerdict) => void) | undefined;
  readonly #reserve: { pulls: number; clear: number };
  #quickCheckedAt = Number.NEGATIVE_INFINITY;

  /**
   * @param path The database file; without one (an in-memory store) there is no reserve and
   *   no file-system check.
   * @param onChange Told each new verdict: a fault, another fault, or healthy again.
   * @param maxItemBytes The largest item the relay accepts, bytes, which sizes the reserve;
   *   default the most any configuration allows (768 KiB).
   */
  constructor(
    path: string | undefined,
    onChange?: ((verdict: HealthVerdict) => void) | undefined,
    maxItemBytes: number = MAX_BODY_LIMIT_BYTES,
  ) {
    this.#path = path;
    this.#onChange = onChange;
    this.#reserve = reserveSizes(maxItemBytes);
  }

  /** Bytes of the whole reserve: room for pulls and for a clear. */
  get #reserveBytes(): number {
    return this.#reserve.pulls + this.#reserve.clear;
  }

  /** Tells `onChange` when the verdict is not the one last told. */
  #report(): void {
    const now = this.verdict();
    const before = this.#reported;
    if (now.ok === before.ok && (now.ok || (!before.ok && now.kind === before.kind))) return;
    this.#reported = now;
    this.#onChange?.(now);
  }

  /** The reserve file: `<database>.reserve`, or `undefined` without a path. */
  get reservePath(): string | undefined {
    return this.#path === undefined ? undefined : `${this.#path}.reserve`;
  }

  /** Whether the store is in disk-full mode: writes that store new content are refused. */
  get full(): boolean {
    return this.#full;
  }

  /** Records a commit that succeeded. */
  succeeded(): void {
    this.#last = OK;
    // Without a reserve to set aside, a commit that went through is the only sign of space.
    if (this.#path === undefined) this.#full = false;
    this.#report();
  }

  /**
   * Records a commit (or a state load) that failed with `error`; an error that names no
   * storage fault is reported as an I/O error.
   *
   * @returns The kind of storage fault `error` names, or `undefined` when it names none.
   */
  failed(error: unknown): FaultKind | undefined {
    return this.#record(error, this.#classify(error));
  }

  /** Records the failure `error`, of the kind `named` (`undefined`: an I/O error). */
  #record(error: unknown, named: FaultKind | undefined): FaultKind | undefined {
    const kind = named ?? "io";
    const verdict: HealthVerdict = {
      ok: false,
      kind,
      reason: faultReason(kind, error),
      cause: error,
    };
    this.#last = verdict;
    // A damaged file does not mend itself: it stays reported until the relay restarts.
    if (kind === "damaged") this.#damaged ??= verdict;
    if (kind === "full") this.#full = true;
    this.#report();
    return named;
  }

  /**
   * Records a read of content from KV that failed with `error`, when `error` names a storage
   * fault; any other error is left to its caller.
   *
   * @returns The kind of storage fault, or `undefined`.
   */
  readFailed(error: unknown): FaultKind | undefined {
    const named = this.#classify(error);
    return named === undefined ? undefined : this.#record(error, named);
  }

  /**
   * The kind of fault `error` names; an error that names none, or only an I/O error, counts
   * as `damaged` when SQLite's check of the file finds damaged pages. Deno KV reports a
   * value on a damaged page in words of its own (`The value encoding N is unknown`), which
   * no message check can know in advance. A damaged file is found once: it stays reported.
   */
  #classify(error: unknown): FaultKind | undefined {
    const named = classifyFault(error, this.#path);
    if (named !== undefined && named !== "io") return named;
    if (this.#damaged !== undefined) return named ?? "damaged";
    // The check reads the whole file on the main thread (about 1 ms a MB): not for every
    // error of a burst.
    const now = performance.now();
    if (this.#path === undefined || now - this.#quickCheckedAt < QUICK_CHECK_INTERVAL_MS) {
      return named;
    }
    this.#quickCheckedAt = now;
    try {
      return quickCheck(this.#path) === undefined ? named : "damaged";
    } catch {
      return named; // the check itself could not read the file: nothing more is known
    }
  }

  /**
   * Gives up part of the reserve to make room for a commit on a full disk: the room for
   * pulls and acks (the file is cut to the room for a clear), or, for a clear, all of it.
   *
   * @param forClear Whether the commit is a clear's, which may take the last part.
   * @returns Whether any room was given up: `false` when that part is used up already.
   */
  releaseReserve(forClear: boolean): boolean {
    const path = this.reservePath;
    if (path === undefined) return false;
    try {
      const size = Deno.statSync(path).size;
      if (forClear) {
        Deno.removeSync(path);
        return true;
      }
      if (size <= this.#reserve.clear) return false;
      Deno.truncateSync(path, this.#reserve.clear);
      return true;
    } catch {
      return false;
    }
  }

  /**
   * Sets the reserve aside: grows the reserve file to its full size with random bytes (which
   * no file system compresses away), mode 0600. What is there already is kept: on a disk
   * without room for the rest, the file stays as it was.
   *
   * @returns Whether the whole reserve is in place; `false` without a path or when there is
   *   no room for it.
   */
  async ensureReserve(): Promise<boolean> {
    const path = this.reservePath;
    if (path === undefined) return false;
    const want = this.#reserveBytes;
    let have = 0;
    try {
      have = (await Deno.stat(path)).size;
    } catch {
      // Missing: write it.
    }
    if (have >= want) return true;
    let file: Deno.FsFile;
    try {
      file = await Deno.open(path, { write: true, create: true, mode: PRIVATE_FILE_MODE });
      await Deno.chmod(path, PRIVATE_FILE_MODE);
    } catch {
      return false;
    }
    try {
      await file.seek(have, Deno.SeekMode.Start);
      const block = new Uint8Array(65536);
      for (let at = have; at < want;) {
        const chunk = block.subarray(0, Math.min(block.length, want - at));
        crypto.getRandomValues(chunk);
        at += await file.write(chunk);
      }
      return true;
    } catch {
      await file.truncate(have).catch(() => {});
      return false;
    } finally {
      file.close();
    }
  }

  /**
   * Enters disk-full mode when the disk lacks the room {@linkcode recheckFull} needs to leave
   * it (twice the whole reserve, available to the relay): what the relay does at start when it
   * could not set the reserve aside. Restarted on a full disk after its reserve was given up,
   * the relay would otherwise let new content (a podcast's audio) take the last room until a
   * commit failed. Without a path, or when free space cannot be read, nothing changes.
   */
  enterFullWithoutRoom(): void {
    // What the relay may use: a relay that is not root cannot write into the blocks a file
    // system keeps for root, which `free` counts.
    const room = this.#path === undefined ? undefined : diskSpace(this.#path)?.available;
    if (room === undefined || room >= 2 * this.#reserveBytes) return;
    this.#full = true;
    this.#report();
  }

  /**
   * In disk-full mode, at most once a second: leaves it when there is room again to set the
   * reserve aside (the writer asks before it refuses a write, so the store recovers by
   * itself when space returns, whether or not anything polls `/health`).
   */
  async recheckFull(): Promise<void> {
    if (!this.#full || performance.now() - this.#fullCheckedAt < PROBE_INTERVAL_MS) return;
    this.#fullCheckedAt = performance.now();
    await this.#leaveFull();
  }

  /** Leaves disk-full mode when the reserve can be set aside again (a store with a path). */
  async #leaveFull(): Promise<void> {
    const path = this.#path;
    if (path === undefined) return;
    const free = diskSpace(path)?.free;
    const room = 2 * this.#reserveBytes;
    if ((free !== undefined && free < room) || !await this.ensureReserve()) return;
    this.#full = false;
    this.#report();
  }

  /**
   * The verdict, probing first when the last probe is older than
   * {@linkcode PROBE_INTERVAL_MS}; concurrent callers share one probe.
   */
  async check(actions: ProbeActions): Promise<HealthVerdict> {
    if (performance.now() - this.#probedAt >= PROBE_INTERVAL_MS) {
      this.#probing ??= this.#probe(actions).finally(() => {
        this.#probedAt = performance.now();
        this.#probing = undefined;
      });
      await this.#probing;
    }
    return this.verdict();
  }

  /**
   * The verdict when the last probe is younger than {@linkcode PROBE_INTERVAL_MS} and none is
   * running, else `undefined`: what {@linkcode check} would answer without waiting, so that
   * `/health` can be answered synchronously between probes.
   */
  freshVerdict(): HealthVerdict | undefined {
    if (this.#probing !== undefined) return undefined;
    return performance.now() - this.#probedAt < PROBE_INTERVAL_MS ? this.verdict() : undefined;
  }

  /** The verdict as of now, without probing. */
  verdict(): HealthVerdict {
    if (this.#damaged !== undefined) return this.#damaged;
    if (this.#full) return { ok: false, kind: "full", reason: faultReason("full") };
    return this.#last;
  }

  async #probe(actions: ProbeActions): Promise<void> {
    const path = this.#path;
    if (path !== undefined && fileSystemReadOnly(path)) {
      this.#last = { ok: false, kind: "read-only", reason: faultReason("read-only") };
      this.#report();
      return;
    }
    let write = !this.#last.ok;
    if (this.#full) {
      await this.#leaveFull();
      // Still full: a commit would only use up room that pulls and clears need.
      if (this.#full && path !== undefined) return;
      write = true;
    } else if (path !== undefined) {
      const available = diskSpace(path)?.available;
      write ||= available !== undefined && available < RESERVE_BYTES;
    }
    if (write) {
      // The writer reports the commit's outcome itself.
      await actions.write().catch(() => {});
      return;
    }
    try {
      await actions.read();
    } catch (error) {
      this.failed(error);
    }
  }
}

/**
 * Free space of the file system holding `path`, bytes: `free` for root, `available` for
 * other users (file systems keep some blocks for root); `undefined` when it cannot be read.
 */
export function diskSpace(path: string): { free: number; available: number } | undefined {
  try {
    const stats = statfsSync(path);
    return { free: stats.bfree * stats.bsize, available: stats.bavail * stats.bsize };
  } catch {
    return undefined;
  }
}

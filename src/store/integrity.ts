/**
 * Noticing a database that is damaged or lost what it held, before the relay serves it
 * (docs/faults.md, "Damaged files"): {@linkcode checkDatabase} reads the whole state once
 * and compares the counters with the counters file beside the database (`<db>.counters`), a
 * copy of the store's counters as of a recent commit kept outside the database.
 *
 * Every counter of `GET /stats` only grows (items accepted, delivered, evicted, cleared,
 * results pushed, the results' `t` mark), and `/clear` and imports keep them. So a database
 * whose counters are lower than the file's has lost commits that were acknowledged: it was
 * emptied or truncated, replaced by an older copy, or its write-ahead log was damaged (SQLite
 * then drops every commit after the damage without a word). The relay refuses to start on
 * such a database ({@linkcode checkCounters}) instead of serving what is left as if nothing
 * happened.
 *
 * The running relay rewrites the file after commits, at most every
 * {@linkcode COUNTERS_INTERVAL_MS} ({@linkcode keepCounters}), off the main thread (Deno's
 * asynchronous file operations) and without an fsync of its own:
 * the file is written only after the commits it counts are durable, so it never claims more
 * than the database holds; after a crash it may claim less, which only means that the
 * losses of the last moments before the crash cannot be noticed.
 *
 * @module
 */

import { errorMessage } from "../errors.ts";
import { sleep } from "../util/backoff.ts";
import { writeAtomically } from "../util/files.ts";
import { QUEUE_NAMES } from "../queue_names.ts";
import { damagedDatabaseError, UnsafeDatabaseError } from "./database.ts";
import { COLLECTIONS } from "./_state.ts";
import {
  nextChange,
  prepare,
  stats,
  StorageError,
  type Store,
  StoreFormatError,
  type StoreStats,
} from "./store.ts";

/** The value of `format` in every counters file. */
const COUNTERS_FORMAT = "content-relay-counters";

/**
 * Shortest time between two writes of the counters file, ms. Each write costs the main
 * thread a little (stats, JSON, the file operations' calls); once a second keeps it out of the
 * way of a load, and a file that lags only hides the losses of its last second.
 */
export const COUNTERS_INTERVAL_MS = 1000;

/** The counters file of the database `db`: `<db>.counters`. */
export function countersPath(db: string): string {
  return `${db}.counters`;
}

/** Every counter that only grows, by name (`qa.accepted`, …, `results.hwm`). */
function countersOf(stats: StoreStats): Record<string, number> {
  const out: Record<string, number> = {};
  for (const queue of QUEUE_NAMES) {
    const q = stats.queues[queue];
    for (const name of ["accepted", "duplicate", "delivered", "leased", "evicted", "cleared"]) {
      out[`${queue}.${name}`] = q[name as keyof typeof q];
    }
  }
  const r = stats.results;
  for (const name of ["pushed", "evicted", "cleared", "hwm"] as const) {
    out[`results.${name}`] = r[name];
  }
  return out;
}

/**
 * Writes the store's counters to `<db>.counters` (mode 0600, replaced in one step).
 * `relay import` calls it after it restored a backup, whose counters start again lower.
 *
 * @throws I/O errors of the write; KV errors while the state is first loaded.
 */
export async function writeCounters(store: Store, db: string): Promise<void> {
  const counters = countersOf(await stats(store));
  await writeAtomically(
    countersPath(db),
    JSON.stringify({ format: COUNTERS_FORMAT, written_at: Date.now(), counters }) + "\n",
    // Rewritten up to once a second; losing the last one only hides the last losses.
    { noSync: true },
  );
}

/**
 * Checks the database before the relay serves it: loads its whole state (which reads every
 * entry's page, so a damaged file is found now rather than by a request), sets the
 * disk-full reserve aside, and compares its counters with `<db>.counters`.
 *
 * @returns A warning for a counters file that cannot be read or is not one (nothing is
 *   compared then), else `undefined`: no file yet (a new relay, or one upgraded from a
 *   version without it), or no counter went back.
 * @throws {UnsafeDatabaseError} when the database is damaged, or a counter of the database
 *   is lower than the file's; the message names what and how to recover.
 * @throws {StorageError} for another storage fault (a failing disk: a restart may help);
 *   other KV errors.
 */
export async function checkDatabase(store: Store, db: string): Promise<string | undefined> {
  try {
    await prepare(store);
  } catch (error) {
    if (error instanceof StoreFormatError) {
      throw new UnsafeDatabaseError(
        `${error.message}: run that relay again, or move "${db}" and its -wal and -shm files ` +
          "aside and restore a backup into an empty database with relay import " +
          "(docs/operations.md, Upgrade and roll back)",
      );
    }
    if (!(error instanceof StorageError) || error.kind !== "damaged") throw error;
    throw damagedDatabaseError(db, errorMessage(error.cause));
  }
  return await checkCounters(store, db);
}

/**
 * Compares the store's counters with `<db>.counters`.
 *
 * @returns A warning for a counters file that cannot be read or is not one (nothing is
 *   compared then), else `undefined`: no file yet (a new relay, or one upgraded from a
 *   version without it), or no counter went back.
 * @throws {UnsafeDatabaseError} when a counter of the database is lower than the file's,
 *   naming up to three of them and how to recover.
 * @throws {StorageError} and KV errors while the state is loaded.
 */
async function checkCounters(store: Store, db: string): Promise<string | undefined> {
  const path = countersPath(db);
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return undefined;
    return `relay: warning: cannot read ${path} (${String(error)}): the database was not ` +
      "checked for lost writes";
  }
  let saved: Record<string, unknown>;
  try {
    const doc = JSON.parse(text);
    if (doc?.format !== COUNTERS_FORMAT || typeof doc.counters !== "object") throw new Error();
    saved = doc.counters;
  } catch {
    return `relay: warning: ${path} is not a counters file: the database was not checked for ` +
      "lost writes";
  }
  const now = countersOf(await stats(store));
  const lower = Object.entries(now).filter(([name, value]) => {
    const was = saved[name];
    return typeof was === "number" && value < was;
  });
  if (lower.length === 0) return undefined;
  const shown = lower.slice(0, 3).map(([name, value]) => `${name} ${saved[name]} → ${value}`);
  throw new UnsafeDatabaseError(
    `the database "${db}" holds less than this relay wrote to it ` +
      `(${shown.join(", ")}${lower.length > 3 ? ", …" : ""}): it was emptied, replaced by ` +
      "an older copy, or lost acknowledged writes to a damaged write-ahead log. Restore the " +
      "latest backup with relay import --force (docs/operations.md), or delete " +
      `${path} to start with what the database holds`,
  );
}

/** The running keeper of {@linkcode keepCounters}. */
export interface CountersKeeper {
  /** Stops after one last write of the file. Never throws. */
  stop(): Promise<void>;
}

/**
 * Writes `<db>.counters` now and again after commits, at most every
 * {@linkcode COUNTERS_INTERVAL_MS}, until stopped. A write that fails (a full or read-only
 * disk) is told to `onError` once, until one succeeds again.
 *
 * @param onError Told a failed write's error (the relay logs it).
 * @param intervalMs Shortest time between two writes, ms; tests make it long to show that
 *   stopping does not wait it out.
 */
export function keepCounters(
  store: Store,
  db: string,
  onError: (error: unknown) => void = () => {},
  intervalMs: number = COUNTERS_INTERVAL_MS,
): CountersKeeper {
  const stopping = new AbortController();
  let failing = false;
  const write = async () => {
    try {
      await writeCounters(store, db);
      failing = false;
    } catch (error) {
      if (!failing) onError(error);
      failing = true;
    }
  };
  const loop = (async () => {
    while (!stopping.signal.aborted) {
      // Waiting starts before the write reads the counters: no commit slips between.
      const changed = nextChange(store, COLLECTIONS, stopping.signal);
      await write();
      await changed;
      // A stop also wakes `changed`, so the pause may begin after the stop: `sleep` ends at
      // once then, where a pause listening only for a later abort waited the whole interval.
      await sleep(intervalMs, stopping.signal);
    }
  })();
  return {
    async stop() {
      stopping.abort();
      await loop;
      await write();
    },
  };
}

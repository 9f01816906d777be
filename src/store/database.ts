/**
 * Opening the relay's database file: the data directory made private, the file's lock
 * taken (one process at a time), the KV file opened 0600. The relay's start-up and the
 * one-off jobs (export, import) both open it here.
 *
 * @module
 */

import { dirname, resolve } from "node:path";
import { ConfigError } from "../config/config.ts";
import { createPrivateFile, makePrivateDirectory, restrictFile } from "../util/files.ts";
import { lockDatabase } from "./lock.ts";
import { diskSpace, RESERVE_BYTES } from "./_health.ts";
import { quickCheck } from "./_quick_check.ts";
import { createStore, type Store } from "./store.ts";

/**
 * Thrown when the database cannot be used safely as it is and restarting cannot change that:
 * it has more than one name (hard links), or it holds less than the relay wrote to it
 * (`counters_file.ts`). The message is one line that says what to do; `relay serve` exits
 * with 2 on it, like a configuration error, so that systemd does not restart it in a loop.
 */
export class UnsafeDatabaseError extends Error {
  /** @param message One line: what is wrong with the database and what to do. */
  constructor(message: string) {
    super(message);
    this.name = "UnsafeDatabaseError";
  }
}

/**
 * The error for a database whose pages SQLite finds damaged, with the steps that recover
 * from it: what the relay says (and exits 2 on) whether it finds the damage at start or
 * while it serves.
 *
 * @param path The database file.
 * @param problem What SQLite found, e.g. `database disk image is malformed`.
 */
export function damagedDatabaseError(path: string, problem: string): UnsafeDatabaseError {
  return new UnsafeDatabaseError(
    `the database "${path}" is damaged (${problem}): move it and its -wal and -shm files ` +
      "aside, then restore the latest backup with relay import (docs/operations.md, " +
      "A damaged database)",
  );
}

/** An open KV database and the lock that makes it this process's alone. */
export interface LockedDatabase {
  /** The database's absolute path. */
  readonly path: string;
  /** The open database. */
  readonly kv: Deno.Kv;
  /** Closes KV, then releases the lock. */
  close(): void;
}

/**
 * Creates the data directory when missing (with its missing parents, each 0700), takes the
 * database's lock and opens the KV file, made 0600 with its `-wal` and `-shm` files
 * (docs/install.md, "Where the data lives"), turning each failure into one line that names the path.
 *
 * A database file with more than one name (a hard link) is refused. The lock file, SQLite's
 * write-ahead log and its index are all found by the name, so two names of one file make two
 * locks and two logs: two relays could then serve the same file at once, and one relay alone
 * would miss what the other name's log holds (measured: every acknowledged write made through
 * the second name was gone after a restart). Refusing the extra name covers both, where a
 * lock on the file itself would cover only the first.
 *
 * @param db The database file's path, relative to the working directory or absolute.
 * @throws {ConfigError} when the directory cannot be created or the file cannot be opened
 *   (corrupt, unwritable, not SQLite).
 * @throws {DatabaseInUseError} when another process holds the database.
 * Before Deno KV opens the file, SQLite checks its pages (`PRAGMA quick_check`, read-only):
 * on a damaged page Deno KV's own background tasks panic, which no caller can catch.
 *
 * @throws {UnsafeDatabaseError} when the database file has more than one name, or SQLite
 *   finds its pages damaged.
 */
export async function openLockedDatabase(db: string): Promise<LockedDatabase> {
  const path = resolve(db);
  try {
    makePrivateDirectory(dirname(path));
  } catch (error) {
    throw new ConfigError(`cannot create the data directory "${dirname(path)}": ${String(error)}`);
  }
  const lock = await lockDatabase(path);
  try {
    checkDatabaseFile(path);
  } catch (error) {
    lock.release();
    throw error;
  }
  let kv: Deno.Kv;
  try {
    // SQLite creates the database 0644 and gives its -wal and -shm files the database's
    // mode: a database created (or set) 0600 first keeps all three private whatever the umask.
    createPrivateFile(path);
    restrictFile(`${path}-wal`);
    restrictFile(`${path}-shm`);
    const problem = quickCheck(path);
    if (problem !== undefined) throw damagedDatabaseError(path, problem);
    kv = await Deno.openKv(path);
  } catch (error) {
    lock.release();
    if (error instanceof UnsafeDatabaseError) throw error;
    const reason = error instanceof Error ? error.message.split("\n")[0]! : String(error);
    throw new ConfigError(
      `cannot open the database "${path}": ${reason}${fullDisk(path, reason)}`,
    );
  }
  return {
    path,
    kv,
    close() {
      kv.close();
      lock.release();
    },
  };
}

/**
 * What to add to a failure to open the database at `path` when the disk holding it is full:
 * SQLite, which cannot then make the files it keeps beside the database, says only `disk
 * I/O error`. Empty when there is a megabyte left, when free space cannot be read, and when
 * `reason` is not one a full disk gives (a refused permission, say: the disk is not why).
 */
function fullDisk(path: string, reason: string): string {
  if (!/disk I\/O error|disk is full|no space left/i.test(reason)) return "";
  const available = diskSpace(dirname(path))?.available;
  if (available === undefined || available >= RESERVE_BYTES) return "";
  return `: the disk holding it is full (${available} ${available === 1 ? "byte" : "bytes"} free)`;
}

/**
 * Opens the database under its lock for a one-off job such as export or import, runs
 * `job`, and closes it again. Creates the directory when missing (0700, as its missing
 * parents).
 *
 * @param db The database file's path.
 * @param job Runs with a store on the open database.
 * @returns What `job` returns.
 * @throws {ConfigError} when the database cannot be opened.
 * @throws {DatabaseInUseError} when a relay (or another job) holds the database.
 * @throws {UnsafeDatabaseError} when the database file has more than one name or is damaged.
 */
export async function withStore<T>(
  db: string,
  job: (store: Store) => Promise<T>,
): Promise<T> {
  const database = await openLockedDatabase(db);
  try {
    return await job(createStore(database.kv));
  } finally {
    database.close();
  }
}

/**
 * Refuses a database file with more than one name (see {@linkcode openLockedDatabase}), and
 * anything but a file in its place: SQLite says `disk I/O error` of a directory, which reads
 * as a failing disk.
 *
 * @throws {ConfigError} when the path names a directory or another kind of file.
 * @throws {UnsafeDatabaseError} naming the count and how to find the other names.
 */
function checkDatabaseFile(path: string): void {
  let info: Deno.FileInfo;
  try {
    info = Deno.statSync(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return; // created when it is opened
    throw error;
  }
  if (!info.isFile) {
    const kind = info.isDirectory ? "a directory" : "not a regular file";
    throw new ConfigError(`cannot open the database "${path}": it is ${kind}, not a database file`);
  }
  const links = info.nlink;
  if (links === null || links <= 1) return;
  throw new UnsafeDatabaseError(
    `the database "${path}" has ${links} names (hard links), and each name gets its own ` +
      "lock and write-ahead log, so writes made through one name can be lost through the " +
      `other: remove the other names (find them with: find / -xdev -samefile ${path}) or ` +
      "give each relay its own copy",
  );
}

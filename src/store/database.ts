/**
 * Opening the relay's database file: the data directory made private, the file's lock
 * taken (one process at a time), the KV file opened 0600. The relay's start-up and the
 * one-off jobs (export, import) both open it here.
 *
 * @module
 */

import { dirname, resolve } from "node:path";
import { ConfigError } from "../config.ts";
import { createPrivateFile, makePrivateDirectory, restrictFile } from "../util/files.ts";
import { lockDatabase } from "./lock.ts";
import { createStore, type Store } from "./store.ts";

/** An open KV database and the lock that makes it this process's alone (C73). */
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
 * database's lock (C73) and opens the KV file, made 0600 with its `-wal` and `-shm` files
 * (docs/operations.md, data files), turning each failure into one line that names the path.
 *
 * @param db The database file's path, relative to the working directory or absolute.
 * @throws {ConfigError} when the directory cannot be created or the file cannot be opened
 *   (corrupt, unwritable, not SQLite).
 * @throws {DatabaseInUseError} when another process holds the database.
 */
export async function openLockedDatabase(db: string): Promise<LockedDatabase> {
  const path = resolve(db);
  try {
    makePrivateDirectory(dirname(path));
  } catch (error) {
    throw new ConfigError(`cannot create the data directory "${dirname(path)}": ${String(error)}`);
  }
  const lock = await lockDatabase(path);
  let kv: Deno.Kv;
  try {
    // SQLite creates the database 0644 and gives its -wal and -shm files the database's
    // mode: a database created (or set) 0600 first keeps all three private whatever the umask.
    createPrivateFile(path);
    restrictFile(`${path}-wal`);
    restrictFile(`${path}-shm`);
    kv = await Deno.openKv(path);
  } catch (error) {
    lock.release();
    const reason = error instanceof Error ? error.message.split("\n")[0] : String(error);
    throw new ConfigError(`cannot open the database "${path}": ${reason}`);
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
 * Opens the database under its lock (C73) for a one-off job such as export or import, runs
 * `job`, and closes it again. Creates the directory when missing (0700, as its missing
 * parents).
 *
 * @param db The database file's path.
 * @param job Runs with a store on the open database.
 * @returns What `job` returns.
 * @throws {ConfigError} when the database cannot be opened.
 * @throws {DatabaseInUseError} when a relay (or another job) holds the database.
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

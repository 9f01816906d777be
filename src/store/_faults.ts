/**
 * Storage faults: what SQLite's errors (as Deno KV throws them) say about the disk under the
 * database, in four kinds a client and an operator can act on (docs/faults.md, "Storage
 * faults").
 *
 * @module
 */

import { STORE_FORMAT } from "./kv_keys.ts";

/**
 * What went wrong with the storage:
 * - `full`: no space left on the file system;
 * - `read-only`: the file system (or the file) does not take writes, e.g. remounted
 *   read-only after disk errors;
 * - `damaged`: the database file is corrupt or not a database;
 * - `io`: any other I/O error of the disk.
 */
export type FaultKind = "full" | "read-only" | "damaged" | "io";

/**
 * The database holds a layout this code does not know: a later relay wrote it
 * (`kv_keys.ts`, {@linkcode STORE_FORMAT}).
 */
export class StoreFormatError extends Error {
  /** The `["format"]` the file holds. */
  readonly found: number;
  /** @param found The `["format"]` the file holds. */
  constructor(found: number) {
    super(
      `the database was written by a later relay (its data format is ${found}; this relay ` +
        `reads up to ${STORE_FORMAT})`,
    );
    this.name = "StoreFormatError";
    this.found = found;
  }
}

/** A storage fault met by a store operation; the operation's outcome is "not done". */
export class StorageError extends Error {
  /** What kind of fault. */
  readonly kind: FaultKind;
  /** What could not be done, e.g. `"submit"`. */
  readonly operation: string;

  /**
   * @param kind What kind of fault.
   * @param operation What could not be done, e.g. `"submit"`.
   * @param cause The error KV threw, when there was one.
   */
  constructor(kind: FaultKind, operation: string, cause?: unknown) {
    super(`Cannot ${operation}: ${faultReason(kind, cause)}`, { cause });
    this.name = "StorageError";
    this.kind = kind;
    this.operation = operation;
  }
}

/**
 * A short reason for `/health` and for messages: `disk full`, `read-only file system`,
 * `database damaged (…)`, `I/O error (…)`.
 *
 * @param cause The error KV threw, for SQLite's own words where they add something.
 */
export function faultReason(kind: FaultKind, cause?: unknown): string {
  const said = cause === undefined ? "" : firstLine(cause);
  switch (kind) {
    case "full":
      return "disk full";
    case "read-only":
      return "read-only file system";
    case "damaged":
      return said === "" ? "database damaged" : `database damaged (${said})`;
    case "io":
      return said === "" ? "I/O error" : `I/O error (${said})`;
  }
}

/**
 * The kind of storage fault `error` reports, from SQLite's messages; `undefined` when it is
 * not one (a closed database, a bug, another process's lock).
 *
 * SQLite reports a write on a file system remounted read-only as a plain `disk I/O error`;
 * with `path`, such an error counts as `read-only` when the file cannot be opened for
 * writing because the file system is read-only (`EROFS`).
 *
 * @param path The database file, to tell a read-only file system from other I/O errors.
 */
export function classifyFault(error: unknown, path?: string): FaultKind | undefined {
  const message = firstLine(error).toLowerCase();
  if (/database or disk is full|no space left|os error 28\b/.test(message)) return "full";
  if (/readonly database|read-only file system|os error 30\b/.test(message)) return "read-only";
  // Deno KV's own words for a value whose bytes were damaged: its encoding tag is garbage.
  if (/malformed|not a database|corrupt|value encoding -?\d+ is unknown/.test(message)) {
    return "damaged";
  }
  if (/disk i\/o error|input\/output error|os error 5\b/.test(message)) {
    return path !== undefined && fileSystemReadOnly(path) ? "read-only" : "io";
  }
  return undefined;
}

/**
 * Whether the file system of the database `path` refuses writes: opening one of the relay's
 * own files beside it (the lock file, else the reserve, else the counters file) for writing
 * fails with `EROFS`. Opening writes nothing. The database file itself is never opened here:
 * closing any descriptor of a file drops every POSIX lock this process holds on it, SQLite's
 * included. When none of those files exists, or opening fails otherwise, the answer is
 * `false`.
 */
export function fileSystemReadOnly(path: string): boolean {
  for (const beside of [`${path}.lock`, `${path}.reserve`, `${path}.counters`]) {
    try {
      Deno.openSync(beside, { write: true }).close();
      return false;
    } catch (error) {
      if (error instanceof Deno.errors.NotFound) continue;
      return (error as { code?: unknown }).code === "EROFS" ||
        /os error 30\b/.test(firstLine(error));
    }
  }
  return false;
}

function firstLine(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.split("\n")[0]!;
}

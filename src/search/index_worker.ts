/**
 * The search index's thread: it owns the SQLite file (`index_db.ts`) and answers the main
 * thread's messages one at a time, in order, so that indexing a long article or rebuilding
 * the whole index never holds up the relay's requests. Messages are
 * `{ id, type, ... }`; each gets one reply `{ id, ok: true, value }` or
 * `{ id, ok: false, error, damaged }` (`damaged` when SQLite says the file is not a sound
 * database: the main thread then rebuilds it).
 *
 * @module
 */

/// <reference lib="deno.worker" />

import { IndexDb, type IndexOp, type SearchRequest } from "./index_db.ts";

/** A message from the main thread. */
export type IndexMessage =
  | { readonly id: number; readonly type: "open"; readonly path: string }
  | { readonly id: number; readonly type: "reopen"; readonly path: string }
  | { readonly id: number; readonly type: "reset" }
  | { readonly id: number; readonly type: "apply"; readonly ops: readonly IndexOp[] }
  | { readonly id: number; readonly type: "search"; readonly request: SearchRequest }
  | { readonly id: number; readonly type: "setMeta"; readonly key: string; value: string }
  | { readonly id: number; readonly type: "counts" }
  | { readonly id: number; readonly type: "close" };

let db: IndexDb | undefined;
let path = "";
/** Why the file could not be reopened: every later call is answered as on a damaged file. */
let reopenFailed: string | undefined;

/** Removes the index file and SQLite's files beside it. */
function removeFiles(): void {
  for (const suffix of ["", "-wal", "-shm", "-journal"]) {
    try {
      Deno.removeSync(path + suffix);
    } catch (error) {
      if (!(error instanceof Deno.errors.NotFound)) throw error;
    }
  }
}

/**
 * Makes the index file, empty (which SQLite takes as an empty database), owner-only like every
 * file of the relay's: SQLite gives its write-ahead log the same mode.
 */
function createPrivate(): void {
  try {
    Deno.writeFileSync(path, new Uint8Array(), { createNew: true, mode: 0o600 });
    Deno.chmodSync(path, 0o600);
  } catch (error) {
    if (!(error instanceof Deno.errors.AlreadyExists)) throw error;
  }
}

/** Opens a new, empty index in place of whatever the file held. */
function fresh(): IndexDb {
  db?.close();
  db = undefined;
  removeFiles();
  createPrivate();
  db = new IndexDb(path, { check: false });
  return db;
}

function open(at: string): { fresh: boolean; generation: string | undefined } {
  path = at;
  try {
    createPrivate();
    db = new IndexDb(path, { check: true });
    return { fresh: false, generation: db.meta("generation") };
  } catch {
    // Not a database, damaged, or of another version: it is rebuilt from the sources.
    fresh();
    return { fresh: true, generation: undefined };
  }
}

/**
 * Opens the file a thread before this one checked, without the full check (that thread
 * failed; the file was whole when checked). A missing file is not made anew: its documents
 * would be missing, so the call fails and the main thread rebuilds it.
 */
function reopen(at: string): void {
  path = at;
  try {
    Deno.statSync(path);
    db = new IndexDb(path, { check: false });
  } catch (error) {
    reopenFailed = error instanceof Error ? error.message : String(error);
    throw error;
  }
}

function handle(message: IndexMessage): unknown {
  if (message.type === "open") return open(message.path);
  if (message.type === "reopen") return reopen(message.path);
  if (message.type === "reset") {
    reopenFailed = undefined;
    return void fresh();
  }
  if (db === undefined) throw new Error("the search index is not open");
  switch (message.type) {
    case "apply":
      return db.apply(message.ops);
    case "search":
      return db.search(message.request);
    case "setMeta":
      return db.setMeta(message.key, message.value);
    case "counts":
      return db.counts();
    case "close":
      db.close();
      db = undefined;
      return undefined;
  }
}

const DAMAGED = /malformed|not a database|corrupt|disk image|SQLITE_CORRUPT|SQLITE_NOTADB/i;

self.onmessage = (event: MessageEvent<IndexMessage>) => {
  const { id } = event.data;
  try {
    self.postMessage({ id, ok: true, value: handle(event.data) });
  } catch (error) {
    const text = error instanceof Error ? error.message : String(error);
    const damaged = DAMAGED.test(text) || reopenFailed !== undefined;
    self.postMessage({ id, ok: false, error: text, damaged });
  }
};

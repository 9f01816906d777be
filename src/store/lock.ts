/**
 * One relay per database: an exclusive lock on a file beside the KV file.
 * Deno KV's SQLite file cannot be shared by two processes safely (platform notes).
 *
 * @module
 */

import { PRIVATE_FILE_MODE, restrictFile } from "../util/files.ts";

/** Thrown when another process holds the database's lock. */
export class DatabaseInUseError extends Error {
  /** Process id of the holder, when it wrote one. */
  readonly pid: number | undefined;

  /**
   * @param db The database path.
   * @param pid The holder's process id, when known.
   */
  constructor(db: string, pid: number | undefined) {
    const by = pid === undefined ? "another process" : `another relay (pid ${pid})`;
    super(`the database "${db}" is in use by ${by}; stop it or choose another --db`);
    this.name = "DatabaseInUseError";
    this.pid = pid;
  }
}

/** A held database lock; release it after closing KV. */
export interface DatabaseLock {
  /** The lock file's path: `<db>.lock`. */
  readonly path: string;
  /** Unlocks and closes the lock file. Never throws. */
  release(): void;
}

/**
 * Takes the exclusive lock `<db>.lock` (mode 0600) without waiting, and writes this
 * process's id into it for the error message of a second relay.
 *
 * @throws {DatabaseInUseError} when another process holds the lock.
 * @throws {Deno.errors.PermissionDenied} and other I/O errors when the file cannot be opened.
 */
export async function lockDatabase(db: string): Promise<DatabaseLock> {
  // Lock the file the path leads to, so a symlink or a second name cannot share it.
  const path = `${await realFilePath(db)}.lock`;
  const file = await Deno.open(path, {
    read: true,
    write: true,
    create: true,
    mode: PRIVATE_FILE_MODE,
  });
  if (!await file.tryLock(true)) {
    const text = await Deno.readTextFile(path).catch(() => "");
    file.close();
    const pid = Number.parseInt(text.trim(), 10);
    throw new DatabaseInUseError(db, Number.isSafeInteger(pid) ? pid : undefined);
  }
  // Created 0600 at most; made exactly 0600 whatever the umask or an older relay left.
  restrictFile(path);
  await file.truncate(0);
  await file.write(new TextEncoder().encode(`${Deno.pid}\n`));
  return {
    path,
    release() {
      try {
        file.unlockSync();
        file.close();
      } catch {
        // Already closed: nothing to release.
      }
    },
  };
}

/** The path with every symlink resolved; for a file that does not exist yet, its directory's. */
async function realFilePath(path: string): Promise<string> {
  try {
    return await Deno.realPath(path);
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
    const slash = path.lastIndexOf("/");
    const dir = slash <= 0 ? (slash === 0 ? "/" : ".") : path.slice(0, slash);
    const real = await Deno.realPath(dir);
    return `${real === "/" ? "" : real}/${path.slice(slash + 1)}`;
  }
}

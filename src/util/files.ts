/**
 * The modes of the relay's data files (docs/operations.md, data files): every directory the
 * relay creates is 0700 and every file it writes is 0600, whatever the umask. A mode given
 * when a file or directory is created is only ever narrowed by the umask, so each helper sets
 * the mode again after creating.
 *
 * @module
 */

import { dirname, resolve } from "node:path";

/** The mode of every file the relay writes: read and write for its owner only. */
export const PRIVATE_FILE_MODE = 0o600;

/** The mode of every directory the relay creates: its owner only. */
export const PRIVATE_DIRECTORY_MODE = 0o700;

/**
 * Creates the directory `dir` and each missing parent, every new one with mode 0700.
 * Directories that exist already are left as they are (a parent such as `/var/lib` keeps
 * its mode).
 *
 * @throws {Deno.errors.PermissionDenied} and other I/O errors of `mkdir` and `chmod`, e.g.
 *   when a path component is a file.
 */
export function makePrivateDirectory(dir: string): void {
  const missing: string[] = [];
  for (let path = resolve(dir);;) {
    try {
      Deno.statSync(path);
      break;
    } catch (error) {
      if (!(error instanceof Deno.errors.NotFound)) throw error;
    }
    missing.push(path);
    const parent = dirname(path);
    if (parent === path) break;
    path = parent;
  }
  for (const path of missing.reverse()) {
    try {
      Deno.mkdirSync(path, { mode: PRIVATE_DIRECTORY_MODE });
    } catch (error) {
      // Made meanwhile by another process: not ours to change.
      if (error instanceof Deno.errors.AlreadyExists) continue;
      throw error;
    }
    Deno.chmodSync(path, PRIVATE_DIRECTORY_MODE);
  }
}

/**
 * Gives an existing file mode 0600 when it has another, e.g. a database written by an
 * older relay (0644). A missing path, one that is not a file, or a file this process may not
 * change (owned by another user) is left as it is.
 */
export function restrictFile(path: string): void {
  try {
    const info = Deno.statSync(path);
    if (info.isFile && info.mode !== null && (info.mode & 0o777) !== PRIVATE_FILE_MODE) {
      Deno.chmodSync(path, PRIVATE_FILE_MODE);
    }
  } catch (error) {
    if (
      !(error instanceof Deno.errors.NotFound || error instanceof Deno.errors.PermissionDenied)
    ) throw error;
  }
}

/**
 * Creates the empty file `path` with mode 0600 when it does not exist, so that a program that
 * creates it otherwise (SQLite: 0644) finds it made; SQLite gives its `-wal` and `-shm`
 * files the database's mode. An existing file gets mode 0600 ({@linkcode restrictFile}).
 *
 * @throws {Deno.errors.PermissionDenied} and other I/O errors when the file cannot be created.
 */
export function createPrivateFile(path: string): void {
  try {
    Deno.writeFileSync(path, new Uint8Array(), { createNew: true, mode: PRIVATE_FILE_MODE });
    Deno.chmodSync(path, PRIVATE_FILE_MODE);
  } catch (error) {
    if (!(error instanceof Deno.errors.AlreadyExists)) throw error;
    restrictFile(path);
  }
}

/**
 * Replaces a file's contents in one step: writes a temporary file beside it (mode 0600),
 * then renames it over `path`. Missing directories are created 0700
 * ({@linkcode makePrivateDirectory}). The new file keeps the owner of the file it replaces,
 * else takes its directory's, when this process may set it (root): so `sudo relay keys add`
 * leaves a keys file the relay's own user can still read.
 *
 * @param text The whole new contents, UTF-8.
 * @throws {Deno.errors.PermissionDenied} and other I/O errors; the temporary file is removed.
 */
export function writePrivateFile(path: string, text: string): void {
  const temporary = `${path}.${crypto.randomUUID()}.tmp`;
  try {
    makePrivateDirectory(dirname(path));
    Deno.writeTextFileSync(temporary, text, { createNew: true, mode: PRIVATE_FILE_MODE });
    Deno.chmodSync(temporary, PRIVATE_FILE_MODE);
    keepOwner(temporary, path);
    Deno.renameSync(temporary, path);
  } catch (error) {
    try {
      Deno.removeSync(temporary);
    } catch {
      // Nothing was written.
    }
    throw error;
  }
}

/** Gives `temporary` the owner of `path`, else of its directory; only root may, so best effort. */
function keepOwner(temporary: string, path: string): void {
  let owner: Deno.FileInfo;
  try {
    owner = Deno.statSync(path);
  } catch {
    owner = Deno.statSync(dirname(path));
  }
  const mine = Deno.statSync(temporary);
  if (owner.uid === null || owner.gid === null) return;
  if (owner.uid === mine.uid && owner.gid === mine.gid) return;
  try {
    Deno.chownSync(temporary, owner.uid, owner.gid);
  } catch {
    // Not root: the file stays this user's, as any file it writes.
  }
}

/**
 * Whether something exists at `path`: a file, a folder, or a symbolic link (a dangling one
 * counts, since writing there would still clash).
 *
 * @param path The path to look at.
 * @returns `false` when nothing is there or it cannot be looked at.
 */
export function pathExists(path: string): boolean {
  try {
    Deno.lstatSync(path);
    return true;
  } catch {
    return false;
  }
}

/** Creates `path` and its missing parents with mode 0700 (an existing one is left as it is). */
export async function ensureDir(path: string): Promise<void> {
  try {
    await Deno.stat(path);
    return;
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
  await ensureDir(dirname(path));
  try {
    await Deno.mkdir(path, { mode: PRIVATE_DIRECTORY_MODE });
    // The mode given at creation is narrowed by the umask; set it as meant.
    await Deno.chmod(path, PRIVATE_DIRECTORY_MODE);
  } catch (error) {
    if (!(error instanceof Deno.errors.AlreadyExists)) throw error;
  }
}

/**
 * Replaces the file at `path` with `data` in one step (mode 0600), creating its directory
 * (0700) when missing.
 *
 * @throws the file system's errors (no space, permission).
 */
export async function writeAtomically(path: string, data: string | Uint8Array): Promise<void> {
  await ensureDir(dirname(path));
  const temporary = `${path}.${crypto.randomUUID()}.tmp`;
  try {
    const file = await Deno.open(temporary, {
      write: true,
      createNew: true,
      mode: PRIVATE_FILE_MODE,
    });
    try {
      const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
      let offset = 0;
      while (offset < bytes.length) offset += await file.write(bytes.subarray(offset));
      await file.sync();
    } finally {
      file.close();
    }
    await Deno.chmod(temporary, PRIVATE_FILE_MODE);
    await Deno.rename(temporary, path);
  } catch (error) {
    await Deno.remove(temporary).catch(() => {});
    throw error;
  }
}

/** Reads a text file, or `undefined` when it does not exist. */
export async function readTextIfExists(path: string): Promise<string | undefined> {
  try {
    return await Deno.readTextFile(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return undefined;
    throw error;
  }
}

/** Removes a file; `false` when it did not exist. */
export async function removeIfExists(path: string): Promise<boolean> {
  try {
    await Deno.remove(path);
    return true;
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return false;
    throw error;
  }
}

/**
 * A new identifier that sorts by creation time and is safe as a file name and in a URL
 * path: `YYYYMMDD-HHMMSS-` and 8 random lower-case letters and digits, e.g.
 * `20261123-114218-k3f9q2ab`.
 *
 * @param now Epoch ms.
 */
export function newId(now: number): string {
  const stamp = new Date(now).toISOString().slice(0, 19).replace(/[-:]/g, "").replace("T", "-");
  const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789";
  const random = crypto.getRandomValues(new Uint8Array(8));
  return `${stamp}-${Array.from(random, (b) => alphabet[b % alphabet.length]).join("")}`;
}

/** Whether `id` has the shape {@linkcode newId} makes: checked before it names a file. */
export function isId(id: string): boolean {
  return /^\d{8}-\d{6}-[a-z0-9]{8}$/.test(id);
}

/** The entries of a directory; none when it does not exist (it is not created: reads write nothing). */
export async function* readDirIfExists(path: string): AsyncGenerator<Deno.DirEntry> {
  let entries: AsyncIterable<Deno.DirEntry>;
  try {
    entries = Deno.readDir(path);
    for await (const entry of entries) yield entry;
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
}

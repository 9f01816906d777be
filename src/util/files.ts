/**
 * The modes of the relay's data files (docs/install.md, "Where the data lives"): every directory the
 * relay creates is 0700 and every file it writes is 0600, whatever the umask. A mode given
 * when a file or directory is created is only ever narrowed by the umask, so each helper sets
 * the mode again after creating.
 *
 * Every file the relay writes, and every directory it creates, is made durable before the
 * write returns: the file is fsynced, then its directory, which holds the file's name. A file
 * system keeps neither for seconds otherwise: after a file-system failure one second after a
 * first start, the `api-key` and `app-id` files written without fsync were gone (measured on
 * an ext4 image whose journal was aborted), and with them the key the phones were given.
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
    syncDirectory(dirname(path)); // the new directory's name
  }
}

/**
 * Flushes a directory's entries to the disk (fsync of the directory): what makes a file
 * created or renamed in it survive a power cut, not only the file's own fsync. A directory
 * this process may write in but not read (mode `-wx`) cannot be opened to be synced: it is
 * left as the file system keeps it, rather than failing the write.
 *
 * @throws I/O errors of opening (other than permission) or syncing the directory.
 */
export function syncDirectory(dir: string): void {
  let handle: Deno.FsFile;
  try {
    handle = Deno.openSync(dir, { read: true });
  } catch (error) {
    if (error instanceof Deno.errors.PermissionDenied) return;
    throw error;
  }
  try {
    handle.syncSync();
  } finally {
    handle.close();
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
    syncDirectory(dirname(path));
  } catch (error) {
    if (!(error instanceof Deno.errors.AlreadyExists)) throw error;
    restrictFile(path);
  }
}

/** Options of {@linkcode writePrivateFile}. */
export interface WriteOptions {
  /**
   * Create the file only when nothing is at `path`; else throw
   * `Deno.errors.AlreadyExists` and leave what is there (a generated key is never replaced).
   */
  createNew?: boolean;
  /**
   * Skip both fsyncs; default `false`. Only for a file rewritten often whose loss in a power
   * cut is harmless and noticed (the database's counters file).
   */
  noSync?: boolean;
}

/**
 * The relay's one way to write a file: the whole contents appear in one step, durably. It
 * writes a temporary file beside `path` (mode 0600), fsyncs it, gives it its name (a rename
 * over `path`, or with `createNew` a hard link that fails when `path` exists), then fsyncs
 * the directory. Missing directories are created 0700 ({@linkcode makePrivateDirectory}). The
 * new file keeps the owner of the file it replaces, else takes its directory's, when this
 * process may set it (root): so `sudo relay keys add` leaves a keys file the relay's own user
 * can still read.
 *
 * It is synchronous, for the command line and for files written seldom outside async code
 * (keys, settings); it blocks the main thread for its fsyncs, so the running relay writes
 * what it writes while serving with {@linkcode writeAtomically}.
 *
 * @param data The whole new contents: text (UTF-8) or bytes.
 * @throws {Deno.errors.AlreadyExists} with `createNew` when `path` exists.
 * @throws {Deno.errors.PermissionDenied} and other I/O errors (no space); the temporary file
 *   is removed.
 */
export function writePrivateFile(
  path: string,
  data: string | Uint8Array,
  options: WriteOptions = {},
): void {
  const temporary = temporaryName(path);
  const sync = options.noSync !== true;
  try {
    makePrivateDirectory(dirname(path));
    const file = Deno.openSync(temporary, {
      write: true,
      createNew: true,
      mode: PRIVATE_FILE_MODE,
    });
    try {
      const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
      for (let at = 0; at < bytes.length;) at += file.writeSync(bytes.subarray(at));
      if (sync) file.syncSync();
    } finally {
      file.close();
    }
    Deno.chmodSync(temporary, PRIVATE_FILE_MODE);
    keepOwner(temporary, path);
    if (options.createNew) {
      Deno.linkSync(temporary, path);
      Deno.removeSync(temporary);
    } else {
      Deno.renameSync(temporary, path);
    }
  } catch (error) {
    try {
      Deno.removeSync(temporary);
    } catch {
      // Nothing was written, or it already has its name.
    }
    throw error;
  }
  if (sync) syncDirectory(dirname(path));
}

/**
 * {@linkcode writePrivateFile} for code that awaits its writes (the built-in services' notes,
 * posts and episodes, the failed publishes, the counters file): the same steps and
 * guarantees, but every one of them (write, fsync, rename, the directory's fsync) is one of
 * Deno's asynchronous file operations, which run off the main thread, so that a slow disk
 * (an SD card's fsync takes tens of ms) does not hold up every request meanwhile. Only a
 * missing directory is created synchronously (once per directory).
 *
 * @param data The whole new contents: text (UTF-8) or bytes.
 * @throws (rejects with) the errors of {@linkcode writePrivateFile}.
 */
export async function writeAtomically(
  path: string,
  data: string | Uint8Array,
  options: WriteOptions = {},
): Promise<void> {
  const temporary = temporaryName(path);
  const sync = options.noSync !== true;
  const dir = dirname(path);
  try {
    await Deno.stat(dir).catch(() => makePrivateDirectory(dir));
    const file = await Deno.open(temporary, {
      write: true,
      createNew: true,
      mode: PRIVATE_FILE_MODE,
    });
    try {
      const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
      for (let at = 0; at < bytes.length;) at += await file.write(bytes.subarray(at));
      if (sync) await file.sync();
    } finally {
      file.close();
    }
    await Deno.chmod(temporary, PRIVATE_FILE_MODE);
    const owner = await Deno.stat(path).catch(() => Deno.stat(dir));
    await chownTo(temporary, owner, await Deno.stat(temporary));
    if (options.createNew) {
      await Deno.link(temporary, path);
      await Deno.remove(temporary);
    } else {
      await Deno.rename(temporary, path);
    }
  } catch (error) {
    await Deno.remove(temporary).catch(() => {}); // nothing written, or already named
    throw error;
  }
  if (sync) {
    const handle = await Deno.open(dir, { read: true });
    try {
      await handle.sync();
    } finally {
      handle.close();
    }
  }
}

/** A temporary name beside `path` that no other writer uses. */
function temporaryName(path: string): string {
  return `${path}.${crypto.randomUUID()}.tmp`;
}

/** Gives `temporary` the owner of `path`, else of its directory; only root may, so best effort. */
function keepOwner(temporary: string, path: string): void {
  let owner: Deno.FileInfo;
  try {
    owner = Deno.statSync(path);
  } catch {
    owner = Deno.statSync(dirname(path));
  }
  const change = ownerChange(owner, Deno.statSync(temporary));
  if (change === undefined) return;
  try {
    Deno.chownSync(temporary, change.uid, change.gid);
  } catch {
    // Not root: the file stays this user's, as any file it writes.
  }
}

/** {@linkcode keepOwner} for the asynchronous writer. */
async function chownTo(temporary: string, owner: Deno.FileInfo, mine: Deno.FileInfo) {
  const change = ownerChange(owner, mine);
  if (change === undefined) return;
  // Not root: the file stays this user's, as any file it writes.
  await Deno.chown(temporary, change.uid, change.gid).catch(() => {});
}

/** The owner to give a file now owned as `mine`, or `undefined` when it has `owner`'s. */
function ownerChange(
  owner: Deno.FileInfo,
  mine: Deno.FileInfo,
): { uid: number; gid: number } | undefined {
  if (owner.uid === null || owner.gid === null) return undefined;
  if (owner.uid === mine.uid && owner.gid === mine.gid) return undefined;
  return { uid: owner.uid, gid: owner.gid };
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

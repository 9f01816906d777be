/**
 * Files of the built-in publishing services: every directory is created 0700 and every file
 * written 0600, whatever the umask, and a file is replaced in one step (written beside its
 * place, then renamed), so a crash leaves the old version or the new one, never half of it.
 *
 * @module
 */

import { dirname } from "node:path";
import { PRIVATE_DIRECTORY_MODE, PRIVATE_FILE_MODE } from "../util/files.ts";

/** Mode of every directory the services create: the relay's one private mode. */
export const DIR_MODE = PRIVATE_DIRECTORY_MODE;

/** Mode of every file the services write: the relay's one private mode. */
export const FILE_MODE = PRIVATE_FILE_MODE;

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
    await Deno.mkdir(path, { mode: DIR_MODE });
    // The mode given at creation is narrowed by the umask; set it as meant.
    await Deno.chmod(path, DIR_MODE);
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
      mode: FILE_MODE,
    });
    try {
      const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
      let offset = 0;
      while (offset < bytes.length) offset += await file.write(bytes.subarray(offset));
      await file.sync();
    } finally {
      file.close();
    }
    await Deno.chmod(temporary, FILE_MODE);
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

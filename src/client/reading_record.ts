/**
 * The reader's record of the link it is reading, kept on disk so that it outlives the reader.
 * A page can stop the whole reader, not only its reading thread: the kernel ends a process that
 * runs out of memory (systemd's `MemoryMax=`) with SIGKILL, which no code of the reader sees.
 * The relay then hands the same item out again when its lease ends, and without a record the
 * restarted reader would read it again, and die again, for ever.
 *
 * So before reading an item the reader writes one small file for it in its state directory
 * (atomically and durably: src/util/files.ts) holding how many readings of it have begun and
 * not ended; when the item ends (a result pushed and acknowledged, or the worker stopping) the
 * file is removed. A file that is still there when the item comes back is a reading that
 * stopped the reader; once that has happened `--attempts` times the item ends as
 * `Could not read <url>: reading this page stopped the reader N times`, without being read
 * (docs/cli/work.md, "relay work --extract").
 *
 * @module
 */

import { join } from "node:path";
import { readTextIfExists, removeIfExists, writeAtomically } from "../util/files.ts";

/** What one item's file holds. */
interface ItemRecord {
  /** Readings of the item begun and not ended: each one that is left stopped the reader. */
  count: number;
  /** The item's content: an item id the relay reuses for another link starts again at 0. */
  content: string;
}

/** Item ids written as file names as they are: the relay's `queue:number` ids. */
const PLAIN_ID = /^[\w.:-]{1,200}$/;

/**
 * The reader's state directory when `--state-dir` is not given: `$STATE_DIRECTORY` under
 * systemd (the unit's `StateDirectory=relay-reader`; the first when it lists several), else
 * `$HOME/.local/state/relay/reader` (the XDG base directory specification's default place for
 * state that outlives a restart).
 *
 * @param env Reads an environment variable; an empty value counts as unset.
 * @returns The directory, or `undefined` when neither variable is set.
 */
export function defaultStateDir(env: (name: string) => string | undefined): string | undefined {
  const systemd = env("STATE_DIRECTORY")?.split(":")[0];
  if (systemd) return systemd;
  const home = env("HOME");
  return home ? join(home, ".local", "state", "relay", "reader") : undefined;
}

/** The records of the items being read, one file each in a directory. */
export class ReadingRecords {
  /** The directory of the files, made (0700) with the first one. */
  readonly dir: string;

  /** @param dir The reader's state directory. */
  constructor(dir: string) {
    this.dir = dir;
  }

  /** The file of an item, or `undefined` for an id that cannot be a file name as it is. */
  #path(id: string): string | undefined {
    return PLAIN_ID.test(id) && id !== "." && id !== ".." ? join(this.dir, id) : undefined;
  }

  /**
   * Records that reading `id` begins.
   *
   * @param id The item's id.
   * @param content The item's content (its link).
   * @returns How many earlier readings of the item stopped the reader (0 for a new item).
   * @throws I/O errors of writing the file (a read-only or full disk): the caller reads the
   *   item unrecorded.
   */
  async begin(id: string, content: string): Promise<number> {
    const path = this.#path(id);
    if (path === undefined) return 0;
    const stopped = await this.#count(path, content);
    const record: ItemRecord = { count: stopped + 1, content };
    await writeAtomically(path, JSON.stringify(record) + "\n");
    return stopped;
  }

  /**
   * Records that reading `id` ended: its file is removed, or with `stopped` above 0 (a reading
   * that ended because the worker is stopping, not because the page stopped it) set back to
   * the count {@linkcode begin} returned. A missing file is no error.
   *
   * @throws I/O errors of writing or removing the file other than its absence.
   */
  async end(id: string, content: string, stopped = 0): Promise<void> {
    const path = this.#path(id);
    if (path === undefined) return;
    if (stopped > 0) {
      const record: ItemRecord = { count: stopped, content };
      return await writeAtomically(path, JSON.stringify(record) + "\n");
    }
    await removeIfExists(path);
  }

  /**
   * The count in an item's file: 0 when there is none, or it is another item's (the same id
   * with other content) or unreadable (a file cut by a full disk counts as no reading).
   */
  async #count(path: string, content: string): Promise<number> {
    const text = await readTextIfExists(path);
    if (text === undefined) return 0;
    try {
      const record = JSON.parse(text) as Partial<ItemRecord>;
      return record.content === content && Number.isSafeInteger(record.count) &&
          record.count! > 0
        ? record.count!
        : 0;
    } catch {
      return 0;
    }
  }
}

/**
 * SQLite's own check of a database file's pages (`PRAGMA quick_check`), run through a
 * read-only connection of its own: before Deno KV opens the file at start, and after a
 * commit or read fails for a reason SQLite's message does not name.
 *
 * Why before Deno KV: Deno KV reads pages from background tasks of its own (expiring entries,
 * cleaning its queue), and on a damaged page those tasks panic and take the process down
 * with exit code 1, and a value on a damaged page fails with `The value encoding N is
 * unknown` rather than SQLite's `malformed`. Measured on databases with three random 4 KiB
 * pages overwritten: of 31 starts, 11 were refused with the damaged-database line, 7 died in
 * a panic and 13 stopped with the value-encoding error. The check reads every page of the
 * file's b-trees (their structure, not each value's bytes), which catches those pages first.
 *
 * @module
 */

import { DatabaseSync } from "node:sqlite";

/** The most of SQLite's problem lines kept for a message. */
const PROBLEMS_SHOWN = 1;

/**
 * Runs `PRAGMA quick_check` on the database file `path` through a read-only connection that
 * is closed again before returning. A missing or empty file is whole (SQLite sees an empty
 * database).
 *
 * @param path The database file.
 * @returns `undefined` when SQLite finds the file whole, else SQLite's first problem, e.g.
 *   `Tree 4 page 97 cell 3: invalid page number 1990019204` or `database disk image is
 *   malformed` (when the file cannot even be read as a database).
 * @throws Errors that say nothing about the file's pages: it cannot be opened (permission,
 *   a folder), an I/O error of the disk.
 */
export function quickCheck(path: string): string | undefined {
  let db: DatabaseSync | undefined;
  try {
    db = new DatabaseSync(path, { readOnly: true });
    const rows = db.prepare("PRAGMA quick_check").all() as Array<Record<string, unknown>>;
    const problems = rows.map((row) => String(Object.values(row)[0]))
      .flatMap((text) => text.split("\n"))
      .filter((line) => line !== "ok" && !line.startsWith("*** in database"));
    return problems.length === 0 ? undefined : problems.slice(0, PROBLEMS_SHOWN).join("; ");
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    if (/malformed|not a database|corrupt/i.test(message)) return message.split("\n")[0];
    throw error;
  } finally {
    db?.close();
  }
}

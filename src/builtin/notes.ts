/**
 * The built-in notes store: each note is a Markdown file with front matter (`title`,
 * `tags`, `created`, `doc_id`) in `<data>/notes/`, a folder a person can open, sync or back
 * up. The file name is the note's `doc_id` plus `.md`; the id is made by the relay (a
 * timestamp and random letters), so it is stable and safe as a file name.
 *
 * @module
 */

import { join } from "node:path";
import { isId, newId, readDirIfExists, readTextIfExists, writeAtomically } from "../util/files.ts";

/** A note as listed: its front matter. */
export interface NoteSummary {
  /** The note's id, also its file name without `.md`. */
  readonly doc_id: string;
  /** Its title. */
  readonly title: string;
  /** Its tags, in the order given. */
  readonly tags: readonly string[];
  /** When it was saved, ISO 8601 UTC. */
  readonly created: string;
}

/**
 * Splits a comma-separated tag list: each tag trimmed, empty ones and repeats dropped.
 *
 * @example `parseTags(" a, b,,a ")` → `["a", "b"]`
 */
export function parseTags(tags: string | undefined): string[] {
  const seen = new Set<string>();
  for (const tag of (tags ?? "").split(/[,，]/)) {
    const trimmed = tag.trim();
    if (trimmed !== "") seen.add(trimmed);
  }
  return [...seen];
}

/**
 * Writes a note's file text: YAML front matter whose values are JSON strings (valid YAML
 * double-quoted scalars, so any title is safe), a blank line, then the Markdown as given.
 */
export function noteFileText(summary: NoteSummary, markdown: string): string {
  const tags = `[${summary.tags.map((tag) => JSON.stringify(tag)).join(", ")}]`;
  return [
    "---",
    `title: ${JSON.stringify(summary.title)}`,
    `tags: ${tags}`,
    `created: ${summary.created}`,
    `doc_id: ${summary.doc_id}`,
    "---",
    "",
    markdown,
  ].join("\n");
}

/**
 * Reads the front matter of a note file written by {@linkcode noteFileText}.
 *
 * @returns The summary, or `undefined` when the text has no such front matter.
 */
export function parseNoteFile(text: string): NoteSummary | undefined {
  const match = /^---\n([\s\S]*?)\n---\n/.exec(text);
  if (match === null) return undefined;
  const fields = new Map<string, string>();
  for (const line of match[1]!.split("\n")) {
    const colon = line.indexOf(":");
    if (colon > 0) fields.set(line.slice(0, colon).trim(), line.slice(colon + 1).trim());
  }
  try {
    const title = JSON.parse(fields.get("title") ?? "");
    const tags = JSON.parse(fields.get("tags") ?? "[]");
    const docId = fields.get("doc_id") ?? "";
    const created = fields.get("created") ?? "";
    if (typeof title !== "string" || !Array.isArray(tags) || !isId(docId)) return undefined;
    return { doc_id: docId, title, tags: tags.map(String), created };
  } catch {
    return undefined;
  }
}

/** The notes in `<data>/notes/`. */
export class NotesStore {
  /** The folder holding the note files. */
  readonly dir: string;
  /** Told of each note saved or restored, after its file is written (the search index). */
  onChange: ((docId: string, removed: boolean) => void) | undefined;
  readonly #clock: () => number;

  /**
   * Reads and writes notes in `<data>/notes/`.
   *
   * @param dataDir The relay's data directory; notes go in its `notes/` folder.
   * @param clock Source of time, epoch ms.
   */
  constructor(dataDir: string, clock: () => number) {
    this.dir = join(dataDir, "notes");
    this.#clock = clock;
  }

  /**
   * Saves a note.
   *
   * @returns Its summary; `doc_id` names the file.
   * @throws the file system's errors.
   */
  async save(note: { title: string; markdown: string; tags: readonly string[] }): Promise<
    NoteSummary
  > {
    const now = this.#clock();
    const summary: NoteSummary = {
      doc_id: newId(now),
      title: note.title,
      tags: note.tags,
      created: new Date(now).toISOString(),
    };
    await writeAtomically(this.#path(summary.doc_id), noteFileText(summary, note.markdown));
    this.onChange?.(summary.doc_id, false);
    return summary;
  }

  /** Every note's front matter, newest first; files that are not notes are skipped. */
  async list(): Promise<NoteSummary[]> {
    const notes: NoteSummary[] = [];
    for await (const entry of readDirIfExists(this.dir)) {
      if (!entry.isFile || !entry.name.endsWith(".md")) continue;
      if (!isId(entry.name.slice(0, -3))) continue;
      const text = await readTextIfExists(join(this.dir, entry.name));
      const summary = text === undefined ? undefined : parseNoteFile(text);
      if (summary !== undefined) notes.push(summary);
    }
    return notes.sort((a, b) =>
      b.created.localeCompare(a.created) || b.doc_id.localeCompare(a.doc_id)
    );
  }

  /** How many notes there are (files named like a note), without reading them. */
  async count(): Promise<number> {
    let count = 0;
    for await (const entry of readDirIfExists(this.dir)) {
      if (entry.isFile && entry.name.endsWith(".md") && isId(entry.name.slice(0, -3))) count++;
    }
    return count;
  }

  /**
   * A note's file exactly as stored, front matter included.
   *
   * @returns Its text, or `undefined` when there is no such note (or `docId` is not an id).
   */
  async read(docId: string): Promise<string | undefined> {
    if (!isId(docId)) return undefined;
    return await readTextIfExists(this.#path(docId));
  }

  /** Writes a note file as it was exported (same id, same text). */
  async restore(docId: string, text: string): Promise<void> {
    if (!isId(docId)) throw new Error(`"${docId}" is not a note id`);
    await writeAtomically(this.#path(docId), text);
    this.onChange?.(docId, false);
  }

  #path(docId: string): string {
    return join(this.dir, `${docId}.md`);
  }
}

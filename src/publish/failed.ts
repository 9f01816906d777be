/**
 * Failed publishes (the dead letters of `POST /publish`): each publish with a target that
 * failed is kept, with the article and the failed targets' errors, so that it can be sent
 * again later (`POST /publish/retry`, `relay publish --retry ID`) instead of being lost
 * while the NAS's internet was down.
 *
 * The list lives in one JSON file in the data directory (`failed-publishes.json`, mode
 * 0600), replaced atomically at every change. It is bounded: at most 100 entries and 16 MiB
 * of articles, the oldest dropped first. A file that cannot be read as such a list is moved
 * aside (`.broken`) and the list starts empty, so a damaged file never stops the relay.
 *
 * While the relay has no room for new content (a full disk: the store keeps what is left for
 * pulls and acks), the list changes in memory only: the file, written whole, would take that
 * room. The first change made once there is room again writes the whole list; a relay
 * stopped before that loses what it kept meanwhile.
 *
 * @module
 */

import { newId, readTextIfExists, writeAtomically } from "../util/files.ts";

/** Entries kept at most; the oldest beyond are dropped. */
export const MAX_FAILED_ENTRIES = 100;

/** Bytes of articles kept at most (as JSON); the oldest beyond are dropped. */
export const MAX_FAILED_BYTES = 16 * 1024 * 1024;

/** The article of a failed publish, as it was sent. */
export interface FailedArticle {
  readonly title: string;
  readonly content: string;
  readonly content_md?: string;
  readonly tags?: string;
}

/** One failed publish. */
export interface FailedPublish {
  /** Its id (a timestamp and random letters), for `relay publish --retry`. */
  readonly id: string;
  /** When it first failed, ISO 8601 UTC. */
  readonly at: string;
  /** When it was last tried, ISO 8601 UTC. */
  readonly last_try: string;
  /** How many times it was tried, ≥ 1. */
  readonly tries: number;
  /** The targets still failing, with the last error of each. */
  readonly errors: Readonly<Record<string, string>>;
  /** The article. */
  readonly article: FailedArticle;
}

/** A failed publish as `/stats` and `GET /publish/failed` list it: without the article's text. */
export type FailedSummary = Omit<FailedPublish, "article"> & { readonly title: string };

/** The failed publishes of one relay, kept in a file. */
export class FailedPublishes {
  readonly #path: string;
  readonly #clock: () => number;
  readonly #roomLeft: () => Promise<boolean>;
  #entries: FailedPublish[] = [];
  #writing: Promise<void> = Promise.resolve();

  private constructor(path: string, clock: () => number, roomLeft: () => Promise<boolean>) {
    this.#path = path;
    this.#clock = clock;
    this.#roomLeft = roomLeft;
  }

  /**
   * Opens the list kept at `path` (created at the first failure).
   *
   * @param clock Milliseconds since the epoch.
   * @param warn Told when a damaged file was moved aside.
   * @param roomLeft Whether the relay has room for new content (the store's `roomForContent`):
   *   while it says no, changes are not written (module doc). Default: always room.
   * @throws the file system's errors other than a missing or damaged file.
   */
  static async open(
    path: string,
    clock: () => number = Date.now,
    warn: (line: string) => void = () => {},
    roomLeft: () => Promise<boolean> = () => Promise.resolve(true),
  ): Promise<FailedPublishes> {
    const list = new FailedPublishes(path, clock, roomLeft);
    const text = await readTextIfExists(path);
    if (text !== undefined) {
      try {
        const parsed = JSON.parse(text) as { entries?: unknown };
        if (!Array.isArray(parsed.entries) || !parsed.entries.every(isEntry)) {
          throw new Error("not a list of failed publishes");
        }
        list.#entries = parsed.entries;
      } catch (error) {
        await Deno.rename(path, `${path}.broken`);
        warn(
          `relay: ${path} could not be read (${(error as Error).message}); moved to ${path}.broken`,
        );
      }
    }
    return list;
  }

  /** Every entry, oldest first, without the articles' text. */
  list(): FailedSummary[] {
    return this.#entries.map(({ article, ...rest }) => ({ ...rest, title: article.title }));
  }

  /** The entry `id`, or `undefined`. */
  get(id: string): FailedPublish | undefined {
    return this.#entries.find((e) => e.id === id);
  }

  /**
   * Keeps a publish whose targets in `errors` failed; drops the oldest entries beyond the
   * bounds.
   *
   * @returns The new entry's id.
   * @throws the file system's errors (the entry stays in memory).
   */
  async add(article: FailedArticle, errors: Record<string, string>): Promise<string> {
    const now = new Date(this.#clock()).toISOString();
    const id = newId(this.#clock());
    this.#entries.push({ id, at: now, last_try: now, tries: 1, errors, article });
    let bytes = this.#entries.reduce((n, e) => n + JSON.stringify(e).length, 0);
    while (
      this.#entries.length > MAX_FAILED_ENTRIES ||
      (bytes > MAX_FAILED_BYTES && this.#entries.length > 1)
    ) {
      bytes -= JSON.stringify(this.#entries.shift()).length;
    }
    await this.#save();
    return id;
  }

  /**
   * Records a retry of `id`: its targets now in `errors` still fail; when none does, the
   * entry is removed.
   */
  async settle(id: string, errors: Record<string, string>): Promise<void> {
    const index = this.#entries.findIndex((e) => e.id === id);
    if (index < 0) return;
    const entry = this.#entries[index]!;
    if (Object.keys(errors).length === 0) this.#entries.splice(index, 1);
    else {
      this.#entries[index] = {
        ...entry,
        errors,
        tries: entry.tries + 1,
        last_try: new Date(this.#clock()).toISOString(),
      };
    }
    await this.#save();
  }

  /**
   * Writes the list as it is then, one write at a time, in order; nothing while the relay has
   * no room for new content.
   */
  #save(): Promise<void> {
    const write = this.#writing.catch(() => {}).then(async () => {
      if (!await this.#roomLeft()) return;
      await writeAtomically(this.#path, JSON.stringify({ entries: this.#entries }));
    });
    this.#writing = write;
    return write;
  }
}

function isEntry(value: unknown): value is FailedPublish {
  const e = value as FailedPublish;
  return typeof e === "object" && e !== null && typeof e.id === "string" &&
    typeof e.at === "string" && typeof e.tries === "number" &&
    typeof e.errors === "object" && e.errors !== null &&
    typeof e.article?.title === "string" && typeof e.article?.content === "string";
}

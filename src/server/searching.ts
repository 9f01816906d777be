/**
 * The search index's place in the relay: what it indexes (the results feed, and the built-in
 * notes, posts and episodes), how it stays current, and its file beside the store
 * (`<data>/search.sqlite`). The index itself is `search/search_index.ts`.
 *
 * Staying current costs a request nothing. The results feed is followed by one loop woken by
 * the store's change notification, after each commit that changed the feed: it adds the
 * results pushed since it last looked and drops those that left the feed (evicted past its 50
 * results, or cleared), at most once per {@linkcode FEED_BATCH_MS}, so that many pushes make
 * one batch. The built-in services tell of each note, post or episode added or removed once
 * its files are written.
 *
 * @module
 */

import { join } from "node:path";
import { readArticleResult, readFailureResult } from "../article_result.ts";
import { parseNoteFile } from "../builtin/notes.ts";
import type { BuiltinChange, BuiltinServices } from "../builtin/services.ts";
import { errorMessage } from "../errors.ts";
import type { SearchRequest } from "../search/index_db.ts";
import { SearchIndex, type SearchSources } from "../search/search_index.ts";
import { plainText, type SearchDocument, type SearchHit } from "../search/text.ts";
import {
  nextChange,
  readResults,
  RESULTS_CAPACITY,
  resultsHighWaterMark,
  stateVersion,
  type Store,
} from "../store/store.ts";
import { isId, pathExists, readDirIfExists } from "../util/files.ts";
import { sleep } from "../util/backoff.ts";

/** The index file's name in the data directory. */
export const SEARCH_FILE = "search.sqlite";

/** Least time between two looks at the results feed, ms: pushes in between make one batch. */
export const FEED_BATCH_MS = 50;

/** Characters of a title made from a result's first line at most. */
const TITLE_CHARS = 120;

/** A result of the feed as a document: an article by its title and address, else its text. */
export function resultDocument(t: number, content: string): SearchDocument {
  const article = readArticleResult(content);
  if (article !== undefined) {
    const text = [article.byline, article.siteName, article.summary, article.markdown]
      .filter((part) => part !== undefined && part !== "").join("\n\n");
    return { kind: "result", key: String(t), title: article.title, url: article.url, t, text };
  }
  const failure = readFailureResult(content);
  const self = `/results?since=${t - 1}&limit=1`;
  const firstLine = content.trim().split("\n", 1)[0]!.replace(/^#+\s*/, "").trim();
  return {
    kind: "result",
    key: String(t),
    title: failure ? `Could not read ${failure.url}` : firstLine.slice(0, TITLE_CHARS),
    url: failure?.url ?? self,
    t,
    text: plainText(content),
  };
}

/** The note with id `id` as a document, or `undefined` when there is none. */
async function noteDocument(
  services: BuiltinServices,
  id: string,
): Promise<SearchDocument | undefined> {
  const file = await services.notes.read(id);
  const note = file === undefined ? undefined : parseNoteFile(file);
  if (file === undefined || note === undefined) return undefined;
  const body = file.replace(/^---\n[\s\S]*?\n---\n/, "");
  const t = Date.parse(note.created);
  return {
    kind: "note",
    key: id,
    title: note.title,
    url: `/notes/${id}`,
    t: Number.isFinite(t) ? t : 0,
    text: plainText([note.tags.join(", "), body].join("\n\n")),
  };
}

/** The document of a note, post or episode, or `undefined` when it is gone. */
async function builtinDocument(
  services: BuiltinServices,
  kind: BuiltinChange["kind"],
  id: string,
): Promise<SearchDocument | undefined> {
  if (kind === "note") return await noteDocument(services, id);
  if (kind === "post") {
    const post = await services.blog.get(id);
    if (post === undefined) return undefined;
    const text = plainText(post.content_md ?? post.content);
    return { kind, key: id, title: post.title, url: `/blog/${id}`, t: post.created_at, text };
  }
  const episode = await services.podcast.get(id);
  if (episode === undefined) return undefined;
  return {
    kind,
    key: id,
    title: episode.title,
    url: `/podcast/${id}.txt`,
    t: episode.created_at,
    text: plainText(episode.text),
  };
}

/** The ids of the notes in their folder, from the file names alone. */
async function noteIds(services: BuiltinServices): Promise<string[]> {
  const ids: string[] = [];
  for await (const entry of readDirIfExists(services.notes.dir)) {
    const id = entry.name.slice(0, -3);
    if (entry.isFile && entry.name.endsWith(".md") && isId(id)) ids.push(id);
  }
  return ids.sort();
}

/** The results in the feed now, oldest first. */
async function feed(store: Store): Promise<{ t: number; content: string }[]> {
  return (await readResults(store, { since: 0, limit: RESULTS_CAPACITY })).items;
}

/** The sources of the relay's index: its results feed and, when served, the built-in services. */
export function searchSources(store: Store, services: BuiltinServices | undefined): SearchSources {
  return {
    async fingerprint() {
      const parts = [`results ${(await feed(store)).map((r) => r.t).join(",")}`];
      if (services !== undefined) {
        parts.push(`notes ${(await noteIds(services)).join(",")}`);
        parts.push(`posts ${(await services.blog.list()).map((p) => p.post_id).sort().join(",")}`);
        parts.push(`episodes ${(await services.podcast.list()).map((e) => e.id).sort().join(",")}`);
      }
      const digest = await crypto.subtle.digest(
        "SHA-256",
        new TextEncoder().encode(parts.join("\n")),
      );
      return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
    },
    async *documents() {
      for (const result of await feed(store)) yield resultDocument(result.t, result.content);
      if (services === undefined) return;
      for (const id of await noteIds(services)) {
        const doc = await noteDocument(services, id);
        if (doc !== undefined) yield doc;
      }
      for (const post of await services.blog.list()) {
        const doc = await builtinDocument(services, "post", post.post_id);
        if (doc !== undefined) yield doc;
      }
      for (const episode of await services.podcast.list()) {
        const doc = await builtinDocument(services, "episode", episode.id);
        if (doc !== undefined) yield doc;
      }
    },
  };
}

/** The relay's search: the index and what keeps it current. */
export interface RelaySearch {
  /** The index. */
  readonly index: SearchIndex;
  /**
   * The index's best hits ({@linkcode SearchIndex.search}), less any note whose file is gone:
   * the notes are files a household may delete by hand while the relay runs, which no change
   * reports; such a note is taken out of the index as it is found.
   *
   * @throws {Error} the index's `SearchUnavailableError` while it is checked or rebuilt.
   */
  find(request: SearchRequest): Promise<SearchHit[]>;
  /** Stops following the feed and the services, indexes what changed last, closes the index. */
  close(): Promise<void>;
}

/**
 * Opens the index in `dataDir` over the store and the built-in services, and keeps it
 * current; checking or rebuilding it goes on in the background.
 *
 * @param log Where a rebuild's and a failure's one line goes.
 */
export async function openSearch(
  store: Store,
  services: BuiltinServices | undefined,
  options: { dataDir: string; log: (line: string) => void },
): Promise<RelaySearch> {
  const { log } = options;
  // Everything up to here is in the file already, or the rebuild will read it.
  let seen = await resultsHighWaterMark(store);
  // The feed's version as last indexed (read after the state is loaded, which changes it).
  let synced = stateVersion(store, ["feed"]);
  const index = SearchIndex.open({
    path: join(options.dataDir, SEARCH_FILE),
    sources: searchSources(store, services),
    log,
  });
  const stop = new AbortController();
  // The first look finds nothing to do (the file matches the feed, or is rebuilt from it)
  // and queues nothing, so that an idle relay never starts the index's thread.
  let first = true;
  const syncFeed = async () => {
    if (first) {
      first = false;
      return;
    }
    // Read before the feed is: a change while it is read makes the next look. Recorded only
    // once the feed is indexed, so that a look that failed is made again at the stop.
    const version = stateVersion(store, ["feed"]);
    const oldest = (await readResults(store, { since: 0, limit: 1 })).items[0];
    index.keepFrom("result", oldest?.t ?? null);
    while (true) {
      const page = await readResults(store, { since: seen, limit: RESULTS_CAPACITY });
      for (const result of page.items) index.put(resultDocument(result.t, result.content));
      seen = page.cursor;
      if (page.items.length < RESULTS_CAPACITY) break;
    }
    synced = version;
  };
  const following = (async () => {
    while (!stop.signal.aborted) {
      const changed = nextChange(store, ["feed"], stop.signal);
      await syncFeed().catch((error) => {
        log(`relay: cannot index the results feed: ${errorMessage(error)}`);
      });
      await changed;
      await sleep(FEED_BATCH_MS, stop.signal);
    }
  })();
  // One change at a time, in order: a post's removal never overtaken by its addition.
  let changes = Promise.resolve();
  services?.watch((change) => {
    changes = changes.then(async () => {
      const doc = change.removed
        ? undefined
        : await builtinDocument(services, change.kind, change.id);
      if (doc === undefined) index.remove(change.kind, change.id);
      else index.put(doc);
    }).catch((error) => {
      log(`relay: cannot index ${change.kind} ${change.id}: ${errorMessage(error)}`);
    });
  });
  return {
    index,
    async find(request) {
      const hits = await index.search(request);
      if (services === undefined) return hits;
      const kept: SearchHit[] = [];
      for (const hit of hits) {
        const id = hit.kind === "note" ? hit.url.slice("/notes/".length) : "";
        if (isId(id) && !pathExists(join(services.notes.dir, `${id}.md`))) {
          index.remove("note", id);
          continue;
        }
        kept.push(hit);
      }
      return kept;
    },
    async close() {
      stop.abort();
      await following;
      // The last changes to the feed, if it changed since it was last indexed: a relay that
      // had nothing to index does not start the index's thread just to stop it.
      if (stateVersion(store, ["feed"]) !== synced) await syncFeed().catch(() => {});
      services?.watch(() => {});
      await changes;
      await index.close();
    },
  };
}

/**
 * The search index's thread starts with the first change or query, not at open; a relay
 * stopped before any leaves the file and its marker as they were. A real index file and a
 * real thread.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { SearchIndex, SearchUnavailableError } from "../../src/search/search_index.ts";
import { parseQuery, type SearchDocument } from "../../src/search/text.ts";

function doc(key: string, text: string): SearchDocument {
  return { kind: "note", key, title: key, url: `/notes/${key}`, t: Number(key), text };
}

/** An index over `docs` (the sources as they are now). */
function openIndex(path: string, docs: SearchDocument[], logs: string[]): SearchIndex {
  return SearchIndex.open({
    path,
    log: (line) => logs.push(line),
    sources: {
      fingerprint: () => Promise.resolve(docs.map((d) => d.key).join(",")),
      async *documents() {
        yield* docs;
      },
    },
  });
}

/** The keys found for `text`, asking again while the index is rebuilt. */
async function keys(index: SearchIndex, text: string): Promise<string[]> {
  for (;;) {
    try {
      const hits = await index.search({ query: parseQuery(text)!, limit: 10 });
      return hits.map((hit) => hit.url).sort();
    } catch (error) {
      if (!(error instanceof SearchUnavailableError)) throw error;
      await index.settled();
    }
  }
}

Deno.test("the index's thread and file wait for the first change or query", async () => {
  const dir = await Deno.makeTempDir({ prefix: "relay-search-index-" });
  const path = join(dir, "search.sqlite");
  const logs: string[] = [];
  const docs = [doc("1", "runner beans on canes")];
  try {
    let index = openIndex(path, docs, logs);
    // Opened, nothing asked: no thread, and not even the file yet.
    assert.equal(index.threadRunning, false);
    await assert.rejects(Deno.stat(path), Deno.errors.NotFound);
    assert.deepEqual(await keys(index, "canes"), ["/notes/1"]);
    assert.equal(index.threadRunning, true);

    docs.push(doc("2", "broad beans in pots"));
    index.put(docs[1]!);
    assert.deepEqual(await keys(index, "beans"), ["/notes/1", "/notes/2"]);
    await index.close();
    assert.equal(index.threadRunning, false);
    assert.equal(logs.filter((line) => line.includes("rebuilt")).length, 1);

    // A change made after start, before any query, starts the check: a restart uses the file.
    index = openIndex(path, docs, logs);
    docs[1] = doc("2", "broad beans on the windowsill");
    index.put(docs[1]);
    assert.deepEqual(await keys(index, "windowsill"), ["/notes/2"]);
    assert.equal(logs.filter((line) => line.includes("rebuilt")).length, 1);
    await index.close();
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a relay stopped before any call leaves the index file and its marker as they were", async () => {
  const dir = await Deno.makeTempDir({ prefix: "relay-search-index-" });
  const path = join(dir, "search.sqlite");
  const logs: string[] = [];
  const docs = [doc("1", "garlic planted in autumn")];
  try {
    let index = openIndex(path, docs, logs);
    assert.deepEqual(await keys(index, "garlic"), ["/notes/1"]);
    await index.close();
    // Opened and closed with no call: no thread, and the marker is still the last one.
    index = openIndex(path, docs, logs);
    await index.close();
    index = openIndex(path, docs, logs);
    assert.deepEqual(await keys(index, "autumn"), ["/notes/1"]);
    await index.close();
    assert.equal(logs.filter((line) => line.includes("rebuilt")).length, 1);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

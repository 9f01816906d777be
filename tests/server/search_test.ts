/**
 * `GET /search` on the real app over a real store, real built-in services and a real index
 * file: English, Chinese and Japanese, two-character words, words inside unspaced text, a
 * deleted post, results leaving the feed, a restart, a damaged index, hostile queries.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import fc from "fast-check";
import { createBuiltinServices } from "../../src/builtin/services.ts";
import type { TtsEngine } from "../../src/builtin/tts.ts";
import { createApp } from "../../src/server/app.ts";
import { Logger } from "../../src/server/log.ts";
import { openSearch, SEARCH_FILE } from "../../src/server/searching.ts";
import { writeArticleResult } from "../../src/article_result.ts";
import { clear, push, type Store } from "../../src/store/store.ts";
import { assertProblem, KEY, makeStore } from "../_helpers.ts";

/** An engine that is never asked to speak: the podcast's worker is not started here. */
const SILENT: TtsEngine = {
  name: "silent",
  synthesize: () => Promise.reject(new Error("not in these tests")),
};

interface Hit {
  kind: string;
  title: string;
  url: string;
  snippet: string;
  t: number;
}

/** The app with its search over `store` and the services in `dataDir`. */
async function searching(store: Store, dataDir: string, logs: string[] = []) {
  const services = createBuiltinServices({ dataDir, log: () => {}, engine: SILENT });
  const search = await openSearch(store, services, { dataDir, log: (line) => logs.push(line) });
  const app = createApp({
    store,
    apiKey: KEY,
    logger: new Logger({ write: () => {} }),
    builtin: { services, appId: "app-id-0123456789abcdef", search },
  });
  const get = (query: string) =>
    Promise.resolve(app.request(`/search?${query}`, { headers: { "x-auth-key": KEY } }));
  const hits = async (query: string): Promise<Hit[]> => {
    await search.index.settled();
    const res = await get(query);
    assert.equal(res.status, 200, await res.clone().text());
    return ((await res.json()) as { items: Hit[] }).items;
  };
  return { services, search, app, get, hits };
}

async function withRelay(
  job: (
    relay: Awaited<ReturnType<typeof searching>> & { store: Store; dataDir: string },
  ) => Promise<void>,
): Promise<void> {
  await using base = await makeStore({ systemClock: true });
  const dataDir = await Deno.makeTempDir({ prefix: "relay-search-" });
  const relay = await searching(base.store, dataDir);
  try {
    await job({ ...relay, store: base.store, dataDir });
  } finally {
    await relay.search.close();
    await Deno.remove(dataDir, { recursive: true });
  }
}

const q = (text: string) => `q=${encodeURIComponent(text)}`;

Deno.test("search finds English and Chinese, two-character words and words inside unspaced text", async () => {
  await withRelay(async ({ services, hits }) => {
    await services.blog.publish({
      title: "番茄",
      content: "番茄需要阳光、水和耐心。早上在根部浇水。",
      tags: [],
    });
    await services.notes.save({
      title: "Tomatoes",
      markdown: "Tomatoes need **sun**, water and patience.",
      tags: ["garden"],
    });
    await services.podcast.enqueue("東京の庭", "東京都に住んでいます。毎朝トマトに水をやります。");

    const patience = await hits(q("patience"));
    assert.deepEqual(patience.map((h) => h.kind), ["note"]);
    assert.equal(patience[0]!.title, "Tomatoes");
    assert.match(patience[0]!.snippet, /«patience»/);
    assert.match(patience[0]!.url, /^\/notes\//);

    // Three characters inside unspaced Chinese text, and a two-character word.
    assert.deepEqual((await hits(q("需要阳"))).map((h) => h.kind), ["post"]);
    const tomato = await hits(q("番茄"));
    assert.deepEqual(tomato.map((h) => h.kind), ["post"]);
    assert.match(tomato[0]!.snippet, /«番茄»/);
    assert.deepEqual((await hits(q("阳光"))).map((h) => h.kind), ["post"]);
    // A Japanese two-character word, and a longer one inside the text.
    assert.deepEqual((await hits(q("東京"))).map((h) => h.kind), ["episode"]);
    assert.deepEqual((await hits(q("トマト"))).map((h) => h.kind), ["episode"]);
    // Every word must match; case does not matter; kind narrows.
    assert.deepEqual((await hits(q("TOMATOES sun"))).map((h) => h.kind), ["note"]);
    assert.deepEqual(await hits(q("tomatoes 番茄")), []);
    assert.deepEqual(await hits(`${q("番茄")}&kind=note`), []);
    assert.deepEqual(await hits(q("cucumber")), []);
  });
});

Deno.test("a deleted post and results that left the feed are no longer found", async () => {
  await withRelay(async ({ services, store, hits }) => {
    const post = await services.blog.publish({
      title: "Basil",
      content: "Basil likes warmth",
      tags: [],
    });
    assert.equal((await hits(q("warmth"))).length, 1);
    assert.equal(await services.blog.delete(post.post_id), true);
    assert.deepEqual(await hits(q("warmth")), []);

    const article = writeArticleResult({
      title: "Watering",
      url: "https://example.com/watering",
      markdown: "Water tomatoes at the roots in the morning.",
    });
    const pushed = await push(store, article);
    const found = await (async () => {
      for (let i = 0; i < 100; i++) {
        const items = await hits(q("roots"));
        if (items.length > 0) return items;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      return [];
    })();
    assert.deepEqual(found.map(({ kind, title, url, t }) => ({ kind, title, url, t })), [
      { kind: "result", title: "Watering", url: "https://example.com/watering", t: pushed.t },
    ]);
    await clear(store);
    for (let i = 0; i < 100 && (await hits(q("roots"))).length > 0; i++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.deepEqual(await hits(q("roots")), []);
  });
});

Deno.test("search needs a read key, a query, a known kind and a sane limit", async () => {
  await withRelay(async ({ app, get, search }) => {
    await search.index.settled();
    const anonymous = await app.request("/search?q=tomato");
    await assertProblem(anonymous, 401);
    assert.match(await assertProblem(await get(""), 400), /"q"/);
    assert.match(await assertProblem(await get("q=%20%20"), 400), /empty/);
    assert.match(await assertProblem(await get("q=x&kind=book"), 400), /kind/);
    assert.match(await assertProblem(await get("q=x&limit=0"), 400), /limit/);
    assert.match(await assertProblem(await get(q("x".repeat(1001))), 400), /1000/);
    assert.equal((await get("q=x&limit=999")).status, 200);
  });
});

Deno.test("hostile queries are text: operators, quotes, stars and NUL never reach SQLite as syntax", async () => {
  await withRelay(async ({ services, get, hits }) => {
    await services.notes.save({
      title: "AND OR NOT",
      markdown: 'He said "NEAR" twice * ^',
      tags: [],
    });
    // Operator words are looked for as words.
    assert.deepEqual((await hits(q("NEAR"))).map((h) => h.kind), ["note"]);
    assert.deepEqual((await hits(q('"NEAR" AND twice*'))).map((h) => h.kind), ["note"]);
    for (
      const hostile of [
        '"',
        "*",
        "NEAR(",
        "a\u0000b",
        "title:x",
        "^",
        "'; DROP TABLE docs; --",
        "((",
      ]
    ) {
      const res = await get(q(hostile));
      assert.equal(res.status, 200, `${hostile}: ${await res.clone().text()}`);
    }
    await fc.assert(
      fc.asyncProperty(fc.string({ unit: "binary", maxLength: 200 }), async (text) => {
        const res = await get(q(text));
        const body = await res.text();
        assert.ok(
          res.status === 200 || res.status === 400,
          `${res.status} for ${JSON.stringify(text)}: ${body}`,
        );
      }),
      { numRuns: 300 },
    );
    // The index still answers after them.
    assert.deepEqual((await hits(q("twice"))).map((h) => h.kind), ["note"]);
  });
});

Deno.test("a restart uses the index as it is; a changed, missing or damaged index is rebuilt, answering 503 meanwhile", async () => {
  await using base = await makeStore({ systemClock: true });
  const dataDir = await Deno.makeTempDir({ prefix: "relay-search-" });
  try {
    const logs: string[] = [];
    let relay = await searching(base.store, dataDir, logs);
    await relay.services.blog.publish({ title: "Peas", content: "Peas climb the fence", tags: [] });
    assert.equal((await relay.hits(q("fence"))).length, 1);
    await relay.search.close();
    // Like every file of the relay's, owner-only.
    assert.equal((await Deno.stat(join(dataDir, SEARCH_FILE))).mode! & 0o777, 0o600);

    // Restart: the marker matches, so nothing is rebuilt.
    logs.length = 0;
    relay = await searching(base.store, dataDir, logs);
    assert.equal((await relay.hits(q("fence"))).length, 1);
    assert.deepEqual(logs.filter((line) => line.includes("rebuilt")), []);
    await relay.search.close();

    // A post added while the relay was stopped changes the fingerprint: rebuilt.
    const offline = createBuiltinServices({ dataDir, log: () => {}, engine: SILENT });
    await offline.blog.publish({ title: "Beans", content: "Beans climb poles", tags: [] });
    relay = await searching(base.store, dataDir, logs);
    assert.equal((await relay.hits(q("poles"))).length, 1);
    assert.equal(logs.filter((line) => line.includes("rebuilt: 2 documents")).length, 1);
    await relay.search.close();

    // Garbage over the file: found damaged, rebuilt; until then 503 with Retry-After.
    const file = join(dataDir, SEARCH_FILE);
    const bytes = await Deno.readFile(file);
    await Deno.writeFile(file, bytes.map((_, i) => (i * 7919) % 251));
    logs.length = 0;
    relay = await searching(base.store, dataDir, logs);
    const early = await relay.get(q("fence"));
    if (early.status === 503) assert.ok(Number(early.headers.get("retry-after")) > 0);
    else assert.equal(early.status, 200);
    await early.body?.cancel();
    assert.equal((await relay.hits(q("fence"))).length, 1);
    assert.equal((await relay.hits(q("poles"))).length, 1);
    assert.equal(logs.filter((line) => line.includes("rebuilt: 2 documents")).length, 1);
    await relay.search.close();

    // A missing file is rebuilt.
    relay = await searching(base.store, dataDir, logs);
    await relay.search.index.settled();
    await relay.services.notes.save({
      title: "Crash",
      markdown: "written before a crash",
      tags: [],
    });
    await relay.hits(q("crash"));
    await relay.search.close();
    await Deno.remove(file);
    logs.length = 0;
    relay = await searching(base.store, dataDir, logs);
    assert.equal((await relay.hits(q("crash"))).length, 1);
    assert.equal(logs.filter((line) => line.includes("rebuilt: 3 documents")).length, 1);
    await relay.search.close();
  } finally {
    await Deno.remove(dataDir, { recursive: true });
  }
});

Deno.test("while the index is rebuilt, search answers 503 with Retry-After, never a partial answer", async () => {
  await using base = await makeStore({ systemClock: true });
  const dataDir = await Deno.makeTempDir({ prefix: "relay-search-" });
  try {
    for (let i = 0; i < 30; i++) await push(base.store, `result number ${i} about carrots`);
    const relay = await searching(base.store, dataDir);
    const res = await relay.get(q("carrots"));
    // The index was missing: until its rebuild is over, no answer is given.
    if (res.status === 200) {
      assert.equal(((await res.json()) as { items: Hit[] }).items.length, 20);
    } else {
      await assertProblem(res, 503);
      assert.ok(Number(res.headers.get("retry-after")) >= 1);
    }
    assert.equal((await relay.hits(`${q("carrots")}&limit=50`)).length, 30);
    await relay.search.close();
  } finally {
    await Deno.remove(dataDir, { recursive: true });
  }
});

Deno.test("a note whose file was deleted by hand is no longer found after the next start", async () => {
  await using base = await makeStore({ systemClock: true });
  const dataDir = await Deno.makeTempDir({ prefix: "relay-search-" });
  try {
    let relay = await searching(base.store, dataDir);
    await relay.services.notes.save({ title: "Kept", markdown: "kale", tags: [] });
    const gone = await relay.services.notes.save({ title: "Gone", markdown: "kale", tags: [] });
    assert.equal((await relay.hits(q("kale"))).length, 2);
    await relay.search.close();
    // The household tidies the notes folder with a file manager while the relay is stopped.
    await Deno.remove(join(relay.services.notes.dir, `${gone.doc_id}.md`));
    relay = await searching(base.store, dataDir);
    const hits = await relay.hits(q("kale"));
    assert.deepEqual(hits.map((hit) => hit.title), ["Kept"]);
    await relay.search.close();
  } finally {
    await Deno.remove(dataDir, { recursive: true });
  }
});

Deno.test("a note whose file is deleted by hand while the relay runs is not found, and leaves the index", async () => {
  await withRelay(async (relay) => {
    const note = await relay.services.notes.save({ title: "Chard", markdown: "chard", tags: [] });
    assert.equal((await relay.hits(q("chard"))).length, 1);
    await Deno.remove(join(relay.services.notes.dir, `${note.doc_id}.md`));
    assert.deepEqual(await relay.hits(q("chard")), []);
    // Taken out of the index too: its count of notes is down to none.
    await relay.search.index.settled();
    assert.equal((await relay.search.index.counts()).note ?? 0, 0);
  });
});

Deno.test("a relay that had nothing to index stops without starting the index's thread or writing its file", async () => {
  await using base = await makeStore({ systemClock: true });
  const dataDir = await Deno.makeTempDir({ prefix: "relay-search-" });
  try {
    const services = createBuiltinServices({ dataDir, log: () => {}, engine: SILENT });
    const search = await openSearch(base.store, services, { dataDir, log: () => {} });
    await search.close();
    // The thread is what opens the file: no file, no thread.
    await assert.rejects(Deno.stat(join(dataDir, SEARCH_FILE)), Deno.errors.NotFound);
    // A feed changed after start is still indexed at close.
    const again = await openSearch(base.store, services, { dataDir, log: () => {} });
    await push(base.store, "# Late\n\nPushed just before the relay stopped");
    await again.close();
    const last = await searching(base.store, dataDir);
    try {
      assert.deepEqual((await last.hits(q("stopped"))).map((hit) => hit.title), ["Late"]);
    } finally {
      await last.search.close();
    }
  } finally {
    await Deno.remove(dataDir, { recursive: true });
  }
});

import assert from "node:assert/strict";
import { clear, createStore, submit } from "../../src/store/store.ts";
import { batchHashes } from "../../src/store/_duplicates.ts";
import { acceptedPrefix, submissionsPrefix } from "../../src/store/kv_keys.ts";
import { makeStore } from "../_helpers.ts";

// Duplicate records past the in-memory bound are looked up in KV: the window stays exact
// (src/store/_duplicates.ts).

/** The SHA-256 of `content`'s UTF-8 bytes, lowercase hex (WebCrypto's, not the store's). */
async function sha256(content: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(content));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

const contents = Array.from({ length: 12 }, (_, i) => `https://example.com/${i}`);

Deno.test("submit() with more records than memory keeps: every one is still a duplicate inside the window, none after", async () => {
  await using t = await makeStore({ dedupeWindowMs: 10_000, seenInMemory: 3 });
  for (const c of contents) {
    assert.equal((await submit(t.store, c, "general")).accepted, true);
    t.clock.advance(100);
  }
  // The first content was accepted 1,200 ms ago, long dropped from memory.
  for (const c of contents) {
    assert.equal((await submit(t.store, c, "general")).accepted, false, c);
  }
  t.clock.advance(10_000 - 1_200 - 1); // 1 ms before the first one's window ends
  assert.equal((await submit(t.store, contents[0]!, "general")).accepted, false);
  t.clock.advance(1);
  assert.equal((await submit(t.store, contents[0]!, "general")).accepted, true);
  assert.equal((await submit(t.store, contents[1]!, "general")).accepted, false);
});

Deno.test("submit() of concurrent contents past the memory bound decides each exactly once", async () => {
  await using t = await makeStore({ seenInMemory: 2 });
  for (const c of contents) await submit(t.store, c, "qa");
  const outcomes = await Promise.all(
    [...contents, "new 1", "new 1", "new 2"].map((c) => submit(t.store, c, "qa")),
  );
  assert.deepEqual(
    outcomes.map((o) => o.accepted),
    [...contents.map(() => false), true, false, true],
  );
});

Deno.test("a store opened on more records than memory keeps still refuses every duplicate", async () => {
  await using t = await makeStore();
  for (const c of contents) await submit(t.store, c, "article");
  const reopened = createStore(t.temp.kv, { clock: t.clock.read, seenInMemory: 4 });
  for (const c of contents) {
    assert.equal((await submit(reopened, c, "article")).accepted, false, c);
  }
  assert.equal((await submit(reopened, "fresh", "article")).accepted, true);
});

Deno.test("clear() forgets the records left in KV too", async () => {
  await using t = await makeStore({ seenInMemory: 2 });
  for (const c of contents) await submit(t.store, c, "general");
  await clear(t.store);
  for (const c of contents) {
    assert.equal((await submit(t.store, c, "general")).accepted, true, c);
  }
});

/** The hashes of the duplicate records KV holds, of both kinds (`_duplicates.ts`). */
async function hashesInKv(kv: Deno.Kv): Promise<string[]> {
  const hashes: string[] = [];
  for await (const e of kv.list<Uint8Array>({ prefix: acceptedPrefix() })) {
    hashes.push(...batchHashes(e.value));
  }
  for await (const e of kv.list({ prefix: submissionsPrefix() })) hashes.push(String(e.key[1]));
  return hashes;
}

/** How many duplicate records KV holds. */
async function recordsInKv(kv: Deno.Kv): Promise<number> {
  return (await hashesInKv(kv)).length;
}

Deno.test("the relay deletes duplicate records once their window has passed, in its own commits", async () => {
  await using t = await makeStore({ dedupeWindowMs: 10_000 });
  for (const c of contents) await submit(t.store, c, "general");
  assert.equal(await recordsInKv(t.temp.kv), contents.length);
  t.clock.advance(10_000);
  // The next write's commit deletes the expired records; KV's own expiry is not waited for.
  await submit(t.store, "a later link", "qa");
  assert.equal(await recordsInKv(t.temp.kv), 1);
  // Each deleted record's content is accepted again, and recorded again.
  for (const c of contents) assert.equal((await submit(t.store, c, "general")).accepted, true);
  assert.equal(await recordsInKv(t.temp.kv), contents.length + 1);
});

Deno.test("records past their window found when the store is opened are deleted by its next commit", async () => {
  await using t = await makeStore({ dedupeWindowMs: 10_000 });
  for (const c of contents) await submit(t.store, c, "general");
  t.clock.advance(10_000);
  const reopened = createStore(t.temp.kv, { clock: t.clock.read, dedupeWindowMs: 10_000 });
  assert.equal((await submit(reopened, contents[0]!, "general")).accepted, true);
  // The one just accepted is the only record left.
  assert.equal(await recordsInKv(t.temp.kv), 1);
});

Deno.test("a duplicate record is keyed by the SHA-256 of the content's UTF-8 bytes, for one part and for several", async () => {
  await using t = await makeStore();
  // Short ASCII, non-ASCII, and 140,000 bytes of "é" (three parts of at most 60,000 bytes).
  const samples = ["https://example.com/a", "日本語のメモ 🚀", "é".repeat(70_000)];
  for (const c of samples) assert.equal((await submit(t.store, c, "general")).accepted, true);
  const keys = await hashesInKv(t.temp.kv);
  assert.deepEqual(keys.sort(), (await Promise.all(samples.map(sha256))).sort());
  // The records written so keep deciding: each content is a duplicate now.
  for (const c of samples) assert.equal((await submit(t.store, c, "qa")).accepted, false);
});

Deno.test("one commit of many submits writes one duplicate entry for all of them, which decides after a restart", async () => {
  await using t = await makeStore({ dedupeWindowMs: 10_000 });
  const many = Array.from({ length: 40 }, (_, i) => `https://example.com/many/${i}`);
  await submit(t.store, "first, alone", "qa");
  // Forty submits waiting while the first commit ran: applied and committed together.
  const outcomes = await Promise.all(many.map((c) => submit(t.store, c, "general")));
  assert.ok(outcomes.every((o) => o.accepted));
  const entries: Deno.KvKey[] = [];
  for await (const e of t.temp.kv.list({ prefix: acceptedPrefix() })) entries.push(e.key);
  assert.ok(entries.length <= 3, `${entries.length} entries for 41 contents`);
  let single = 0;
  for await (const _ of t.temp.kv.list({ prefix: submissionsPrefix() })) single++;
  assert.equal(single, 0);
  assert.equal(await recordsInKv(t.temp.kv), 41);
  const reopened = createStore(t.temp.kv, { clock: t.clock.read, dedupeWindowMs: 10_000 });
  for (const c of many) assert.equal((await submit(reopened, c, "qa")).accepted, false, c);
  t.clock.advance(10_000);
  for (const c of many) assert.equal((await submit(reopened, c, "qa")).accepted, true, c);
});

Deno.test("records of one content each, as a file written before the per-commit entries holds, still decide", async () => {
  await using t = await makeStore({ dedupeWindowMs: 10_000 });
  // Written as the older versions wrote every record, 2 s and 12 s ago.
  const now = t.clock.read();
  await t.temp.kv.set(["submissions", await sha256("recent")], { last_seen_at: now - 2_000 });
  await t.temp.kv.set(["submissions", await sha256("old")], { last_seen_at: now - 12_000 });
  for (const memory of [100, 1]) {
    const store = createStore(t.temp.kv, {
      clock: t.clock.read,
      dedupeWindowMs: 10_000,
      seenInMemory: memory,
    });
    assert.equal((await submit(store, "recent", "qa")).accepted, false, `memory ${memory}`);
  }
  const store = createStore(t.temp.kv, { clock: t.clock.read, dedupeWindowMs: 10_000 });
  assert.equal((await submit(store, "old", "qa")).accepted, true);
  // That commit deleted the record past its window; the one in force stays.
  const left: string[] = [];
  for await (const e of t.temp.kv.list({ prefix: submissionsPrefix() })) {
    left.push(String(e.key[1]));
  }
  assert.deepEqual(left, [await sha256("recent")]);
  t.clock.advance(8_000);
  assert.equal((await submit(store, "recent", "qa")).accepted, true);
});

Deno.test("a record found past its window at start and written again while memory is full is not deleted as expired", async () => {
  await using t = await makeStore();
  const now = t.clock.read();
  // 300 records of one content each past their window, and 300 in force: memory (300) is
  // full once they are loaded.
  const old = Array.from({ length: 300 }, (_, i) => `old content ${i}`);
  const hashes = await Promise.all(old.map(sha256));
  let op = t.temp.kv.atomic();
  for (const h of hashes) op = op.set(["submissions", h], { last_seen_at: now - 20_000 });
  await op.commit();
  op = t.temp.kv.atomic();
  for (let i = 0; i < 300; i++) {
    op = op.set(["submissions", await sha256(`recent ${i}`)], { last_seen_at: now - 1_000 });
  }
  await op.commit();
  // The content listed first: the last of the expired ones to be deleted, 256 a commit.
  const x = old[hashes.indexOf([...hashes].sort()[0]!)]!;
  const store = createStore(t.temp.kv, {
    clock: t.clock.read,
    dedupeWindowMs: 10_000,
    seenInMemory: 300,
  });
  assert.equal((await submit(store, x, "qa")).accepted, true, "past its window");
  t.clock.advance(100);
  assert.equal((await submit(store, "another", "qa")).accepted, true);
  t.clock.advance(100);
  assert.equal((await submit(store, x, "qa")).accepted, false, "accepted 200 ms ago");
});

Deno.test("records of one content each are deleted by the relay's commits once their window has passed", async () => {
  await using t = await makeStore({ dedupeWindowMs: 10_000, seenInMemory: 3 });
  // One in force when the store starts, as an older version wrote it ...
  await t.temp.kv.set(["submissions", await sha256("older")], { last_seen_at: t.clock.read() });
  // ... and two written because memory (3: "older", "a", "b") is full.
  for (const c of ["a", "b", "c", "d"]) await submit(t.store, c, "qa");
  let single = 0;
  for await (const _ of t.temp.kv.list({ prefix: submissionsPrefix() })) single++;
  assert.equal(single, 3, "records of one content");
  t.clock.advance(10_000);
  await submit(t.store, "a later one", "general");
  const left: string[] = [];
  for await (const e of t.temp.kv.list({ prefix: submissionsPrefix() })) {
    left.push(String(e.key[1]));
  }
  assert.deepEqual(left, []);
});

import assert from "node:assert/strict";
import { makeApp, type TestApp } from "../_helpers.ts";
import { AnswerCache, answerOf, MAX_CACHED_BODY_BYTES } from "../../src/server/cache.ts";

// The answers of GET /peek and GET /results are kept per state version (src/server/cache.ts):
// these tests check that whatever changes the answer is seen at once.

function submit(t: TestApp, content: string, queue = "general") {
  return t.call(`/submit?queue=${queue}`, { method: "POST", body: content });
}

async function peekJson(t: TestApp, query = ""): Promise<Record<string, unknown> | null> {
  const res = await t.call(`/peek${query}`);
  return res.status === 204 ? null : await res.json();
}

Deno.test("GET /peek answers the same bytes again until a commit changes a queue", async () => {
  await using t = await makeApp();
  assert.equal(await peekJson(t), null);
  await submit(t, "one");
  const first = await (await t.call("/peek")).text();
  assert.equal(await (await t.call("/peek")).text(), first);
  await submit(t, "two", "qa");
  const second = await peekJson(t);
  assert.equal(second?.total, 2);
  await t.call("/pull?queue=qa");
  assert.equal((await peekJson(t))?.total, 1);
  await t.call("/clear", { method: "POST" });
  assert.equal(await peekJson(t), null);
});

Deno.test("GET /peek shows a lease until it ends, with no commit in between", async () => {
  await using t = await makeApp();
  await submit(t, "held");
  await t.call("/pull?queue=general&lease=60");
  const until = t.clock.now + 60_000;
  const general = async () => ((await peekJson(t))?.queues as Record<string, unknown[]>).general;
  assert.deepEqual((await general())?.[0], {
    content: "held",
    queue_type: "general",
    created_at: "2026-01-01 00:00:00",
    lease_until: until,
  });
  t.clock.advance(59_999);
  assert.equal(((await general())?.[0] as { lease_until?: number }).lease_until, until);
  t.clock.advance(1);
  assert.deepEqual((await general())?.[0], {
    content: "held",
    queue_type: "general",
    created_at: "2026-01-01 00:00:00",
  });
});

Deno.test("GET /peek keeps answers per query, and a bad query is still refused", async () => {
  await using t = await makeApp();
  await submit(t, "a", "qa");
  await submit(t, "b", "article");
  assert.deepEqual(Object.keys((await peekJson(t, "?queue=qa"))?.queues ?? {}), ["qa"]);
  assert.deepEqual(Object.keys((await peekJson(t))?.queues ?? {}), ["qa", "article", "general"]);
  assert.deepEqual(Object.keys((await peekJson(t, "?queue=qa"))?.queues ?? {}), ["qa"]);
  for (let i = 0; i < 3; i++) assert.equal((await t.call("/peek?queue=nope")).status, 400);
});

Deno.test("GET /peek formats created_at of items queued in different seconds", async () => {
  await using t = await makeApp();
  await submit(t, "first");
  t.clock.advance(1_500);
  await submit(t, "second");
  t.clock.advance(86_400_000);
  await submit(t, "third");
  const items = ((await peekJson(t))?.queues as Record<string, Array<{ created_at: string }>>)
    .general;
  assert.deepEqual(items?.map((i) => i.created_at), [
    "2026-01-01 00:00:00",
    "2026-01-01 00:00:01",
    "2026-01-02 00:00:01",
  ]);
});

Deno.test("GET /results sees every push, per cursor, and waits are not answered from the cache", async () => {
  await using t = await makeApp();
  const read = async (query: string) => await (await t.call(`/results${query}`)).json();
  assert.deepEqual((await read("?since=0")).items, []);
  await t.call("/push", { method: "POST", body: "r1" });
  const t1 = t.clock.now;
  assert.deepEqual((await read("?since=0")).items, [{ t: t1, c: "r1" }]);
  assert.deepEqual((await read(`?since=${t1}`)).items, []);
  t.clock.advance(5);
  await t.call("/push", { method: "POST", body: "r2" });
  assert.deepEqual((await read(`?since=${t1}`)).items, [{ t: t1 + 5, c: "r2" }]);
  assert.equal((await read("?since=0")).items.length, 2);
  // A long-poll registered before the push gets it.
  const waiting = read(`?since=${t1 + 5}&wait=30`);
  await t.call("/push", { method: "POST", body: "r3" });
  assert.deepEqual((await waiting).items.map((i: { c: string }) => i.c), ["r3"]);
  await t.call("/clear", { method: "POST" });
  assert.deepEqual((await read("?since=0")).items, []);
});

Deno.test("AnswerCache keeps small answers by key and version, and no answer over its size limit", () => {
  const cache = new AnswerCache(2);
  cache.set("?a", answerOf({ x: 1 }, 1, Infinity));
  assert.equal(cache.get("?a", 1, 0)?.version, 1);
  assert.equal(cache.get("?a", 2, 0), undefined, "another version misses");
  assert.equal(cache.get("?b", 1, 0), undefined);
  cache.set("?lease", answerOf({ x: 2 }, 1, 1000));
  assert.notEqual(cache.get("?lease", 1, 999), undefined);
  assert.equal(cache.get("?lease", 1, 1000), undefined, "expired at its until");
  const big = "x".repeat(MAX_CACHED_BODY_BYTES);
  cache.set("?big", answerOf(big, 1, Infinity));
  assert.equal(cache.get("?big", 1, 0), undefined, "a body over the limit is not kept");
  cache.set("?c", answerOf(null, 1, Infinity));
  cache.set("?d", answerOf(undefined, 1, Infinity));
  assert.equal(cache.get("?d", 1, 0)?.body, null, "a 204 answer");
});

Deno.test("GET /peek of items too large to keep is still right after a change", async () => {
  await using t = await makeApp();
  const large = "y".repeat(200_000);
  await submit(t, `${large}1`);
  await submit(t, `${large}2`);
  assert.equal((await peekJson(t))?.total, 2);
  await t.call("/pull?queue=general");
  await submit(t, `${large}3`);
  const items = ((await peekJson(t))?.queues as Record<string, Array<{ content: string }>>)
    .general;
  assert.deepEqual(items?.map((i) => i.content.slice(-1)), ["3"]);
});

/**
 * Instant delivery, in process: long-poll of `/pull` and `/results` (`wait=`),
 * and the SSE stream `/results/stream`. Real app, real KV on a temp file.
 */

import assert from "node:assert/strict";
import { longPoll } from "../../src/server/live.ts";
import { assertProblem, KEY, makeApp, makeStore, SseReader, type TestApp } from "../_helpers.ts";

function submit(t: TestApp, text: string, queue = "general") {
  return t.call(`/submit?queue=${queue}`, { method: "POST", body: text });
}

function push(t: TestApp, text: string) {
  return t.call("/push", { method: "POST", body: text });
}

/** Waits `ms` of real time. */
const pause = (ms: number) => new Promise((done) => setTimeout(done, ms));

Deno.test("GET /pull?wait= answers as soon as a submit lands, long before its timeout", async () => {
  await using t = await makeApp();
  const started = performance.now();
  const waiting = t.call("/pull?queue=qa&wait=30");
  await pause(50);
  assert.equal((await submit(t, "https://stackoverflow.com/q/1", "qa")).status, 200);
  const res = await waiting;
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), ["https://stackoverflow.com/q/1"]);
  assert.ok(performance.now() - started < 15_000, "woken by the submit, not by the timeout");
});

Deno.test("GET /pull?wait= without a queue wakes for any queue and keeps the order of the queues", async () => {
  await using t = await makeApp();
  const waiting = t.call("/pull?wait=30");
  await pause(20);
  await submit(t, "for the article queue", "article");
  assert.deepEqual(await (await waiting).json(), ["for the article queue"]);
});

Deno.test("GET /pull?wait= gives the usual 204 when the time is up; a submit to another queue does not answer it", async () => {
  await using t = await makeApp();
  const started = performance.now();
  const waiting = t.call("/pull?queue=qa&wait=1");
  await submit(t, "plain words, general queue");
  const res = await waiting;
  assert.equal(res.status, 204);
  assert.equal(await res.text(), "");
  assert.ok(performance.now() - started >= 950, "it waited its second");
  // The other queue's item is untouched.
  assert.deepEqual(await (await t.call("/pull?queue=general")).json(), [
    "plain words, general queue",
  ]);
});

Deno.test("GET /pull?wait= two waiting pulls, one submit: exactly one gets the item", async () => {
  await using t = await makeApp();
  const a = t.call("/pull?queue=general&wait=1");
  const b = t.call("/pull?queue=general&wait=1");
  await pause(20);
  await submit(t, "only one");
  const answers = await Promise.all([a, b]);
  const bodies = await Promise.all(answers.map((r) => r.text()));
  assert.deepEqual(answers.map((r) => r.status).sort(), [200, 204]);
  assert.deepEqual(bodies.sort(), ["", '["only one"]']);
});

Deno.test("longPoll() never tries again for a client that has gone (a pull would take its items)", async () => {
  await using t = await makeStore();
  const leaving = new AbortController();
  let attempts = 0;
  const polling = longPoll(
    t.store,
    { collections: ["general"], waitMs: 30_000, signal: leaving.signal },
    () => Promise.resolve(void attempts++),
  );
  await pause(20);
  assert.equal(attempts, 1);
  leaving.abort();
  assert.equal(await polling, undefined);
  assert.equal(attempts, 1, "no attempt after the client left");
});

Deno.test("GET /pull?lease=&wait= wakes when a lease ends and hands the item out again", async () => {
  await using t = await makeApp({ systemClock: true });
  await submit(t, "slow work");
  const first = await (await t.call("/pull?queue=general&lease=1")).json();
  assert.equal(first.length, 1);
  const started = performance.now();
  // No commit happens when a lease ends: the waiting pull wakes by itself.
  const again = await (await t.call("/pull?queue=general&lease=30&wait=20")).json();
  assert.ok(performance.now() - started < 15_000, "woken by the lease's end, not the timeout");
  assert.equal(again.length, 1);
  assert.equal(again[0].id, first[0].id);
  assert.equal(again[0].content, "slow work");
  assert.ok(again[0].lease_until > first[0].lease_until);
});

Deno.test("GET /results?wait= answers as soon as a push lands", async () => {
  await using t = await makeApp();
  const r0 = await push(t, "before");
  assert.equal(r0.status, 200);
  const page0 = await (await t.call("/results")).json();
  const started = performance.now();
  const waiting = t.call(`/results?since=${page0.cursor}&wait=30`);
  await pause(50);
  await push(t, "after");
  const page = await (await waiting).json();
  assert.deepEqual(page.items.map((i: { c: string }) => i.c), ["after"]);
  assert.equal(page.cursor, page.items[0].t);
  assert.ok(performance.now() - started < 15_000, "woken by the push, not by the timeout");
});

Deno.test("GET /results?wait= returns at once when something is newer, and an empty page on timeout", async () => {
  await using t = await makeApp();
  await push(t, "already there");
  const now = await (await t.call("/results?since=0&wait=30")).json();
  assert.equal(now.items.length, 1);
  const later = await (await t.call(`/results?since=${now.cursor}&wait=1`)).json();
  assert.deepEqual(later, { cursor: now.cursor, items: [] });
});

Deno.test("wait, lease and limit are validated: 400 problem documents", async () => {
  await using t = await makeApp();
  for (
    const path of [
      "/pull?wait=61",
      "/pull?wait=-1",
      "/pull?wait=1.5",
      "/pull?lease=0",
      "/pull?lease=43201",
      "/pull?lease=x",
      "/pull?limit=0",
      "/pull?lease=10&limit=0",
      "/pull?lease=10&limit=51",
      "/results?wait=61",
      "/results?wait=soon",
      "/results/stream?since=-1",
    ]
  ) {
    const detail = await assertProblem(await t.call(path), 400);
    assert.match(detail, /wait|lease|limit|since/, path);
  }
  await assertProblem(
    await t.call("/results/stream", { headers: { "last-event-id": "abc" } }),
    400,
  );
});

/** Opens the results stream in process; `cancel()` disconnects like a closed tab. */
function openStream(t: TestApp, query = "", headers: Record<string, string> = {}) {
  const controller = new AbortController();
  const response = t.app.request(`/results/stream${query}`, {
    headers: { "x-auth-key": KEY, ...headers },
    signal: controller.signal,
  });
  return { response: Promise.resolve(response), cancel: () => controller.abort() };
}

/** Waits until `check` holds, polling every 10 ms, at most 10 s. */
async function until(check: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 1000; i++) {
    if (check()) return;
    await pause(10);
  }
  assert.fail(`timed out waiting for ${what}`);
}

Deno.test("GET /results/stream sends the feed from ?since=, then each push live, with id = t", async () => {
  await using t = await makeApp();
  const first = await (await push(t, "one"), t.call("/results")).then((r) => r.json());
  await push(t, "two");
  const stream = openStream(t, `?since=${first.cursor}`);
  const res = await stream.response;
  assert.equal(res.status, 200);
  assert.equal(res.headers.get("content-type"), "text/event-stream");
  const reader = new SseReader(res.body!);
  await until(() => reader.events.length === 1, "the missed result");
  assert.equal(reader.events[0]!.data, "two");
  await push(t, "three\nwith a second line");
  await until(() => reader.events.length === 2, "the live result");
  const page = await (await t.call("/results")).json();
  assert.deepEqual(
    reader.events.map((e) => [e.event, e.id, e.data]),
    page.items.slice(1).map((i: { t: number; c: string }) => ["message", String(i.t), i.c]),
  );
  stream.cancel();
  await reader.done;
});

Deno.test("GET /results/stream resumes after Last-Event-ID with exactly what was missed", async () => {
  await using t = await makeApp();
  for (const c of ["a", "b", "c", "d"]) await push(t, c);
  const page = await (await t.call("/results")).json();
  const seen = page.items[1].t; // the client had "a" and "b"
  // Last-Event-ID wins over since: a reconnecting EventSource keeps its original URL.
  const stream = openStream(t, "?since=0", { "last-event-id": String(seen) });
  const reader = new SseReader((await stream.response).body!);
  await until(() => reader.events.length === 2, "c and d");
  await pause(50);
  assert.deepEqual(reader.events.map((e) => e.data), ["c", "d"]);
  assert.equal(reader.events.at(-1)!.id, String(page.cursor));
  stream.cancel();
  await reader.done;
});

Deno.test("GET /results/stream sends keep-alive comments while idle", async () => {
  await using t = await makeApp({ keepAliveMs: 50 });
  const stream = openStream(t);
  const reader = new SseReader((await stream.response).body!);
  await until(() => reader.comments.filter((c) => c === "keep-alive").length >= 2, "keep-alives");
  assert.equal(reader.events.length, 0);
  stream.cancel();
  await reader.done;
});

Deno.test("GET /results/stream signals a gap when results after the cursor were evicted", async () => {
  await using t = await makeApp();
  for (let i = 0; i < 55; i++) await push(t, `r${i}`);
  const stream = openStream(t, "?since=1");
  const reader = new SseReader((await stream.response).body!);
  await until(() => reader.events.length === 51, "the gap and the 50 kept results");
  assert.deepEqual(reader.events[0], { event: "gap", data: "1", id: undefined });
  assert.equal(reader.events[1]!.data, "r5");
  assert.equal(reader.events[50]!.data, "r54");
  stream.cancel();
  await reader.done;
  // A new reader (no cursor) missed nothing: no gap event, like /results without since.
  const fresh = openStream(t);
  const freshReader = new SseReader((await fresh.response).body!);
  await until(() => freshReader.events.length === 50, "the 50 kept results");
  assert.equal(freshReader.events[0]!.data, "r5");
  fresh.cancel();
  await freshReader.done;
});

Deno.test("GET /results/stream ends when the relay is closing", async () => {
  const closing = new AbortController();
  await using t = await makeApp({ closing: closing.signal });
  const stream = openStream(t);
  const reader = new SseReader((await stream.response).body!);
  const waiting = t.call("/pull?wait=30");
  await pause(50);
  closing.abort();
  await reader.done; // the stream ended by itself
  assert.equal((await waiting).status, 204);
});

Deno.test("GET /results/stream needs the key (?key= works for EventSource)", async () => {
  await using t = await makeApp();
  await assertProblem(await t.app.request("/results/stream"), 401);
  await t.call("/results"); // loads the store, so the stream's first read is from memory
  const controller = new AbortController();
  const res = await t.app.request(`/results/stream?key=${KEY}`, { signal: controller.signal });
  assert.equal(res.status, 200);
  const reader = new SseReader(res.body!);
  await until(() => reader.comments.length > 0, "the stream's first comment");
  controller.abort();
  await reader.done;
});

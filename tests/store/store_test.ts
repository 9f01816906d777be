import assert from "node:assert/strict";
import {
  ack,
  clear,
  createStore,
  health,
  lease,
  nextChange,
  nextLeaseEnd,
  peek,
  pull,
  pullFirst,
  push,
  QUEUE_CAPACITY,
  readResults,
  RESULTS_CAPACITY,
  stats,
  submit,
} from "../../src/store/store.ts";
import { eventually, makeStore, ManualClock, openTempKv } from "../_helpers.ts";

Deno.test("submit() reports a duplicate within the window, relay-wide", async () => {
  await using t = await makeStore({ dedupeWindowMs: 1000 });
  assert.deepEqual(await submit(t.store, "hello", "general"), {
    accepted: true,
    queue: "general",
    id: 1,
  });
  t.clock.advance(999);
  assert.deepEqual(await submit(t.store, "hello", "general"), { accepted: false });
  assert.deepEqual(await submit(t.store, "hello", "qa"), { accepted: false });
  const queued = await peek(t.store);
  assert.deepEqual([...queued.values()].flat().map((i) => i.content), ["hello"]);
});

Deno.test("submit() accepts the same content again once the window has passed", async () => {
  await using t = await makeStore({ dedupeWindowMs: 1000 });
  await submit(t.store, "hello", "general");
  t.clock.advance(1000);
  // The KV record is still stored (expireIn is lazy); the decision compares last_seen_at.
  assert.equal((await submit(t.store, "hello", "general")).accepted, true);
});

Deno.test("submit() does not refresh the window on a duplicate", async () => {
  await using t = await makeStore({ dedupeWindowMs: 1000 });
  await submit(t.store, "hello", "general");
  t.clock.advance(600);
  assert.equal((await submit(t.store, "hello", "general")).accepted, false);
  t.clock.advance(400);
  assert.equal((await submit(t.store, "hello", "general")).accepted, true);
});

Deno.test("submit() accepts only one of concurrent submissions of the same content", async () => {
  await using t = await makeStore();
  const outcomes = await Promise.all([
    submit(t.store, "same", "qa"),
    submit(t.store, "same", "general"),
    submit(t.store, "same", "article"),
    submit(t.store, "same", "qa"),
  ]);
  assert.equal(outcomes.filter((o) => o.accepted).length, 1);
  const queued = [...(await peek(t.store)).values()].flat();
  assert.deepEqual(queued.map((i) => i.content), ["same"]);
});

Deno.test("clear() keeps the duplicate record of a submission accepted after it began", async () => {
  await using t = await makeStore({ dedupeWindowMs: 60_000 });
  await submit(t.store, "before", "general");
  t.clock.advance(1);
  // A submission that lands while clear() runs, after the queues were emptied, keeps
  // both its item and its record: the same content must not be queued twice.
  const clearing = clear(t.store);
  t.clock.advance(5);
  await submit(t.store, "racing", "general");
  await clearing;
  assert.equal((await submit(t.store, "before", "general")).accepted, true);
  const queued = (await peek(t.store, ["general"])).get("general")!.map((i) => i.content);
  if (queued.includes("racing")) {
    assert.equal((await submit(t.store, "racing", "general")).accepted, false);
  }
});

Deno.test("submit() keeps at most 50 items per queue, evicting the oldest", async () => {
  await using t = await makeStore();
  for (let i = 1; i <= QUEUE_CAPACITY + 5; i++) {
    assert.equal((await submit(t.store, `item ${i}`, "qa")).accepted, true);
  }
  await submit(t.store, "other queue", "general");
  const items = await pull(t.store, "qa");
  assert.equal(items.length, QUEUE_CAPACITY);
  assert.equal(items[0]?.content, "item 6");
  assert.equal(items.at(-1)?.content, `item ${QUEUE_CAPACITY + 5}`);
  assert.deepEqual((await pull(t.store, "general")).map((i) => i.content), ["other queue"]);
  // Evicted parts are gone from KV too, not only from the queue's order.
  const left = [];
  for await (const entry of t.temp.kv.list({ prefix: ["items"] })) left.push(entry.key);
  assert.deepEqual(left, []);
});

Deno.test("pull() returns items oldest first once, and empties the queue", async () => {
  await using t = await makeStore();
  await submit(t.store, "first", "article");
  t.clock.advance(1);
  await submit(t.store, "second", "article");
  const items = await pull(t.store, "article");
  assert.deepEqual(items.map((i) => [i.content, i.queue]), [["first", "article"], [
    "second",
    "article",
  ]]);
  assert.equal(items[1]!.created_at - items[0]!.created_at, 1);
  assert.deepEqual(await pull(t.store, "article"), []);
});

Deno.test("pullFirst() empties only the first non-empty queue in qa, article, general order", async () => {
  await using t = await makeStore();
  await submit(t.store, "g", "general");
  await submit(t.store, "a", "article");
  const first = await pullFirst(t.store);
  assert.equal(first?.queue, "article");
  assert.deepEqual(first?.items.map((i) => i.content), ["a"]);
  assert.deepEqual((await peek(t.store, ["general"])).get("general")?.map((i) => i.content), ["g"]);
  assert.equal((await pullFirst(t.store))?.queue, "general");
  assert.equal(await pullFirst(t.store), undefined);
});

Deno.test("pull() delivers every accepted item exactly once under concurrent submits and pulls", async () => {
  await using t = await makeStore();
  const submitters = Array.from({ length: 6 }, async (_, s) => {
    const accepted: string[] = [];
    for (let i = 0; i < 8; i++) {
      const content = `s${s}-i${i}`;
      if ((await submit(t.store, content, "general")).accepted) accepted.push(content);
    }
    return accepted;
  });
  let submitting = true;
  const pullers = Array.from({ length: 4 }, async () => {
    const got: string[] = [];
    while (submitting) got.push(...(await pull(t.store, "general")).map((i) => i.content));
    return got;
  });
  const accepted = (await Promise.all(submitters)).flat();
  submitting = false;
  const delivered = (await Promise.all(pullers)).flat();
  delivered.push(...(await pull(t.store, "general")).map((i) => i.content));
  assert.equal(accepted.length, 48);
  assert.equal(delivered.length, new Set(delivered).size, "no item delivered twice");
  assert.deepEqual([...delivered].sort(), [...accepted].sort());
});

Deno.test("peek() reads without removing", async () => {
  await using t = await makeStore();
  await submit(t.store, "x", "qa");
  const first = await peek(t.store);
  assert.deepEqual([...first.keys()], ["qa", "article", "general"]);
  assert.deepEqual(first.get("qa")?.map((i) => i.content), ["x"]);
  assert.deepEqual(first.get("article"), []);
  assert.deepEqual((await pull(t.store, "qa")).map((i) => i.content), ["x"]);
});

Deno.test("push() gives strictly increasing t even when the clock stands still or goes back", async () => {
  await using t = await makeStore();
  const a = await push(t.store, "a");
  const b = await push(t.store, "b");
  t.clock.advance(-60_000);
  const c = await push(t.store, "c");
  assert.equal(a.t, t.clock.now + 60_000);
  assert.equal(b.t, a.t + 1);
  assert.equal(c.t, b.t + 1);
  t.clock.advance(120_000);
  assert.equal((await push(t.store, "d")).t, t.clock.now);
});

Deno.test("push() keeps the high-water mark across clear and reopening the file", async () => {
  await using t = await makeStore();
  const a = await push(t.store, "a");
  await clear(t.store);
  const b = await push(t.store, "b");
  assert.equal(b.t, a.t + 1);
  t.temp.kv.close();
  const kv = await Deno.openKv(t.temp.path);
  try {
    const reopened = createStore(kv, { clock: t.clock.read });
    assert.equal((await push(reopened, "c")).t, b.t + 1);
  } finally {
    kv.close();
  }
});

Deno.test("push() keeps at most 50 results, evicting the oldest", async () => {
  await using t = await makeStore();
  for (let i = 1; i <= RESULTS_CAPACITY + 3; i++) await push(t.store, `r${i}`);
  const page = await readResults(t.store, { since: 0, limit: 50 });
  assert.equal(page.items.length, RESULTS_CAPACITY);
  assert.equal(page.items[0]?.content, "r4");
});

Deno.test("readResults() pages with since = cursor and sees every item exactly once", async () => {
  await using t = await makeStore();
  const pushed = [];
  for (let i = 0; i < 7; i++) pushed.push(await push(t.store, `r${i}`));
  const seen: string[] = [];
  let since = 0;
  for (let page = 0; page < 5; page++) {
    const result = await readResults(t.store, { since, limit: 3 });
    assert.ok(result.items.length <= 3);
    seen.push(...result.items.map((i) => i.content));
    since = result.cursor;
  }
  assert.deepEqual(seen, pushed.map((r) => r.content));
  assert.equal(since, pushed.at(-1)?.t);
});

Deno.test("readResults() answers cursor = since when nothing is newer, 0 on an empty feed", async () => {
  await using t = await makeStore();
  assert.deepEqual(await readResults(t.store, { since: 0, limit: 50 }), {
    cursor: 0,
    items: [],
    gap: false,
  });
  const r = await push(t.store, "x");
  assert.deepEqual(await readResults(t.store, { since: r.t, limit: 50 }), {
    cursor: r.t,
    items: [],
    gap: false,
  });
  assert.deepEqual(await readResults(t.store, { since: r.t + 1000, limit: 50 }), {
    cursor: r.t + 1000,
    items: [],
    gap: false,
  });
});

Deno.test("clear() removes items, results and duplicate records and keeps nothing else", async () => {
  await using t = await makeStore();
  await submit(t.store, "q", "qa");
  await submit(t.store, "g".repeat(200_000), "general");
  await push(t.store, "r");
  await clear(t.store);
  assert.deepEqual([...(await peek(t.store)).values()].flat(), []);
  assert.deepEqual((await readResults(t.store, { since: 0, limit: 50 })).items, []);
  assert.equal((await submit(t.store, "q", "qa")).accepted, true, "duplicate record removed");
  const keys = [];
  for await (const entry of t.temp.kv.list({ prefix: [] })) keys.push(entry.key[0]);
  assert.deepEqual(keys.sort(), [
    "accepted",
    "format",
    "items",
    "queues",
    "queues",
    "results_meta",
  ]);
});

Deno.test("clear() deletes more duplicate records than one commit holds, each commit measured", async () => {
  await using temp = await openTempKv();
  const commits: boolean[] = [];
  const store = createStore(temp.kv, {
    clock: new ManualClock().read,
    onCommit: (_ms, ok) => commits.push(ok),
    // Memory full at once: each content gets a KV record of its own.
    seenInMemory: 1,
  });
  const contents = Array.from({ length: 1000 }, (_, i) => `content ${i}`);
  await Promise.all(contents.map((c) => submit(store, c, "general")));
  let single = 0;
  for await (const _ of temp.kv.list({ prefix: ["submissions"] })) single++;
  assert.equal(single, 999, "records of one content each");
  const before = commits.length;
  await clear(store);
  // The queue's commit, then the records: a KV commit holds at most 1000 mutations.
  assert.ok(commits.length - before >= 3, `${commits.length - before} commits measured`);
  assert.ok(commits.every((ok) => ok));
  let left = 0;
  for await (const _ of temp.kv.list({ prefix: ["submissions"] })) left++;
  for await (const _ of temp.kv.list({ prefix: ["accepted"] })) left++;
  assert.equal(left, 0);
  const again = await Promise.all(contents.map((c) => submit(store, c, "general")));
  assert.equal(again.filter((o) => o.accepted).length, 1000);
});

Deno.test("submit() and push() round-trip large multi-byte content byte for byte", async () => {
  await using t = await makeStore();
  // 768 KiB of 1-, 2-, 3- and 4-byte characters, split across part boundaries.
  const unit = "a€é😀";
  const big = unit.repeat(Math.floor((768 * 1024) / new TextEncoder().encode(unit).length));
  assert.ok(new TextEncoder().encode(big).length > 760 * 1024);
  assert.equal((await submit(t.store, big, "general")).accepted, true);
  assert.equal((await peek(t.store, ["general"])).get("general")?.[0]?.content, big);
  assert.equal((await pull(t.store, "general"))[0]?.content, big);
  await push(t.store, big);
  assert.equal((await readResults(t.store, { since: 0, limit: 1 })).items[0]?.content, big);
});

Deno.test("submit() evicts large items whole, all parts", async () => {
  await using t = await makeStore();
  const big = (i: number) => `${i}`.padEnd(150_000, "x");
  for (let i = 0; i < QUEUE_CAPACITY + 2; i++) await submit(t.store, big(i), "qa");
  const items = await pull(t.store, "qa");
  assert.equal(items.length, QUEUE_CAPACITY);
  assert.equal(items[0]?.content, big(2));
  let left = 0;
  for await (const _ of t.temp.kv.list({ prefix: ["items"] })) left++;
  assert.equal(left, 0);
});

Deno.test("health() is ok on an open store and not once KV is closed", async () => {
  await using t = await makeStore();
  assert.deepEqual(await health(t.store), { ok: true });
  t.temp.kv.close();
  // A probe reads at most once a second: the next one finds the closed store.
  await eventually(async () => !(await health(t.store)).ok, "health() to see the closed KV");
  const verdict = await health(t.store);
  assert.ok(!verdict.ok && verdict.kind === "io", JSON.stringify(verdict));
});

Deno.test("stats() counters stay accountable: accepted = delivered + evicted + cleared + depth", async () => {
  await using t = await makeStore({ dedupeWindowMs: 1000 });
  const writes: Promise<unknown>[] = [];
  for (let i = 0; i < 300; i++) {
    const queue = (["qa", "article", "general"] as const)[i % 3]!;
    writes.push(submit(t.store, `c${i % 250}`, queue));
    if (i % 40 === 0) writes.push(pullFirst(t.store));
    if (i % 7 === 0) writes.push(push(t.store, `r${i}`));
    if (i === 150) writes.push(clear(t.store));
  }
  await Promise.all(writes);
  const s = await stats(t.store);
  for (const q of Object.values(s.queues)) {
    assert.equal(q.accepted, q.delivered + q.evicted + q.cleared + q.depth);
  }
  const accepted = Object.values(s.queues).reduce((n, q) => n + q.accepted + q.duplicate, 0);
  assert.equal(accepted, 300);
  assert.equal(s.results.pushed, s.results.evicted + s.results.cleared + s.results.depth);
  assert.equal(s.results.pushed, 43);
  // Durable: a new store on the same file reads the same counters.
  const again = createStore(t.temp.kv, { clock: t.clock.read });
  assert.deepEqual(await stats(again), s);
});

Deno.test("submit() settles with the error when the store cannot be reloaded after a failed check", async () => {
  await using t = await makeStore();
  assert.equal((await submit(t.store, "one", "general")).accepted, true);
  // Another handle changes a metadata entry: the next commit's check fails and the store
  // reloads; that reload meets an I/O error (injected into Deno KV, once).
  const other = await Deno.openKv(t.temp.path);
  try {
    await other.set(["queues", "qa"], { next_id: 1, items: [] });
  } finally {
    other.close();
  }
  const kv = t.temp.kv;
  const getMany = kv.getMany.bind(kv);
  let fail = true;
  Object.assign(kv, {
    getMany: (...args: Parameters<typeof getMany>) => {
      if (!fail) return getMany(...args);
      fail = false;
      return Promise.reject(new Error("injected I/O error"));
    },
  });
  await assert.rejects(submit(t.store, "two", "general"), /injected I\/O error/);
  assert.equal((await submit(t.store, "three", "general")).accepted, true);
});

Deno.test("lease() hides items from pulls until ack() deletes them; counters stay accountable", async () => {
  await using t = await makeStore();
  for (const c of ["a", "b", "c"]) await submit(t.store, c, "general");
  const got = await lease(t.store, ["general"], { leaseMs: 30_000, limit: 2 });
  assert.equal(got?.queue, "general");
  assert.deepEqual(got?.items.map((i) => [i.content, i.lease_until]), [
    ["a", t.clock.now + 30_000],
    ["b", t.clock.now + 30_000],
  ]);
  // Hidden from other pulls, leased or plain; still shown by peek, with lease_until.
  assert.deepEqual(
    (await lease(t.store, ["general"], { leaseMs: 1000, limit: 50 }))?.items
      .map((i) => i.content),
    ["c"],
  );
  assert.deepEqual(await pull(t.store, "general"), []);
  const peeked = (await peek(t.store, ["general"])).get("general")!;
  assert.deepEqual(peeked.map((i) => i.content), ["a", "b", "c"]);
  assert.ok(peeked.every((i) => i.lease_until !== undefined));
  const refs = got!.items.map((i) => ({ queue: i.queue, id: i.id }));
  assert.deepEqual(await ack(t.store, refs), { acked: refs, unknown: [] });
  // Acknowledged once: a second ack finds nothing.
  assert.deepEqual(await ack(t.store, refs), { acked: [], unknown: refs });
  const s = (await stats(t.store)).queues.general;
  assert.deepEqual(
    { ...s },
    {
      accepted: 3,
      duplicate: 0,
      delivered: 2,
      leased: 3,
      evicted: 0,
      cleared: 0,
      depth: 1,
      in_flight: 1,
    },
  );
  assert.equal(s.accepted, s.delivered + s.evicted + s.cleared + s.depth);
});

Deno.test("lease(): an item not acked in time returns to the front of its queue, in order", async () => {
  await using t = await makeStore();
  for (const c of ["first", "second", "third"]) await submit(t.store, c, "qa");
  await lease(t.store, ["qa"], { leaseMs: 10_000, limit: 2 });
  assert.equal(await nextLeaseEnd(t.store, ["qa"]), t.clock.now + 10_000);
  assert.equal(await nextLeaseEnd(t.store, ["general"]), undefined);
  t.clock.advance(9_999);
  assert.deepEqual(
    (await lease(t.store, ["qa"], { leaseMs: 10_000, limit: 50 }))?.items.map((i) => i.content),
    ["third"],
  );
  t.clock.advance(1);
  // An ended lease still counts: a waiter that missed the moment tries again at once.
  assert.equal(await nextLeaseEnd(t.store, ["qa"]), t.clock.now);
  // first and second are back, ahead of anything newer; a plain pull takes them too.
  await submit(t.store, "fourth", "qa");
  assert.deepEqual((await pull(t.store, "qa")).map((i) => i.content), [
    "first",
    "second",
    "fourth",
  ]);
  // Pulled plainly, the expired items can no longer be acknowledged.
  assert.equal((await ack(t.store, [{ queue: "qa", id: 1 }])).unknown.length, 1);
});

Deno.test("ack() refuses items that were never leased, and acks an ended lease not yet re-leased", async () => {
  await using t = await makeStore();
  await submit(t.store, "never leased", "article");
  await submit(t.store, "leased", "article");
  assert.deepEqual(await ack(t.store, [{ queue: "article", id: 1 }]), {
    acked: [],
    unknown: [{ queue: "article", id: 1 }],
  });
  await lease(t.store, ["article"], { leaseMs: 1000, limit: 1 }); // takes id 1
  t.clock.advance(5_000);
  // The worker was slow, but nobody took the item meanwhile: its ack still counts.
  assert.equal((await ack(t.store, [{ queue: "article", id: 1 }])).acked.length, 1);
  assert.deepEqual((await pull(t.store, "article")).map((i) => i.content), ["leased"]);
  await assert.rejects(lease(t.store, ["qa"], { leaseMs: 0, limit: 1 }), RangeError);
  await assert.rejects(lease(t.store, ["qa"], { leaseMs: 1000, limit: 0 }), RangeError);
});

Deno.test("lease(): leases are durable, a restarted relay still hides the item until the lease ends", async () => {
  await using t = await makeStore();
  await submit(t.store, "in flight", "general");
  await lease(t.store, ["general"], { leaseMs: 60_000, limit: 1 });
  const again = createStore(t.temp.kv, { clock: t.clock.read });
  assert.deepEqual(await pull(again, "general"), []);
  t.clock.advance(60_000);
  assert.deepEqual((await pull(again, "general")).map((i) => i.content), ["in flight"]);
});

Deno.test("readResults() sets gap when results after since were evicted, across restarts", async () => {
  await using t = await makeStore();
  const first = await push(t.store, "r0");
  t.clock.advance(1);
  for (let i = 1; i <= RESULTS_CAPACITY; i++) await push(t.store, `r${i}`); // evicts r0
  assert.equal((await readResults(t.store, { since: 0, limit: 50 })).gap, true);
  assert.equal((await readResults(t.store, { since: first.t - 1, limit: 50 })).gap, true);
  // A reader who had r0 missed nothing.
  const page = await readResults(t.store, { since: first.t, limit: 50 });
  assert.equal(page.gap, false);
  assert.equal(page.items[0]?.content, "r1");
  const again = createStore(t.temp.kv, { clock: t.clock.read });
  assert.equal((await readResults(again, { since: 0, limit: 1 })).gap, true);
  // Clearing is not eviction: a reader after the clear sees no gap.
  await clear(again);
  assert.equal((await readResults(again, { since: first.t, limit: 1 })).gap, false);
});

Deno.test("nextChange() wakes on a commit to a watched collection only, and on abort", async () => {
  await using t = await makeStore();
  const stop = new AbortController();
  let feedWoke = false;
  const feed = nextChange(t.store, ["feed"], stop.signal).then(() => feedWoke = true);
  const qa = nextChange(t.store, ["qa"], stop.signal);
  await submit(t.store, "x", "qa");
  await qa;
  assert.equal(feedWoke, false);
  await push(t.store, "y");
  await feed;
  assert.equal(feedWoke, true);
  // An aborted wait resolves at once and leaves nothing registered.
  const never = nextChange(t.store, ["general"], stop.signal);
  stop.abort();
  await never;
});

/**
 * The store's layout in Deno KV (src/store/kv_keys.ts): which keys an item's and a result's
 * parts take, that an entry of one part takes over the key of the one it evicts, and that
 * files older releases wrote are read whole.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  ack,
  clear,
  createStore,
  lease,
  peek,
  pull,
  push,
  QUEUE_CAPACITY,
  readResults,
  RESULTS_CAPACITY,
  submit,
} from "../../src/store/store.ts";
import { makeStore, ManualClock, openTempKv } from "../_helpers.ts";

Deno.test("an item that evicts an item of one part takes over its key; after a reopen every item reads back", async () => {
  await using t = await makeStore();
  const big = (i: number) => `${i}`.padEnd(150_000, "x");
  // Items 1 … 50; 51, of three parts, evicts 1 (not taking its key); 52 … 100, of one part,
  // evict 2 … 50 and take their keys; 101 evicts 51, whose three keys it does not take.
  for (let i = 1; i <= QUEUE_CAPACITY; i++) await submit(t.store, `item ${i}`, "qa");
  await submit(t.store, big(51), "qa");
  for (let i = 52; i <= 2 * QUEUE_CAPACITY; i++) await submit(t.store, `item ${i}`, "qa");
  await submit(t.store, "item 101", "qa");
  const keys = [];
  for await (const entry of t.temp.kv.list({ prefix: ["items", "qa"] })) keys.push(entry.key);
  assert.equal(keys.length, QUEUE_CAPACITY, "one entry an item: every item is of one part");
  assert.deepEqual(
    (await t.temp.kv.get(["items", "qa", 2, 0])).value,
    new TextEncoder().encode("item 52"),
    "item 52 is stored under the key of item 2, which it evicted",
  );
  const reopened = createStore(t.temp.kv, { clock: t.clock.read });
  const expected = [
    "item 52",
    ...Array.from({ length: QUEUE_CAPACITY - 2 }, (_, i) => `item ${i + 53}`),
    "item 101",
  ];
  const items = (await peek(reopened)).get("qa")!;
  assert.deepEqual(items.map((i) => i.content), expected);
  assert.deepEqual(items.slice(0, 2).map((i) => i.id), [52, 53]);
  // A lease, an ack and a pull remove the right keys.
  const leased = await lease(reopened, ["qa"], { leaseMs: 60_000, limit: 1 });
  assert.deepEqual(leased?.items.map((i) => i.content), ["item 52"]);
  assert.deepEqual((await ack(reopened, [{ queue: "qa", id: 52 }])).acked.length, 1);
  assert.equal((await t.temp.kv.get(["items", "qa", 2, 0])).value, null);
  assert.deepEqual(
    (await pull(createStore(t.temp.kv), "qa")).map((i) => i.content),
    expected.slice(1),
  );
  let left = 0;
  for await (const _ of t.temp.kv.list({ prefix: ["items"] })) left++;
  assert.equal(left, 0);
});

Deno.test("a result that evicts a result of one part takes over its key; after a reopen every result reads back", async () => {
  await using t = await makeStore();
  const big = (i: number) => `${i}`.padEnd(150_000, "x");
  // As for items: 51, of three parts, does not take over a key, 52 … 100 do, 101 does not.
  const pushed: number[] = [];
  const pushAt = async (content: string) => {
    t.clock.advance(1);
    pushed.push(t.clock.now);
    await push(t.store, content);
  };
  for (let i = 1; i <= RESULTS_CAPACITY; i++) await pushAt(`result ${i}`);
  await pushAt(big(51));
  for (let i = 52; i <= 2 * RESULTS_CAPACITY; i++) await pushAt(`result ${i}`);
  await pushAt("result 101");
  let entries = 0;
  for await (const _ of t.temp.kv.list({ prefix: ["results"] })) entries++;
  assert.equal(entries, RESULTS_CAPACITY);
  assert.deepEqual(
    (await t.temp.kv.get(["results", pushed[1]!, 0])).value,
    new TextEncoder().encode("result 52"),
    "result 52 is stored under the key of result 2, which it evicted",
  );
  const page = await readResults(createStore(t.temp.kv), { since: 0, limit: 50 });
  assert.deepEqual(page.items.map((r) => r.content), [
    "result 52",
    ...Array.from({ length: RESULTS_CAPACITY - 2 }, (_, i) => `result ${i + 53}`),
    "result 101",
  ]);
  assert.deepEqual(page.items.map((r) => r.t), pushed.slice(51));
  await clear(createStore(t.temp.kv));
  entries = 0;
  for await (const _ of t.temp.kv.list({ prefix: ["results"] })) entries++;
  assert.equal(entries, 0);
});

Deno.test("an item's and a result's part 0 are their first bytes alone; the queue's metadata holds the item's time", async () => {
  await using t = await makeStore();
  t.clock.now = 1_700_000_000_000;
  await submit(t.store, "a link", "qa");
  await push(t.store, "a result");
  const item = await t.temp.kv.get(["items", "qa", 1, 0]);
  const result = await t.temp.kv.get(["results", 1_700_000_000_000, 0]);
  assert.deepEqual(item.value, new TextEncoder().encode("a link"));
  assert.deepEqual(result.value, new TextEncoder().encode("a result"));
  const meta = await t.temp.kv.get<{ created_at: number[] }>(["queues", "qa"]);
  assert.deepEqual(meta.value?.created_at, [1_700_000_000_000]);
});

Deno.test("a file whose items and results have head records (as older versions wrote them) is read whole, and written on", async () => {
  await using temp = await openTempKv();
  const bytes = (s: string) => new TextEncoder().encode(s);
  const long = "é".repeat(70_000); // 140,000 bytes: three parts
  const longBytes = bytes(long);
  const part = (i: number) => longBytes.slice(i * 60_000, (i + 1) * 60_000);
  // The layout before the queue's metadata held `created_at`.
  await temp.kv.atomic()
    .set(["queues", "general"], { next_id: 3, items: [[1, 1], [2, 3]] })
    .set(["items", "general", 1, 0], { created_at: 1_000, parts: 1, data: bytes("short") })
    .set(["items", "general", 2, 0], { created_at: 2_000, parts: 3, data: part(0) })
    .set(["items", "general", 2, 1], part(1))
    .set(["items", "general", 2, 2], part(2))
    .set(["results_meta"], { hwm: 7, items: [[5, 1], [7, 3]] })
    .set(["results", 5, 0], { parts: 1, data: bytes("r5") })
    .set(["results", 7, 0], { parts: 3, data: part(0) })
    .set(["results", 7, 1], part(1))
    .set(["results", 7, 2], part(2))
    .commit();
  const clock = new ManualClock();
  clock.now = 10_000;
  const store = createStore(temp.kv, { clock: clock.read });
  const expected = [
    { id: 1, content: "short", queue: "general", created_at: 1_000 },
    { id: 2, content: long, queue: "general", created_at: 2_000 },
  ];
  assert.deepEqual((await peek(store)).get("general"), expected);
  const results = await readResults(store, { since: 0, limit: 50 });
  assert.deepEqual(results.items, [{ t: 5, content: "r5" }, { t: 7, content: long }]);
  // A new item in the new layout beside the old ones; after a restart all three read back.
  await submit(store, "new", "general");
  const reopened = createStore(temp.kv, { clock: clock.read });
  assert.deepEqual(await pull(reopened, "general"), [
    ...expected,
    { id: 3, content: "new", queue: "general", created_at: 10_000 },
  ]);
});

Deno.test("a store loading while another process commits never pairs an item with the content of the one that took over its key", async () => {
  await using t = await makeStore();
  const writer = t.store;
  for (let i = 1; i <= QUEUE_CAPACITY; i++) await submit(writer, `item ${i}`, "qa");
  // The other process commits once, between the load's read of the queues' metadata and its
  // read of their entries: item 51 takes over item 1's key.
  let armed = true;
  const kv = new Proxy(t.temp.kv, {
    get(target, name) {
      const value = Reflect.get(target, name, target);
      if (name !== "getMany") return typeof value === "function" ? value.bind(target) : value;
      return async (...args: unknown[]) => {
        const read = await (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
        if (armed) {
          armed = false;
          await submit(writer, "item 51", "qa");
        }
        return read;
      };
    },
  });
  const items = (await peek(createStore(kv))).get("qa")!;
  assert.equal(armed, false, "the other process committed during the load");
  assert.deepEqual(items[0], {
    id: 2,
    content: "item 2",
    queue: "qa",
    created_at: items[0]!.created_at,
  });
  assert.deepEqual(items.at(-1)?.content, "item 51");
});

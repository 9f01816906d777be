/**
 * Issue 19: the idle relay gives memory back (src/server/idle_memory.ts). The collection
 * is V8's own, run in this test process; only the figures the policy reads are given.
 */

import assert from "node:assert/strict";
import {
  COLLECT_AFTER_GROWTH_BYTES,
  type Collection,
  collectWithV8,
  IdleMemory,
} from "../../src/server/idle_memory.ts";

const MIB = 1024 * 1024;

Deno.test("IdleMemory with V8's collection gives back the pages of dropped garbage", async () => {
  const done: Collection[] = [];
  const idle = new IdleMemory({ collected: (c) => done.push(c) });
  // About 80 MB of arrays, reachable until just before the check.
  let junk: number[][] | undefined = Array.from(
    { length: 200 },
    (_, i) => new Array<number>(50_000).fill(i + 0.5),
  );
  assert.equal(junk.length, 200);
  junk = undefined;
  assert.equal(await idle.check(), true);
  assert.equal(done.length, 1);
  const [{ rssBefore, rssAfter, ms }] = done as [Collection];
  assert.ok(rssAfter < rssBefore - 20 * MIB, `${rssBefore} → ${rssAfter} bytes`);
  assert.ok(ms >= 0);
  // Nothing grew since: the next idle interval does not pay another pause.
  assert.equal(await idle.check(), false);
  await collectWithV8(); // a second call reuses the gc function it took
});

Deno.test("IdleMemory collects only after an interval without requests, and again only after growth", async () => {
  let rss = 100 * MIB;
  let collections = 0;
  let fail = false;
  const idle = new IdleMemory({
    rss: () => rss,
    collect: () => {
      if (fail) throw new Error("no gc here");
      collections++;
      rss -= 10 * MIB;
    },
  });
  idle.request();
  assert.equal(await idle.check(), false, "a request arrived in this interval");
  assert.equal(await idle.check(), true, "the first idle interval collects");
  assert.equal(rss, 90 * MIB);
  assert.equal(await idle.check(), false, "nothing to give back");
  rss += COLLECT_AFTER_GROWTH_BYTES - 1;
  assert.equal(await idle.check(), false, "grown, but by less than the threshold");
  rss += 1;
  idle.request();
  assert.equal(await idle.check(), false, "grown enough, but not idle");
  assert.equal(await idle.check(), true);
  assert.equal(collections, 2);
  // A collection that fails is not tried again until the set grows once more.
  rss += COLLECT_AFTER_GROWTH_BYTES;
  fail = true;
  assert.equal(await idle.check(), false);
  fail = false;
  assert.equal(await idle.check(), false);
  rss += COLLECT_AFTER_GROWTH_BYTES;
  assert.equal(await idle.check(), true);
  assert.equal(collections, 3);
});

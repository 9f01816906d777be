/**
 * the idle relay gives memory back (src/server/idle_memory.ts). The collection
 * is V8's own, run in this test process; only the figures the policy reads are given.
 */

import assert from "node:assert/strict";
import {
  COLLECT_AFTER_GROWTH_BYTES,
  type Collection,
  IDLE_CHECK_MS,
  IdleMemory,
  QUIET_CHECKS,
} from "../../src/server/idle_memory.ts";
import { v8Collector } from "../../src/server/_deno_internals.ts";

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
  const [{ rssBefore, rssAfter, heapBefore, heapAfter, ms }] = done as [Collection];
  assert.ok(rssAfter < rssBefore - 20 * MIB, `resident ${rssBefore} → ${rssAfter} bytes`);
  assert.ok(heapAfter < heapBefore - 20 * MIB, `heap ${heapBefore} → ${heapAfter} bytes`);
  assert.ok(ms >= 0);
  // Nothing grew since: the next idle interval does not pay another pause.
  assert.equal(await idle.check(), false);
  (await v8Collector())(); // made again, it still works: the flag is set once for good
});

Deno.test("IdleMemory collects after the first quiet interval, then only after quiet checks and heap growth", async () => {
  let heap = 100 * MIB;
  let collections = 0;
  let fail = false;
  let made = 0;
  const idle = new IdleMemory({
    memory: () => ({ rss: heap + 40 * MIB, heapTotal: heap }),
    quietChecks: 3,
    collector: () => {
      made++;
      return Promise.resolve(() => {
        if (fail) throw new Error("no gc here");
        collections++;
        heap -= 10 * MIB;
      });
    },
  });
  /** The outcomes of `n` checks in a row, as 0 and 1. */
  const checks = async (n: number) => {
    const outcomes: number[] = [];
    for (let i = 0; i < n; i++) outcomes.push(Number(await idle.check()));
    return outcomes;
  };
  idle.request();
  assert.deepEqual(await checks(1), [0], "a request arrived in this interval");
  assert.deepEqual(await checks(1), [1], "the first quiet interval collects");
  assert.equal(heap, 90 * MIB);
  assert.deepEqual(
    await checks(4),
    [0, 0, 0, 0],
    "not quiet long enough, then nothing to give back",
  );
  heap += COLLECT_AFTER_GROWTH_BYTES - 1;
  assert.deepEqual(await checks(2), [0, 0], "grown, but by less than the threshold");
  heap += 1;
  idle.request();
  // Grown enough: the check that saw the request and the next two are not quiet enough.
  assert.deepEqual(await checks(4), [0, 0, 0, 1]);
  assert.equal(collections, 2);
  // A collection that fails is not tried again until the heap grows once more.
  heap += COLLECT_AFTER_GROWTH_BYTES;
  idle.request();
  fail = true;
  assert.deepEqual(await checks(4), [0, 0, 0, 0]);
  fail = false;
  assert.deepEqual(await checks(2), [0, 0]);
  heap += COLLECT_AFTER_GROWTH_BYTES;
  assert.deepEqual(await checks(1), [1], "still quiet: the next check collects");
  // V8 shrank its heap by itself while the resident set stayed: nothing to do.
  heap -= COLLECT_AFTER_GROWTH_BYTES;
  assert.deepEqual(await checks(5), [0, 0, 0, 0, 0]);
  assert.equal(made, 1, "the collector is made once");
  assert.equal(collections, 3);
  assert.equal(QUIET_CHECKS * IDLE_CHECK_MS, 30_000);
});

Deno.test("IdleMemory without a collector says why once, never collects, and never rejects", async () => {
  const why: unknown[] = [];
  let reads = 0;
  let broken = false;
  const idle = new IdleMemory({
    memory: () => {
      reads++;
      if (broken) throw new Error("cannot read the figures");
      return { rss: 100 * MIB, heapTotal: 50 * MIB * reads };
    },
    quietChecks: 1,
    collector: () => Promise.reject(new Error("no gc in this runtime")),
    unavailable: (error) => why.push(error),
  });
  broken = true;
  assert.equal(await idle.check(), false, "figures that cannot be read: no collection");
  broken = false;
  for (let i = 0; i < 5; i++) assert.equal(await idle.check(), false);
  assert.equal(why.length, 1);
  assert.match(String(why[0]), /no gc in this runtime/);
  assert.equal(reads, 2, "after the collector failed, the figures are not even read");
});

Deno.test("IdleMemory does not collect when a request came while its collector was made", async () => {
  let collections = 0;
  const idle: IdleMemory = new IdleMemory({
    memory: () => ({ rss: 100 * MIB, heapTotal: 50 * MIB }),
    collector: () => {
      idle.request(); // arrives while node:v8 and node:vm would load
      return Promise.resolve(() => void collections++);
    },
  });
  assert.equal(await idle.check(), false);
  assert.equal(collections, 0);
  assert.equal(await idle.check(), false, "the interval that request came in was not quiet");
  assert.equal(await idle.check(), true, "the next quiet check collects");
  assert.equal(collections, 1);
});

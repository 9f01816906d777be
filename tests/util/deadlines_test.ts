import assert from "node:assert/strict";
import { Deadlines } from "../../src/util/deadlines.ts";

Deno.test("Deadlines: a deadline fires once, never before its time; a cleared one never fires", async () => {
  const deadlines = new Deadlines(10);
  const started = performance.now();
  let cleared = 0;
  const fired: number[] = [];
  const done = Promise.withResolvers<void>();
  deadlines.add(40, () => {
    fired.push(performance.now() - started);
    done.resolve();
  });
  deadlines.add(20, () => cleared++).clear();
  const twice = deadlines.add(20, () => cleared++);
  twice.clear();
  twice.clear();
  assert.equal(deadlines.size, 1);
  await done.promise;
  // The cleared ones were due before the one that fired: had they been kept, they had run.
  await new Promise((resolve) => setTimeout(resolve, 30));
  assert.equal(fired.length, 1);
  assert.ok(fired[0]! >= 40, `fired after ${fired[0]} ms, not before 40`);
  assert.equal(cleared, 0);
  assert.equal(deadlines.size, 0);
});

Deno.test("Deadlines: many deadlines of different lengths fire in time order, and a throwing one does not stop the rest", async () => {
  const deadlines = new Deadlines(5);
  const order: number[] = [];
  const all = Promise.withResolvers<void>();
  for (const ms of [60, 10, 35, 0]) {
    deadlines.add(ms, () => {
      order.push(ms);
      if (order.length === 4) all.resolve();
      throw new Error("the owner is gone");
    });
  }
  await all.promise;
  assert.deepEqual(order, [0, 10, 35, 60]);
  assert.equal(deadlines.size, 0);
});

Deno.test("Deadlines: a timer that runs late fires the deadlines that are due oldest first", async () => {
  const deadlines = new Deadlines(5);
  const order: number[] = [];
  const all = Promise.withResolvers<void>();
  for (const ms of [60, 10, 35, 0]) {
    deadlines.add(ms, () => {
      order.push(ms);
      if (order.length === 4) all.resolve();
    });
  }
  // Keep the thread busy past every deadline, as a loaded machine does: the first tick then
  // finds all four due at once.
  const start = performance.now();
  while (performance.now() - start < 80) {
    // busy
  }
  await all.promise;
  assert.deepEqual(order, [0, 10, 35, 60]);
});

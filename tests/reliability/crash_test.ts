/**
 * Reliability: crash consistency. A relay under submit and push load is killed
 * with SIGKILL at a random moment, three times (five with `RELAY_STRESS=1`), restarting on the same file; afterwards
 * every acknowledged item and result is in the store or counted as evicted, the counters
 * agree with the contents, the results' `t` never goes backwards, and every
 * acknowledged submission is still a duplicate.
 *
 * @module
 */

import assert from "node:assert/strict";
import { getStats, KEY, relayCall, startRelayProcess, stressOr, withTempDir } from "../_helpers.ts";

const ROUNDS = stressOr(3, 5);
const WRITERS = 6;
const QUEUES = ["qa", "article", "general"] as const;

/** An acknowledged write: its content, when it was sent and when its 200 came back (ms). */
interface Write {
  content: string;
  sentAt: number;
  ackedAt: number;
}

/**
 * Eviction drops the oldest first. A write acknowledged before another was even sent is the
 * older one, so a missing write must be older than everything still kept: it may not have
 * been sent after a kept write was acknowledged. And no more are missing than were counted
 * as evicted.
 */
function assertOnlyOldestMissing(
  writes: Write[],
  present: Set<string>,
  evicted: number,
  where: string,
): void {
  const missing = writes.filter((w) => !present.has(w.content));
  assert.ok(missing.length <= evicted, `${where}: ${missing.length} > ${evicted} evicted`);
  const kept = writes.filter((w) => present.has(w.content));
  const oldestKeptAck = Math.min(...kept.map((w) => w.ackedAt));
  for (const m of missing) {
    assert.ok(m.sentAt <= oldestKeptAck, `${where}: lost ${m.content}, an older write is kept`);
  }
}

Deno.test(`${ROUNDS} random SIGKILLs under load: acknowledged writes survive, counters agree, t only grows, duplicates are still refused`, async () => {
  await withTempDir(async (dir) => {
    const acked = { qa: [] as Write[], article: [] as Write[], general: [] as Write[] };
    const ackedResults: Write[] = [];
    let hwmBefore = 0;
    let maxTSeen = 0;

    for (let round = 0; round < ROUNDS; round++) {
      const relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
      const call = relayCall(relay.url);
      // After a restart the mark is where it was: nothing acknowledged was lost.
      const before = await getStats(call);
      assert.ok(before.results.hwm >= hwmBefore, `round ${round}: hwm went back`);
      let n = 0;
      let stop = false;
      const writer = async (w: number) => {
        while (!stop) {
          const i = n++;
          try {
            if (i % 3 === 0) {
              const content = `result r${round} w${w} n${i}`;
              const sentAt = performance.now();
              const res = await call("/push", { method: "POST", body: content });
              if (res.status === 200) {
                ackedResults.push({ content, sentAt, ackedAt: performance.now() });
              }
              await res.body?.cancel();
            } else {
              const queue = QUEUES[Math.floor(i / 3) % QUEUES.length]!;
              const content = `item r${round} w${w} n${i}`;
              const sentAt = performance.now();
              const res = await call(`/submit?queue=${queue}`, { method: "POST", body: content });
              if (res.status === 200) {
                acked[queue].push({ content, sentAt, ackedAt: performance.now() });
              }
              await res.body?.cancel();
            }
          } catch {
            return; // the relay is gone
          }
        }
      };
      const writers = Array.from({ length: WRITERS }, (_, w) => writer(w));
      await new Promise((r) => setTimeout(r, 150 + Math.random() * 350));
      // Read the feed's newest t while under load, then kill at once.
      const page = await (await call(`/results?since=${maxTSeen}`)).json();
      for (const item of page.items as Array<{ t: number }>) {
        assert.ok(item.t > maxTSeen, "t strictly increases");
        maxTSeen = item.t;
      }
      relay.child.kill("SIGKILL");
      stop = true;
      await Promise.all(writers);
      await relay.stop();
      hwmBefore = Math.max(hwmBefore, maxTSeen);
    }

    await using relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
    const call = relayCall(relay.url);
    const stats = await getStats(call);
    assert.ok(stats.results.hwm >= maxTSeen, "t never goes backwards across kills");
    const peek = await (await call("/peek")).json() as {
      queues: Record<string, Array<{ content: string }>>;
    };
    for (const queue of QUEUES) {
      const q = stats.queues[queue];
      const present = new Set(peek.queues[queue]!.map((i) => i.content));
      assert.equal(present.size, q.depth, `${queue}: depth matches the contents`);
      assert.equal(q.accepted, q.delivered + q.evicted + q.cleared + q.depth, queue);
      // Unacknowledged submissions may have landed too (platform notes), so "at least".
      assert.ok(q.accepted >= acked[queue].length, `${queue}: accepted >= acknowledged`);
      assertOnlyOldestMissing(acked[queue], present, q.evicted, queue);
    }
    const results = await (await call("/results?since=0")).json() as {
      items: Array<{ t: number; c: string }>;
    };
    const ts = results.items.map((i) => i.t);
    assert.deepEqual(ts, [...ts].sort((a, b) => a - b));
    assert.equal(new Set(ts).size, ts.length);
    assert.equal(results.items.length, stats.results.depth);
    assert.equal(
      stats.results.pushed,
      stats.results.evicted + stats.results.cleared + stats.results.depth,
    );
    assert.ok(stats.results.pushed >= ackedResults.length);
    const kept = new Set(results.items.map((i) => i.c));
    assertOnlyOldestMissing(ackedResults, kept, stats.results.evicted, "results");
    assert.ok(ackedResults.length > 0 && Object.values(acked).every((a) => a.length > 0));
    // Every acknowledged submission is still a duplicate: its record, committed with
    // the item, survived the kills (one in seven of them, at most 200).
    const sample = Object.values(acked).flat().filter((_, i) => i % 7 === 0).slice(0, 200);
    for (const w of sample) {
      const res = await call("/submit", { method: "POST", body: w.content });
      assert.equal(await res.text(), "OK (duplicate)", w.content);
    }
  });
});

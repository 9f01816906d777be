/**
 * Reliability: exactly-once delivery at scale over HTTP against a real relay
 * process (100 items per submitter, 300 with `RELAY_STRESS=1`), with the counters of `GET /stats` accounting for every accepted item.
 *
 * @module
 */

import assert from "node:assert/strict";
import { getStats, KEY, relayCall, startRelayProcess, stressOr, withTempDir } from "../_helpers.ts";

const SUBMITTERS = 8;
const ITEMS_EACH = stressOr(100, 300);
const PULLERS = 4;
const QUEUES = ["qa", "article", "general"] as const;

Deno.test(`${SUBMITTERS} submitters x ${ITEMS_EACH} items, ${PULLERS} pullers: each accepted item delivered once or counted evicted`, async () => {
  await withTempDir(async (dir) => {
    await using relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
    const call = relayCall(relay.url);
    const accepted = new Set<string>();
    const delivered: string[] = [];
    let submitting = SUBMITTERS;

    const submitter = async (s: number) => {
      for (let i = 0; i < ITEMS_EACH; i++) {
        const content = `item s${s} n${i}`;
        const queue = QUEUES[(s + i) % QUEUES.length]!;
        const res = await call(`/submit?queue=${queue}`, { method: "POST", body: content });
        assert.equal(res.status, 200);
        assert.equal(await res.text(), `OK (${queue})`);
        accepted.add(content);
      }
      submitting--;
    };
    const puller = async (p: number) => {
      for (;;) {
        const done = submitting === 0;
        const res = await call(p % 2 === 0 ? "/pull" : `/pull?queue=${QUEUES[p % 3]}`);
        if (res.status === 200) delivered.push(...(await res.json() as string[]));
        else {
          assert.equal(res.status, 204);
          await res.body?.cancel();
          // Stop after a last empty answer that began once every submitter had finished.
          if (done) return;
        }
      }
    };
    await Promise.all([
      ...Array.from({ length: SUBMITTERS }, (_, s) => submitter(s)),
      ...Array.from({ length: PULLERS }, (_, p) => puller(p)),
    ]);
    // Whatever is still queued (a puller of one queue may have stopped early).
    for (const queue of QUEUES) {
      const res = await call(`/pull?queue=${queue}`);
      if (res.status === 200) delivered.push(...(await res.json() as string[]));
      else await res.body?.cancel();
    }

    assert.equal(accepted.size, SUBMITTERS * ITEMS_EACH);
    assert.equal(new Set(delivered).size, delivered.length, "no item is delivered twice");
    for (const item of delivered) assert.ok(accepted.has(item), `delivered unknown ${item}`);
    const stats = await getStats(call);
    let evicted = 0;
    for (const queue of QUEUES) {
      const q = stats.queues[queue];
      assert.equal(q.depth, 0);
      assert.equal(q.accepted, q.delivered + q.evicted + q.cleared + q.depth, queue);
      evicted += q.evicted;
    }
    const sum = (f: "accepted" | "delivered") => QUEUES.reduce((n, q) => n + stats.queues[q][f], 0);
    assert.equal(sum("accepted"), accepted.size);
    assert.equal(sum("delivered"), delivered.length);
    assert.equal(accepted.size, delivered.length + evicted, "the rest is counted as evicted");
  });
});

Deno.test("leased pulls: 6 workers leasing concurrently never get one item twice; ack accounts for all", async () => {
  await withTempDir(async (dir) => {
    await using relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
    const call = relayCall(relay.url);
    // 3 queues × 45 items: below the overflow, so every item must be handed out.
    const submitted: string[] = [];
    for (let i = 0; i < 135; i++) {
      const queue = QUEUES[i % QUEUES.length]!;
      const content = `job ${i}`;
      const res = await call(`/submit?queue=${queue}`, { method: "POST", body: content });
      assert.equal(await res.text(), `OK (${queue})`);
      submitted.push(content);
    }
    const handedOut: Array<{ id: string; content: string }> = [];
    const worker = async (w: number) => {
      for (;;) {
        const limit = 1 + (w % 3);
        const res = await call(`/pull?lease=300&limit=${limit}&wait=1`);
        if (res.status === 204) return;
        assert.equal(res.status, 200);
        const items = await res.json() as Array<{ id: string; content: string }>;
        assert.ok(items.length >= 1 && items.length <= limit);
        handedOut.push(...items);
        const ack = await call("/ack", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ ids: items.map((i) => i.id) }),
        });
        assert.deepEqual(await ack.json(), { acked: items.length, unknown: [] });
      }
    };
    await Promise.all(Array.from({ length: 6 }, (_, w) => worker(w)));
    assert.equal(new Set(handedOut.map((i) => i.id)).size, handedOut.length, "no id twice");
    assert.deepEqual(handedOut.map((i) => i.content).sort(), [...submitted].sort());
    const stats = await getStats(call);
    for (const queue of QUEUES) {
      const q = stats.queues[queue];
      assert.deepEqual([q.accepted, q.leased, q.delivered, q.depth], [45, 45, 45, 0], queue);
    }
  });
});

/**
 * Reliability: kill and account (docs/faults.md, "What the relay promises"). A relay under
 * submits, pushes, leased pulls with acks and a results reader is killed with SIGKILL at a
 * random moment, 10 times (50 with `RELAY_STRESS=1`, as CI runs it), restarting on the same file each time; then everything is
 * counted. Every acknowledged submit must have been delivered to a leased pull, every
 * acknowledged push read from the feed; nothing is delivered again after its ack was
 * acknowledged, nothing is stored twice, and no item is evicted (the load keeps the queues
 * below their 50 items, and the feed's reader ahead of its 50 results). Deliveries again of items whose ack never came
 * back are what a leased pull allows (at least once): they are counted, not failed.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  eventually,
  getStats,
  KEY,
  relayCall,
  startRelayProcess,
  stressOr,
  withTempDir,
} from "../_helpers.ts";

const KILLS = stressOr(10, 50);
const SUBMITTERS = 2;
const PULLERS = 2;
const QUEUES = ["qa", "article", "general"] as const;
/** Acknowledged but not yet delivered items (or results not yet read) before writers wait. */
const MAX_OUTSTANDING = 30;
/** Lease of every pull, seconds: short, so items of a killed round come back soon. */
const LEASE_S = 1;

type Kind = "submit" | "push" | "lease" | "ack" | "results";

/** Everything the clients saw, across every round. */
class Ledger {
  /** Submits answered 200: content → when the answer came (ms). */
  readonly submitted = new Map<string, number>();
  /** Submits sent whose answer never came (the kill): they may or may not have landed. */
  readonly submitUnknown = new Set<string>();
  /** Every delivery by a leased pull: content, id, when its request was sent. */
  readonly deliveries: Array<{ content: string; id: string; sentAt: number }> = [];
  /** Acks answered 200: content → when the answer came (ms). */
  readonly acked = new Map<string, number>();
  /**
   * Contents whose ack was sent but whose answer never came (the kill). The ack may have
   * landed, and then the item is never delivered again; so these do not count as outstanding,
   * or over many kills they would fill the writers' allowance and stop every submit.
   */
  readonly ackUnknown = new Set<string>();
  /** Pushes answered 200. */
  readonly pushed = new Set<string>();
  /** Results read from the feed: content → every `t` it was read with. */
  readonly read = new Map<string, Set<number>>();
  cursor = 0;
  /** Requests in flight when each kill came, by kind. */
  readonly cutOff: Record<Kind, number> = { submit: 0, push: 0, lease: 0, ack: 0, results: 0 };
  readonly inFlight: Record<Kind, number> = { submit: 0, push: 0, lease: 0, ack: 0, results: 0 };

  /** Items acknowledged by submit and not yet by an ack, nor sent in an ack cut off by a kill. */
  outstandingItems(): number {
    let n = 0;
    for (const content of this.submitted.keys()) {
      if (!this.acked.has(content) && !this.ackUnknown.has(content)) n++;
    }
    return n;
  }

  /** Results acknowledged by push and not yet read. */
  outstandingResults(): number {
    let n = 0;
    for (const content of this.pushed) if (!this.read.has(content)) n++;
    return n;
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * One client request, counted in flight while it runs.
 *
 * @returns The response, or `undefined` when the relay went away.
 */
async function request(
  ledger: Ledger,
  kind: Kind,
  send: () => Promise<Response>,
): Promise<Response | undefined> {
  ledger.inFlight[kind]++;
  try {
    return await send();
  } catch {
    return undefined;
  } finally {
    ledger.inFlight[kind]--;
  }
}

/** Runs the clients against `url` until `stop.stopped`; each returns when the relay is gone. */
function clients(url: string, ledger: Ledger, round: number, stop: { stopped: boolean }) {
  const call = relayCall(url);
  const submitter = async (w: number) => {
    for (let n = 0; !stop.stopped; n++) {
      if (ledger.outstandingItems() >= MAX_OUTSTANDING) {
        await sleep(5);
        continue;
      }
      const content = `item r${round} w${w} n${n}`;
      const queue = QUEUES[n % QUEUES.length]!;
      ledger.submitUnknown.add(content);
      const res = await request(
        ledger,
        "submit",
        () => call(`/submit?queue=${queue}`, { method: "POST", body: content }),
      );
      if (res === undefined) return;
      const text = await res.text().catch(() => undefined);
      if (text === undefined) return;
      assert.equal(res.status, 200, text);
      ledger.submitUnknown.delete(content);
      ledger.submitted.set(content, performance.now());
    }
  };
  const pusher = async () => {
    for (let n = 0; !stop.stopped; n++) {
      if (ledger.outstandingResults() >= MAX_OUTSTANDING) {
        await sleep(5);
        continue;
      }
      const content = `result r${round} n${n}`;
      const res = await request(
        ledger,
        "push",
        () => call("/push", { method: "POST", body: content }),
      );
      if (res === undefined) return;
      const text = await res.text().catch(() => undefined);
      if (text === undefined) return;
      assert.equal(res.status, 200, text);
      ledger.pushed.add(content);
    }
  };
  const puller = async () => {
    while (!stop.stopped) {
      if (!await leaseAndAck(call, ledger)) return;
    }
  };
  const reader = async () => {
    while (!stop.stopped) {
      const got = await readResults(call, ledger);
      if (got === undefined) return;
      if (got === 0) await sleep(5);
    }
  };
  return [
    ...Array.from({ length: SUBMITTERS }, (_, w) => submitter(w)),
    pusher(),
    ...Array.from({ length: PULLERS }, () => puller()),
    reader(),
  ];
}

/**
 * One leased pull and, when it got items, their ack.
 *
 * @returns `false` when the relay went away; `true` otherwise (also when nothing was there).
 */
async function leaseAndAck(
  call: (path: string, init?: RequestInit) => Promise<Response>,
  ledger: Ledger,
): Promise<boolean> {
  const sentAt = performance.now();
  const res = await request(ledger, "lease", () => call(`/pull?lease=${LEASE_S}&limit=5`));
  if (res === undefined) return false;
  if (res.status === 204) {
    await sleep(5);
    return true;
  }
  const items = await res.json().catch(() => undefined) as
    | Array<{ id: string; content: string }>
    | undefined;
  if (items === undefined) return false;
  assert.equal(res.status, 200);
  for (const item of items) {
    ledger.deliveries.push({ content: item.content, id: item.id, sentAt });
    ledger.ackUnknown.add(item.content);
  }
  const ack = await request(ledger, "ack", () =>
    call("/ack", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ ids: items.map((i) => i.id) }),
    }));
  if (ack === undefined) return false;
  const outcome = await ack.json().catch(() => undefined) as
    | { acked: number; unknown: string[] }
    | undefined;
  if (outcome === undefined) return false;
  assert.equal(ack.status, 200);
  for (const item of items) ledger.ackUnknown.delete(item.content);
  const unknown = new Set(outcome.unknown);
  const now = performance.now();
  for (const item of items) {
    if (!unknown.has(item.id) && !ledger.acked.has(item.content)) {
      ledger.acked.set(item.content, now);
    }
  }
  return true;
}

/**
 * Reads the feed from the ledger's cursor.
 *
 * @returns How many results it read, or `undefined` when the relay went away.
 */
async function readResults(
  call: (path: string, init?: RequestInit) => Promise<Response>,
  ledger: Ledger,
): Promise<number | undefined> {
  const res = await request(ledger, "results", () => call(`/results?since=${ledger.cursor}`));
  if (res === undefined) return undefined;
  const page = await res.json().catch(() => undefined) as
    | { items: Array<{ t: number; c: string }>; cursor: number; gap?: boolean }
    | undefined;
  if (page === undefined) return undefined;
  assert.equal(res.status, 200);
  assert.ok(!page.gap, "no result was evicted before it was read");
  for (const item of page.items) {
    const ts = ledger.read.get(item.c) ?? new Set<number>();
    ts.add(item.t);
    ledger.read.set(item.c, ts);
  }
  ledger.cursor = Math.max(ledger.cursor, page.cursor);
  return page.items.length;
}

Deno.test(`kill and account: ${KILLS} SIGKILLs across submits, pushes and leased pulls lose and duplicate nothing the delivery rules do not allow`, async () => {
  const started = performance.now();
  await withTempDir(async (dir) => {
    const ledger = new Ledger();
    for (let round = 0; round < KILLS; round++) {
      const relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
      const stop = { stopped: false };
      const running = clients(relay.url, ledger, round, stop);
      // Each round has a submit and a push answered before its kill, however slow the machine
      // (acks wait for leases that earlier kills left, so a round may have none of its own).
      const before = [ledger.submitted.size, ledger.pushed.size];
      await eventually(
        () => ledger.submitted.size > before[0]! && ledger.pushed.size > before[1]!,
        "a submit and a push answered in this round",
        60_000,
      );
      await sleep(100 + Math.random() * 300);
      for (const kind of Object.keys(ledger.cutOff) as Kind[]) {
        ledger.cutOff[kind] += ledger.inFlight[kind];
      }
      relay.child.kill("SIGKILL");
      stop.stopped = true;
      await Promise.all(running);
      await relay.stop();
    }

    // The last start: drain what is left (leases of the last round end within a second).
    await using relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
    const call = relayCall(relay.url);
    await eventually(
      async () => {
        assert.ok(await leaseAndAck(call, ledger));
        const stats = await getStats(call);
        return QUEUES.every((q) => stats.queues[q].depth === 0);
      },
      "the queues to drain",
      30_000,
    );
    while ((await readResults(call, ledger) ?? 0) > 0) { /* read to the end */ }
    const stats = await getStats(call);

    // Items: every acknowledged submit delivered, nothing stored twice, nothing after its ack.
    const delivered = new Map<string, Set<string>>();
    for (const d of ledger.deliveries) {
      const ids = delivered.get(d.content) ?? new Set<string>();
      ids.add(d.id);
      delivered.set(d.content, ids);
    }
    const lost = [...ledger.submitted.keys()].filter((c) => !delivered.has(c));
    const storedTwice = [...delivered].filter(([, ids]) => ids.size > 1).map(([c]) => c);
    const afterAck = ledger.deliveries.filter((d) => {
      const ackedAt = ledger.acked.get(d.content);
      return ackedAt !== undefined && d.sentAt > ackedAt;
    });
    const unexpected = [...delivered.keys()].filter((c) =>
      !ledger.submitted.has(c) && !ledger.submitUnknown.has(c)
    );
    const again = ledger.deliveries.length - delivered.size;
    // Results: every acknowledged push read, each once with one t.
    const resultsLost = [...ledger.pushed].filter((c) => !ledger.read.has(c));
    const resultsTwice = [...ledger.read].filter(([, ts]) => ts.size > 1).map(([c]) => c);

    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    console.log(
      `kill and account: ${KILLS} kills in ${seconds} s; in flight at the kills: ` +
        `${JSON.stringify(ledger.cutOff)}; submits acknowledged ${ledger.submitted.size}, ` +
        `unanswered ${ledger.submitUnknown.size}; items found ${delivered.size} ` +
        `(${delivered.size - ledger.submitted.size} of them unanswered submits that landed), ` +
        `lost ${lost.length}, stored twice ${storedTwice.length}, delivered after their ack ` +
        `${afterAck.length}, delivered again before an ack came back ${again}, whose ack went ` +
        `unanswered ${ledger.ackUnknown.size}; pushes ` +
        `acknowledged ${ledger.pushed.size}, results read ${ledger.read.size}, lost ` +
        `${resultsLost.length}, read twice ${resultsTwice.length}`,
    );
    assert.deepEqual(lost, [], "acknowledged submits never delivered");
    assert.deepEqual(storedTwice, [], "contents stored as two items");
    assert.deepEqual(afterAck, [], "items delivered after their ack was acknowledged");
    assert.deepEqual(unexpected, [], "items nobody submitted");
    assert.deepEqual(resultsLost, [], "acknowledged pushes never read");
    assert.deepEqual(resultsTwice, [], "results read twice");
    for (const q of QUEUES) {
      const s = stats.queues[q];
      assert.equal(s.evicted, 0, `${q}: nothing evicted, so nothing may be missing`);
      assert.equal(s.accepted, s.delivered + s.evicted + s.cleared + s.depth, q);
    }
    // The feed keeps 50 results: older ones are evicted, but only after they were read (the
    // reader never saw a gap).
    assert.equal(
      stats.results.pushed,
      stats.results.depth + stats.results.evicted + stats.results.cleared,
    );
    assert.ok(stats.results.pushed >= ledger.pushed.size);
    // The load reached every kind of request at some kill.
    assert.ok(ledger.submitted.size > KILLS && ledger.pushed.size > KILLS);
    assert.ok(ledger.acked.size > KILLS);
  });
});

/**
 * `GET /metrics` in the Prometheus text format, parsed back line by line.
 */

import assert from "node:assert/strict";
import { RelayMetrics } from "../../src/server/metrics.ts";
import { createStore, submit } from "../../src/store/store.ts";
import { assertProblem, KEY, makeApp, openTempKv } from "../_helpers.ts";

/** A sample line of the text format 0.0.4: name, optional labels, value. */
const SAMPLE =
  /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*",?)*\})? (-?[0-9.e+-]+|\+Inf|NaN)$/;

/** Parses the exposition text; fails on any line that is not a comment or a sample. */
function parse(text: string): { types: Map<string, string>; samples: Map<string, number> } {
  const types = new Map<string, string>();
  const samples = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("# HELP ")) continue;
    const type = line.match(/^# TYPE (\S+) (counter|gauge|histogram|summary|untyped)$/);
    if (type) {
      types.set(type[1]!, type[2]!);
      continue;
    }
    const sample = line.match(SAMPLE);
    assert.ok(sample, `not a line of the Prometheus text format: ${line}`);
    samples.set(`${sample[1]}${sample[2] ?? ""}`, Number(sample[3]));
  }
  return { types, samples };
}

Deno.test("GET /metrics is Prometheus text with requests, latency, depths and counters", async () => {
  await using t = await makeApp();
  await t.call("/submit?queue=general", { method: "POST", body: "before the first scrape" });
  // The first scrape loads prom-client; requests are counted from then on.
  assert.equal((await t.call("/metrics")).status, 200);
  await t.call("/submit?queue=qa", { method: "POST", body: "https://stackoverflow.com/q/1" });
  await t.call("/submit?queue=qa", { method: "POST", body: "https://stackoverflow.com/q/1" });
  await t.call("/submit?queue=general", { method: "POST", body: "two" });
  await t.call("/pull?queue=general&lease=60&limit=1");
  await t.call("/push", { method: "POST", body: "r" });
  await t.call("/nowhere");
  const res = await t.call("/metrics");
  assert.equal(res.status, 200);
  assert.match(res.headers.get("content-type")!, /^text\/plain; version=0\.0\.4/);
  const { types, samples } = parse(await res.text());
  assert.equal(types.get("relay_http_requests_total"), "counter");
  assert.equal(types.get("relay_http_request_duration_seconds"), "histogram");
  assert.equal(types.get("relay_kv_commit_duration_seconds"), "histogram");
  assert.equal(types.get("relay_waiting_clients"), "gauge");
  assert.equal(
    samples.get('relay_http_requests_total{route="/submit",method="POST",status="200"}'),
    3,
  );
  assert.equal(
    samples.get('relay_http_requests_total{route="other",method="GET",status="404"}'),
    1,
  );
  assert.equal(samples.get('relay_http_request_duration_seconds_count{route="/submit"}'), 3);
  assert.equal(samples.get('relay_queue_depth{queue="qa"}'), 1);
  // The store's counters and depths are complete: they include what came before.
  assert.equal(samples.get('relay_queue_depth{queue="general"}'), 2);
  assert.equal(samples.get('relay_queue_in_flight{queue="general"}'), 1);
  assert.equal(samples.get('relay_queue_items_total{queue="qa",event="accepted"}'), 1);
  assert.equal(samples.get('relay_queue_items_total{queue="qa",event="duplicate"}'), 1);
  assert.equal(samples.get('relay_queue_items_total{queue="general",event="leased"}'), 1);
  assert.equal(samples.get('relay_queue_items_total{queue="general",event="accepted"}'), 2);
  assert.equal(samples.get("relay_results_depth"), 1);
  assert.equal(samples.get('relay_results_total{event="pushed"}'), 1);
  assert.equal(samples.get('relay_waiting_clients{kind="stream"}'), 0);
  // Scraping twice does not add the durable counters up twice.
  const again = parse(await (await t.call("/metrics")).text()).samples;
  assert.equal(again.get('relay_queue_items_total{queue="qa",event="accepted"}'), 1);
  await assertProblem(await t.app.request("/metrics"), 401);
  // Prometheus sends the key as a parameter (params: {key: …}).
  assert.equal((await t.app.request(`/metrics?key=${KEY}`)).status, 200);
});

Deno.test("RelayMetrics counts KV commits and waiting clients", async () => {
  await using temp = await openTempKv();
  const metrics = new RelayMetrics();
  const store = createStore(temp.kv, { onCommit: metrics.commit });
  const done = metrics.wait("pull");
  await submit(store, "before the first scrape", "general");
  await metrics.text(store);
  await submit(store, "x", "general");
  const during = parse(await metrics.text(store)).samples;
  assert.equal(during.get('relay_kv_commit_duration_seconds_count{outcome="ok"}'), 1);
  // Waiting clients are counted from the start.
  assert.equal(during.get('relay_waiting_clients{kind="pull"}'), 1);
  done();
  done(); // a second call changes nothing
  const after = parse(await metrics.text(store)).samples;
  assert.equal(after.get('relay_waiting_clients{kind="pull"}'), 0);
});

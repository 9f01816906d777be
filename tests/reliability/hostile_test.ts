/**
 * Reliability: hostile input, property-based with fast-check. Random methods,
 * paths, query strings, headers, content types and bodies (invalid UTF-8, deep JSON, huge
 * numbers, NUL bytes) against every endpoint of the real app: never a 5xx, every error a
 * problem document, and the store's invariants hold afterwards. 1,000 runs, 3,000 with
 * `RELAY_STRESS=1`.
 *
 * @module
 */

import assert from "node:assert/strict";
import fc from "fast-check";
import { KEY, makeApp, stressOr } from "../_helpers.ts";
import { peek, readResults, stats } from "../../src/store/store.ts";

const PATHS = [
  "/submit",
  "/pull",
  "/peek",
  "/push",
  "/results",
  "/publish",
  "/clear",
  "/health",
  "/stats",
  "/ack",
  "/metrics",
  "/results/stream",
  "/",
  "/submit/",
  "/SUBMIT",
  "//pull",
  "/%00",
  "/%E0%A4%A",
  "/peek%2F..",
];

const QUERY_VALUES = fc.oneof(
  fc.constantFrom(
    "qa",
    "article",
    "general",
    "queue_qa",
    "QA",
    "",
    "0",
    "-1",
    "1e400",
    "9".repeat(400),
    "NaN",
    "50",
    "51",
    "0x10",
    " 5",
    "false",
    "true",
    "%00",
    "\u0000",
    "\ud800",
  ),
  fc.string({ maxLength: 20 }),
);

const query = fc.dictionary(
  fc.constantFrom("queue", "since", "limit", "dedupe", "key", "wait", "lease", "x"),
  QUERY_VALUES,
  { maxKeys: 4 },
).map((params) => {
  const search = new URLSearchParams(params).toString();
  return search === "" ? "" : `?${search}`;
});

const CONTENT_TYPES = [
  undefined,
  "text/plain",
  "text/plain; charset=utf-8",
  "text/plain; charset=latin1",
  "application/json",
  "application/json; charset=UTF-8",
  "application/x-www-form-urlencoded",
  "multipart/form-data; boundary=x",
  "application/octet-stream",
  "text/html",
  ";;;",
  'application/json; charset="utf-8"; x=y',
];

const deepJson = fc.integer({ min: 1, max: 5000 }).map((n) =>
  fc.constantFrom("[".repeat(n) + "]".repeat(n), `{"content":${"[".repeat(n)}`)
).chain((a) => a);

const bodies: fc.Arbitrary<string | Uint8Array<ArrayBuffer>> = fc.oneof(
  fc.string({ unit: "grapheme", maxLength: 200 }),
  fc.string({ unit: "binary", maxLength: 200 }),
  fc.uint8Array({ maxLength: 300 }).map((a) => new Uint8Array(a)),
  deepJson,
  fc.constantFrom(
    '{"content": 1e999}',
    '{"content": 123456789012345678901234567890}',
    '{"content": "a\\u0000b"}',
    '{"content": "\\ud800"}',
    '{"url": "https://stackoverflow.com/q/1", "queue": "qa"}',
    '{"content": null, "url": ["x"]}',
    '{"title": "t", "content": "c", "targets": ["notes", "notes"]}',
    '{"title": 1, "content": {}}',
    '{"ids": ["qa:1", "general:2"]}',
    '{"ids": ["qa:99999999999999999"]}',
    '{"ids": [null, {}, "article:-1"]}',
    "content=hello&queue=general",
    "content=%FF%FE&queue=%00",
    "\u0000\u0000\u0000",
    "null",
    "[]",
    '"just a string"',
  ),
  fc.json({ maxDepth: 4 }),
);

const request = fc.record({
  method: fc.oneof(
    { weight: 6, arbitrary: fc.constantFrom("GET", "POST") },
    { weight: 1, arbitrary: fc.constantFrom("HEAD", "PUT", "DELETE", "PATCH", "OPTIONS", "FOO") },
  ),
  path: fc.oneof(
    { weight: 6, arbitrary: fc.constantFrom(...PATHS.slice(0, 12)) },
    { weight: 1, arbitrary: fc.constantFrom(...PATHS.slice(12)) },
  ),
  query,
  contentType: fc.constantFrom(...CONTENT_TYPES),
  key: fc.oneof(
    { weight: 8, arbitrary: fc.constant(KEY) },
    { weight: 1, arbitrary: fc.constantFrom("", "wrong", `${KEY} `, KEY.toUpperCase()) },
    { weight: 1, arbitrary: fc.constant(undefined) },
  ),
  body: bodies,
  extraHeader: fc.option(
    fc.tuple(
      fc.constantFrom(
        "content-length",
        "transfer-encoding",
        "accept",
        "x-forwarded-for",
        "origin",
        "x-forwarded-host",
      ),
      fc.constantFrom("0", "999999999999", "chunked", "*/*", "-1", "null", "https://evil.example"),
    ),
  ),
});

/** Random requests sent: 1,000, or 3,000 with `RELAY_STRESS=1`. */
const RUNS = stressOr(1000, 3000);

Deno.test("hostile requests: never a 5xx, every error a problem document, invariants hold", async () => {
  // As if the relay were stopping: long-polls answer at once and streams end, so that a
  // random wait=50 does not hold the test up (waiting is tested in tests/server/live_test.ts).
  await using t = await makeApp({ maxBodyBytes: 4096, closing: AbortSignal.abort() });
  let sent = 0;
  const statuses = new Map<number, number>();
  await fc.assert(
    fc.asyncProperty(request, async (r) => {
      const headers = new Headers();
      if (r.contentType !== undefined) headers.set("content-type", r.contentType);
      if (r.key !== undefined) headers.set("x-auth-key", r.key);
      if (r.extraHeader !== null) {
        try {
          headers.set(r.extraHeader[0], r.extraHeader[1]);
        } catch {
          // a header the Request API refuses to send
        }
      }
      const hasBody = r.method !== "GET" && r.method !== "HEAD";
      let req: Request;
      try {
        req = new Request(`http://relay${r.path}${r.query}`, {
          method: r.method,
          headers,
          body: hasBody ? r.body : null,
        });
      } catch {
        return; // not a request a client can send
      }
      sent++;
      const res = await t.app.request(req);
      const label = `${r.method} ${r.path}${r.query} -> ${res.status}`;
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      assert.ok(res.status < 500, label);
      if (res.status >= 400) {
        assert.equal(res.headers.get("content-type"), "application/problem+json", label);
      }
      if (res.status >= 400 && r.method !== "HEAD") {
        const doc = await res.json();
        assert.equal(doc.status, res.status, label);
        assert.equal(typeof doc.title, "string", label);
        assert.equal(typeof doc.detail, "string", label);
      } else {
        await res.body?.cancel();
      }
    }),
    { numRuns: RUNS },
  );
  assert.ok(sent > RUNS * 2 / 3, `only ${sent} of ${RUNS} requests were sendable`);
  // The inputs reached the handlers, not only the router: some were stored, many refused.
  for (const status of [200, 400, 401, 404, 405, 415]) {
    assert.ok((statuses.get(status) ?? 0) > 10, `${status}: ${JSON.stringify([...statuses])}`);
  }
  // The store's invariants: at most 50 per queue and in the feed, t strictly increasing.
  for (const [queue, items] of await peek(t.store)) {
    assert.ok(items.length <= 50, queue);
  }
  const page = await readResults(t.store, { since: 0, limit: 50 });
  for (let i = 1; i < page.items.length; i++) {
    assert.ok(page.items[i]!.t > page.items[i - 1]!.t);
  }
  const s = await stats(t.store);
  for (const q of Object.values(s.queues)) {
    assert.equal(q.accepted, q.delivered + q.evicted + q.cleared + q.depth);
    assert.ok(q.in_flight <= q.depth);
  }
  assert.equal(s.results.pushed, s.results.evicted + s.results.cleared + s.results.depth);
});

/** The app's results and queue book-keeping in process: push, results, clear, stats, leases. */
import assert from "node:assert/strict";
import { assertProblem, makeApp } from "../_helpers.ts";
import { assertText, JSON_TYPE, submitText } from "./_app.ts";

Deno.test("POST /push and GET /results", async (t) => {
  await t.step("answers OK; trims; empty is 400", async () => {
    await using app = await makeApp();
    await assertText(await app.call("/push", { method: "POST", body: "  result \n" }), "OK");
    await assertText(
      await app.call("/push", {
        method: "POST",
        body: JSON.stringify({ content: "# md" }),
        headers: { "content-type": "application/json" },
      }),
      "OK",
    );
    await assertText(
      await app.call("/push", {
        method: "POST",
        body: "content=form",
        headers: { "content-type": "application/x-www-form-urlencoded" },
      }),
      "OK",
    );
    for (const body of ["", " ", JSON.stringify({ content: "" }), JSON.stringify({})]) {
      const res = await app.call("/push", {
        method: "POST",
        body,
        headers: { "content-type": body.startsWith("{") ? "application/json" : "text/plain" },
      });
      assert.match(await assertProblem(res, 400), /^Cannot push: content is empty/);
    }
    await assertProblem(
      await app.call("/push", {
        method: "POST",
        body: '{"content": ["x"]}',
        headers: { "content-type": "application/json" },
      }),
      400,
    );
    await assertProblem(
      await app.call("/push", {
        method: "POST",
        body: "x",
        headers: { "content-type": "image/png" },
      }),
      415,
    );
    const page = await (await app.call("/results")).json();
    assert.deepEqual(page.items.map((i: { c: string }) => i.c), ["result", "# md", "form"]);
  });

  await t.step("lists {t, c} after since, ascending, cursor = last t", async () => {
    await using app = await makeApp();
    for (const c of ["a", "b", "c"]) await app.call("/push", { method: "POST", body: c });
    const res = await app.call("/results");
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("content-type"), JSON_TYPE);
    const t0 = app.clock.now;
    assert.deepEqual(await res.json(), {
      cursor: t0 + 2,
      items: [{ t: t0, c: "a" }, { t: t0 + 1, c: "b" }, { t: t0 + 2, c: "c" }],
    });
    assert.deepEqual(await (await app.call(`/results?since=${t0}&limit=1`)).json(), {
      cursor: t0 + 1,
      items: [{ t: t0 + 1, c: "b" }],
    });
  });

  await t.step("clamps limit to 50, however large", async () => {
    await using app = await makeApp();
    for (let i = 0; i < 55; i++) await app.call("/push", { method: "POST", body: `r${i}` });
    for (const limit of ["51", "1000", "9007199254740993", "99999999999999999999999"]) {
      const res = await app.call(`/results?limit=${limit}`);
      assert.equal(res.status, 200, limit);
      const page = await res.json();
      assert.equal(page.items.length, 50);
      assert.equal(page.items[0].c, "r5");
    }
    assert.equal((await (await app.call("/results?limit=007")).json()).items.length, 7);
  });

  await t.step(
    "answers 400 for since and limit that are not whole numbers in range",
    async () => {
      await using app = await makeApp();
      for (
        const query of [
          "since=-1",
          "since=1.5",
          "since=abc",
          "since=1e3",
          "limit=0",
          "limit=-3",
          "limit=2.5",
          "limit=ten",
          "since=99999999999999999999",
        ]
      ) {
        assert.match(
          await assertProblem(await app.call(`/results?${query}`), 400),
          /^Cannot read results: "(since|limit)" must be/,
          query,
        );
      }
    },
  );

  await t.step("answers cursor = since with no newer items, 0 on an empty feed", async () => {
    await using app = await makeApp();
    assert.deepEqual(await (await app.call("/results")).json(), { cursor: 0, items: [] });
    assert.deepEqual(await (await app.call("/results?since=")).json(), { cursor: 0, items: [] });
    assert.deepEqual(await (await app.call("/results?since=12345")).json(), {
      cursor: 12345,
      items: [],
    });
  });

  await t.step("t strictly increases within one millisecond", async () => {
    await using app = await makeApp();
    for (let i = 0; i < 5; i++) await app.call("/push", { method: "POST", body: `same ms ${i}` });
    const ts = (await (await app.call("/results")).json()).items.map((i: { t: number }) => i.t);
    assert.deepEqual(ts, [0, 1, 2, 3, 4].map((d) => app.clock.now + d));
  });
});

Deno.test("POST /clear", async (t) => {
  await t.step(
    "removes queues, results and duplicate records; keeps the t high-water mark",
    async () => {
      await using app = await makeApp();
      await submitText(app, "https://zhihu.com/q");
      await submitText(app, "g");
      await app.call("/push", { method: "POST", body: "r" });
      const before = (await (await app.call("/results")).json()).cursor;
      await assertText(await app.call("/clear", { method: "POST" }), "OK (all queues cleared)");
      assert.equal((await app.call("/peek")).status, 204);
      assert.deepEqual(await (await app.call("/results")).json(), { cursor: 0, items: [] });
      await assertText(await submitText(app, "g"), "OK (general)");
      await app.call("/push", { method: "POST", body: "after" });
      const after = await (await app.call("/results")).json();
      assert.equal(after.items[0].t, before + 1);
    },
  );
});

Deno.test("GET /stats counts accepted, duplicate, delivered, evicted, cleared and pushed", async () => {
  await using t = await makeApp();
  for (let i = 0; i < 52; i++) await submitText(t, `item ${i}`, "/submit?queue=general");
  await submitText(t, "item 51", "/submit?queue=general");
  await submitText(t, "a question", "/submit?queue=qa");
  assert.equal((await t.call("/pull?queue=qa")).status, 200);
  await submitText(t, "kept", "/submit?queue=article");
  await t.call("/push", { method: "POST", body: "r1" });
  assert.equal((await t.call("/clear", { method: "POST" })).status, 200);
  await submitText(t, "after clear", "/submit?queue=article");
  const res = await t.call("/stats");
  assert.equal(res.status, 200);
  assert.equal(res.headers.get("content-type"), JSON_TYPE);
  assert.deepEqual(await res.json(), {
    queues: {
      qa: {
        ...{ accepted: 1, duplicate: 0, delivered: 1, leased: 0, evicted: 0, cleared: 0 },
        ...{ depth: 0, in_flight: 0 },
      },
      article: {
        ...{ accepted: 2, duplicate: 0, delivered: 0, leased: 0, evicted: 0, cleared: 1 },
        ...{ depth: 1, in_flight: 0 },
      },
      general: {
        ...{ accepted: 52, duplicate: 1, delivered: 0, leased: 0, evicted: 2, cleared: 50 },
        ...{ depth: 0, in_flight: 0 },
      },
    },
    results: { pushed: 1, evicted: 0, cleared: 1, depth: 0, hwm: t.clock.now },
  });
  await assertProblem(await t.app.request("/stats"), 401);
});

Deno.test("GET /pull?lease= answers id, content, created_at and lease_until; POST /ack deletes", async () => {
  await using t = await makeApp();
  await submitText(t, "one", "/submit?queue=general");
  await submitText(t, "two", "/submit?queue=general");
  const res = await t.call("/pull?queue=queue_general&lease=60&limit=1");
  assert.equal(res.status, 200);
  assert.equal(res.headers.get("content-type"), JSON_TYPE);
  assert.deepEqual(await res.json(), [{
    id: "general:1",
    content: "one",
    created_at: "2026-01-01 00:00:00",
    lease_until: t.clock.now + 60_000,
  }]);
  // The spec's plain pull still answers an array of strings, without the leased item.
  assert.deepEqual(await (await t.call("/pull?queue=general")).json(), ["two"]);
  const peeked = await (await t.call("/peek?queue=general")).json();
  assert.deepEqual(peeked.queues.general[0].lease_until, t.clock.now + 60_000);
  const acked = await t.call("/ack", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ ids: ["general:1", "qa:7"] }),
  });
  assert.equal(acked.status, 200);
  assert.deepEqual(await acked.json(), { acked: 1, unknown: ["qa:7"] });
  assert.equal((await t.call("/peek")).status, 204);
});

Deno.test("POST /ack refuses bad bodies with problem documents and changes nothing", async () => {
  await using t = await makeApp();
  await submitText(t, "keep me", "/submit?queue=qa");
  await t.call("/pull?lease=60");
  const post = (body: string, type = "application/json") =>
    t.call("/ack", { method: "POST", headers: { "content-type": type }, body });
  await assertProblem(await post('{"ids":["qa:1"]}', "text/plain"), 415);
  for (
    const body of [
      "not json",
      "[]",
      "{}",
      '{"ids": "qa:1"}',
      '{"ids": []}',
      '{"ids": ["qa"]}',
      '{"ids": ["nope:1"]}',
      '{"ids": ["qa:0"]}',
      '{"ids": ["qa:1x"]}',
      '{"ids": [1]}',
      JSON.stringify({ ids: Array.from({ length: 501 }, (_, i) => `qa:${i + 1}`) }),
    ]
  ) {
    await assertProblem(await post(body), 400);
  }
  await assertProblem(await t.app.request("/ack", { method: "POST" }), 401);
  await assertProblem(await t.call("/ack"), 405);
  assert.equal((await (await t.call("/peek")).json()).total, 1);
});

Deno.test("GET /results adds gap: true only for a reader with a cursor who missed evicted results", async () => {
  await using t = await makeApp();
  for (let i = 0; i < 51; i++) {
    await t.call("/push", { method: "POST", body: `r${i}` });
    t.clock.advance(1);
  }
  const first = Date.UTC(2026, 0, 1); // r0's t, evicted
  const fresh = await (await t.call("/results")).json();
  assert.equal("gap" in fresh, false, "no cursor given: the spec's answer, unchanged");
  assert.equal((await (await t.call("/results?since=0")).json()).gap, true);
  assert.equal((await (await t.call(`/results?since=${first - 1}&limit=1`)).json()).gap, true);
  assert.equal("gap" in await (await t.call(`/results?since=${first}`)).json(), false);
});

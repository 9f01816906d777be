import assert from "node:assert/strict";
import { assertProblem, KEY, makeApp, type TestApp } from "../_helpers.ts";
import { type ProblemKind, problemType } from "../../src/errors.ts";
import { DEFAULT_QA_HOSTS } from "../../src/queue_names.ts";

const TEXT = "text/plain; charset=utf-8";
const JSON_TYPE = "application/json; charset=utf-8";

async function assertText(res: Response, expected: string): Promise<void> {
  assert.equal(res.status, 200);
  assert.equal(res.headers.get("content-type"), TEXT);
  assert.equal(await res.text(), expected);
}

function submitText(t: TestApp, text: string, path = "/submit") {
  return t.call(path, { method: "POST", body: text, headers: { "content-type": "text/plain" } });
}

function submitJson(t: TestApp, value: unknown, path = "/submit") {
  return t.call(path, {
    method: "POST",
    body: JSON.stringify(value),
    headers: { "content-type": "application/json" },
  });
}

async function pullAll(t: TestApp, queue: string): Promise<unknown> {
  const res = await t.call(`/pull?queue=${queue}`);
  return res.status === 204 ? [] : await res.json();
}

Deno.test("POST /submit", async (t) => {
  await t.step("answers OK (<queue>) as text/plain; charset=utf-8", async () => {
    await using app = await makeApp();
    await assertText(await submitText(app, "https://stackoverflow.com/q/1"), "OK (qa)");
    await assertText(await submitText(app, "plain words"), "OK (general)");
    await assertText(await submitJson(app, { content: "x", queue: "article" }), "OK (article)");
  });

  await t.step("takes url in place of content, a non-empty content winning", async () => {
    await using app = await makeApp();
    await assertText(await submitJson(app, { url: "https://zhihu.com/q/1" }), "OK (qa)");
    await assertText(
      await submitJson(app, { content: "c", url: "https://zhihu.com/q/2" }),
      "OK (general)",
    );
    await assertText(await submitJson(app, { content: "  ", url: "u" }), "OK (general)");
    assert.deepEqual(await pullAll(app, "general"), ["c", "u"]);
  });

  await t.step(
    "takes queue from the body or the query, the body winning; empty is absent",
    async () => {
      await using app = await makeApp();
      await assertText(await submitText(app, "a", "/submit?queue=article"), "OK (article)");
      await assertText(
        await submitJson(app, { content: "b", queue: "qa" }, "/submit?queue=article"),
        "OK (qa)",
      );
      await assertText(
        await submitJson(app, { content: "c", queue: "" }, "/submit?queue=article"),
        "OK (article)",
      );
      await assertText(await submitText(app, "d", "/submit?queue="), "OK (general)");
      await assertText(
        await submitJson(app, { content: "https://zhihu.com/x", queue: "general" }),
        "OK (general)",
      );
    },
  );

  await t.step("reads its query string as URLSearchParams does", async () => {
    await using app = await makeApp();
    const cases: Array<[string, string]> = [
      ["/submit?x=1&queue=qa", "OK (qa)"],
      ["/submit?&&queue=article&", "OK (article)"],
      ["/submit?queue=qa&queue=article", "OK (qa)"],
      ["/submit?queue=%61rticle", "OK (article)"],
      ["/submit?queue", "OK (general)"],
      ["/submit?queue=&dedupe=false", "OK (general)"],
      ["/submit?dedupe=false&queue=qa", "OK (qa)"],
    ];
    for (const [path, answer] of cases) await assertText(await submitText(app, path, path), answer);
    const detail = await assertProblem(await submitText(app, "x", "/submit?queue=a+b"), 400);
    assert.match(detail, /queue "a b" is not one of/);
  });

  await t.step("refuses any other queue name, the queue_ prefix included", async () => {
    await using app = await makeApp();
    for (const queue of ["queue_qa", "QA", "other"]) {
      const detail = await assertProblem(await submitJson(app, { content: "x", queue }), 400);
      assert.match(detail, new RegExp(`queue "${queue}" is not one of "qa", "article", "general"`));
      await assertProblem(await submitText(app, "x", `/submit?queue=${queue}`), 400);
    }
    assert.deepEqual(await pullAll(app, "general"), []);
  });

  await t.step(
    "trims content before storing and comparing; empty after trimming is 400",
    async () => {
      await using app = await makeApp();
      await assertText(await submitText(app, "  \n padded \t"), "OK (general)");
      await assertText(await submitText(app, "padded"), "OK (duplicate)");
      for (const body of ["", "   \n\t"]) {
        const detail = await assertProblem(await submitText(app, body), 400);
        assert.match(detail, /^Cannot submit: content is empty/);
      }
      await assertProblem(await submitJson(app, {}), 400);
      await assertProblem(await submitJson(app, { content: " ", url: " " }), 400);
      assert.deepEqual(await pullAll(app, "general"), ["padded"]);
    },
  );

  await t.step(
    "accepts JSON, text/plain, form fields, a raw form body and no content type",
    async () => {
      await using app = await makeApp();
      // A byte body gets no Content-Type from Request (a string body would get text/plain).
      const untyped = new Request("http://relay/submit", {
        method: "POST",
        body: new TextEncoder().encode("no type"),
        headers: { "x-auth-key": KEY },
      });
      assert.equal(untyped.headers.get("content-type"), null);
      await assertText(await app.app.request(untyped), "OK (general)");
      await assertText(
        await app.call("/submit", {
          method: "POST",
          body: "content=form+field&queue=article",
          headers: { "content-type": "application/x-www-form-urlencoded" },
        }),
        "OK (article)",
      );
      await assertText(
        await app.call("/submit", {
          method: "POST",
          body: "url=https%3A%2F%2Fzhihu.com%2Fq",
          headers: { "content-type": "application/x-www-form-urlencoded" },
        }),
        "OK (qa)",
      );
      // What `curl -d 'some text'` sends: taken whole as plain text.
      await assertText(
        await app.call("/submit", {
          method: "POST",
          body: "some text & https://example.com/?a=b",
          headers: { "content-type": "application/x-www-form-urlencoded" },
        }),
        "OK (general)",
      );
      await assertText(
        await app.call("/submit", {
          method: "POST",
          body: JSON.stringify({ content: "json" }),
          headers: { "content-type": "Application/JSON; charset=UTF-8" },
        }),
        "OK (general)",
      );
      assert.deepEqual(await pullAll(app, "general"), [
        "no type",
        "some text & https://example.com/?a=b",
        "json",
      ]);
      assert.deepEqual(await pullAll(app, "article"), ["form field"]);
      assert.deepEqual(await pullAll(app, "qa"), ["https://zhihu.com/q"]);
    },
  );

  await t.step("answers 415 for any other content type, with Accept-Post", async () => {
    await using app = await makeApp();
    for (const type of ["application/xml", "multipart/form-data; boundary=x", "text/html"]) {
      const res = await app.call("/submit", {
        method: "POST",
        body: "x",
        headers: { "content-type": type },
      });
      assert.match(res.headers.get("accept-post") ?? "", /application\/json/);
      await assertProblem(res, 415);
    }
  });

  await t.step(
    "answers 400 for malformed JSON, non-objects, wrong field types and bad UTF-8",
    async () => {
      await using app = await makeApp();
      await submitText(app, "kept");
      const bodies: Array<[BodyInit, string]> = [
        ["{", "application/json"],
        ["[1,2]", "application/json"],
        ["null", "application/json"],
        ['"text"', "application/json"],
        ['{"content": 5}', "application/json"],
        ['{"content": "x", "queue": 1}', "application/json"],
        ['{"url": null}', "application/json"],
        [new Uint8Array([0x68, 0xff, 0xfe]), "text/plain"],
        [new Uint8Array([0xc3, 0x28]), "application/json"],
        ['{"content": "a\\ud800b"}', "application/json"],
        ['{"url": "\\udfff"}', "application/json"],
        ["[".repeat(100_000) + "]".repeat(100_000), "application/json"],
        ['{"a":'.repeat(50_000) + "1" + "}".repeat(50_000), "application/json"],
      ];
      for (const [body, type] of bodies) {
        const res = await app.call("/submit", {
          method: "POST",
          body,
          headers: { "content-type": type },
        });
        const detail = await assertProblem(res, 400);
        assert.match(detail, /^Cannot submit: /);
      }
      assert.deepEqual(await pullAll(app, "general"), ["kept"], "nothing stored is lost");
    },
  );

  await t.step(
    "answers 413 past the body limit, by Content-Length or by counted bytes",
    async () => {
      await using app = await makeApp({ maxBodyBytes: 1024 });
      await assertText(await submitText(app, "x".repeat(1024)), "OK (general)");
      const detail = await assertProblem(await submitText(app, "y".repeat(1025)), 413);
      assert.match(detail, /limit is 1024/);
      // A chunked body has no Content-Length: bytes are counted as they arrive.
      const stream = new ReadableStream<Uint8Array>({
        start(controller) {
          for (let i = 0; i < 10; i++) controller.enqueue(new Uint8Array(200).fill(0x61));
          controller.close();
        },
      });
      await assertProblem(await app.call("/submit", { method: "POST", body: stream }), 413);
      assert.equal((await pullAll(app, "general") as string[]).length, 1);
    },
  );

  await t.step("answers OK (duplicate) for the same content within the window", async () => {
    await using app = await makeApp({ dedupeWindowMs: 1000 });
    await assertText(await submitText(app, "same"), "OK (general)");
    app.clock.advance(500);
    await assertText(await submitJson(app, { content: "same", queue: "qa" }), "OK (duplicate)");
    app.clock.advance(500);
    await assertText(await submitText(app, "same"), "OK (general)");
    assert.deepEqual(await pullAll(app, "general"), ["same", "same"]);
  });

  await t.step("dedupe=false (extension) queues again without touching the window", async () => {
    await using app = await makeApp({ dedupeWindowMs: 1000 });
    await assertText(await submitText(app, "item"), "OK (general)");
    app.clock.advance(600);
    await assertText(await submitText(app, "item", "/submit?dedupe=false"), "OK (general)");
    app.clock.advance(400);
    // The window still runs from the first acceptance: the put-back did not refresh it.
    await assertText(await submitText(app, "item"), "OK (general)");
    assert.deepEqual(await pullAll(app, "general"), ["item", "item", "item"]);
    const detail = await assertProblem(await submitText(app, "x", "/submit?dedupe=no"), 400);
    assert.match(detail, /dedupe "no" is not "true" or "false"/);
  });

  await t.step("keeps 50 items in the queue after overflow", async () => {
    await using app = await makeApp();
    for (let i = 0; i < 53; i++) await submitText(app, `n${i}`);
    const items = await pullAll(app, "general") as string[];
    assert.equal(items.length, 50);
    assert.equal(items[0], "n3");
  });
});

Deno.test("GET /pull", async (t) => {
  await t.step("accepts qa, article, general and the queue_ prefix", async () => {
    await using app = await makeApp();
    for (
      const [name, queue] of [["qa", "qa"], ["queue_qa", "qa"], ["queue_article", "article"], [
        "general",
        "general",
      ]]
    ) {
      await submitJson(app, { content: `for ${name}`, queue });
      const res = await app.call(`/pull?queue=${name}`);
      assert.equal(res.status, 200);
      assert.equal(res.headers.get("content-type"), JSON_TYPE);
      assert.deepEqual(await res.json(), [`for ${name}`]);
    }
  });

  await t.step("answers 400 for any other queue name and deletes nothing", async () => {
    await using app = await makeApp();
    await submitText(app, "stay");
    for (const name of ["queue_", "queue_x", "x", "GENERAL", "queue_queue_qa"]) {
      const detail = await assertProblem(await app.call(`/pull?queue=${name}`), 400);
      assert.match(detail, /^Cannot pull: queue /);
    }
    assert.deepEqual(await pullAll(app, "general"), ["stay"]);
  });

  await t.step("returns contents oldest first, then 204 with no body", async () => {
    await using app = await makeApp();
    await submitText(app, "one");
    app.clock.advance(1);
    await submitText(app, "two");
    const res = await app.call("/pull?queue=general");
    assert.deepEqual(await res.json(), ["one", "two"]);
    const empty = await app.call("/pull?queue=general");
    assert.equal(empty.status, 204);
    assert.equal(await empty.text(), "");
  });

  await t.step(
    "without queue empties only the first non-empty of qa, article, general",
    async () => {
      await using app = await makeApp();
      await submitJson(app, { content: "g", queue: "general" });
      await submitJson(app, { content: "a", queue: "article" });
      await submitJson(app, { content: "q", queue: "qa" });
      assert.deepEqual(await (await app.call("/pull")).json(), ["q"]);
      assert.deepEqual(await (await app.call("/pull?queue=")).json(), ["a"]);
      assert.deepEqual(await (await app.call("/pull")).json(), ["g"]);
      assert.equal((await app.call("/pull")).status, 204);
    },
  );

  await t.step("refuses HEAD, which would otherwise empty the queue", async () => {
    await using app = await makeApp();
    await submitText(app, "keep");
    const res = await app.call("/pull?queue=general", { method: "HEAD" });
    assert.equal(res.status, 405);
    assert.equal(res.headers.get("allow"), "GET");
    assert.deepEqual(await pullAll(app, "general"), ["keep"]);
  });
});

Deno.test("GET /peek", async (t) => {
  await t.step("lists all three queues, empty ones included, and deletes nothing", async () => {
    await using app = await makeApp();
    await submitText(app, "https://zhihu.com/q/1");
    app.clock.advance(1500);
    await submitText(app, "text");
    const res = await app.call("/peek");
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("content-type"), JSON_TYPE);
    const start = "2026-01-01 00:00:00";
    assert.deepEqual(await res.json(), {
      total: 2,
      queues: {
        qa: [{ content: "https://zhihu.com/q/1", queue_type: "qa", created_at: start }],
        article: [],
        general: [{ content: "text", queue_type: "general", created_at: "2026-01-01 00:00:01" }],
      },
    });
    assert.deepEqual(await pullAll(app, "general"), ["text"]);
  });

  await t.step("with queue lists only that queue; 204 when it is empty", async () => {
    await using app = await makeApp();
    await submitText(app, "text");
    const res = await app.call("/peek?queue=general");
    const body = await res.json();
    assert.deepEqual(Object.keys(body.queues), ["general"]);
    assert.equal(body.total, 1);
    assert.equal((await app.call("/peek?queue=qa")).status, 204);
    assert.equal((await app.call("/peek?queue=")).status, 200);
  });

  await t.step("answers 204 when every queue is empty", async () => {
    await using app = await makeApp();
    const res = await app.call("/peek");
    assert.equal(res.status, 204);
    assert.equal(await res.text(), "");
  });

  await t.step("refuses the queue_ prefix and unknown names with 400", async () => {
    await using app = await makeApp();
    for (const name of ["queue_qa", "nope"]) {
      assert.match(
        await assertProblem(await app.call(`/peek?queue=${name}`), 400),
        /^Cannot peek: /,
      );
    }
  });

  await t.step("works from a browser address bar with ?key=", async () => {
    await using app = await makeApp();
    await submitText(app, "x");
    const res = await app.app.request(`/peek?key=${KEY}`);
    assert.equal(res.status, 200);
    assert.equal((await res.json()).total, 1);
  });
});

Deno.test("GET /qa-hosts answers the configured Q&A domains, privately, to a key that may pull", async () => {
  await using app = await makeApp({ qaHosts: ["example.org", "forum.example.net"] });
  const res = await app.call("/qa-hosts");
  assert.equal(res.status, 200);
  assert.equal(res.headers.get("content-type"), JSON_TYPE);
  assert.equal(res.headers.get("cache-control"), "private");
  assert.deepEqual(await res.json(), { hosts: ["example.org", "forum.example.net"] });
  await assertProblem(await app.app.request("/qa-hosts"), 401);
  await assertProblem(await app.call("/qa-hosts", { method: "POST" }), 405);
  await using defaults = await makeApp();
  assert.deepEqual((await (await defaults.call("/qa-hosts")).json()).hosts, DEFAULT_QA_HOSTS);
});

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

Deno.test("GET /health", async (t) => {
  await t.step("answers 200 {ok, ts, db: connected} without a key", async () => {
    await using app = await makeApp();
    const res = await app.app.request("/health");
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("content-type"), JSON_TYPE);
    assert.deepEqual(await res.json(), { ok: true, ts: app.clock.now, db: "connected" });
  });

  await t.step(
    "answers a request right after a probe at once (a Response, not a promise), the same as routed",
    async () => {
      await using app = await makeApp();
      const request = () =>
        new Request("http://localhost/health", { headers: { host: "localhost" } });
      // The first request probes; one right after it finds the verdict fresh. A machine that
      // stalls a whole second between the two only makes it try again.
      let answer: Response | Promise<Response> | undefined;
      for (let attempt = 0; attempt < 10 && !(answer instanceof Response); attempt++) {
        await (await app.app.fetch(request())).body?.cancel();
        answer = app.app.fetch(request());
        if (!(answer instanceof Response)) await (await answer).body?.cancel();
      }
      assert.ok(answer instanceof Response, "answered in the same turn");
      assert.equal(answer.status, 200);
      assert.equal(answer.headers.get("content-type"), JSON_TYPE);
      assert.deepEqual(await answer.json(), { ok: true, ts: app.clock.now, db: "connected" });
    },
  );

  await t.step("answers 503 {ok: false, db: error, reason} when the store fails", async () => {
    await using app = await makeApp();
    app.temp.kv.close();
    const res = await app.app.request("/health");
    assert.equal(res.status, 503);
    assert.equal(res.headers.get("content-type"), JSON_TYPE);
    const body = await res.json();
    assert.match(body.reason, /^I\/O error \(.+\)$/);
    assert.deepEqual(body, { ok: false, ts: app.clock.now, db: "error", reason: body.reason });
  });
});

Deno.test("authentication", async (t) => {
  const protectedRoutes: Array<[string, string]> = [
    ["POST", "/submit"],
    ["GET", "/pull"],
    ["GET", "/peek"],
    ["POST", "/push"],
    ["GET", "/results"],
    ["POST", "/clear"],
    ["GET", "/stats"],
  ];

  await t.step("answers 401 without a key on every protected endpoint", async () => {
    await using app = await makeApp();
    for (const [method, path] of protectedRoutes) {
      const res = await app.app.request(path, { method, body: method === "POST" ? "x" : null });
      assert.match(await assertProblem(res, 401), /^Missing API key/);
    }
  });

  await t.step("answers 401 for a wrong key, in the header or the query", async () => {
    await using app = await makeApp();
    for (const [method, path] of protectedRoutes) {
      const init = { method, body: method === "POST" ? "x" : null };
      // The answer says which keys the relay takes and where its own is.
      assert.match(
        await assertProblem(
          await app.app.request(path, { ...init, headers: { "x-auth-key": "wrong" } }),
          401,
        ),
        /^Wrong API key: send the relay's main key \(its api-key file, or RELAY_API_KEY\)/,
      );
      await assertProblem(await app.app.request(`${path}?key=wrong`, init), 401);
      await assertProblem(
        await app.app.request(path, { ...init, headers: { "x-auth-key": `${KEY}x` } }),
        401,
      );
    }
    assert.equal((await app.call("/peek")).status, 204, "nothing was submitted or cleared");
  });

  await t.step("checks the header when present, the query key only without it", async () => {
    await using app = await makeApp();
    const viaQuery = await app.app.request(`/results?key=${KEY}`);
    assert.equal(viaQuery.status, 200);
    const wrongHeader = await app.app.request(`/results?key=${KEY}`, {
      headers: { "x-auth-key": "wrong" },
    });
    await assertProblem(wrongHeader, 401);
    const emptyHeader = await app.app.request(`/results?key=${KEY}`, {
      headers: { "x-auth-key": "" },
    });
    await assertProblem(emptyHeader, 401);
  });

  await t.step("never writes the query key to the access log", async () => {
    await using app = await makeApp();
    await app.app.request(`/results?since=0&key=${KEY}`);
    await app.app.request(`/results?key=wrong-key`);
    assert.equal(app.logs.length, 2);
    assert.match(app.logs[0]!, /GET \/results\?since=0&key=REDACTED 200 \d+ \d+\.\dms$/);
    assert.match(app.logs[1]!, /GET \/results\?key=REDACTED 401 /);
    assert.ok(!app.logs.join("\n").includes(KEY));
    assert.ok(!app.logs.join("\n").includes("wrong-key"));
  });
});

Deno.test("problem documents", async (t) => {
  await t.step(
    "every error is application/problem+json with type, title, status, detail",
    async () => {
      await using app = await makeApp({ maxBodyBytes: 4 });
      const cases: Array<[Response | Promise<Response>, number, string]> = [
        [app.app.request("/nope"), 404, "Not Found"],
        [app.app.request("/submit"), 405, "Method Not Allowed"],
        [app.app.request("/peek"), 401, "Unauthorized"],
        [
          app.call("/push", { method: "POST", body: "x", headers: { "content-type": "a/b" } }),
          415,
          "Unsupported Media Type",
        ],
        [app.call("/push", { method: "POST", body: "12345" }), 413, "Content Too Large"],
        [app.call("/pull?queue=x"), 400, "Bad Request"],
      ];
      // The kind each answer names, when finer than its status's own.
      const kinds: Record<number, ProblemKind> = { 400: "unknown-queue" };
      for (const [pending, status, title] of cases) {
        const res = await pending;
        assert.equal(res.status, status);
        assert.equal(res.headers.get("content-type"), "application/problem+json");
        const doc = await res.json();
        assert.deepEqual(Object.keys(doc), ["type", "title", "status", "detail"]);
        assert.equal(doc.type, problemType(status, kinds[status]));
        assert.equal(doc.title, title);
        assert.equal(doc.status, status);
        assert.match(doc.detail, /^[A-Z]/, "a sentence a person can read");
      }
    },
  );

  await t.step("a detail quotes at most a short piece of what was wrong", async () => {
    await using app = await makeApp();
    const res = await app.call("/submit", {
      method: "POST",
      body: JSON.stringify({ content: "x", queue: "q".repeat(400_000) }),
      headers: { "content-type": "application/json" },
    });
    assert.equal(res.status, 400);
    const doc = await res.json();
    assert.ok(doc.detail.length <= 400, `${doc.detail.length}`);
    assert.match(doc.detail, /^Cannot submit: queue "q+…" is not one of/);
  });

  await t.step(
    "an unexpected failure is a problem document too, never a stack trace",
    async () => {
      await using app = await makeApp();
      app.temp.kv.close();
      const res = await app.call("/peek");
      assert.equal(res.status, 500);
      assert.equal(res.headers.get("content-type"), "application/problem+json");
      const doc = await res.json();
      assert.equal(doc.title, "Internal Server Error");
      assert.ok(!JSON.stringify(doc).includes(" at "), "no stack trace");
      // The cause, with its stack, is in the relay's log instead.
      const logged = app.logs.find((line) => line.startsWith("relay: unexpected error: "));
      assert.ok(logged?.includes(" at "), app.logs.join("\n"));
    },
  );
});

Deno.test("GET /", async (t) => {
  await t.step("redirects a browser to the web app with 302, no key needed", async () => {
    await using app = await makeApp();
    for (const method of ["GET", "HEAD"]) {
      const res = await app.app.request("/", { method });
      assert.equal(res.status, 302, method);
      assert.equal(res.headers.get("location"), "/app/", method);
      assert.equal(await res.text(), "");
    }
    // With a wrong key too: the redirect asks for none.
    const res = await app.app.request("/?x=1", { headers: { "x-auth-key": "wrong" } });
    assert.equal(res.status, 302);
    assert.equal(res.headers.get("location"), "/app/");
  });

  await t.step("leads to the web app's page", async () => {
    await using app = await makeApp();
    const location = (await app.app.request("/")).headers.get("location")!;
    const page = await app.app.request(location);
    assert.equal(page.status, 200);
    assert.match(page.headers.get("content-type") ?? "", /^text\/html/);
  });

  await t.step("is not listed among the endpoints a 404 names", async () => {
    await using app = await makeApp();
    const detail = await assertProblem(await app.app.request("/nope"), 404);
    assert.match(detail, /the relay serves \/submit, /);
  });
});

Deno.test("routing and error order", async (t) => {
  await t.step("answers 404 for an unknown path, before authentication", async () => {
    await using app = await makeApp();
    for (const path of ["/nope", "/submit/", "/SUBMIT", "/publish/x", "//"]) {
      await assertProblem(await app.app.request(path, { method: "POST" }), 404);
    }
  });

  await t.step(
    "answers 405 with Allow for a known path and wrong method, before authentication",
    async () => {
      await using app = await makeApp();
      const cases: Array<[string, string, string]> = [
        ["GET", "/submit", "POST"],
        ["DELETE", "/pull", "GET"],
        ["POST", "/peek", "GET, HEAD"],
        ["PUT", "/push", "POST"],
        ["POST", "/results", "GET, HEAD"],
        ["GET", "/clear", "POST"],
        ["POST", "/health", "GET, HEAD"],
        ["POST", "/", "GET, HEAD"],
        ["DELETE", "/", "GET, HEAD"],
      ];
      for (const [method, path, allow] of cases) {
        const res = await app.app.request(path, { method });
        assert.equal(res.headers.get("allow"), allow, `${method} ${path}`);
        await assertProblem(res, 405);
      }
    },
  );

  await t.step("checks 401 before 415, 415 before 413, and 413 before 400", async () => {
    await using app = await makeApp({ maxBodyBytes: 10 });
    const big = "x".repeat(11);
    await assertProblem(
      await app.app.request("/submit", {
        method: "POST",
        body: big,
        headers: { "content-type": "image/png" },
      }),
      401,
    );
    await assertProblem(
      await app.call("/submit?queue=bad", {
        method: "POST",
        body: big,
        headers: { "content-type": "image/png" },
      }),
      415,
    );
    await assertProblem(await app.call("/submit?queue=bad", { method: "POST", body: big }), 413);
    await assertProblem(await app.call("/submit?queue=bad", { method: "POST", body: "x" }), 400);
  });

  await t.step("answers HEAD on GET endpoints like GET, without a body", async () => {
    await using app = await makeApp();
    const res = await app.app.request("/health", { method: "HEAD" });
    assert.equal(res.status, 200);
    assert.equal(await res.text(), "");
  });

  await t.step(
    "the access log has one line per request with client, method, path, status, bytes and ms",
    async () => {
      await using app = await makeApp();
      await app.call("/submit", { method: "POST", body: "x" });
      const notFound = await app.app.request("/nope");
      const size = (await notFound.arrayBuffer()).byteLength;
      await app.app.request("/health", { method: "HEAD" });
      await app.call("/pull");
      assert.equal(app.logs.length, 4);
      // app.request() has no client address: "-".
      assert.match(app.logs[0]!, /^\S+Z - POST \/submit 200 12 \d+\.\dms$/);
      assert.match(app.logs[1]!, new RegExp(`^\\S+Z - GET /nope 404 ${size} \\d+\\.\\dms$`));
      assert.match(app.logs[2]!, /^\S+Z - HEAD \/health 200 0 \d+\.\dms$/);
      assert.match(app.logs[3]!, /^\S+Z - GET \/pull 200 5 \d+\.\dms$/);
    },
  );

  await t.step(
    "a read answered from its cache comes back at once, logged and counted like any other",
    async () => {
      await using app = await makeApp();
      const get = (key = KEY) =>
        app.app.fetch(new Request("http://localhost/peek", { headers: { "x-auth-key": key } }));
      assert.equal((await app.call("/metrics")).status, 200); // requests count from here
      // The first read of a state builds the answer (a promise); the next is answered from
      // the cache, a Response at once.
      const reads: Array<Response | Promise<Response>> = [get(), undefined!, undefined!];
      await reads[0];
      reads[1] = get();
      await app.call("/submit", { method: "POST", body: "x" });
      reads[2] = get();
      await reads[2];
      reads.push(get(), get("not the key"));
      assert.deepEqual(
        reads.map((r) => r instanceof Promise ? "promise" : "response"),
        // A refusal's problem document has its size measured: that waits.
        ["promise", "response", "promise", "response", "promise"],
      );
      const [e0, e1, f0, f1, wrong] = await Promise.all(reads);
      assert.deepEqual([e0!.status, e1!.status, f0!.status, f1!.status], [204, 204, 200, 200]);
      const body = await f1!.text();
      assert.equal(await f0!.text(), body);
      const problem = new TextEncoder().encode(await wrong!.clone().text()).byteLength;
      await assertProblem(wrong!, 401);
      const bytes = new TextEncoder().encode(body).byteLength;
      const lines = app.logs.filter((line) => line.includes(" /peek "));
      const expected = [[204, 0], [204, 0], [200, bytes], [200, bytes], [401, problem]];
      assert.equal(lines.length, expected.length);
      for (const [i, [status, size]] of expected.entries()) {
        assert.match(lines[i]!, new RegExp(`^\\S+Z - GET /peek ${status} ${size} \\d+\\.\\dms$`));
      }
      const metrics = await (await app.call("/metrics")).text();
      for (const [status, n] of [[200, 2], [204, 2], [401, 1]]) {
        const sample =
          `relay_http_requests_total{route="/peek",method="GET",status="${status}"} ${n}`;
        assert.ok(metrics.split("\n").includes(sample), sample);
      }
    },
  );

  await t.step(
    "the access log in JSON has time, level, msg and the request's fields, the key redacted",
    async () => {
      await using app = await makeApp({ logFormat: "json" });
      await app.call("/submit", { method: "POST", body: "x" });
      await app.app.request(`/peek?key=${KEY}&queue=general`);
      assert.equal(app.logs.length, 2);
      const lines = app.logs.map((line) => JSON.parse(line));
      assert.match(lines[0].time, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      assert.equal(typeof lines[0].duration_ms, "number");
      assert.deepEqual({ ...lines[0], time: "", duration_ms: 0 }, {
        time: "",
        level: "info",
        msg: "POST /submit 200",
        method: "POST",
        path: "/submit",
        status: 200,
        duration_ms: 0,
        bytes: 12,
        client: null,
      });
      assert.equal(lines[1].path, "/peek?key=REDACTED&queue=general");
      assert.equal(lines[1].msg, "GET /peek?key=REDACTED&queue=general 200");
      assert.ok(lines[1].bytes > 0);
      assert.ok(!app.logs.join("\n").includes(KEY));
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

Deno.test("failed authentication is rate limited per client address with 429 and Retry-After", async () => {
  await using t = await makeApp();
  const from = (hostname: string) => ({ remoteAddr: { transport: "tcp", hostname, port: 1 } });
  const attempt = (key: string, hostname: string) =>
    t.app.request("/peek", { headers: { "x-auth-key": key } }, from(hostname));
  for (let i = 0; i < 10; i++) await assertProblem(await attempt("guess", "192.0.2.1"), 401);
  // Past the limit, a wrong key gets 429 instead of 401.
  const limited = await attempt("guess", "192.0.2.1");
  const detail = await assertProblem(limited, 429);
  assert.match(detail, /192\.0\.2\.1/);
  assert.equal(limited.headers.get("retry-after"), "60");
  // The right key is never refused because of earlier failures from its address.
  assert.equal((await attempt(KEY, "192.0.2.1")).status, 204);
  // Another client is not affected.
  assert.equal((await attempt("guess", "192.0.2.2")).status, 401);
  t.clock.advance(30_000);
  assert.equal((await attempt("guess", "192.0.2.1")).headers.get("retry-after"), "30");
  t.clock.advance(30_000);
  await assertProblem(await attempt("guess", "192.0.2.1"), 401);
  // Open endpoints never count or refuse.
  assert.equal((await t.app.request("/health", {}, from("192.0.2.1"))).status, 200);
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

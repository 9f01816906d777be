/** The app's queue calls in process: submit, pull, peek and the Q&A hosts. */
import assert from "node:assert/strict";
import { assertProblem, KEY, makeApp } from "../_helpers.ts";
import { DEFAULT_QA_HOSTS } from "../../src/queue_names.ts";
import { assertText, JSON_TYPE, pullAll, submitJson, submitText } from "./_app.ts";

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

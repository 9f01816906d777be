import assert from "node:assert/strict";
import { deleteBlogPost, type PublishConfig } from "../../src/publish/fan_out.ts";
import { type Downstream, startDownstream } from "../downstream.ts";
import { makeApp } from "../_helpers.ts";

function configFor(downstream: Downstream, timeoutMs = 2000): PublishConfig {
  return {
    urls: { notes: downstream.url, blog: downstream.url, podcast: downstream.url },
    appId: downstream.appId,
    timeoutMs,
  };
}

const ARTICLE = {
  title: "Why WAL needs fsync",
  content: "A short plain summary.",
  content_md: "# Why WAL needs fsync\n\nA *short* summary.",
  tags: "sqlite,durability",
};

async function publishVia(
  publish: PublishConfig | undefined,
  body: unknown,
): Promise<{ status: number; type: string | null; json: Record<string, unknown> }> {
  await using app = await makeApp(publish === undefined ? {} : { publish });
  const res = await app.call("/publish", {
    method: "POST",
    body: JSON.stringify(body),
    headers: { "content-type": "application/json" },
  });
  return { status: res.status, type: res.headers.get("content-type"), json: await res.json() };
}

Deno.test("POST /publish", async (t) => {
  await t.step("publishes to all three targets and answers 200 ok", async () => {
    await using downstream = startDownstream();
    const res = await publishVia(configFor(downstream), {
      ...ARTICLE,
      targets: ["notes", "blog", "nas"],
      transform: "read",
    });
    assert.equal(res.status, 200);
    assert.equal(res.type, "application/json; charset=utf-8");
    assert.equal(res.json.status, "ok");
    assert.deepEqual(Object.keys(res.json.results as object), ["notes", "blog", "nas"]);
    const results = res.json.results as Record<string, Record<string, string>>;
    assert.match(results.notes!.doc_id!, /^doc-\d+$/);
    assert.match(results.blog!.url!, new RegExp(`^${downstream.url}/posts/\\d+$`));
    assert.match(results.nas!.message!, /^queued for reading/);
    for (const result of Object.values(results)) assert.equal(result.status, "success");
  });

  await t.step("publishes once to a target named by its name and its alias", async () => {
    await using downstream = startDownstream();
    const res = await publishVia(configFor(downstream), {
      ...ARTICLE,
      targets: ["podcast", "nas"],
    });
    assert.equal(res.status, 200);
    assert.deepEqual(Object.keys(res.json.results as object), ["podcast", "nas"]);
    const results = res.json.results as Record<string, unknown>;
    assert.deepEqual(results.podcast, results.nas, "one publish, under both names");
    assert.equal(downstream.requests.length, 1, "one request to the podcast service");
  });

  await t.step("sends exactly the bodies and headers", async () => {
    await using downstream = startDownstream();
    await publishVia(configFor(downstream), {
      ...ARTICLE,
      targets: ["notes", "blog", "nas"],
      transform: "read",
    });
    const by = (service: string) => downstream.requests.find((r) => r.service === service)!;
    assert.equal(by("notes").path, "/api/notes/import");
    assert.deepEqual(by("notes").body, {
      title: ARTICLE.title,
      content: ARTICLE.content_md,
      content_format: 1,
      tags: ARTICLE.tags,
    });
    assert.equal(by("blog").path, "/api/publish");
    assert.deepEqual(by("blog").body, {
      title: ARTICLE.title,
      content: ARTICLE.content,
      content_md: ARTICLE.content_md,
      tags: ARTICLE.tags,
      targets: ["blog"],
    });
    assert.equal(by("blog").headers["x-app-id"], undefined);
    assert.equal(by("podcast").path, "/api/publish");
    assert.equal(by("podcast").headers["x-app-id"], downstream.appId);
    assert.deepEqual(by("podcast").body, {
      title: ARTICLE.title,
      content: ARTICLE.content,
      content_md: ARTICLE.content_md,
      targets: ["nas"],
      transform: "read",
    });
  });

  await t.step(
    "takes podcast without transform, and nas as its other name, answering under the name asked for",
    async () => {
      await using downstream = startDownstream();
      for (const name of ["podcast", "nas"]) {
        const res = await publishVia(configFor(downstream), { ...ARTICLE, targets: [name] });
        assert.equal(res.status, 200, JSON.stringify(res.json));
        assert.deepEqual(Object.keys(res.json.results as object), [name]);
      }
      const sent = downstream.requests.filter((r) => r.service === "podcast");
      assert.equal(sent.length, 2);
      for (const request of sent) {
        assert.deepEqual((request.body as { targets: unknown }).targets, ["nas"]);
      }
    },
  );

  await t.step(
    "leaves out optional fields that were not given; notes get content",
    async () => {
      await using downstream = startDownstream();
      const res = await publishVia(configFor(downstream), {
        title: "t",
        content: "plain",
        targets: ["notes", "blog"],
      });
      assert.equal(res.status, 200);
      const by = (service: string) => downstream.requests.find((r) => r.service === service)!;
      assert.deepEqual(by("notes").body, { title: "t", content: "plain", content_format: 1 });
      assert.deepEqual(by("blog").body, { title: "t", content: "plain", targets: ["blog"] });
    },
  );

  await t.step("answers 207 partial when one target fails, naming why", async () => {
    await using downstream = startDownstream();
    downstream.modes.blog = "fail";
    const res = await publishVia(configFor(downstream), { ...ARTICLE, targets: ["notes", "blog"] });
    assert.equal(res.status, 207);
    const results = res.json.results as Record<string, Record<string, string>>;
    assert.equal(res.json.status, "partial");
    assert.equal(results.notes!.status, "success");
    assert.equal(results.blog!.status, "error");
    assert.match(results.blog!.error!, /answered HTTP 500: internal failure/);
  });

  await t.step(
    "answers 502 when every target fails: garbage, HTML, refusal, own error",
    async () => {
      await using downstream = startDownstream();
      for (const mode of ["garbage", "html", "reject"] as const) {
        downstream.modes.notes = mode;
        downstream.modes.blog = mode;
        downstream.modes.podcast = mode;
        const res = await publishVia(configFor(downstream), {
          ...ARTICLE,
          targets: ["notes", "blog", "nas"],
          transform: "read",
        });
        assert.equal(res.status, 502, mode);
        assert.equal(res.type, "application/json; charset=utf-8");
        assert.equal(res.json.status, "error");
        const results = res.json.results as Record<string, Record<string, string>>;
        for (const target of ["notes", "blog", "nas"]) {
          assert.equal(results[target]!.status, "error", `${mode} ${target}`);
          assert.equal(typeof results[target]!.error, "string");
          assert.ok(!results[target]!.error!.includes("\n"));
        }
      }
    },
  );

  await t.step("reports a refused connection as that target's error", async () => {
    // The live downstream listens before the other one closes, so that the system cannot
    // give it the port just freed (it did once: the "refused" target answered, 200 not 207).
    await using downstream = startDownstream();
    const closed = startDownstream();
    const url = closed.url;
    await closed.close();
    const res = await publishVia(
      { ...configFor(downstream), urls: { notes: url, blog: downstream.url, podcast: undefined } },
      { ...ARTICLE, targets: ["notes", "blog"] },
    );
    assert.equal(res.status, 207);
    const results = res.json.results as Record<string, Record<string, string>>;
    assert.match(results.notes!.error!, /refused the connection/);
    assert.equal(results.blog!.status, "success");
  });

  await t.step(
    "gives up on a hanging target after --publish-timeout, calling all at once",
    async () => {
      await using downstream = startDownstream();
      downstream.modes.podcast = "hang";
      downstream.modes.notes = "hang";
      const started = performance.now();
      const res = await publishVia(configFor(downstream, 300), {
        ...ARTICLE,
        targets: ["notes", "blog", "nas"],
        transform: "read",
      });
      const elapsed = performance.now() - started;
      assert.equal(res.status, 207);
      const results = res.json.results as Record<string, Record<string, string>>;
      assert.match(results.nas!.error!, /did not answer within 300 ms/);
      assert.match(results.notes!.error!, /did not answer within 300 ms/);
      // Two hanging targets in parallel cost one timeout, not two.
      assert.ok(elapsed >= 300, `${elapsed}`);
      assert.ok(elapsed < 600 + 2000, `${elapsed}`);
    },
  );

  await t.step("validates before any downstream call", async () => {
    await using downstream = startDownstream();
    const cases: Array<[unknown, RegExp]> = [
      [{ content: "c", targets: ["notes"] }, /field "title"/],
      [{ title: " ", content: "c", targets: ["notes"] }, /field "title" must not be empty/],
      [{ title: "t", content: "", targets: ["notes"] }, /field "content" must not be empty/],
      [{ title: "t", content: 5, targets: ["notes"] }, /field "content"/],
      [{ title: "t", content: "c" }, /field "targets"/],
      [{ title: "t", content: "c", targets: [] }, /at least one of "notes", "blog", "podcast"/],
      [{ title: "t", content: "c", targets: "notes" }, /field "targets" must be an array/],
      [{ title: "t", content: "c", targets: ["notes", "notes"] }, /names a target twice/],
      [
        { title: "t", content: "c", targets: ["twitter"] },
        /target "twitter" is unknown: use "notes", "blog", "podcast"/,
      ],
      [{ title: "t".repeat(501), content: "c", targets: ["blog"] }, /longer than 500/],
      [
        { title: "t", content: "c", targets: ["nas"], transform: "summarize" },
        /"transform" must be "read"/,
      ],
      [
        { title: "t", content: "c", targets: ["blog"], tags: ["a"] },
        /field "tags" must be a string/,
      ],
      [{ title: "t", content: "c", targets: ["blog"], content_md: 1 }, /field "content_md"/],
      [["not", "an", "object"], /must be an object/],
    ];
    for (const [body, pattern] of cases) {
      const res = await publishVia(configFor(downstream), body);
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.equal(res.type, "application/problem+json");
      assert.match(String(res.json.detail), pattern, JSON.stringify(body));
    }
    assert.equal(downstream.requests.length, 0, "no downstream call was made");
  });

  await t.step(
    "answers 503 when publishing is not configured, after validation",
    async () => {
      const valid = { ...ARTICLE, targets: ["notes"] };
      const res = await publishVia(undefined, valid);
      assert.equal(res.status, 503);
      assert.equal(res.type, "application/problem+json");
      assert.match(String(res.json.detail), /target "notes" has no URL/);
      const invalid = await publishVia(undefined, { ...ARTICLE, targets: ["x"] });
      assert.equal(invalid.status, 400);
      await using downstream = startDownstream();
      const noAppId = await publishVia(
        { ...configFor(downstream), appId: undefined },
        { ...ARTICLE, targets: ["nas"], transform: "read" },
      );
      assert.equal(noAppId.status, 503);
      assert.match(String(noAppId.json.detail), /RELAY_APP_ID/);
    },
  );

  await t.step("uses each target's own base URL when given", async () => {
    await using notes = startDownstream();
    await using rest = startDownstream();
    const res = await publishVia(
      {
        urls: { notes: `${notes.url}/`, blog: rest.url, podcast: rest.url },
        appId: rest.appId,
        timeoutMs: 2000,
      },
      { ...ARTICLE, targets: ["notes", "blog"] },
    );
    assert.equal(res.status, 200);
    assert.deepEqual(notes.requests.map((r) => r.path), ["/api/notes/import"]);
    assert.deepEqual(rest.requests.map((r) => r.path), ["/api/publish"]);
  });

  await t.step("answers 415 for a body that is not JSON, 401 before it", async () => {
    await using app = await makeApp();
    const res = await app.call("/publish", { method: "POST", body: "title=x" });
    assert.equal(res.status, 415);
    assert.equal(res.headers.get("accept-post"), "application/json");
    const unauth = await app.app.request("/publish", { method: "POST", body: "x" });
    assert.equal(unauth.status, 401);
  });
});

Deno.test("deleteBlogPost() succeeds on the 303 and explains anything else", async () => {
  await using downstream = startDownstream();
  downstream.posts.add("42");
  const options = { baseUrl: downstream.url, cookie: downstream.cookie, timeoutMs: 2000 };
  assert.equal(await deleteBlogPost("42", options), undefined);
  assert.equal(downstream.posts.has("42"), false);
  const sent = downstream.requests.at(-1)!;
  assert.equal(sent.path, "/delete/42");
  assert.equal(sent.headers["cookie"], downstream.cookie);
  assert.match((await deleteBlogPost("42", options))!, /answered 404/);
  downstream.posts.add("7");
  assert.match(
    (await deleteBlogPost("7", { ...options, cookie: "CF_Authorization=wrong" }))!,
    /answered 403.*RELAY_BLOG_ACCESS_COOKIE/,
  );
});

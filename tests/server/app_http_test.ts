/** The app's HTTP surface in process: health, authentication, problems, the root page, routing. */
import assert from "node:assert/strict";
import { assertProblem, KEY, makeApp } from "../_helpers.ts";
import { feedKey } from "../../src/access/feed_keys.ts";
import { type ProblemKind, problemType } from "../../src/errors.ts";
import { JSON_TYPE } from "./_app.ts";

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

  await t.step("never writes a feed's key to the access log, wherever it is", async () => {
    await using app = await makeApp();
    const key = feedKey(KEY, "/results/feed.xml");
    const feed = await app.app.request(`/results/feed.xml?key=${key}`);
    assert.equal(feed.status, 200);
    await feed.body?.cancel();
    // Outside a key parameter too: pasted into another parameter, or into the path.
    await (await app.app.request(`/results/feed.xml?since=0&token=${key}`)).body?.cancel();
    await (await app.app.request(`/results/${key}`)).body?.cancel();
    assert.equal(app.logs.length, 3);
    assert.match(app.logs[0]!, /GET \/results\/feed\.xml\?key=REDACTED 200 /);
    assert.match(app.logs[1]!, /GET \/results\/feed\.xml\?since=0&token=REDACTED 401 /);
    assert.match(app.logs[2]!, /GET \/results\/REDACTED 404 /);
    assert.ok(!app.logs.join("\n").includes(key));
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

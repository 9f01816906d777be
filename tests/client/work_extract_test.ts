/**
 * `relay work --extract` with real processes: a relay, the worker, loopback pages and (for
 * `--publish`) the downstream test server. Each link ends as one result, the article or a line
 * saying why it could not be read, and is acknowledged; text is pushed as it is.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import {
  eventually,
  getStats,
  runCli,
  spawnRelay,
  startRelayProcess,
  withTempDir,
} from "../_helpers.ts";
import { startDownstream } from "../downstream.ts";
import { countingServer, servePages } from "./_pages.ts";

const KEY = "extract-test-key-0123456789";

/**
 * Queues `item` over HTTP, as `relay submit` would (into `queue`, or where the relay routes
 * it): these tests are about the reader, so the items go in without a process each.
 */
async function submitted(base: string, item: string, queue?: string): Promise<void> {
  const query = queue === undefined ? "" : `?queue=${queue}`;
  const res = await fetch(`${base}/submit${query}`, {
    method: "POST",
    headers: { "x-auth-key": KEY, "content-type": "text/plain; charset=utf-8" },
    body: item,
  });
  assert.equal(res.status, 200, await res.text());
}

/** The contents of the results feed, oldest first. */
async function results(url: string): Promise<string[]> {
  const res = await fetch(`${url}/results`, { headers: { "x-auth-key": KEY } });
  return ((await res.json()) as { items: { c: string }[] }).items.map((item) => item.c);
}

/**
 * Starts `relay work --queue general --extract` as a process (what these tests are about),
 * its reading record in `stateDir`, with more `options`.
 */
function startReader(
  stateDir: string,
  options: string[],
  spawn: { env: Record<string, string> },
): ReturnType<typeof spawnRelay> {
  return spawnRelay([
    "work",
    "--queue",
    "general",
    "--extract",
    "--state-dir",
    stateDir,
    ...options,
  ], spawn);
}

/**
 * Runs the reader ({@linkcode startReader}) until the results feed of the relay at `url`
 * holds `count` results, then stops it with SIGTERM; it must exit 0.
 *
 * @returns The feed, oldest first, and the lines the reader wrote to standard error.
 */
async function readUntil(
  url: string,
  count: number,
  stateDir: string,
  options: string[],
  spawn: { env: Record<string, string> },
): Promise<{ feed: string[]; stderr: string[] }> {
  const worker = startReader(stateDir, options, spawn);
  let feed: string[] = [];
  await eventually(async () => (feed = await results(url)).length === count, `${count} results`);
  worker.child.kill("SIGTERM");
  assert.equal((await worker.done).code, 0, worker.stderr.join("\n"));
  return { feed, stderr: worker.stderr };
}

// These readers cannot disturb one another (each its own pages and state directory, the
// relay emptied before each by POST /clear), so they share one relay.
Deno.test("relay work --extract against one relay", async (t) => {
  await withTempDir(async (dir) => {
    await using relay = await startRelayProcess(join(dir, "data"), {
      env: { RELAY_API_KEY: KEY },
    });
    const env = { RELAY_URL: relay.url, RELAY_API_KEY: KEY };
    const clear = async () => {
      const res = await fetch(`${relay.url}/clear`, {
        method: "POST",
        headers: { "x-auth-key": KEY },
      });
      assert.equal(res.status, 200, await res.text());
    };
    await t.step(
      "relay work --extract pushes each link's article, reports links it cannot read, and acks every item",
      async () => {
        await clear();
        await using pages = servePages();
        const items = [
          `${pages.url}/table`,
          `${pages.url}/missing`,
          "javascript:alert(1)",
          "remember to buy seeds",
          `${pages.url}/endless`,
        ];
        for (const item of items) {
          await submitted(relay.url, item, "general");
        }
        const { feed, stderr } = await readUntil(relay.url, 5, `${dir}/reader-1`, [
          "--attempts",
          "2",
          "--backoff",
          "10ms",
          "--max-page",
          "64KiB",
          "--allow-private",
          new URL(pages.url).host,
        ], { env });

        assert.match(feed[0]!, /^# Sowing calendar\n/);
        assert.match(feed[0]!, /^\| Bean \| April \| June \|$/m);
        assert.equal(feed[1], `Could not read ${pages.url}/missing: HTTP 404`);
        assert.equal(
          feed[2],
          "Could not read javascript:alert(1): only http and https links are read, not javascript:",
        );
        assert.equal(feed[3], "remember to buy seeds");
        assert.match(feed[4]!, /^# Endless\n/);
        assert.match(feed[4]!, /The page was longer than 64 KiB: only its beginning was read/);

        const stats = await getStats((path) =>
          fetch(`${relay.url}${path}`, { headers: { "x-auth-key": KEY } })
        );
        assert.equal(stats.queues.general.depth, 0, "every item acknowledged");
        const log = stderr.join("\n");
        assert.match(
          log,
          /could not read \S+\/missing \(item general:\d+, attempt 1 of 2\): HTTP 404\n/,
        );
        assert.match(log, /attempt 2 of 2\): HTTP 404; reported in the results feed/);
        // A javascript: link is not fetched again: no second attempt can read it.
        assert.match(
          log,
          /javascript:alert\(1\) \(item general:\d+, not retried\): .*; reported/,
        );
        assert.doesNotMatch(log, /javascript:alert\(1\) \(item general:\d+, attempt 2/);
        assert.match(stderr.at(-1)!, /^relay: stopped after 3 done and 2 given up on$/);
      },
    );

    await t.step(
      "relay work --extract --summarize with a model nothing answers at: the offline summary, and the log says why",
      async () => {
        await clear();
        await using pages = servePages();
        await submitted(relay.url, `${pages.url}/table`, "general");
        // A port that was just free: nothing listens on it.
        const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
        const model = `http://127.0.0.1:${listener.addr.port}/v1`;
        listener.close();
        const { feed, stderr } = await readUntil(relay.url, 1, `${dir}/reader-summary`, [
          "--summarize",
          "--summarize-url",
          model,
          "--summarize-model",
          "tiny",
          "--allow-private",
          new URL(pages.url).host,
        ], { env });
        assert.match(feed[0]!, /_Offline summary: tiny failed \(Connection error\./);
        assert.ok(
          stderr.some((line) =>
            line.includes("(item general:") && line.includes("Offline summary: tiny failed") &&
            line.includes(model)
          ),
          stderr.join("\n"),
        );
      },
    );
    await t.step(
      "relay work --extract refuses a link to this machine as one result, acks it, and sends it nothing",
      async () => {
        await clear();
        await using admin = countingServer();
        const relayPort = new URL(relay.url).port;
        const items = [
          `http://localhost:${admin.port}/`,
          `http://127.1:${admin.port}/status`,
          // The relay itself, at its own address and port.
          `http://127.0.0.1:${relayPort}/results`,
        ];
        for (const item of items) {
          await submitted(relay.url, item, "general");
        }
        const { feed, stderr } = await readUntil(relay.url, 3, `${dir}/reader-2`, [], { env });
        assert.deepEqual(feed, [
          `Could not read ${items[0]}: localhost is this machine ` +
          `(allow it with --allow-private localhost:${admin.port})`,
          `Could not read ${items[1]}: 127.0.0.1 is a loopback address (this machine) ` +
          `(allow it with --allow-private 127.0.0.1:${admin.port})`,
          `Could not read ${items[2]}: 127.0.0.1 is a loopback address (this machine) ` +
          `(allow it with --allow-private 127.0.0.1:${relayPort})`,
        ]);
        assert.deepEqual(admin.seen, [], "the private server received no request");
        const stats = await getStats((path) =>
          fetch(`${relay.url}${path}`, { headers: { "x-auth-key": KEY } })
        );
        assert.equal(stats.queues.general.depth, 0, "every item acknowledged");
        // A refusal is final: the link is not fetched again.
        assert.doesNotMatch(stderr.join("\n"), /attempt 2 of/);
      },
    );

    await t.step(
      "relay work --extract ends a page that takes longer than --timeout, fetching or reading it, as one result",
      async () => {
        await clear();
        await using pages = servePages();
        // A page that drips a byte at a time, and one served at once whose extraction takes
        // seconds: one deadline covers both, and ends the reading thread wherever it is.
        const items = [`${pages.url}/slow`, `${pages.url}/heavy`];
        for (const item of items) {
          await submitted(relay.url, item, "general");
        }
        const { feed } = await readUntil(relay.url, 2, `${dir}/reader-3`, [
          "--attempts",
          "1",
          "--timeout",
          "200ms",
          "--allow-private",
          new URL(pages.url).host,
        ], { env });
        assert.deepEqual(
          feed,
          items.map((url) =>
            `Could not read ${url}: took longer than 0.2 s (fetching and reading one page; ` +
            "a larger --timeout gives slow pages more time)"
          ),
        );
      },
    );
  });
});

Deno.test("relay work --extract --publish blog,nas publishes each article with a key of the reader's scopes; a failed target is kept", async () => {
  await withTempDir(async (dir) => {
    await using pages = servePages();
    await using downstream = startDownstream();
    const db = join(dir, "data", "relay.kv");
    await Deno.mkdir(join(dir, "data"));
    // The key relay-reader.service is given: only what the reader does.
    const added = await runCli(
      ["keys", "add", "reader", "--scope", "consume,push,publish", "--db", db],
    );
    assert.equal(added.code, 0, added.stderr);
    await using relay = await startRelayProcess(join(dir, "data"), {
      args: ["--publish-url", downstream.url],
      env: { RELAY_API_KEY: KEY, RELAY_APP_ID: downstream.appId },
    });
    const env = { RELAY_URL: relay.url, RELAY_API_KEY: KEY };
    const worker = startReader(`${dir}/reader`, [
      "--publish",
      "blog,nas",
      "--allow-private",
      new URL(pages.url).host,
    ], { env: { RELAY_URL: relay.url, RELAY_API_KEY: added.stdout.trim() } });
    await submitted(relay.url, `${pages.url}/table`);
    await eventually(() => downstream.requests.length === 2, "the blog and the podcast");
    const byService = Object.fromEntries(
      downstream.requests.map((r) => [r.service, r.body]),
    ) as Record<string, Record<string, unknown>>;
    assert.equal(byService.podcast?.title, "Sowing calendar");
    assert.equal(byService.podcast?.transform, "read");
    assert.match(String(byService.podcast?.content), /When to sow what in a small garden/);
    assert.match(String(byService.blog?.content_md), /^\| Tomato \| March \| May \|$/m);
    // The article sent is the result pushed, whole: the same text the web app would publish.
    const pushed = (await results(relay.url))[0];
    assert.equal(String(byService.blog?.content_md).trim(), pushed);
    assert.match(String(pushed), new RegExp(`^Source: (.+, )?<${pages.url}/table>$`, "m"));

    downstream.modes.blog = "fail";
    await submitted(relay.url, `${pages.url}/table?again`);
    await eventually(
      () => worker.stderr.some((line) => /publishing "Sowing calendar" failed for blog/.test(line)),
      "the failed publish",
    );
    const failed = await runCli(["publish", "--failed"], { env });
    assert.match(failed.stdout, /Sowing calendar/);
    assert.equal((await results(relay.url)).length, 2, "both articles are results");
    worker.child.kill("SIGTERM");
    assert.equal((await worker.done).code, 0);
  });
});

Deno.test("relay work --extract --publish publishes a 400 KB article whole, as Markdown only, when text and Markdown exceed the body limit", async () => {
  await withTempDir(async (dir) => {
    await using pages = servePages();
    await using downstream = startDownstream();
    await using relay = await startRelayProcess(join(dir, "data"), {
      args: ["--publish-url", downstream.url],
      env: { RELAY_API_KEY: KEY, RELAY_APP_ID: downstream.appId },
    });
    const env = { RELAY_URL: relay.url, RELAY_API_KEY: KEY };
    await submitted(relay.url, `${pages.url}/huge`);
    const worker = startReader(`${dir}/reader`, [
      "--publish",
      "blog",
      "--timeout",
      "5m",
      "--allow-private",
      new URL(pages.url).host,
    ], { env });
    await eventually(() => downstream.requests.length === 1, "the blog post", 120_000);
    worker.child.kill("SIGTERM");
    assert.equal((await worker.done).code, 0, worker.stderr.join("\n"));
    const body = downstream.requests[0]!.body as Record<string, unknown>;
    const markdown = String(body.content_md ?? body.content);
    assert.ok(markdown.length > 400_000, `${markdown.length} characters`);
    assert.match(markdown, /^1\\\. Water at the root/m);
    assert.match(markdown, /^2700\\\. Water at the root/m, "the article's end arrived");
    assert.doesNotMatch(markdown, /was cut/);
    assert.match(
      worker.stderr.join("\n"),
      /refused to publish "Huge" as too large; sending it as Markdown only\n(.|\n)*published "Huge" to blog/,
    );
  });
});

Deno.test("relay work --extract cuts an article longer than the relay's body limit instead of failing for ever", async () => {
  await withTempDir(async (dir) => {
    await using pages = servePages();
    await using relay = await startRelayProcess(join(dir, "data"), {
      args: ["--max-body", "32KiB"],
      env: { RELAY_API_KEY: KEY },
    });
    const env = { RELAY_URL: relay.url, RELAY_API_KEY: KEY };
    await submitted(relay.url, `${pages.url}/long`);
    const { feed } = await readUntil(relay.url, 1, `${dir}/reader`, [
      "--allow-private",
      new URL(pages.url).host,
    ], { env });
    const bytes = new TextEncoder().encode(feed[0]!).length;
    assert.ok(bytes <= 32 * 1024, `${bytes} bytes`);
    assert.match(feed[0]!, /^# Long\n/);
    assert.match(
      feed[0]!,
      /_The result was cut to \d+ of its \d+ bytes: the relay takes no longer/,
    );
  });
});

Deno.test("relay work --extract refuses a command, and its options without --extract", async () => {
  const cases: Array<[string[], RegExp]> = [
    [["--extract", "--", "cat"], /--extract runs no command/],
    [["--publish", "blog", "--", "cat"], /--publish needs --extract/],
    [["--extract", "--publish", "blog,radio"], /invalid --publish "blog,radio"/],
    [["--extract", "--max-page", "lots"], /invalid --max-page "lots"/],
    [["--allow-private", "nas.home", "--", "cat"], /--allow-private needs --extract/],
    [
      ["--extract", "--allow-private", "nas.home:http"],
      /invalid --allow-private: "nas\.home:http" is not HOST or HOST:PORT/,
    ],
  ];
  for (const [args, message] of cases) {
    const out = await runCli(["work", "--queue", "general", ...args], {
      env: { RELAY_URL: "http://127.0.0.1:9", RELAY_API_KEY: KEY },
    });
    assert.equal(out.code, 2, out.stderr);
    assert.match(out.stderr, message);
  }
});

Deno.test("relay work --extract --publish: a publish the relay could not take through every try is kept in its failed publishes, and retried from there", async () => {
  await withTempDir(async (dir) => {
    await using pages = servePages();
    await using relay = await startRelayProcess(join(dir, "data"), {
      env: { RELAY_API_KEY: KEY },
    });
    // A reverse proxy in front of the relay whose /publish is down (503); the rest passes.
    const publishes: string[] = [];
    const proxy = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (req) => {
      const url = new URL(req.url);
      if (url.pathname === "/publish") {
        publishes.push(req.method);
        await req.body?.cancel();
        return Response.json(
          { title: "Service Unavailable", status: 503, detail: "upstream down" },
          {
            status: 503,
            headers: { "content-type": "application/problem+json" },
          },
        );
      }
      try {
        const res = await fetch(`${relay.url}${url.pathname}${url.search}`, {
          method: req.method,
          headers: req.headers,
          body: req.body === null ? null : await req.arrayBuffer(),
          // A long-poll the worker gave up (it stopped) ends here too.
          signal: req.signal,
        });
        return new Response(res.body, { status: res.status, headers: res.headers });
      } catch {
        return new Response(null, { status: 502 }); // the worker went away
      }
    });
    try {
      const proxied = `http://127.0.0.1:${proxy.addr.port}`;
      const worker = startReader(`${dir}/reader`, [
        "--publish",
        "blog",
        "--backoff",
        "10ms",
        "--allow-private",
        new URL(pages.url).host,
      ], { env: { RELAY_URL: proxied, RELAY_API_KEY: KEY } });
      const env = { RELAY_URL: relay.url, RELAY_API_KEY: KEY };
      await submitted(relay.url, `${pages.url}/table`);
      await eventually(
        () =>
          worker.stderr.some((line) => /kept "Sowing calendar" in the relay's failed/.test(line)),
        "the report",
      );
      worker.child.kill("SIGTERM");
      assert.equal((await worker.done).code, 0, worker.stderr.join("\n"));
      assert.equal(publishes.length, 3, "three tries, then the report");
      const listed = await runCli(["publish", "--failed"], { env });
      assert.match(listed.stdout, /Sowing calendar/);
      assert.match(listed.stdout, /The relay answered 503: upstream down/);
      const id = /kept "Sowing calendar" in the relay's failed publishes as (\S+) /.exec(
        worker.stderr.join("\n"),
      )![1]!;
      // Sent again from the relay itself (its built-in blog), the entry is settled.
      const retried = await runCli(["publish", "--retry", id], { env });
      assert.equal(retried.code, 0, retried.stderr);
      const after = await fetch(`${relay.url}/publish/failed`, { headers: { "x-auth-key": KEY } });
      assert.deepEqual((await after.json() as { entries: unknown[] }).entries, []);
      const posts = await fetch(`${relay.url}/blog/`, { headers: { "x-auth-key": KEY } });
      assert.match(await posts.text(), /Sowing calendar/);
    } finally {
      await proxy.shutdown();
    }
  });
});

import assert from "node:assert/strict";
import { startDownstream } from "../downstream.ts";
import {
  eventually,
  freePort,
  getStats,
  REFUSED_URL,
  runCli,
  runRelay,
  spawnRelay,
  startRelayProcess,
} from "../_helpers.ts";

const KEY = "client-test-key-0123456789";

async function tempDir(): Promise<string> {
  return await Deno.makeTempDir({ prefix: "relay-client-test-" });
}

Deno.test("relay client commands against a running relay", async (t) => {
  const dir = await tempDir();
  await using relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
  const env = { RELAY_URL: relay.url, RELAY_API_KEY: KEY };
  const run = (args: string[], stdin?: string) =>
    runCli(args, stdin === undefined ? { env } : { env, stdin });
  // One command through a real process and a real pipe on its stdin; the rest in process.
  const piped = (args: string[], stdin: string) => runRelay(args, { env, stdin });

  await t.step("submit prints the relay's answer; --json; - reads stdin; --queue", async () => {
    assert.deepEqual(await run(["submit", "https://stackoverflow.com/q/1"]), {
      code: 0,
      stdout: "OK (qa)\n",
      stderr: "",
    });
    const viaStdin = await piped(["submit", "-", "--json"], "  text from a pipe\n");
    assert.equal(viaStdin.code, 0);
    assert.deepEqual(JSON.parse(viaStdin.stdout), { status: "accepted", queue: "general" });
    const dup = await run(["submit", "text", "from", "a", "pipe", "--json"]);
    assert.deepEqual(JSON.parse(dup.stdout), { status: "duplicate" });
    assert.equal(
      (await run(["submit", "--queue", "article", "long read"])).stdout,
      "OK (article)\n",
    );
  });

  await t.step("peek lists one item per line; --json gives the relay's body", async () => {
    const human = await run(["peek"]);
    assert.equal(human.code, 0);
    assert.match(
      human.stdout,
      /^qa\t\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\thttps:\/\/stackoverflow\.com\/q\/1\n/,
    );
    const body = JSON.parse((await run(["peek", "--json", "--queue", "article"])).stdout);
    assert.equal(body.total, 1);
    assert.equal(body.queues.article[0].content, "long read");
  });

  await t.step("pull prints one item per line, then says nothing is queued", async () => {
    assert.equal((await run(["pull", "--queue", "general"])).stdout, "text from a pipe\n");
    const empty = await run(["pull", "--queue", "general"]);
    assert.equal(empty.code, 0);
    assert.equal(empty.stdout, "");
    assert.equal(empty.stderr, "relay: nothing queued\n");
    assert.deepEqual(JSON.parse((await run(["pull", "--json"])).stdout), [
      "https://stackoverflow.com/q/1",
    ]);
  });

  await t.step("push and results, from arguments and stdin", async () => {
    assert.equal((await run(["push", "first", "result"])).stdout, "OK\n");
    assert.equal((await run(["push", "-"], "# second\n")).code, 0);
    const page = JSON.parse((await run(["results", "--json"])).stdout);
    assert.deepEqual(page.items.map((i: { c: string }) => i.c), ["first result", "# second"]);
    const after = JSON.parse(
      (await run(["results", "--json", "--since", String(page.items[0].t)])).stdout,
    );
    assert.deepEqual(after.items.map((i: { c: string }) => i.c), ["# second"]);
    const human = await run(["results", "--limit", "1"]);
    assert.match(human.stdout, /^\d{4}-\d\d-\d\dT[\d:.]+Z\tfirst result\n$/);
    assert.equal(human.stderr, `relay: cursor ${page.items[0].t}\n`);
  });

  await t.step("health needs no key: it works where no key can be found", async () => {
    // No RELAY_API_KEY, no config file, and no api-key beside this --db.
    const out = await runCli(["health", "--url", relay.url, "--db", `${dir}/elsewhere/relay.kv`]);
    assert.deepEqual(out, { code: 0, stdout: "ok (store connected)\n", stderr: "" });
    const json = await runCli(["health", "--json", "--url", relay.url, "--db", `${dir}/x.kv`]);
    assert.equal(JSON.parse(json.stdout).db, "connected");
  });

  await t.step("health and clear", async () => {
    assert.deepEqual(await run(["health"]), {
      code: 0,
      stdout: "ok (store connected)\n",
      stderr: "",
    });
    assert.equal((await run(["clear"])).stdout, "OK (all queues cleared)\n");
    assert.deepEqual(await run(["peek"]), {
      code: 0,
      stdout: "",
      stderr: "relay: nothing queued\n",
    });
  });

  await t.step(
    "a wrong key and a 400 exit 3, a refused connection exits 1, each with one line",
    async () => {
      const wrong = await runCli(["peek"], { env: { ...env, RELAY_API_KEY: "nope" } });
      assert.equal(wrong.code, 3);
      assert.equal(wrong.stdout, "");
      assert.match(
        wrong.stderr,
        /^relay: The relay at .* refused the API key \(401: Wrong API key: send the relay's main key .*\); set RELAY_API_KEY[^\n]*\n$/,
      );
      const refused = await runCli(["health"], {
        env: { RELAY_URL: REFUSED_URL, RELAY_API_KEY: KEY },
      });
      assert.equal(refused.code, 1);
      assert.match(
        refused.stderr,
        /^relay: Cannot reach the relay at http:\/\/127\.0\.0\.1:\d+: connection refused \(is it running\? start it with relay serve, or check the port [^\n]*\)\n$/,
      );
      const bad = await run(["pull", "--queue", "nope"]);
      assert.equal(bad.code, 3);
      assert.match(
        bad.stderr,
        /^relay: The relay answered 400: Cannot pull: queue "nope"[^\n]*\n$/,
      );
    },
  );

  await t.step("usage errors exit 2 with one line", async () => {
    for (
      const args of [
        ["submit"],
        ["work", "--", "cat"],
        ["work", "--queue", "qa"],
        ["results", "--exec", "cat"],
        ["results", "--since", "x"],
        ["publish", "--title", "t"],
        ["pull", "--bogus"],
      ]
    ) {
      const out = await run(args);
      assert.equal(out.code, 2, args.join(" "));
      assert.equal(out.stderr.trim().split("\n").length, 1, out.stderr);
      assert.match(out.stderr, /^relay: .*; see relay [a-z]+ --help\n$/);
    }
  });

  await relay.stop();
  await Deno.remove(dir, { recursive: true });
});

Deno.test("relay client commands find the generated key and the address beside --db on the relay's machine", async () => {
  const dir = await tempDir();
  await using relay = await startRelayProcess(dir);
  const out = await runCli(["health", "--db", `${dir}/relay.kv`, "--url", relay.url]);
  assert.equal(out.code, 0, out.stderr);
  const peek = await runCli(["peek", "--db", `${dir}/relay.kv`, "--url", relay.url]);
  assert.deepEqual([peek.code, peek.stdout, peek.stderr], [0, "", "relay: nothing queued\n"]);
  const missing = await runCli(["peek", "--db", `${dir}/other/relay.kv`, "--url", relay.url]);
  assert.equal(missing.code, 2);
  assert.match(missing.stderr, /no API key/);
  // Without --url, the address the relay wrote beside its database: its port, not 8787.
  assert.notEqual(new URL(relay.url).port, "8787");
  const found = await runCli(["peek", "--db", `${dir}/relay.kv`]);
  assert.deepEqual([found.code, found.stdout, found.stderr], [0, "", "relay: nothing queued\n"]);
  const health = await runCli(["health", "--db", `${dir}/relay.kv`]);
  assert.deepEqual([health.code, health.stdout], [0, "ok (store connected)\n"]);
  // A relay that listens on every address is reached on loopback.
  await Deno.writeTextFile(`${dir}/wild.kv.address`, `http://0.0.0.0:${new URL(relay.url).port}\n`);
  const wild = await runCli(["health", "--db", `${dir}/wild.kv`]);
  assert.deepEqual([wild.code, wild.stdout], [0, "ok (store connected)\n"]);
  await relay.stop();
  await Deno.remove(dir, { recursive: true });
});

Deno.test("relay publish publishes through the relay and reports each target", async () => {
  await using downstream = startDownstream();
  const dir = await tempDir();
  await using relay = await startRelayProcess(dir, {
    env: { RELAY_API_KEY: KEY, RELAY_PUBLISH_URL: downstream.url, RELAY_APP_ID: downstream.appId },
  });
  const env = { RELAY_URL: relay.url, RELAY_API_KEY: KEY };
  const markdown = `${dir}/article.md`;
  await Deno.writeTextFile(markdown, "# Title\n\nBody *text*.\n");
  const args = ["publish", "--title", "Title", "--markdown-file", markdown, "--tags", "a,b"];
  const ok = await runCli([...args, "--target", "notes,blog,nas"], { env });
  assert.equal(ok.code, 0, ok.stderr);
  const lines = ok.stdout.trim().split("\n");
  assert.match(lines[0]!, /^notes: success \(doc-\d+\)$/);
  assert.match(lines[1]!, /^blog: success \(http:\/\/127\.0\.0\.1:\d+\/posts\/\d+\)$/);
  assert.match(lines[2]!, /^nas: success \(queued for reading/);
  const podcast = downstream.requests.find((r) => r.service === "podcast")!;
  assert.deepEqual(podcast.body, {
    title: "Title",
    content: "# Title\n\nBody *text*.\n",
    content_md: "# Title\n\nBody *text*.\n",
    targets: ["nas"],
    transform: "read",
  });
  downstream.modes.blog = "fail";
  const partial = await runCli([...args, "--target", "notes,blog", "--json"], { env });
  assert.equal(partial.code, 1);
  assert.equal(JSON.parse(partial.stdout).status, "partial");
  await relay.stop();
  await Deno.remove(dir, { recursive: true });
});

Deno.test("relay blog-delete sends the access cookie and needs the 303", async () => {
  await using downstream = startDownstream();
  downstream.posts.add("12");
  const env = { RELAY_PUBLISH_URL: downstream.url, RELAY_BLOG_ACCESS_COOKIE: downstream.cookie };
  assert.deepEqual(await runCli(["blog-delete", "12"], { env }), {
    code: 0,
    stdout: "deleted post 12\n",
    stderr: "",
  });
  assert.equal(downstream.requests.at(-1)?.headers.cookie, downstream.cookie);
  const gone = await runCli(["blog-delete", "12"], { env });
  assert.equal(gone.code, 1);
  assert.match(gone.stderr, /^relay: cannot delete post "12": The blog answered 404[^\n]*\n$/);
  const noCookie = await runCli(["blog-delete", "12"], {
    env: { RELAY_PUBLISH_URL: downstream.url },
  });
  assert.equal(noCookie.code, 2);
  assert.match(noCookie.stderr, /RELAY_BLOG_ACCESS_COOKIE/);
});

Deno.test("relay work runs the command per item, pushes its output, and leaves failures in their queue", async () => {
  const dir = await tempDir();
  await using relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
  const env = { RELAY_URL: relay.url, RELAY_API_KEY: KEY };
  for (const item of ["good one", "bad one", "good two"]) {
    await runCli(["submit", "--queue", "general", item], { env });
  }
  // Upper-cases its input, and fails (exit 3) for anything containing "bad".
  const script = 'input=$(cat); case "$input" in *bad*) exit 3;; esac; echo "$input" | tr a-z A-Z';
  const worker = spawnRelay(
    ["work", "--queue", "general", "--attempts", "1", "--lease", "1s", "--", "sh", "-c", script],
    { env },
  );
  const results = async () =>
    JSON.parse((await runCli(["results", "--json"], { env })).stdout).items.map((
      i: { c: string },
    ) => i.c);
  await eventually(async () => (await results()).length === 2, "two results");
  assert.deepEqual(await results(), ["GOOD ONE", "GOOD TWO"]);
  await eventually(
    async () => (await runCli(["peek", "--json"], { env })).stdout.includes("bad one"),
    "the failed item back on its queue",
  );
  await eventually(
    () => worker.stderr.some((l) => l.includes("exited with code 3")),
    "the failure log line",
  );
  worker.child.kill("SIGTERM");
  const status = await worker.done;
  assert.equal(status.code, 0, worker.stderr.join("\n"));
  assert.match(worker.stderr.at(-1)!, /^relay: stopped after 2 done and \d+ given up on$/);
  // Nothing was lost: the bad item is still queued (held under a 1 s lease at most).
  let left: string[] = [];
  await eventually(async () => {
    left = JSON.parse((await runCli(["pull", "--json", "--queue", "general"], { env })).stdout);
    return left.length > 0;
  }, "the bad item");
  assert.deepEqual(left, ["bad one"]);
  await relay.stop();
  await Deno.remove(dir, { recursive: true });
});

Deno.test("relay results --follow keeps its cursor across relay and follower restarts", async () => {
  const dir = await tempDir();
  const port = freePort();
  const cursorFile = `${dir}/cursor`;
  const env = { RELAY_URL: `http://127.0.0.1:${port}`, RELAY_API_KEY: KEY };
  const push = async (text: string) =>
    assert.equal((await runCli(["push", text], { env })).code, 0);
  const follow = () =>
    spawnRelay([
      "results",
      "--follow",
      "--json",
      "--interval",
      "100ms",
      "--cursor-file",
      cursorFile,
    ], { env });
  const seen = (lines: string[]) => lines.map((line) => JSON.parse(line).c);

  let relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY }, port });
  await push("r1");
  const follower = follow();
  await eventually(() => seen(follower.stdout).includes("r1"), "r1");
  await relay.stop();
  // The follower meets a dead relay (and says so) before the relay comes back.
  await eventually(
    () => follower.stderr.some((line) => /Cannot reach the relay/.test(line)),
    "the follower to find the relay gone",
  );
  relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY }, port });
  await push("r2");
  await eventually(() => seen(follower.stdout).includes("r2"), "r2 after the relay restarted");
  follower.child.kill("SIGTERM");
  assert.equal((await follower.done).code, 0);
  assert.deepEqual(seen(follower.stdout), ["r1", "r2"]);
  const cursor = Number((await Deno.readTextFile(cursorFile)).trim());
  assert.equal(cursor, JSON.parse(follower.stdout.at(-1)!).t);
  // Written by the relay's one atomic writer: fsynced, private, nothing left beside it.
  assert.equal((await Deno.stat(cursorFile)).mode! & 0o777, 0o600);
  assert.deepEqual([...Deno.readDirSync(dir)].filter((e) => e.name.startsWith("cursor.")), []);

  // A new follower on the same cursor file neither repeats nor skips.
  await push("r3");
  const again = follow();
  await eventually(() => seen(again.stdout).includes("r3"), "r3");
  await new Promise((r) => setTimeout(r, 300));
  again.child.kill("SIGTERM");
  await again.done;
  assert.deepEqual(seen(again.stdout), ["r3"]);
  await relay.stop();
  await Deno.remove(dir, { recursive: true });
});

Deno.test("relay results --follow --exec runs the command per result, result on stdin", async () => {
  const dir = await tempDir();
  await using relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
  const env = { RELAY_URL: relay.url, RELAY_API_KEY: KEY };
  await runCli(["push", "alpha"], { env });
  await runCli(["push", "beta"], { env });
  const out = `${dir}/out.txt`;
  const follower = spawnRelay(
    [
      "results",
      "--follow",
      "--interval",
      "100ms",
      "--exec",
      `cat >> ${out}; echo " @$RELAY_RESULT_T" >> ${out}`,
    ],
    { env },
  );
  await eventually(async () => {
    try {
      return (await Deno.readTextFile(out)).split("\n").length >= 3;
    } catch {
      return false;
    }
  }, "two results handled");
  follower.child.kill("SIGTERM");
  await follower.done;
  assert.match(await Deno.readTextFile(out), /^alpha @\d+\nbeta @\d+\n$/);
  await relay.stop();
  await Deno.remove(dir, { recursive: true });
});

Deno.test("relay work: a worker killed with SIGKILL mid-item loses nothing; the next one finishes it", async () => {
  const dir = await tempDir();
  await using relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
  const env = { RELAY_URL: relay.url, RELAY_API_KEY: KEY };
  const started = `${dir}/started`;
  // The first worker's command marks that it started, then hangs until killed.
  const hang = spawnRelay(
    [
      "work",
      "--queue",
      "article",
      "--lease",
      "2s",
      "--",
      "sh",
      "-c",
      `touch ${started}; exec sleep 60 2>/dev/null`,
    ],
    { env },
  );
  await runCli(["submit", "--queue", "article", "precious"], { env });
  await eventually(async () => {
    try {
      await Deno.stat(started);
      return true;
    } catch {
      return false;
    }
  }, "the first worker to start the item");
  hang.child.kill("SIGKILL");
  await hang.done;
  // The item was leased, not deleted: still in its queue, handed out again when the lease
  // ends.
  const call = (path: string) => fetch(`${relay.url}${path}`, { headers: { "x-auth-key": KEY } });
  assert.equal((await getStats(call)).queues.article.depth, 1);
  const finisher = spawnRelay(["work", "--queue", "article", "--", "tr", "a-z", "A-Z"], { env });
  await eventually(
    async () => (await runCli(["results", "--json"], { env })).stdout.includes("PRECIOUS"),
    "the second worker's result",
  );
  finisher.child.kill("SIGTERM");
  assert.equal((await finisher.done).code, 0);
  const after = await getStats(call);
  assert.deepEqual(
    [after.queues.article.depth, after.queues.article.leased, after.queues.article.delivered],
    [0, 2, 1],
  );
  await relay.stop();
  await Deno.remove(dir, { recursive: true });
});

/** `relay serve` as a process: its log lines, their format and level, and a log nobody reads. */
import assert from "node:assert/strict";
import {
  eventually,
  freePort,
  relayCommand,
  runCli,
  runRelay,
  spawnRelay,
  startRelayProcess,
  within,
  withTempDir,
} from "../_helpers.ts";
import { answering, KEY, tempDir } from "./_server.ts";

Deno.test("relay serve --log-format json writes JSON lines whose access fields carry the client address", async () => {
  await withTempDir(async (dir) => {
    // A short key, so that the start also writes a warning.
    const key = "short-key";
    await using relay = await startRelayProcess(dir, {
      args: ["--log-format", "json"],
      env: { RELAY_API_KEY: key },
    });
    assert.equal((await fetch(`${relay.url}/health`)).status, 200);
    const submitted = await fetch(`${relay.url}/submit`, {
      method: "POST",
      body: "x",
      headers: { "x-auth-key": key },
    });
    assert.equal(await submitted.text(), "OK (general)");
    await (await fetch(`${relay.url}/peek?key=${key}`)).body?.cancel();
    await (await fetch(`${relay.url}/`, { redirect: "manual" })).body?.cancel();
    // Access lines are written in batches: wait for the four.
    await eventually(
      () => relay.stdout.filter((line) => line.includes('"method"')).length === 4,
      "four access lines",
    );
    const lines = relay.stdout.map((line) => JSON.parse(line));
    for (const line of lines) {
      assert.match(line.time, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      assert.ok(["info", "warn"].includes(line.level), line.level);
      assert.equal(typeof line.msg, "string");
    }
    assert.ok(lines.some((l) => l.level === "info" && l.msg === `relay listening on ${relay.url}`));
    assert.ok(lines.some((l) => l.level === "warn" && /the API key is 9 characters/.test(l.msg)));
    const access = lines.filter((line) => "method" in line);
    assert.deepEqual(
      access.map((l) => [l.level, l.client, l.method, l.path, l.status, l.bytes]),
      [
        ["info", "127.0.0.1", "GET", "/health", 200, access[0].bytes],
        ["info", "127.0.0.1", "POST", "/submit", 200, 12],
        ["info", "127.0.0.1", "GET", "/peek?key=REDACTED", 200, access[2].bytes],
        ["info", "127.0.0.1", "GET", "/", 302, 0],
      ],
    );
    for (const line of access) {
      assert.equal(typeof line.duration_ms, "number");
      assert.ok(line.bytes >= 0);
      assert.equal(line.msg, `${line.method} ${line.path} ${line.status}`);
    }
    assert.ok(!relay.stdout.join("\n").includes(`key=${key}`), "the key is never logged");
    assert.equal((await relay.stop()).code, 0);
  });
});

Deno.test("relay serve text access lines carry the client address", async () => {
  await withTempDir(async (dir) => {
    await using relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
    await (await fetch(`${relay.url}/peek?key=${KEY}`)).body?.cancel();
    await eventually(() => relay.stdout.some((l) => l.includes("/peek")), "the access line");
    const line = relay.stdout.find((l) => l.includes("/peek"))!;
    assert.match(line, /^\S+Z 127\.0\.0\.1 GET \/peek\?key=REDACTED 204 0 \d+\.\dms$/);
    assert.equal((await relay.stop()).code, 0);
  });
});

Deno.test("relay serve RELAY_LOG_LEVEL=warn leaves out access lines and keeps warnings", async () => {
  await withTempDir(async (dir) => {
    const port = freePort();
    const relay = spawnRelay(
      ["serve", "--hostname", "127.0.0.1", "--port", String(port), "--db", `${dir}/relay.kv`],
      { env: { RELAY_API_KEY: "short-key", RELAY_LOG_LEVEL: "warn" } },
    );
    const url = `http://127.0.0.1:${port}`;
    await answering(url);
    const res = await fetch(`${url}/submit`, {
      method: "POST",
      body: "x",
      headers: { "x-auth-key": "short-key" },
    });
    assert.equal(await res.text(), "OK (general)");
    relay.child.kill("SIGTERM");
    assert.equal((await relay.done).code, 0, relay.stderr.join("\n"));
    const output = relay.stdout.join("\n");
    assert.match(output, /relay: warning: the API key is 9 characters long/);
    assert.ok(!/GET \/health|POST \/submit/.test(output), output);
    assert.ok(!output.includes("relay listening on"), "info lines are left out too");
  });
});

Deno.test("relay serve exits 2 with one line for an invalid --log-format or RELAY_LOG_LEVEL", async () => {
  await withTempDir(async (dir) => {
    const cases: Array<[string[], Record<string, string>, RegExp]> = [
      [["--log-format", "xml"], {}, /^relay: invalid --log-format "xml": must be text or json$/],
      [
        [],
        { RELAY_LOG_LEVEL: "verbose" },
        /^relay: invalid RELAY_LOG_LEVEL "verbose": must be one of debug, info, warn, error$/,
      ],
      [[], { RELAY_LOG_FORMAT: "JSON" }, /^relay: invalid RELAY_LOG_FORMAT "JSON": /],
      [["--log-level", "trace"], {}, /^relay: invalid --log-level "trace": /],
    ];
    for (const [args, env, pattern] of cases) {
      const { code, stdout, stderr } = await runRelay(
        ["serve", "--db", `${dir}/relay.kv`, ...args],
        { env },
      );
      assert.equal(code, 2, stderr);
      assert.equal(stdout, "");
      const lines = stderr.trim().split("\n");
      assert.equal(lines.length, 1, stderr);
      assert.match(lines[0]!, pattern);
    }
    const help = await runCli(["--help"]);
    for (const name of ["--log-format", "RELAY_LOG_FORMAT", "--log-level", "RELAY_LOG_LEVEL"]) {
      assert.ok(help.stdout.includes(name), name);
    }
  });
});

/**
 * A relay whose standard output is a pipe nothing reads until the test calls `read()`: once
 * its 64 KiB buffer is full, every write of the log waits, as under a stalled journal or a
 * paused terminal.
 */
async function relayWithUnreadOutput(dir: string) {
  const port = freePort();
  const child = relayCommand(
    ["serve", "--hostname", "127.0.0.1", "--port", String(port), "--db", `${dir}/relay.kv`],
    { env: { RELAY_API_KEY: KEY } },
    "null",
  ).spawn();
  const stderr = new Response(child.stderr).text();
  let stdout = "";
  let reading: Promise<void> | undefined;
  const base = `http://127.0.0.1:${port}`;
  await answering(base);
  return {
    base,
    stderr,
    /** Starts reading standard output; resolves once the relay has closed it. */
    read: () =>
      reading ??= (async () => {
        for await (const text of child.stdout.pipeThrough(new TextDecoderStream())) {
          stdout += text;
        }
      })(),
    /** What has been read of standard output so far. */
    output: () => stdout,
    /** Sends `count` requests for `path`, 100 at a time; every answer must be 200. */
    async load(path: string, count: number) {
      for (let sent = 0; sent < count; sent += 100) {
        const answers = await Promise.all(
          Array.from({ length: 100 }, () =>
            fetch(`${base}${path}`).then(async (res) => {
              await res.body?.cancel();
              return res.status;
            })),
        );
        assert.deepEqual(new Set(answers), new Set([200]));
      }
    },
    /** SIGTERM, then the exit status, or `undefined` when it has not exited within 60 s. */
    async stop(): Promise<Deno.CommandStatus | undefined> {
      child.kill("SIGTERM");
      return await within(child.status, 60_000);
    },
    async [Symbol.asyncDispose]() {
      try {
        child.kill("SIGKILL");
      } catch {
        // already gone
      }
      if (reading === undefined) await child.stdout.cancel();
      await child.status;
      await stderr;
      await reading;
      await Deno.remove(dir, { recursive: true });
    },
  };
}

Deno.test("relay serve exits 0 on SIGTERM while nothing reads its standard output, and keeps answering meanwhile", async () => {
  await using relay = await relayWithUnreadOutput(await tempDir());
  // 4000 access lines of about 100 bytes: several times what the pipe holds.
  await relay.load(`/health?${"padding".repeat(5)}`, 4000);
  const res = await fetch(`${relay.base}/submit`, {
    method: "POST",
    body: "still accepted",
    headers: { "x-auth-key": KEY },
  });
  assert.equal(await res.text(), "OK (general)");
  // The relay gives up on its log after a grace; it used to wait for it forever.
  const status = await relay.stop();
  assert.ok(status !== undefined, "the relay did not exit within 60 s of SIGTERM");
  assert.equal(status.code, 0, await relay.stderr);
});

Deno.test("relay serve holds at most 1 MiB of log lines nobody reads, and reports how many it dropped", async () => {
  await using relay = await relayWithUnreadOutput(await tempDir());
  // 4000 access lines of about 570 bytes (the path is cut at 512 characters): 2.3 MB.
  const sent = 4000;
  await relay.load(`/health?${"p".repeat(600)}`, sent);
  // Read again, then log one more line: it comes out once the held lines and the notice have.
  const done = relay.read();
  await relay.load("/health?marker", 100);
  await eventually(() => relay.output().includes("GET /health?marker"), "the marker lines");
  const status = await relay.stop();
  assert.equal(status?.code, 0, await relay.stderr);
  await done;
  const lines = relay.output().split("\n");
  const notices = lines.flatMap((line) => {
    const match = /^relay: warning: (\d+) log line\(s\) dropped: the output was not taking/
      .exec(line);
    return match ? [Number(match[1])] : [];
  });
  const dropped = notices.reduce((a, b) => a + b, 0);
  const written = lines.filter((line) => line.includes(" GET /health?ppp")).length;
  const markers = lines.filter((line) => line.includes(" GET /health?marker")).length;
  // Every line either written or counted; about 1 MiB of them (1,840 lines) was held while
  // nobody read, plus what the pipe took (64 KiB).
  assert.ok(notices.length >= 1, "no notice of dropped lines");
  assert.equal(written + markers + dropped, sent + 100);
  assert.ok(written < 2500, `${written} of ${sent} lines written: too few were dropped`);
});

/** `relay serve` as a process: start, stop, keys, its database, durability and delivery. */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import {
  childEnv,
  eventually,
  relayArgv,
  runRelay,
  startRelayProcess,
  withTempDir,
} from "../_helpers.ts";
import { client, KEY, tempDir } from "./_server.ts";

Deno.test("relay serve prints its start line, serves, and exits 0 on SIGTERM and SIGINT", async (t) => {
  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    await t.step(signal, async () => {
      const dir = await tempDir();
      await using relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
      assert.match(relay.url, /^http:\/\/127\.0\.0\.1:\d+$/);
      assert.ok(relay.stdout.includes(`relay listening on ${relay.url}`));
      const res = await fetch(`${relay.url}/health`);
      assert.equal(res.status, 200);
      assert.equal((await res.json()).ok, true);
      const status = await relay.stop(signal);
      assert.equal(status.code, 0, relay.stderr.join("\n"));
      assert.ok(
        relay.stdout.some((line) => line.includes(`${signal}: finishing in-flight requests`)),
      );
      await Deno.remove(dir, { recursive: true });
    });
  }
});

Deno.test("relay serve finishes an in-flight request before exiting on SIGTERM", async () => {
  const dir = await tempDir();
  await using relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
  // A request whose body is not sent yet is in flight while the signal arrives. With
  // `Expect: 100-continue` the server says "100 Continue" once it has taken the request
  // in, so the signal is sent after that, however slow the machine (not after a guess of
  // how long a connection takes).
  const { hostname, port } = new URL(relay.url);
  const conn = await Deno.connect({ hostname, port: Number(port) });
  const encoder = new TextEncoder();
  const body = "slow submission";
  await conn.write(encoder.encode(
    `POST /submit HTTP/1.1\r\nHost: relay\r\nX-Auth-Key: ${KEY}\r\n` +
      `Content-Type: text/plain\r\nContent-Length: ${body.length}\r\n` +
      "Expect: 100-continue\r\n\r\n",
  ));
  const replies = conn.readable.pipeThrough(new TextDecoderStream()).getReader();
  let answer = "";
  while (!answer.includes("\r\n\r\n")) answer += (await replies.read()).value ?? "";
  assert.match(answer, /^HTTP\/1\.1 100 Continue\r\n\r\n$/);
  const stopped = relay.stop("SIGTERM");
  // While it drains (the request above holds it open), a new request is refused 503 through
  // the same steps as any answer: the keyed route's Cache-Control, Vary, a problem document.
  let refused = "";
  while (!refused.startsWith("HTTP/1.1 503")) {
    const other = await Deno.connect({ hostname, port: Number(port) });
    await other.write(encoder.encode(
      `GET /peek HTTP/1.1\r\nHost: relay\r\nX-Auth-Key: ${KEY}\r\nConnection: close\r\n\r\n`,
    ));
    refused = new TextDecoder().decode(await readAll(other));
  }
  assert.match(refused, /\r\ncache-control: private\r\n/i);
  assert.match(refused, /\r\nvary: Origin\r\n/i);
  assert.match(refused, /\r\nretry-after: 5\r\n/i);
  assert.match(refused, /\r\ncontent-type: application\/problem\+json\r\n/i);
  assert.match(refused, /shutting down/);
  await conn.write(encoder.encode(body));
  answer = "";
  for (let chunk = await replies.read(); !chunk.done; chunk = await replies.read()) {
    answer += chunk.value;
    if (answer.endsWith("OK (general)")) break;
  }
  replies.releaseLock();
  conn.close();
  assert.match(answer, /^HTTP\/1\.1 200 OK\r\n/);
  assert.ok(answer.endsWith("\r\n\r\nOK (general)"), answer);
  assert.equal((await stopped).code, 0);
  // The accepted item is on disk.
  await using again = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
  assert.deepEqual(await (await client(again.url)("/pull")).json(), ["slow submission"]);
  await again.stop();
  await Deno.remove(dir, { recursive: true });
});

Deno.test("relay serve generates a 0600 API key beside the database and reuses it", async () => {
  const dir = await tempDir();
  const keyPath = `${dir}/api-key`;
  {
    await using relay = await startRelayProcess(dir);
    assert.ok(relay.stdout.some((line) => line.includes(keyPath)), relay.stdout.join("\n"));
    const stat = await Deno.stat(keyPath);
    assert.equal(stat.mode! & 0o777, 0o600);
    const key = (await Deno.readTextFile(keyPath)).trim();
    assert.ok(Buffer.from(key, "base64url").length >= 16, "at least 128 bits");
    assert.ok(!relay.stdout.join("\n").includes(key), "the key itself is never printed");
    assert.equal((await client(relay.url, key)("/results")).status, 200);
    assert.equal((await client(relay.url, "wrong")("/results")).status, 401);
    await relay.stop();
  }
  const key = (await Deno.readTextFile(keyPath)).trim();
  {
    await using relay = await startRelayProcess(dir);
    assert.equal((await Deno.readTextFile(keyPath)).trim(), key);
    assert.equal((await client(relay.url, key)("/results")).status, 200);
    await relay.stop();
  }
  {
    // RELAY_API_KEY wins over the file.
    await using relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
    assert.equal((await client(relay.url, key)("/results")).status, 401);
    assert.equal((await client(relay.url, KEY)("/results")).status, 200);
    await relay.stop();
  }
  await Deno.remove(dir, { recursive: true });
});

Deno.test("relay serve reads the key from --api-key-file and exits 1 when it is missing", async () => {
  const dir = await tempDir();
  const file = `${dir}/my-key`;
  await Deno.writeTextFile(file, "  file-key-0123456789  \n");
  {
    await using relay = await startRelayProcess(dir, { args: ["--api-key-file", file] });
    assert.equal((await client(relay.url, "file-key-0123456789")("/results")).status, 200);
    await relay.stop();
  }
  await assert.rejects(
    startRelayProcess(dir, { args: ["--api-key-file", `${dir}/missing`] }),
    /invalid --api-key-file ".*missing": cannot read it/,
  );
  await Deno.remove(dir, { recursive: true });
});

Deno.test("relay serve refuses a second relay on the same database with one line", async () => {
  const dir = await tempDir();
  await using first = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
  const out = await new Deno.Command(Deno.execPath(), {
    args: relayArgv(["--port", "0", "--hostname", "127.0.0.1", "--db", `${dir}/relay.kv`]).slice(1),
    env: childEnv({ RELAY_API_KEY: KEY }),
    clearEnv: true,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const stderr = new TextDecoder().decode(out.stderr).trim();
  assert.equal(out.code, 1);
  assert.equal(stderr.split("\n").length, 1, stderr);
  assert.match(stderr, /^relay: the database ".*relay\.kv" is in use by another relay \(pid \d+\)/);
  assert.equal(new TextDecoder().decode(out.stdout), "", "it touched nothing and served nothing");
  assert.equal((await fetch(`${first.url}/health`)).status, 200);
  await first.stop();
  await Deno.remove(dir, { recursive: true });
});

Deno.test("relay serve answers 400 to a malformed Host header and never logs the key", async () => {
  const dir = await tempDir();
  await using relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
  const port = Number(new URL(relay.url).port);
  for (const host of ["a:99999", "a b", "[::1", "%zz"]) {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port });
    const request = `GET /peek?key=${KEY} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`;
    await conn.write(new TextEncoder().encode(request));
    const answer = new TextDecoder().decode(await readAll(conn));
    assert.match(answer, /^HTTP\/1\.1 400 /, host);
    assert.match(answer, /content-type: application\/problem\+json/i, host);
    assert.match(answer, /Host header/, host);
  }
  assert.equal((await fetch(`${relay.url}/health`)).status, 200, "still serving");
  await relay.stop();
  const output = [...relay.stdout, ...relay.stderr].join("\n");
  assert.ok(!output.includes(KEY), "the key is never logged");
  assert.ok(output.includes("/peek?key=REDACTED 400"), output);
  await Deno.remove(dir, { recursive: true });
});

Deno.test("a Host header holding a path, query, fragment or user is refused, never routed", async () => {
  const dir = await tempDir();
  await using relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
  const port = Number(new URL(relay.url).port);
  const at = `127.0.0.1:${port}`;
  // Each would make Deno's URL name another path than the request line's /health.
  for (const host of [`${at}/stats?`, `${at}/openapi.json#`, `${at}?`, `user@${at}`, `${at}\\x`]) {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port });
    const request = `GET /health HTTP/1.1\r\nHost: ${host}\r\nX-Auth-Key: ${KEY}\r\n` +
      "Connection: close\r\n\r\n";
    await conn.write(new TextEncoder().encode(request));
    const answer = new TextDecoder().decode(await readAll(conn));
    assert.match(answer, /^HTTP\/1\.1 400 /, host);
    assert.match(answer, /content-type: application\/problem\+json/i, host);
    assert.match(answer, /its Host header is not a host name or address/, host);
  }
  // Valid forms still answer: a name, an IP literal, a port, a name in raw UTF-8 (as the
  // URL parser took it before), a name with its root dot.
  for (const host of ["relay.lan", "[::1]:80", at, "bücher.example", "relay.lan."]) {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port });
    const request = `GET /health HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`;
    await conn.write(new TextEncoder().encode(request));
    assert.match(new TextDecoder().decode(await readAll(conn)), /^HTTP\/1\.1 200 /, host);
  }
  await relay.stop();
  await Deno.remove(dir, { recursive: true });
});

async function readAll(conn: Deno.Conn): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  const buffer = new Uint8Array(4096);
  for (;;) {
    const n = await conn.read(buffer).catch(() => null);
    if (n === null) break;
    chunks.push(buffer.slice(0, n));
  }
  conn.close();
  const out = new Uint8Array(chunks.reduce((sum, c) => sum + c.length, 0));
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.length;
  }
  return out;
}

Deno.test("relay serve refuses a second relay reaching the same database through a symlink", async () => {
  const dir = await tempDir();
  await Deno.mkdir(`${dir}/a`);
  await Deno.mkdir(`${dir}/b`);
  await using first = await startRelayProcess(`${dir}/a`, { env: { RELAY_API_KEY: KEY } });
  await Deno.symlink(`${dir}/a/relay.kv`, `${dir}/b/relay.kv`);
  await assert.rejects(
    startRelayProcess(`${dir}/b`, { env: { RELAY_API_KEY: KEY } }),
    /relay: the database ".*" is in use by another relay \(pid \d+\)/,
  );
  assert.equal((await fetch(`${first.url}/health`)).status, 200);
  await first.stop();
  await Deno.remove(dir, { recursive: true });
});

Deno.test("relay serve shows created_at in UTC whatever the machine's time zone", async () => {
  const dir = await tempDir();
  await using relay = await startRelayProcess(dir, {
    env: { RELAY_API_KEY: KEY, TZ: "Asia/Kolkata" },
  });
  const before = Date.now();
  await client(relay.url)("/submit", { method: "POST", body: "when?" });
  const after = Date.now();
  const peeked = await (await client(relay.url)("/peek")).json();
  const shown = peeked.queues.general[0].created_at as string;
  assert.match(shown, /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/);
  const asUtc = Date.parse(`${shown.replace(" ", "T")}Z`);
  assert.ok(asUtc >= Math.floor(before / 1000) * 1000 && asUtc <= after, `${shown} is UTC`);
  await relay.stop();
  await Deno.remove(dir, { recursive: true });
});

// Checks over HTTP that cannot disturb one another share one relay, emptied before each
// (POST /clear: queues, results and the duplicate records), so the file starts one relay for
// them rather than one each.
Deno.test("relay serve over HTTP: reads, deliveries and sizes on one relay", async (t) => {
  const dir = await tempDir();
  await using relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
  const call = client(relay.url);
  const clear = async () => {
    const res = await call("/clear", { method: "POST" });
    assert.equal(res.status, 200, await res.text());
  };
  await t.step(
    "relay serve answers a cached read, and HEAD of it, with its JSON type and its length in bytes",
    async () => {
      await clear();
      await call("/submit?queue=general", { method: "POST", body: "https://example.com/é/日本" });
      await call("/push", { method: "POST", body: "# Résumé" });
      for (const path of ["/peek", "/results?since=0"]) {
        // The first answer is built and kept; the second and the HEAD come from the read cache.
        const lengths: string[] = [];
        for (const round of [1, 2]) {
          const res = await call(path, { headers: { "accept-encoding": "identity" } });
          const body = new Uint8Array(await res.arrayBuffer());
          assert.equal(res.status, 200);
          assert.equal(res.headers.get("content-type"), "application/json; charset=utf-8");
          assert.equal(
            res.headers.get("content-length"),
            String(body.byteLength),
            `${path} ${round}`,
          );
          assert.ok(new TextDecoder().decode(body).includes(path === "/peek" ? "日本" : "Résumé"));
          lengths.push(String(body.byteLength));
        }
        const head = await call(path, { method: "HEAD" });
        assert.equal(head.status, 200);
        assert.equal(head.headers.get("content-type"), "application/json; charset=utf-8");
        assert.equal(head.headers.get("content-length"), lengths[0], `HEAD ${path}`);
        assert.equal((await head.arrayBuffer()).byteLength, 0);
      }
    },
  );

  await t.step(
    "relay serve delivers every accepted item exactly once to concurrent pullers over HTTP",
    async () => {
      await clear();
      // 4 × 12 = 48 items: below the 50-item overflow, so every accepted item must arrive.
      let submitting = true;
      const submitters = Array.from({ length: 4 }, async (_, s) => {
        const accepted: string[] = [];
        for (let i = 0; i < 12; i++) {
          const content = `s${s} i${i}`;
          const res = await call("/submit?queue=qa", { method: "POST", body: content });
          if (res.status === 200 && (await res.text()) === "OK (qa)") accepted.push(content);
        }
        return accepted;
      });
      const pullers = Array.from({ length: 3 }, async () => {
        const got: string[] = [];
        while (submitting) {
          const res = await call("/pull?queue=queue_qa");
          if (res.status === 200) got.push(...await res.json());
          else await res.body?.cancel();
        }
        return got;
      });
      const accepted = (await Promise.all(submitters)).flat();
      submitting = false;
      const delivered = (await Promise.all(pullers)).flat();
      const last = await call("/pull?queue=qa");
      if (last.status === 200) delivered.push(...await last.json());
      assert.equal(accepted.length, 48);
      assert.equal(new Set(delivered).size, delivered.length, "no item delivered twice");
      assert.deepEqual([...delivered].sort(), [...accepted].sort());
    },
  );

  await t.step(
    "relay serve round-trips 300 KiB byte for byte and answers 413 past the limit",
    async () => {
      await clear();
      const big = "Ünïcødé 🚀 text ".repeat(300 * 1024 / 20) + "end";
      assert.ok(new TextEncoder().encode(big).length > 300 * 1024);
      assert.equal((await call("/submit", { method: "POST", body: big })).status, 200);
      assert.deepEqual(
        await (await call("/peek")).json().then((b) => b.queues.general[0].content),
        big,
      );
      assert.deepEqual(await (await call("/pull")).json(), [big]);
      assert.equal((await call("/push", { method: "POST", body: big })).status, 200);
      assert.ok(
        (await (await call("/results")).json()).items[0].c === big,
        "results byte for byte",
      );
      const tooBig = await call("/push", { method: "POST", body: "x".repeat(512 * 1024 + 1) });
      assert.equal(tooBig.status, 413);
      assert.equal(tooBig.headers.get("content-type"), "application/problem+json");
      await tooBig.body?.cancel();
      assert.equal(
        (await (await call("/results")).json()).items.length,
        1,
        "nothing stored is lost",
      );
    },
  );
  await relay.stop();
  await Deno.remove(dir, { recursive: true });
});

Deno.test("relay serve: gives memory back once idle, and says so at level debug", async () => {
  const dir = await tempDir();
  await using relay = await startRelayProcess(dir, {
    env: { RELAY_API_KEY: KEY, RELAY_LOG_LEVEL: "debug" },
  });
  const line =
    /relay: idle: gave back memory in \d+ ms \(resident ([\d.]+) → ([\d.]+) MiB, heap [\d.]+ → [\d.]+ MiB\)/;
  const found = () => relay.stdout.map((l) => line.exec(l)).find((m) => m !== null);
  await eventually(() => found() !== undefined, "the idle collection's log line");
  const [, before, after] = found()!;
  // A plain full collection gave back nothing measurable at start-up; the last-resort one
  // about 8 MiB (docs/benchmarks.md, "Idle memory").
  assert.ok(Number(after) < Number(before) - 4, `${before} → ${after} MiB`);
  // It still serves, and the collection did not keep the process alive past SIGTERM.
  const res = await client(relay.url)("/submit", { method: "POST", body: "after" });
  assert.equal(await res.text(), "OK (general)");
  assert.equal((await relay.stop()).code, 0, relay.stderr.join("\n"));
  await Deno.remove(dir, { recursive: true });
});

Deno.test("relay serve keeps every acknowledged item and result across SIGKILL", async () => {
  const dir = await tempDir();
  const acked: Record<string, string[]> = { qa: [], article: [], general: [] };
  const results: string[] = [];
  {
    await using relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
    const call = client(relay.url);
    await Promise.all(
      Object.keys(acked).map(async (queue) => {
        for (let i = 0; i < 40; i++) {
          const content = `${queue} item ${i}`;
          const res = await call(`/submit?queue=${queue}`, { method: "POST", body: content });
          if (res.status === 200 && (await res.text()) === `OK (${queue})`) {
            acked[queue]!.push(content);
          }
        }
      }),
    );
    for (let i = 0; i < 40; i++) {
      const res = await call("/push", { method: "POST", body: `result ${i}` });
      if (res.status === 200 && (await res.text()) === "OK") results.push(`result ${i}`);
    }
    const status = await relay.stop("SIGKILL");
    assert.notEqual(status.code, 0);
  }
  assert.equal(acked.qa!.length + acked.article!.length + acked.general!.length, 120);
  assert.equal(results.length, 40);
  await using relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
  const call = client(relay.url);
  for (const [queue, contents] of Object.entries(acked)) {
    assert.deepEqual(await (await call(`/pull?queue=${queue}`)).json(), contents, queue);
  }
  const page = await (await call("/results")).json();
  assert.deepEqual(page.items.map((i: { c: string }) => i.c), results);
  await relay.stop();
  await Deno.remove(dir, { recursive: true });
});

Deno.test("relay serve honours a short --dedupe-window; a duplicate does not refresh it", async () => {
  const windowMs = 2000;
  const dir = await tempDir();
  await using relay = await startRelayProcess(dir, {
    env: { RELAY_API_KEY: KEY },
    args: ["--dedupe-window", "2s"],
  });
  const call = client(relay.url);
  const submit = async (content: string) =>
    await (await call("/submit", { method: "POST", body: content })).text();
  // The relay accepts the first submit between `sent` and `acceptedBy`. A second one
  // answered before `sent + windowMs` is certainly inside the window; on a machine so
  // busy that it was not, nothing can be concluded, and the case runs again with new content.
  for (let attempt = 1;; attempt++) {
    const content = `same link ${attempt}`;
    const sent = Date.now();
    assert.equal(await submit(content), "OK (general)");
    const acceptedBy = Date.now();
    await new Promise((r) => setTimeout(r, windowMs / 4));
    const again = await submit(content);
    if (Date.now() >= sent + windowMs) {
      assert.ok(attempt < 5, "five tries, each too slow to land inside a 2 s window");
      continue;
    }
    assert.equal(again, "OK (duplicate)");
    // Were the window refreshed by that duplicate, this would still be a duplicate.
    await new Promise((r) => setTimeout(r, acceptedBy + windowMs + 50 - Date.now()));
    assert.equal(await submit(content), "OK (general)");
    break;
  }
  await relay.stop();
  await Deno.remove(dir, { recursive: true });
});

Deno.test("relay serve warns at start when the configured API key is shorter than 16 characters", async () => {
  await withTempDir(async (dir) => {
    {
      await using relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: "short-key" } });
      assert.ok(
        relay.stdout.some((l) => /warning: the API key is 9 characters long/.test(l)),
        relay.stdout.join("\n"),
      );
    }
    await using strong = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
    assert.ok(!strong.stdout.some((l) => l.includes("warning")), strong.stdout.join("\n"));
  });
});

Deno.test("relay serve that cannot listen still prints what it logged before it failed", async () => {
  await withTempDir(async (dir) => {
    // The port is taken once the key's warning is logged: the relay exits 1 at once after.
    const taken = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    try {
      for (let run = 0; run < 3; run++) {
        const out = await runRelay(
          [
            "serve",
            "--hostname",
            "127.0.0.1",
            "--port",
            String((taken.addr as Deno.NetAddr).port),
            "--db",
            `${dir}/relay.kv`,
          ],
          { env: { RELAY_API_KEY: "short-key" } },
        );
        assert.equal(out.code, 1, out.stderr);
        // One line that says what to do: a newcomer starting a second relay meets it first.
        assert.match(
          out.stderr,
          /^relay: cannot listen on 127\.0\.0\.1:\d+: address in use \(another program holds the port: stop it, or choose another with --port or RELAY_PORT\)$/m,
        );
        assert.match(out.stdout, /relay: API key from RELAY_API_KEY/);
        assert.match(out.stdout, /warning: the API key is 9 characters long/);
      }
    } finally {
      taken.close();
    }
  });
});

Deno.test("relay serve writes nothing to disk while clients poll empty queues and read", async () => {
  await withTempDir(async (dir) => {
    await using relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
    const call = client(relay.url);
    const get = async (path: string) => {
      const res = await call(path);
      await res.body?.cancel();
      return res.status;
    };
    const written = async () => {
      const io = await Deno.readTextFile(`/proc/${relay.child.pid}/io`);
      return Number(/^write_bytes:\s+(\d+)/m.exec(io)?.[1]);
    };
    assert.equal(await get("/pull"), 204); // loads the store's state
    // A new relay builds its search index in the background (a legitimate write): the polls are
    // measured once it is built, which /search says by answering 200 instead of 503.
    while (await get("/search?q=x") === 503) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const before = await written();
    for (let i = 0; i < 30; i++) {
      assert.equal(await get("/pull"), 204);
      assert.equal(await get("/pull?queue=general"), 204);
      assert.equal(await get("/peek"), 204);
      assert.equal(await get("/results?since=0"), 200);
      assert.equal(await get("/stats"), 200);
      assert.equal(await get("/health"), 200);
    }
    // SQLite may write back the page of a `-shm` file it touched (4–8 KiB, docs/benchmarks.md,
    // "Idle writes"); a write per request would be 180 pages at least.
    const bytes = await written() - before;
    assert.ok(bytes <= 8192, `${bytes} bytes written during 180 reads`);
  });
});

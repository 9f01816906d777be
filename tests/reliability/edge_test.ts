/**
 * Reliability: the HTTP edge of a real relay process on 127.0.0.1, against a hostile LAN
 * and hostile web pages (docs/api/basics.md, "Requests from web pages", "Access log", "Live
 * delivery"). Another site's page cannot lock a household member out; the key never
 * reaches the access log, however its parameter is spelled; control and bidirectional
 * characters are escaped and long targets cut in the log; results streams are capped per
 * key (429) and in total (503).
 *
 * @module
 */

import assert from "node:assert/strict";
import { addKey } from "../../src/access/named_keys.ts";
import { eventually, KEY, rssBytes, startRelayProcess, withTempDir } from "../_helpers.ts";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Host and port of a relay URL like `http://127.0.0.1:41234`. */
function addressOf(url: string): { hostname: string; port: number } {
  const u = new URL(url);
  return { hostname: u.hostname, port: Number(u.port) };
}

/** Sends raw bytes as one request with `Connection: close`; returns the whole answer. */
async function raw(url: string, head: Uint8Array): Promise<string> {
  const conn = await Deno.connect(addressOf(url));
  try {
    await conn.write(head);
    const chunks: string[] = [];
    const buf = new Uint8Array(16 * 1024);
    for (;;) {
      const n = await conn.read(buf).catch(() => null);
      if (n === null) break;
      chunks.push(decoder.decode(buf.subarray(0, n)));
    }
    return chunks.join("");
  } finally {
    conn.close();
  }
}

/** A request line and headers as bytes (the target may hold any UTF-8). */
function request(target: string, headers: Record<string, string> = {}): Uint8Array {
  const lines = Object.entries({ Host: "relay", Connection: "close", ...headers })
    .map(([name, value]) => `${name}: ${value}\r\n`).join("");
  return encoder.encode(`GET ${target} HTTP/1.1\r\n${lines}\r\n`);
}

Deno.test("a web page elsewhere cannot lock a household member out, and a valid key is never refused", async () => {
  await withTempDir(async (dir) => {
    await using relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
    const submit = (headers: Record<string, string>, body = "a link") =>
      fetch(`${relay.url}/submit`, {
        method: "POST",
        headers: { "content-type": "text/plain", ...headers },
        body,
      });
    // What a page on another site sends without a preflight: text/plain, its Origin, no key.
    const refusals: { status: number; type: string | null; detail: string }[] = [];
    for (let i = 0; i < 12; i++) {
      const res = await submit({ origin: "https://evil.example" });
      refusals.push({
        status: res.status,
        type: res.headers.get("content-type"),
        detail: (await res.json()).detail,
      });
    }
    // The household member's own client is not locked out.
    const own = await submit({ "x-auth-key": KEY }, "mine");
    assert.equal(own.status, 200, `after ${JSON.stringify(refusals.at(-1))}`);
    assert.equal(await own.text(), "OK (general)");
    // The page's requests were refused as coming from another site, not counted as keys.
    for (const refusal of refusals) {
      assert.equal(refusal.status, 403, JSON.stringify(refusal));
      assert.equal(refusal.type, "application/problem+json");
      assert.match(refusal.detail, /evil\.example/);
    }

    // Ten wrong keys from this address: the next wrong one gets 429, the right one still
    // gets through.
    for (let i = 0; i < 10; i++) {
      const res = await submit({ "x-auth-key": `guess-${i}` });
      assert.equal(res.status, 401);
      await res.body?.cancel();
    }
    const limited = await submit({ "x-auth-key": "guess-10" });
    assert.equal(limited.status, 429);
    assert.ok(Number(limited.headers.get("retry-after")) >= 1);
    await limited.body?.cancel();
    const valid = await submit({ "x-auth-key": KEY }, "still mine");
    assert.equal(valid.status, 200);
    assert.equal(await valid.text(), "OK (general)");
  });
});

Deno.test("the relay accepts its own pages, a proxy's public name, extensions and --allow-origin", async () => {
  await withTempDir(async (dir) => {
    await using relay = await startRelayProcess(dir, {
      env: { RELAY_API_KEY: KEY },
      args: ["--allow-origin", "https://dash.example"],
    });
    const submit = (headers: Record<string, string>, body: string) =>
      fetch(`${relay.url}/submit`, {
        method: "POST",
        headers: { "content-type": "text/plain", ...headers },
        body,
      });
    // The relay's own pages, a reverse proxy's public name, browser extensions and the
    // origins of --allow-origin are accepted; "null" and other sites are not.
    const { port } = addressOf(relay.url);
    const cases: [Record<string, string>, number][] = [
      [{ origin: relay.url }, 200],
      [{ origin: "https://relay.example", "x-forwarded-host": "relay.example" }, 200],
      [
        { origin: "https://relay.example:8443", forwarded: "proto=https;host=relay.example:8443" },
        200,
      ],
      [{ origin: "chrome-extension://abcdefghijklmnop" }, 200],
      [{ origin: "moz-extension://1234-5678" }, 200],
      [{ origin: "https://dash.example" }, 200],
      [{ origin: "null" }, 403],
      [{ origin: "https://relay.example", "x-forwarded-host": "other.example" }, 403],
      [{ origin: `http://127.0.0.1:${port + 1}` }, 403],
    ];
    for (const [headers, status] of cases) {
      const res = await submit(
        { "x-auth-key": KEY, ...headers },
        `from ${JSON.stringify(headers)}`,
      );
      assert.equal(res.status, status, JSON.stringify(headers));
      await res.body?.cancel();
    }
  });
});

Deno.test("the access log never shows a key, however its parameter is spelled or wherever it is", async () => {
  await withTempDir(async (dir) => {
    const named = addKey(`${dir}/keys.json`, "phone", ["read"], Date.now());
    await using relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
    const encoded = [...KEY].map((c) => `%${c.charCodeAt(0).toString(16)}`).join("");
    const targets = [
      `/peek?key=${KEY}`,
      `/peek?k%65y=${KEY}`,
      `/peek?%6Bey=${KEY}`,
      `/peek?KEY=${KEY}`,
      `/peek?x=1;key=${KEY}`,
      `/peek?queue=qa&api_key=${KEY}`,
      `/peek?key=${encoded}`,
      `/peek?note=${encoded}`,
      `/${KEY}`,
      `/peek/${encodeURIComponent(KEY).replace("-", "%2D")}`,
      `/peek?key=${named}`,
      `/peek?token=${named}`,
      `/results/${named}`,
    ];
    for (const target of targets) {
      const answer = await raw(relay.url, request(target));
      assert.match(answer, /^HTTP\/1\.1 \d{3} /, target);
    }
    await relay.stop();
    const log = [...relay.stdout, ...relay.stderr].join("\n");
    const access = relay.stdout.filter((line) => / GET \//.test(line));
    assert.equal(access.length, targets.length, log);
    for (const secret of [KEY, encoded, KEY.replace("-", "%2D"), named]) {
      assert.ok(!log.includes(secret), `${secret} in the log:\n${log}`);
    }
    for (const line of access) assert.match(line, /REDACTED/, line);
    // What is not a key stays readable.
    assert.ok(access.some((line) => line.includes(" GET /peek?queue=qa&api_key=REDACTED ")));
  });
});

Deno.test("the access log escapes control and bidirectional characters and cuts long targets", async () => {
  await withTempDir(async (dir) => {
    await using relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
    const long = `/${"a".repeat(65_000)}`;
    // Raw UTF-8 in the request target: a right-to-left override, a Latin-1 control (NEL),
    // a line separator and a zero-width space.
    const tricks = ["/x\u202Egpj.exe", "/y\u0085z", "/line\u2028break", "/zero\u200Bwidth"];
    for (const target of [...tricks, long]) {
      const answer = await raw(relay.url, request(target));
      assert.match(answer, /^HTTP\/1\.1 404 /, target.slice(0, 20));
    }
    await relay.stop();
    const access = relay.stdout.filter((line) => / GET \//.test(line));
    assert.equal(access.length, tricks.length + 1, relay.stdout.join("\n"));
    for (const line of access) {
      assert.ok(
        // deno-lint-ignore no-control-regex
        !/[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u2028-\u202e\u2066-\u2069]/.test(line),
        JSON.stringify(line),
      );
      assert.ok(line.length < 1200, `a line of ${line.length} characters`);
    }
    const all = access.join("\n");
    for (const escaped of ["\\u{202e}", "\\x85", "\\u{2028}", "\\u{200b}"]) {
      assert.ok(all.includes(escaped), `${escaped} in\n${all}`);
    }
    assert.ok(access.some((line) => /\/a{500,}…\(\+\d+\) 404 /.test(line)), all.slice(-800));
  });
});

Deno.test("results streams are capped per key (429) and in total (503), with Retry-After", async () => {
  await withTempDir(async (dir) => {
    const keys = ["a", "b", "c", "d"].map((name) =>
      addKey(`${dir}/keys.json`, name, ["read"], Date.now())
    );
    await using relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
    const open: Deno.Conn[] = [];
    /** Opens a stream; its status line and, past a limit, the whole problem answer. */
    const stream = async (key: string) => {
      const conn = await Deno.connect(addressOf(relay.url));
      await conn.write(encoder.encode(
        `GET /results/stream HTTP/1.1\r\nHost: relay\r\nX-Auth-Key: ${key}\r\n\r\n`,
      ));
      const buf = new Uint8Array(4096);
      let text = "";
      while (!text.includes("\r\n\r\n")) {
        const n = await conn.read(buf);
        if (n === null) break;
        text += decoder.decode(buf.subarray(0, n));
      }
      if (text.startsWith("HTTP/1.1 200 ")) open.push(conn);
      else conn.close();
      return text;
    };
    try {
      // 16 for one key: the 17th gets 429.
      for (let i = 0; i < 16; i++) assert.match(await stream(KEY), /^HTTP\/1\.1 200 /, `main ${i}`);
      const perKey = await stream(KEY);
      assert.match(perKey, /^HTTP\/1\.1 429 /);
      assert.match(perKey, /\r\ncontent-type: application\/problem\+json\r\n/i);
      assert.match(perKey, /\r\nretry-after: \d+\r\n/i);
      // 64 in all: three more keys with 16 each, then the fourth key gets 503.
      for (const key of keys.slice(0, 3)) {
        for (let i = 0; i < 16; i++) assert.match(await stream(key), /^HTTP\/1\.1 200 /);
      }
      const total = await stream(keys[3]!);
      assert.match(total, /^HTTP\/1\.1 503 /);
      assert.match(total, /\r\ncontent-type: application\/problem\+json\r\n/i);
      assert.match(total, /\r\nretry-after: \d+\r\n/i);
      // A stream that ends gives its place back.
      open.shift()!.close();
      await eventually(
        async () => (await stream(keys[3]!)).startsWith("HTTP/1.1 200 "),
        "a place to free up",
      );
    } finally {
      for (const conn of open) conn.close();
    }
  });
});

Deno.test("64 results streams and a burst of large results stay far inside the unit's memory limit", async () => {
  await withTempDir(async (dir) => {
    await using relay = await startRelayProcess(dir, {
      env: { RELAY_API_KEY: KEY },
      // All 64 on the main key (the default allows 16 a key).
      args: ["--max-streams-per-key", "64"],
    });
    const pid = relay.child.pid;
    const streams: Deno.Conn[] = [];
    const received: number[] = [];
    const reading: Promise<void>[] = [];
    try {
      for (let i = 0; i < 64; i++) {
        const conn = await Deno.connect(addressOf(relay.url));
        await conn.write(encoder.encode(
          `GET /results/stream HTTP/1.1\r\nHost: relay\r\nX-Auth-Key: ${KEY}\r\n\r\n`,
        ));
        streams.push(conn);
        received.push(0);
        reading.push((async () => {
          const buf = new Uint8Array(64 * 1024);
          for (;;) {
            const n = await conn.read(buf).catch(() => null);
            if (n === null) return;
            received[i]! += n;
          }
        })());
      }
      await eventually(() => received.every((n) => n > 0), "every stream to open");
      const baseline = rssBytes(pid);
      let peak = baseline;
      const sampler = setInterval(() => peak = Math.max(peak, rssBytes(pid)), 10);
      // Ten results of 500 KB, one right after the other: each goes to all 64 streams.
      const big = "é".repeat(250_000);
      try {
        for (let i = 0; i < 10; i++) {
          const res = await fetch(`${relay.url}/push`, {
            method: "POST",
            headers: { "x-auth-key": KEY, "content-type": "text/plain" },
            body: `${i} ${big}`,
          });
          assert.equal(res.status, 200);
          await res.body?.cancel();
        }
        await eventually(
          () => received.every((n) => n > 10 * 500_000),
          `every stream to receive the ten results (${received.join(" ")})`,
          20_000,
        );
      } finally {
        clearInterval(sampler);
      }
      const grew = (peak - baseline) / 1024 ** 2;
      // Read once for all streams, the results cost about 45 MiB here; read once per stream
      // (as before), about 190 MiB on the same machine.
      assert.ok(grew < 100, `RSS grew by ${grew.toFixed(0)} MiB`);
    } finally {
      for (const conn of streams) conn.close();
      await Promise.all(reading);
    }
  });
});

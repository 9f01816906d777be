/**
 * Reliability: abusive clients against a real relay process. A 1 GiB body is
 * refused without being read into memory; 500 idle and byte-at-a-time connections do not
 * stop a normal client; failed authentication is rate limited with 429 and `Retry-After`.
 * (The weak-key warning at start is tested in `tests/server/server_test.ts`.)
 *
 * @module
 */

import assert from "node:assert/strict";
import { KEY, relayCall, rssBytes, startRelayProcess, withTempDir } from "../_helpers.ts";

const encoder = new TextEncoder();
const GiB = 1024 ** 3;
const MiB = 1024 ** 2;

/** Host and port of a relay URL like `http://127.0.0.1:41234`. */
function addressOf(url: string): { hostname: string; port: number } {
  const u = new URL(url);
  return { hostname: u.hostname, port: Number(u.port) };
}

/** Reads what the server sends until it closes or `ms` pass; returns it as text. */
async function readReply(conn: Deno.Conn, ms: number): Promise<string> {
  const buf = new Uint8Array(64 * 1024);
  let text = "";
  const deadline = Date.now() + ms;
  while (Date.now() < deadline && !text.includes("\r\n\r\n")) {
    const n = await Promise.race([
      conn.read(buf).catch(() => null),
      new Promise<null>((r) => setTimeout(() => r(null), 200)),
    ]);
    if (n === null) continue;
    text += new TextDecoder().decode(buf.subarray(0, n));
  }
  return text;
}

Deno.test("a 1 GiB body is refused (413) without being read into memory", async () => {
  await withTempDir(async (dir) => {
    await using relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
    const pid = relay.child.pid;
    const baseline = rssBytes(pid);
    let peak = baseline;
    const sampler = setInterval(() => {
      peak = Math.max(peak, rssBytes(pid));
    }, 20);
    try {
      // Declared: refused from the header alone.
      const declared = await Deno.connect(addressOf(relay.url));
      await declared.write(encoder.encode(
        `POST /submit HTTP/1.1\r\nHost: relay\r\nX-Auth-Key: ${KEY}\r\n` +
          `Content-Type: text/plain\r\nContent-Length: ${GiB}\r\n\r\n`,
      ));
      assert.match(await readReply(declared, 10_000), /^HTTP\/1\.1 413 /);
      declared.close();

      // Chunked, no length: the relay stops reading at the limit; the client streams on
      // until the relay answers or closes.
      const chunked = await Deno.connect(addressOf(relay.url));
      await chunked.write(encoder.encode(
        `POST /submit HTTP/1.1\r\nHost: relay\r\nX-Auth-Key: ${KEY}\r\n` +
          `Content-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n`,
      ));
      const reply = readReply(chunked, 60_000);
      const chunk = encoder.encode(`${MiB.toString(16)}\r\n${"x".repeat(MiB)}\r\n`);
      let sent = 0;
      let answered = false;
      reply.then(() => answered = true);
      while (sent < GiB && !answered) {
        try {
          await chunked.write(chunk);
        } catch {
          break; // the relay closed the connection
        }
        sent += MiB;
      }
      assert.match(await reply, /^HTTP\/1\.1 413 /);
      try {
        chunked.close();
      } catch {
        // already closed
      }
    } finally {
      clearInterval(sampler);
    }
    peak = Math.max(peak, rssBytes(pid));
    assert.ok(peak - baseline < 64 * MiB, `RSS grew by ${(peak - baseline) / MiB} MiB`);
    // And the relay still serves.
    const res = await relayCall(relay.url)("/health");
    assert.equal(res.status, 200);
    await res.body?.cancel();
  });
});

Deno.test("500 idle and byte-at-a-time connections do not stop a normal client", async () => {
  await withTempDir(async (dir) => {
    await using relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
    const conns: Deno.Conn[] = [];
    for (let i = 0; i < 500; i++) conns.push(await Deno.connect(addressOf(relay.url)));
    // Half stay silent; half send a request one byte at a time and never finish it.
    const slow = encoder.encode(`POST /submit HTTP/1.1\r\nHost: relay\r\nX-Auth-Key: ${KEY}\r\n`);
    let stop = false;
    const dribble = (async () => {
      for (let i = 0; !stop && i < slow.length; i++) {
        await Promise.all(
          conns.slice(250).map((c) => c.write(slow.subarray(i, i + 1)).catch(() => 0)),
        );
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    try {
      await new Promise((r) => setTimeout(r, 300));
      const call = relayCall(relay.url);
      const started = performance.now();
      const health = await call("/health");
      assert.equal(health.status, 200);
      await health.body?.cancel();
      const submit = await call("/submit", { method: "POST", body: "still served" });
      assert.equal(await submit.text(), "OK (general)");
      const pulled = await call("/pull?queue=general");
      assert.deepEqual(await pulled.json(), ["still served"]);
      // Not a speed test: only that the answers came while 500 connections were held.
      assert.ok(performance.now() - started < 10_000);
    } finally {
      stop = true;
      await dribble;
      for (const c of conns) {
        try {
          c.close();
        } catch {
          // closed by the relay
        }
      }
    }
  });
});

Deno.test("failed authentication over HTTP: the 11th try within a minute gets 429 with Retry-After", async () => {
  await withTempDir(async (dir) => {
    await using relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
    const call = relayCall(relay.url);
    for (let i = 0; i < 10; i++) {
      const res = await call("/peek", { headers: { "x-auth-key": `guess-${i}` } });
      assert.equal(res.status, 401);
      await res.body?.cancel();
    }
    const limited = await call("/peek", { headers: { "x-auth-key": "guess-10" } });
    assert.equal(limited.status, 429);
    assert.equal(limited.headers.get("content-type"), "application/problem+json");
    const wait = Number(limited.headers.get("retry-after"));
    assert.ok(wait >= 1 && wait <= 60, `Retry-After ${wait}`);
    await limited.body?.cancel();
    // /health stays open to monitors.
    const health = await call("/health");
    assert.equal(health.status, 200);
    await health.body?.cancel();
  });
});

/**
 * Reliability: the connection edge against a real relay process on 127.0.0.1 (docs/
 * faults.md, "Connections and file descriptors"). A client holding hundreds of idle
 * and half-sent connections under a low open-file limit cannot take the relay down; past
 * `--max-connections` a busy relay refuses with a 503 problem and an idle connection makes
 * room; idle and slow-header connections are closed after `--idle-timeout`; an over-limit
 * body is answered 413 and its connection closed while the client is still sending.
 *
 * @module
 */

import assert from "node:assert/strict";
import { SERVER_OPTIONS } from "../../src/config/config.ts";
import { eventually, KEY, relayCall, startRelayProcess, withTempDir } from "../_helpers.ts";

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const GiB = 1024 ** 3;
const MiB = 1024 ** 2;

/** Host and port of a relay URL like `http://127.0.0.1:41234`. */
function addressOf(url: string): { hostname: string; port: number } {
  const u = new URL(url);
  return { hostname: u.hostname, port: Number(u.port) };
}

/** Whether the process is still running (its status has not arrived within 100 ms). */
async function alive(child: Deno.ChildProcess): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const running = await Promise.race([
    child.status.then(() => false),
    new Promise<boolean>((resolve) => timer = setTimeout(() => resolve(true), 100)),
  ]);
  clearTimeout(timer);
  return running;
}

/**
 * Reads until the server closes the connection (or resets it); `undefined` when it is
 * still open after `ms`.
 */
async function readToClose(conn: Deno.Conn, ms: number): Promise<string | undefined> {
  const buf = new Uint8Array(64 * 1024);
  let text = "";
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const n = await Promise.race([
      conn.read(buf).catch(() => null),
      new Promise<"wait">((resolve) => timer = setTimeout(() => resolve("wait"), 200)),
    ]);
    clearTimeout(timer);
    if (n === "wait") continue;
    if (n === null) return text;
    text += decoder.decode(buf.subarray(0, n));
  }
  return undefined;
}

function closeAll(conns: Deno.Conn[]): void {
  for (const conn of conns) {
    try {
      conn.close();
    } catch {
      // closed by the relay
    }
  }
}

/** A keyed `GET /health` on a connection of its own; its status, or the error's text. */
async function health(url: string): Promise<number | string> {
  const client = Deno.createHttpClient({});
  try {
    const res = await fetch(`${url}/health`, {
      client,
      headers: { "x-auth-key": KEY },
      signal: AbortSignal.timeout(5000),
    });
    const text = await res.text();
    if (res.status !== 200 && res.status !== 503) return `${res.status} ${text}`;
    if (res.status === 503) {
      assert.equal(res.headers.get("content-type"), "application/problem+json");
      assert.ok(Number(res.headers.get("retry-after")) >= 1);
    }
    return res.status;
  } catch (error) {
    return String(error);
  } finally {
    client.close();
  }
}

/**
 * An unkeyed `GET /health` with `Connection: close` on a connection of its own, read until
 * the relay closes it: its status code, or 0 when the relay closed it without an answer.
 */
async function closingHealth(url: string): Promise<number> {
  const conn = await Deno.connect(addressOf(url));
  try {
    await conn.write(
      encoder.encode("GET /health HTTP/1.1\r\nHost: relay\r\nConnection: close\r\n\r\n"),
    );
    const answer = await readToClose(conn, 10_000);
    return Number(/^HTTP\/1\.1 (\d{3}) /.exec(answer ?? "")?.[1] ?? 0);
  } finally {
    closeAll([conn]);
  }
}

Deno.test("a relay under ulimit -n 256 survives 400 idle and slow-header connections and keeps serving", async () => {
  await withTempDir(async (dir) => {
    await using relay = await startRelayProcess(dir, {
      env: { RELAY_API_KEY: KEY },
      nofile: 256,
    });
    const conns: Deno.Conn[] = [];
    let dribbling = true;
    let dribble: Promise<void> | undefined;
    try {
      for (let i = 0; i < 400; i++) {
        try {
          conns.push(await Deno.connect(addressOf(relay.url)));
        } catch (error) {
          assert.fail(`connection ${i}: ${error}; the relay printed:\n${relay.stderr.join("\n")}`);
        }
      }
      // Half stay silent; half send a request's headers a byte at a time, never finishing.
      const slow = encoder.encode(`POST /submit HTTP/1.1\r\nHost: relay\r\nX-Auth-Key: ${KEY}\r\n`);
      dribble = (async () => {
        for (let i = 0; dribbling; i = (i + 1) % slow.length) {
          await Promise.all(
            conns.slice(200).map((c) => c.write(slow.subarray(i, i + 1)).catch(() => 0)),
          );
          await new Promise((r) => setTimeout(r, 100));
        }
      })();
      // The relay runs out of file descriptors (its cap of 512 is above the limit): it says
      // so and keeps going.
      await eventually(
        () => relay.stdout.some((line) => line.includes("cannot accept a connection")),
        "the relay to report that it cannot accept",
      );
      assert.ok(await alive(relay.child), relay.stderr.join("\n"));
      // A keyed request is served: room is made by closing idle connections. (A 503 on the
      // way is allowed; anything else is not.)
      const seen: (number | string)[] = [];
      await eventually(async () => {
        const status = await health(relay.url);
        seen.push(status);
        assert.ok(status === 200 || status === 503, `unexpected: ${seen.join(", ")}`);
        return status === 200;
      }, "a keyed request to succeed");
      const call = relayCall(relay.url);
      const submit = await call("/submit", { method: "POST", body: "still served" });
      assert.equal(await submit.text(), "OK (general)");
      const pulled = await call("/pull?queue=general");
      assert.deepEqual(await pulled.json(), ["still served"]);
      assert.ok(await alive(relay.child), relay.stderr.join("\n"));
      assert.deepEqual(
        relay.stderr.filter((line) => /error|uncaught/i.test(line)),
        [],
      );
    } finally {
      dribbling = false;
      await dribble;
      closeAll(conns);
    }
  });
});

Deno.test("past --max-connections a busy relay answers 503 with Retry-After, and an idle connection makes room", async () => {
  await withTempDir(async (dir) => {
    await using relay = await startRelayProcess(dir, {
      env: { RELAY_API_KEY: KEY },
      args: ["--max-connections", "4"],
    });
    // Four results streams: every connection has a request in progress.
    const polls: Deno.Conn[] = [];
    try {
      for (let i = 0; i < 4; i++) {
        const conn = await Deno.connect(addressOf(relay.url));
        await conn.write(encoder.encode(
          `GET /results/stream HTTP/1.1\r\nHost: relay\r\nX-Auth-Key: ${KEY}\r\n\r\n`,
        ));
        const buf = new Uint8Array(4096);
        const n = await conn.read(buf);
        assert.match(decoder.decode(buf.subarray(0, n ?? 0)), /^HTTP\/1\.1 200 /);
        polls.push(conn);
      }
      const refused = await Deno.connect(addressOf(relay.url));
      await refused.write(encoder.encode("GET /health HTTP/1.1\r\nHost: relay\r\n\r\n"));
      const answer = await readToClose(refused, 10_000);
      closeAll([refused]);
      assert.ok(answer !== undefined, "the refused connection was closed");
      assert.match(answer, /^HTTP\/1\.1 503 /);
      assert.match(answer, /\r\ncontent-type: application\/problem\+json\r\n/i);
      assert.match(answer, /\r\nretry-after: \d+\r\n/i);
      assert.match(answer, /\r\nconnection: close\r\n/i);
      const doc = JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4));
      assert.equal(doc.status, 503);
      assert.match(doc.detail, /4 connections open/);
      // The relay logs the refusal before it answers, but its log reaches the pipe in its
      // own time: wait for the line rather than expect it with the answer.
      await eventually(
        () => relay.stdout.some((line) => line.includes("refusing new ones with 503")),
        "the relay to log that it refuses new connections",
      );
    } finally {
      closeAll(polls);
    }

    // Four idle connections fill the cap; a new client still gets in, and the oldest idle
    // one is closed to make room. The wait for the streams to end asks on connections that
    // the relay closes itself, so no connection of ours is left for it to notice later
    // (an older idle one would be closed instead of the first of the four); the relay
    // accepts connections in the order they arrive, so the four are in before the fifth.
    const idle: Deno.Conn[] = [];
    try {
      await eventually(async () => (await closingHealth(relay.url)) === 200, "the streams to end");
      for (let i = 0; i < 4; i++) idle.push(await Deno.connect(addressOf(relay.url)));
      assert.equal(await health(relay.url), 200);
      assert.equal(await readToClose(idle[0]!, 10_000), "", "the oldest idle one was closed");
    } finally {
      closeAll(idle);
    }
  });
});

Deno.test("connections that stay silent or send headers a byte at a time are closed after --idle-timeout", async () => {
  await withTempDir(async (dir) => {
    await using relay = await startRelayProcess(dir, {
      env: { RELAY_API_KEY: KEY },
      args: ["--idle-timeout", "1s"],
    });
    const silent = await Deno.connect(addressOf(relay.url));
    const slow = await Deno.connect(addressOf(relay.url));
    // A kept-alive connection after its answer is idle too.
    const kept = await Deno.connect(addressOf(relay.url));
    await kept.write(encoder.encode("GET /health HTTP/1.1\r\nHost: relay\r\n\r\n"));
    // So is one whose last answer came from a cache, returned at once (the second peek).
    const cached = await Deno.connect(addressOf(relay.url));
    const peek = `GET /peek HTTP/1.1\r\nHost: relay\r\nX-Auth-Key: ${KEY}\r\n\r\n`;
    await cached.write(encoder.encode(peek + peek));
    let dribbling = true;
    const head = encoder.encode("GET /health HTTP/1.1\r\nHost: relay\r\nX-Padding: aaaaaaaaaaaa");
    const dribble = (async () => {
      for (let i = 0; dribbling && i < head.length; i++) {
        if (await slow.write(head.subarray(i, i + 1)).catch(() => 0) === 0) return;
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    try {
      assert.equal(await readToClose(silent, 20_000), "", "the silent connection was closed");
      assert.equal(await readToClose(slow, 20_000), "", "the slow one was closed");
      const answered = await readToClose(kept, 20_000);
      assert.ok(answered !== undefined, "the kept-alive one was closed");
      assert.match(answered, /^HTTP\/1\.1 200 /);
      const peeked = await readToClose(cached, 20_000);
      assert.ok(peeked !== undefined, "the one answered from the cache was closed");
      assert.equal(peeked.match(/HTTP\/1\.1 204 /g)?.length, 2, peeked); // empty queues
      assert.ok(await alive(relay.child));
    } finally {
      dribbling = false;
      await dribble;
      closeAll([silent, slow, kept, cached]);
    }
  });
});

Deno.test("an over-limit body gets 413 and its connection is closed while the client is still sending", async () => {
  await withTempDir(async (dir) => {
    await using relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
    const chunk = new Uint8Array(MiB).fill(120);
    for (
      const framing of [`Content-Length: ${GiB}`, "Transfer-Encoding: chunked"]
    ) {
      const conn = await Deno.connect(addressOf(relay.url));
      await conn.write(encoder.encode(
        `POST /submit HTTP/1.1\r\nHost: relay\r\nX-Auth-Key: ${KEY}\r\n` +
          `Content-Type: text/plain\r\n${framing}\r\n\r\n`,
      ));
      const chunked = framing.startsWith("Transfer");
      const piece = chunked
        ? new Uint8Array([...encoder.encode(`${MiB.toString(16)}\r\n`), ...chunk, 13, 10])
        : chunk;
      let closed = false;
      const reply = readToClose(conn, 60_000).finally(() => closed = true);
      // Send the whole gigabyte unless the relay closes the connection first.
      let sent = 0;
      while (sent < GiB && !closed) {
        try {
          await conn.write(piece);
        } catch {
          break; // the relay closed the connection
        }
        sent += MiB;
      }
      const answer = await reply;
      closeAll([conn]);
      assert.ok(answer !== undefined, `${framing}: the connection was closed`);
      assert.match(answer, /^HTTP\/1\.1 413 /, framing);
      assert.match(answer, /\r\nconnection: close\r\n/i, framing);
      assert.ok(sent < GiB / 2, `${framing}: the client sent ${sent / MiB} MiB before the close`);
    }
    const res = await relayCall(relay.url)("/health");
    assert.equal(res.status, 200);
    await res.body?.cancel();
  });
});

Deno.test("deploy/relay.service's LimitNOFILE leaves room for the default --max-connections, each downloading an episode", async () => {
  const unit = await Deno.readTextFile(new URL("../../deploy/relay.service", import.meta.url));
  const limit = Number(/^LimitNOFILE=(\d+)$/m.exec(unit)?.[1]);
  const cap = Number(SERVER_OPTIONS.find((o) => o.flag === "max-connections")?.default);
  assert.ok(cap > 0, "a default cap");
  // Each connection holds a descriptor, and a download of episode audio a second one for the
  // file; the relay itself uses about 35 at rest, and 64 leaves room for publishing.
  assert.ok(limit >= 2 * cap + 64, `LimitNOFILE=${limit} for ${cap} connections`);
});

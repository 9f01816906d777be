/**
 * The runtime internals the relay leans on (src/server/_deno_internals.ts). After a Deno
 * upgrade, each failure here says what broke and what the relay loses; the relay itself
 * still starts (on `Deno.serve`, without its connection cap and idle timeout).
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  cancelHook,
  PINNED_DENO,
  serveOnConnection,
  v8Collector,
} from "../../src/server/_deno_internals.ts";
import { serveConnections } from "../../src/server/connections.ts";
import { Logger } from "../../src/server/log.ts";

const LOST = "the relay falls back to Deno.serve, without --max-connections, the idle " +
  "timeout and surviving the open-file limit: adapt src/server/_deno_internals.ts";

Deno.test("Deno is the version deno.json pins", () => {
  assert.equal(
    Deno.version.deno,
    PINNED_DENO,
    `Deno ${Deno.version.deno} runs the tests, the relay pins ${PINNED_DENO}: once the other ` +
      "tests of this file pass on it, set denoVersion in deno.json (CI, the package scripts " +
      "and the relay read it there)",
  );
});

Deno.test("Deno[Deno.internal].serveHttpOnConnection serves a connection the relay accepted", async () => {
  const serveOn = serveOnConnection();
  assert.ok(
    serveOn !== undefined,
    `Deno ${Deno.version.deno} has no Deno[Deno.internal].serveHttpOnConnection: ${LOST}`,
  );
  assert.equal(
    serveOn.length,
    5,
    "serveHttpOnConnection no longer takes (connection, signal, handler, onError, onListen): " +
      LOST,
  );
  using listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const accepted = listener.accept();
  const answer = fetch(`http://127.0.0.1:${listener.addr.port}/hello`);
  const hook = cancelHook();
  const seen: string[] = [];
  const server = serveOn(
    await accepted,
    hook.signal,
    (request, info) => {
      seen.push(`${new URL(request.url).pathname} from ${info.remoteAddr.transport}`);
      return new Response("hi");
    },
    () => new Response("error", { status: 500 }),
    () => {},
  );
  const res = await answer;
  assert.equal(await res.text(), "hi", `serveHttpOnConnection no longer answers: ${LOST}`);
  assert.deepEqual(seen, ["/hello from tcp"], "the handler no longer gets (request, info)");
  assert.equal(typeof server.shutdown, "function", "its result has no shutdown(): " + LOST);
  hook.cancel();
  await server.finished.catch(() => {});
});

Deno.test("the AbortSignal stand-in closes a connection that Deno's server holds", async () => {
  const serveOn = serveOnConnection();
  if (serveOn === undefined) return; // Said by the test above.
  using listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const client = await Deno.connect({ hostname: "127.0.0.1", port: listener.addr.port });
  const hook = cancelHook();
  const server = serveOn(
    await listener.accept(),
    hook.signal,
    () => new Response("hi"),
    () => new Response("error", { status: 500 }),
    () => {},
  );
  // An idle connection (no request sent yet): what the idle timeout and the cap close.
  hook.cancel();
  // Were it still open, this request would be answered.
  const request = new TextEncoder().encode("GET / HTTP/1.1\r\nhost: relay\r\n\r\n");
  await client.write(request).catch(() => 0);
  const read = await client.read(new Uint8Array(16)).catch(() => null);
  client.close();
  await server.finished.catch(() => {});
  assert.equal(
    read,
    null,
    "Deno's per-connection server no longer closes the connection when its signal's abort " +
      "listener is called: idle connections would stay open past the timeout and the cap",
  );
});

Deno.test("V8's gc is reached with --expose-gc through node:v8 and node:vm", async () => {
  const collect = await v8Collector().catch((error) => {
    throw new Error(
      `Deno ${Deno.version.deno} gives no gc function (${error}): the idle relay can no ` +
        "longer give its memory back (src/server/idle_memory.ts says so at level debug)",
    );
  });
  collect();
});

Deno.test("serveConnections() falls back to Deno.serve with one warning on a Deno without the internal", async () => {
  const internals = (Deno as unknown as Record<symbol, Record<string, unknown>>)[
    (Deno as unknown as { internal: symbol }).internal
  ]!;
  const saved = internals.serveHttpOnConnection;
  const lines: string[] = [];
  internals.serveHttpOnConnection = undefined;
  try {
    const served = serveConnections({
      hostname: "127.0.0.1",
      port: 0,
      maxConnections: 1,
      idleTimeoutMs: 1000,
      logger: new Logger({ write: (line) => lines.push(line) }),
      onError: () => new Response("error", { status: 500 }),
    }, (_request, info) => new Response(info.remoteAddr.hostname));
    const res = await fetch(`http://127.0.0.1:${served.addr.port}/`);
    assert.equal(await res.text(), "127.0.0.1");
    await served.shutdown();
  } finally {
    internals.serveHttpOnConnection = saved;
  }
  assert.equal(lines.length, 1);
  assert.match(lines[0]!, /without the connection cap \(--max-connections\) and the idle timeout/);
  assert.match(lines[0]!, new RegExp(`pins Deno ${PINNED_DENO.replaceAll(".", "\\.")}`));
});

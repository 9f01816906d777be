/**
 * The one request pipeline (src/server/pipeline.ts): every route's answers carry the
 * `Cache-Control` its access asks for, no route skips the key check, and requests that are
 * odd (percent-encoded paths, unknown methods, HTTP/1.0) take the same steps and get the
 * same problem documents. The relay's real app, with its built-in services private, on a
 * real server on 127.0.0.1.
 */
import assert from "node:assert/strict";
import { createApp, type RelayApp } from "../../src/server/app.ts";
import { Logger } from "../../src/server/log.ts";
import { type BuiltinServices, createBuiltinServices } from "../../src/builtin/services.ts";
import { KEY, makeApp, makeStore } from "../_helpers.ts";

const APP_ID = "app-id-0123456789abcdef";

/** The whole relay app, its blog and podcast private, on a real loopback server. */
async function serveRelay(options: { privateSites: boolean }) {
  const base = await makeStore();
  const dataDir = await Deno.makeTempDir({ prefix: "relay-pipeline-" });
  const services: BuiltinServices = createBuiltinServices({ dataDir, log: () => {} });
  const app: RelayApp = createApp({
    store: base.store,
    apiKey: KEY,
    logger: new Logger({ write: () => {} }),
    builtin: {
      services,
      appId: APP_ID,
      privateBlog: options.privateSites,
      privatePodcast: options.privateSites,
    },
  });
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, app.fetch);
  return {
    app,
    port: server.addr.port,
    url: `http://127.0.0.1:${server.addr.port}`,
    async [Symbol.asyncDispose]() {
      await server.shutdown();
      await services.stop();
      await base[Symbol.asyncDispose]();
      await Deno.remove(dataDir, { recursive: true });
    },
  };
}

/** The answer's `Cache-Control`, its body read (or cancelled, for a stream). */
async function cacheControlOf(res: Response): Promise<string | null> {
  if (res.headers.get("content-type")?.startsWith("text/event-stream")) await res.body?.cancel();
  else await res.arrayBuffer();
  return res.headers.get("cache-control");
}

Deno.test("every answer of a keyed route says private (no-store for pulls and streams), with the key or without", async () => {
  await using relay = await serveRelay({ privateSites: true });
  let keyed = 0;
  for (const route of relay.app.routes) {
    if (!route.keyed) continue;
    keyed++;
    const path = route.path.replace(/:\w+/g, "x");
    const wanted = route.noStore ? "no-store" : "private";
    for (const method of route.methods) {
      for (const key of [KEY, undefined]) {
        const res = await fetch(`${relay.url}${path}`, {
          method,
          headers: key === undefined ? {} : { "x-auth-key": key },
          body: method === "POST" ? "" : null,
        });
        const control = await cacheControlOf(res);
        const label = `${method} ${path} ${key === undefined ? "without" : "with"} a key: ` +
          `${res.status}, Cache-Control ${control}`;
        // `no-store` is stricter than `private`: a route may ask for it itself.
        const said = control?.split(/,\s*/) ?? [];
        assert.ok(said.includes(wanted) || said.includes("no-store"), label);
        assert.ok(!/public/i.test(control ?? ""), label);
        // Refused (429 once this address has failed ten times): no route skips the key.
        if (key === undefined) assert.ok([401, 429].includes(res.status), label);
      }
    }
  }
  assert.ok(keyed >= 20, `${keyed} keyed routes walked`);
  const pull = relay.app.routes.find((route) => route.path === "/pull");
  const stream = relay.app.routes.find((route) => route.path === "/results/stream");
  assert.equal(pull?.noStore, true, "a pull takes what it answers: no-store");
  assert.equal(stream?.noStore, true, "a stream never ends: no-store");
});

Deno.test("GET /results with a key says Cache-Control: private, built, cached and for HEAD, so a shared cache keeps none of it", async () => {
  // Behind a proxy that caches 200s (nginx's proxy_cache_valid), a keyed /results without
  // `private` was given to the next client asking the same URL without any key.
  await using relay = await serveRelay({ privateSites: false });
  const headers = { "x-auth-key": KEY };
  const pushed = await fetch(`${relay.url}/push`, { method: "POST", headers, body: "a result" });
  assert.equal(await cacheControlOf(pushed), "private");
  const submitted = await fetch(`${relay.url}/submit`, { method: "POST", headers, body: "a link" });
  assert.equal(await cacheControlOf(submitted), "private");
  for (const round of ["built", "cached"]) {
    for (const path of ["/results?since=0", "/peek"]) {
      const res = await fetch(`${relay.url}${path}`, { headers });
      assert.equal(res.status, 200);
      assert.equal(await cacheControlOf(res), "private", `${path} ${round}`);
      // The header costs the answer none of its length: sent whole, not chunked.
      assert.ok(res.headers.has("content-length"), `${path} ${round}: Content-Length`);
    }
  }
  const head = await fetch(`${relay.url}/results?since=0`, { method: "HEAD", headers });
  assert.equal(await cacheControlOf(head), "private");
  const compressed = await fetch(`${relay.url}/results?since=0`, {
    headers: { ...headers, "accept-encoding": "gzip" },
  });
  assert.equal(await cacheControlOf(compressed), "private");
});

Deno.test("public resources keep their validators and public caching", async () => {
  await using relay = await serveRelay({ privateSites: false });
  const page = await fetch(`${relay.url}/app/`);
  await page.arrayBuffer();
  assert.equal(page.status, 200);
  const etag = page.headers.get("etag");
  assert.ok(etag !== null, "the web app's page has an entity tag");
  assert.ok(!/private|no-store/i.test(page.headers.get("cache-control") ?? ""));
  const again = await fetch(`${relay.url}/app/`, { headers: { "if-none-match": etag } });
  await again.body?.cancel();
  assert.equal(again.status, 304);
  for (const path of ["/health", "/openapi.json", "/blog/", "/podcast/feed.xml"]) {
    const res = await fetch(`${relay.url}${path}`);
    await res.arrayBuffer();
    assert.ok(res.status < 400, `${path}: ${res.status}`);
    assert.ok(!/private|no-store/i.test(res.headers.get("cache-control") ?? ""), path);
  }
});

/** Sends `raw` bytes on a new connection and reads the answer until the server closes. */
async function rawHttp(port: number, raw: string): Promise<string> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  await conn.write(new TextEncoder().encode(raw));
  const chunks: Uint8Array[] = [];
  const buffer = new Uint8Array(16 * 1024);
  for (;;) {
    const n = await conn.read(buffer);
    if (n === null) break;
    chunks.push(buffer.slice(0, n));
  }
  conn.close();
  return new TextDecoder().decode(new Uint8Array(chunks.flatMap((chunk) => [...chunk])));
}

Deno.test("percent-encoded paths, unknown methods and HTTP/1.0 take the same steps and get the same problem documents", async () => {
  await using relay = await serveRelay({ privateSites: false });
  const refused = async (path: string, init: RequestInit = {}) => {
    const res = await fetch(`${relay.url}${path}`, init);
    return {
      status: res.status,
      type: res.headers.get("content-type"),
      control: res.headers.get("cache-control"),
      allow: res.headers.get("allow"),
      challenge: res.headers.get("www-authenticate"),
      detail: ((await res.json()) as { detail: string }).detail,
    };
  };
  // The same route under its percent-encoded name: the same key check, the same refusal.
  const plain = await refused("/submit", { method: "POST", body: "x" });
  assert.equal(plain.status, 401);
  assert.equal(plain.type, "application/problem+json");
  // Every 401 names its scheme (RFC 9110 requires a challenge), one no browser answers.
  assert.equal(plain.challenge, 'X-Auth-Key realm="relay"');
  assert.deepEqual(await refused("/%73ubmit", { method: "POST", body: "x" }), plain);
  assert.deepEqual(await refused("/%73ubmit?x=1", { method: "POST", body: "x" }), plain);
  const accepted = await fetch(`${relay.url}/%73ubmit?queue=general`, {
    method: "POST",
    headers: { "x-auth-key": KEY },
    body: "https://example.com/encoded",
  });
  assert.equal(await accepted.text(), "OK (general)");
  // A malformed percent-encoding is a malformed request (as nginx answers it), with or
  // without the key; a well-formed one of bytes that are not UTF-8 names no route.
  const malformed = await refused("/pe%zzk");
  assert.equal(malformed.status, 400);
  assert.equal(malformed.type, "application/problem+json");
  assert.match(malformed.detail, /"%" that is not followed by two hexadecimal digits/);
  assert.equal((await refused("/submit%", { method: "POST", body: "x" })).status, 400);
  assert.equal((await refused("/pe%ffk")).status, 404);
  // An unknown method: 405 with Allow, before the key is asked for, as a problem.
  const unknown = await refused("/results", { method: "PURGE" });
  assert.equal(unknown.status, 405);
  assert.equal(unknown.allow, "GET, HEAD");
  assert.equal(unknown.type, "application/problem+json");
  assert.equal(unknown.control, "private");
  // HTTP/1.0: the same refusal, and with the key the same answer.
  const old = await rawHttp(relay.port, "GET /results HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
  assert.match(old, /^HTTP\/1\.[01] 401 /);
  assert.match(old, /content-type: application\/problem\+json/i);
  assert.match(old, /cache-control: private/i);
  assert.ok(old.includes(JSON.stringify(plain.detail).slice(1, 30)), old);
  const read = await rawHttp(
    relay.port,
    `GET /results?since=0 HTTP/1.0\r\nHost: 127.0.0.1\r\nX-Auth-Key: ${KEY}\r\n\r\n`,
  );
  assert.match(read, /^HTTP\/1\.[01] 200 /);
  assert.match(read, /cache-control: private/i);
  assert.match(read, /"cursor":/);
});

Deno.test("a relay that is stopping answers every request 503, those lookup answers itself too", async () => {
  await using t = await makeApp({ stopping: AbortSignal.abort() });
  for (
    const [path, init] of [
      ["/peek", { headers: { "x-auth-key": KEY } }],
      ["/health", {}],
      ["/no/such/path", {}],
      ["/pe%zzk", {}],
      ["/health", { method: "OPTIONS" }],
    ] as const
  ) {
    const res = await t.app.request(path, init);
    await res.body?.cancel();
    assert.equal(res.status, 503, path);
    assert.equal(res.headers.get("retry-after"), "5", path);
    assert.equal(res.headers.get("vary"), "Origin", path);
  }
});

/**
 * HTTP semantics of every answer (RFC 9110, RFC 9112): `HEAD` answers carry the headers of
 * the `GET` answer, requests without `Host` are refused, validators and compression. The
 * relay's real app, with its built-in services, on a real server on 127.0.0.1.
 */
import assert from "node:assert/strict";
import { brotliDecompressSync, gunzipSync } from "node:zlib";
import { createApp } from "../../src/server/app.ts";
import { Logger } from "../../src/server/log.ts";
import { type BuiltinServices, createBuiltinServices } from "../../src/builtin/services.ts";
import { eventually, KEY, makeStore } from "../_helpers.ts";
import { rawRequest } from "./_raw_http.ts";

const APP_ID = "app-id-0123456789abcdef";

/** The whole relay app (API, web app, built-in services) on a real loopback server. */
async function serveRelay() {
  const base = await makeStore();
  const dataDir = await Deno.makeTempDir({ prefix: "relay-http-" });
  const services: BuiltinServices = createBuiltinServices({ dataDir, log: () => {} });
  const app = createApp({
    store: base.store,
    apiKey: KEY,
    logger: new Logger({ write: () => {} }),
    builtin: { services, appId: APP_ID },
  });
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, app.fetch);
  const url = `http://127.0.0.1:${server.addr.port}`;
  return {
    app,
    services,
    url,
    async [Symbol.asyncDispose]() {
      await server.shutdown();
      await services.stop();
      await base[Symbol.asyncDispose]();
      await Deno.remove(dataDir, { recursive: true });
    },
  };
}

/** Every path the app serves `GET` on, its parameters filled in with `values`. */
function getPaths(
  routes: readonly { path: string; method: string }[],
  values: Record<string, string>,
): string[] {
  const paths = new Set<string>();
  for (const { path, method } of routes) {
    if ((method !== "GET" && method !== "ALL") || path.includes("*")) continue;
    paths.add(path.replace(/:(\w+)/g, (_, name: string) => values[name] ?? name));
  }
  return [...paths];
}

Deno.test("HEAD answers with the headers of GET on every GET route", async () => {
  await using relay = await serveRelay();
  const note = await relay.services.notes.save({ title: "A note", markdown: "# Hi", tags: [] });
  const post = await relay.services.blog.publish({ title: "A post", content: "Body", tags: [] });
  const paths = getPaths(relay.app.routes, {
    doc_id: note.doc_id,
    post_id: post.post_id,
    file: "missing.mp3",
  });
  // Lengths of the bodies as sent, uncompressed (fetch asks for br and gzip otherwise).
  const headers = { "x-auth-key": KEY, "accept-encoding": "identity" };
  const wrong: string[] = [];
  let checked = 0;
  for (const path of paths) {
    const head = await fetch(`${relay.url}${path}`, {
      method: "HEAD",
      headers,
      redirect: "manual",
    });
    await head.body?.cancel();
    if (head.status === 405) continue; // a POST-only endpoint
    if (head.headers.get("content-type")?.startsWith("text/event-stream")) continue;
    const get = await fetch(`${relay.url}${path}`, { headers, redirect: "manual" });
    const bytes = (await get.arrayBuffer()).byteLength;
    assert.equal(head.status, get.status, `HEAD ${path}`);
    assert.equal(head.headers.get("content-type"), get.headers.get("content-type"), path);
    // A 204 has no body and no length (RFC 9110).
    const length = get.status === 204 ? null : String(bytes);
    const said = head.headers.get("content-length");
    // The metrics count each request, the HEAD too: their length changes between the two.
    const changes = path === "/metrics" && said !== null && Number(said) > 0;
    if (said !== length && !changes) {
      wrong.push(`HEAD ${path}: Content-Length ${said}, GET sent ${bytes}`);
    }
    checked++;
  }
  assert.deepEqual(wrong, []);
  assert.ok(checked >= 25, `checked ${checked} GET routes`);
});

Deno.test("a request without Host gets 400", async (t) => {
  await using relay = await serveRelay();
  const key = `X-Auth-Key: ${KEY}\r\nConnection: close\r\n`;
  for (const path of ["/health", "/peek", "/results", "/app/app.js"]) {
    await t.step(`GET ${path} without Host`, async () => {
      const answer = await rawRequest(relay.url, `GET ${path} HTTP/1.1\r\n${key}\r\n`);
      assert.equal(answer.status, "HTTP/1.1 400 Bad Request");
      assert.match(JSON.parse(answer.body).detail, /no Host header/);
    });
  }
  await t.step("an empty Host", async () => {
    const answer = await rawRequest(relay.url, `GET /health HTTP/1.1\r\nHost: \r\n${key}\r\n`);
    assert.equal(answer.status, "HTTP/1.1 400 Bad Request");
  });
  await t.step("with Host, the same requests are answered", async () => {
    const host = `Host: ${new URL(relay.url).host}\r\n`;
    for (const path of ["/health", "/results"]) {
      const answer = await rawRequest(relay.url, `GET ${path} HTTP/1.1\r\n${host}${key}\r\n`);
      assert.equal(answer.status, "HTTP/1.1 200 OK");
    }
  });
  // Reads answered from a cache remember a host found usable: never the one Deno writes
  // for a missing Host.
  await t.step("after answered ones, a request without Host still gets 400", async () => {
    for (const path of ["/health", "/peek"]) {
      const answer = await rawRequest(relay.url, `GET ${path} HTTP/1.1\r\n${key}\r\n`);
      assert.equal(answer.status, "HTTP/1.1 400 Bad Request");
    }
  });
});

Deno.test("validators: app files, pages, feeds, notes and the API document answer 304 when unchanged", async (t) => {
  await using relay = await serveRelay();
  const note = await relay.services.notes.save({ title: "A note", markdown: "# Hi", tags: [] });
  const post = await relay.services.blog.publish({ title: "A post", content: "Body", tags: [] });
  const headers = { "x-auth-key": KEY };
  const paths = [
    "/app/app.js",
    "/app/",
    "/openapi.json",
    "/blog/",
    `/blog/${post.post_id}`,
    "/blog/feed.xml",
    "/podcast/feed.xml",
    `/notes/${note.doc_id}`,
  ];
  for (const path of paths) {
    await t.step(path, async () => {
      const first = await fetch(`${relay.url}${path}`, { headers });
      const body = await first.text();
      assert.equal(first.status, 200);
      const etag = first.headers.get("etag");
      assert.match(etag ?? "", /^W\/"[\w-]+"$/); // weak: one tag for every encoding
      const again = await fetch(`${relay.url}${path}`, {
        headers: { ...headers, "if-none-match": `"other", ${etag}` },
      });
      assert.equal(again.status, 304);
      assert.equal(await again.text(), "");
      assert.equal(again.headers.get("etag"), etag);
      const head = await fetch(`${relay.url}${path}`, {
        method: "HEAD",
        headers: { ...headers, "if-none-match": etag! },
      });
      assert.equal(head.status, 304);
      const changed = await fetch(`${relay.url}${path}`, {
        headers: { ...headers, "if-none-match": '"other"' },
      });
      assert.equal(changed.status, 200);
      assert.equal(await changed.text(), body);
    });
  }
  await t.step("a feed's tag changes with its content", async () => {
    const before = (await fetch(`${relay.url}/blog/feed.xml`)).headers.get("etag");
    await relay.services.blog.publish({ title: "Another", content: "More", tags: [] });
    const after = await fetch(`${relay.url}/blog/feed.xml`, {
      headers: { "if-none-match": before! },
    });
    assert.equal(after.status, 200);
    assert.notEqual(after.headers.get("etag"), before);
    await after.body?.cancel();
  });
  await t.step("a pull is never answered 304", async () => {
    await relay.app.request("/submit", { method: "POST", headers, body: "item" });
    const pull = await fetch(`${relay.url}/pull`, {
      headers: { ...headers, "if-none-match": "*" },
    });
    assert.equal(pull.status, 200);
    assert.deepEqual(await pull.json(), ["item"]);
  });
});

Deno.test("validators: an MP3 answers 304 when unchanged, and If-Range of another version gets the whole file", async () => {
  await using relay = await serveRelay();
  relay.services.start();
  const { id } = await relay.services.podcast.enqueue("Short", "Hello there.");
  await eventually(
    async () => {
      const episode = await relay.services.podcast.get(id);
      assert.notEqual(episode?.state, "failed", episode?.error ?? "failed");
      return episode?.state === "ready";
    },
    "the episode to be read aloud",
    60_000,
  );
  const url = `${relay.url}/podcast/${id}.mp3`;
  const whole = await fetch(url);
  const mp3 = new Uint8Array(await whole.arrayBuffer());
  const etag = whole.headers.get("etag")!;
  const lastModified = whole.headers.get("last-modified")!;
  assert.match(etag, /^"[\w-]+"$/);
  const asked = await fetch(url, { headers: { "accept-encoding": "br, gzip" } });
  assert.equal(asked.headers.get("content-encoding"), null); // audio is never compressed
  await asked.body?.cancel();

  const unchanged = await fetch(url, { headers: { "if-none-match": etag } });
  assert.equal(unchanged.status, 304);
  assert.equal(await unchanged.text(), "");
  const since = await fetch(url, { headers: { "if-modified-since": lastModified } });
  assert.equal(since.status, 304);
  await since.body?.cancel();
  const earlier = new Date(Date.parse(lastModified) - 60_000).toUTCString();
  const modified = await fetch(url, { headers: { "if-modified-since": earlier } });
  assert.equal(modified.status, 200);
  await modified.body?.cancel();

  const range = { range: "bytes=10-19" };
  for (const ifRange of [etag, lastModified]) {
    const part = await fetch(url, { headers: { ...range, "if-range": ifRange } });
    assert.equal(part.status, 206, ifRange);
    assert.deepEqual(new Uint8Array(await part.arrayBuffer()), mp3.subarray(10, 20));
  }
  const otherVersion = ['"another-version"', `W/${etag}`, earlier];
  for (const ifRange of otherVersion) {
    const full = await fetch(url, { headers: { ...range, "if-range": ifRange } });
    assert.equal(full.status, 200, ifRange);
    assert.equal((await full.arrayBuffer()).byteLength, mp3.length);
  }
});

Deno.test("compression: text bodies over 1 KiB go out as br or gzip to clients that ask", async (t) => {
  await using relay = await serveRelay();
  const get = (path: string, headers: Record<string, string> = {}) =>
    relay.app.request(path, { headers: { "x-auth-key": KEY, ...headers } });
  for (const path of ["/openapi.json", "/app/app.js", "/metrics", "/app/"]) {
    await t.step(path, async () => {
      const plain = await get(path);
      assert.equal(plain.headers.get("content-encoding"), null);
      const text = await plain.text();
      for (
        const [encoding, decode] of [["br", brotliDecompressSync], ["gzip", gunzipSync]] as const
      ) {
        const res = await get(path, { "accept-encoding": `${encoding}, identity;q=0.5` });
        assert.equal(res.status, 200);
        assert.equal(res.headers.get("content-encoding"), encoding);
        assert.match(res.headers.get("vary") ?? "", /Accept-Encoding/);
        const bytes = new Uint8Array(await res.arrayBuffer());
        assert.equal(res.headers.get("content-length"), String(bytes.byteLength));
        assert.ok(bytes.byteLength < text.length / 2, `${encoding}: ${bytes.byteLength} bytes`);
        const decoded = new TextDecoder().decode(decode(bytes));
        // Metrics change between two requests: compare their first line only.
        if (path === "/metrics") assert.equal(decoded.split("\n")[0], text.split("\n")[0]);
        else assert.equal(decoded, text);
      }
    });
  }
  await t.step("br is preferred, and a coding with q=0 is not used", async () => {
    const both = await get("/openapi.json", { "accept-encoding": "gzip, deflate, br" });
    assert.equal(both.headers.get("content-encoding"), "br");
    await both.body?.cancel();
    const noBr = await get("/openapi.json", { "accept-encoding": "br;q=0, gzip" });
    assert.equal(noBr.headers.get("content-encoding"), "gzip");
    await noBr.body?.cancel();
  });
  await t.step("a HEAD says the compressed length, and the weak tag validates", async () => {
    const ask = { "accept-encoding": "br" };
    const res = await get("/openapi.json", ask);
    const length = (await res.arrayBuffer()).byteLength;
    const etag = res.headers.get("etag") ?? "";
    assert.match(etag, /^W\/"/);
    const head = await relay.app.request("/openapi.json", { method: "HEAD", headers: ask });
    assert.equal(head.headers.get("content-length"), String(length));
    assert.equal(head.headers.get("content-encoding"), "br");
    const again = await get("/openapi.json", { ...ask, "if-none-match": etag });
    assert.equal(again.status, 304);
  });
  await t.step("a peek, from its cache or not, is compressed too", async () => {
    for (let i = 0; i < 30; i++) {
      const body = `https://example.com/article/${i}`;
      await relay.app.request("/submit", { method: "POST", headers: { "x-auth-key": KEY }, body });
    }
    const plain = await (await get("/peek")).text();
    assert.ok(plain.length > 1024);
    for (let i = 0; i < 2; i++) { // the second is answered from the cache
      const res = await get("/peek", { "accept-encoding": "gzip" });
      assert.equal(res.headers.get("content-encoding"), "gzip", `read ${i}`);
      const decoded = gunzipSync(new Uint8Array(await res.arrayBuffer()));
      assert.equal(new TextDecoder().decode(decoded), plain);
    }
  });
  await t.step("small bodies, problems and event streams are sent as they are", async () => {
    const ask = { "accept-encoding": "br, gzip" };
    for (const path of ["/health", "/app/icon.svg", "/nothing-here"]) {
      const res = await get(path, ask);
      assert.equal(res.headers.get("content-encoding"), null, path);
      await res.body?.cancel();
    }
    const stream = await get("/results/stream", ask);
    assert.equal(stream.headers.get("content-type"), "text/event-stream");
    assert.equal(stream.headers.get("content-encoding"), null);
    await stream.body?.cancel();
  });
});

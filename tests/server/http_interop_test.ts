/**
 * What caches, proxies, health checkers and browser players need of the relay's answers
 * (RFC 9110, RFC 9111, the Fetch standard's CORS protocol): the `Vary` of a 304, `Vary:
 * Origin` on every answer, HTTP/1.0 health checks without `Host`, `412` for failed
 * preconditions on audio, and public resources readable from any site. The real app with
 * its built-in services, on a real server on 127.0.0.1; raw TCP where the request's exact
 * bytes matter.
 */
import assert from "node:assert/strict";
import { MAIN_KEY, READER_KEY, serveServices, ToneEngine } from "../builtin/_services.ts";
import { rawRequest } from "./_raw_http.ts";

/** Whether a `Vary` value names `field`. */
function varies(vary: string | null, field: string): boolean {
  return (vary ?? "").split(",").some((name) => name.trim().toLowerCase() === field);
}

Deno.test("a 304 carries the Vary its 200 would", async (t) => {
  await using relay = await serveServices({ engine: new ToneEngine(0.05) });
  const post = await relay.services.blog.publish({
    title: "A post",
    content: "Body ".repeat(400),
    tags: [],
  });
  for (const path of ["/openapi.json", "/app/app.js", `/blog/${post.post_id}`, "/blog/feed.xml"]) {
    for (const encoding of ["br", "gzip", undefined]) {
      await t.step(`${path}, Accept-Encoding ${encoding ?? "none"}`, async () => {
        // Deno's fetch asks for gzip and br unless told otherwise.
        const asked = { "accept-encoding": encoding ?? "identity" };
        const full = await fetch(`${relay.url}${path}`, { headers: asked });
        await full.arrayBuffer();
        assert.equal(full.status, 200);
        assert.equal(full.headers.get("content-encoding") ?? undefined, encoding);
        const again = await fetch(`${relay.url}${path}`, {
          headers: { ...asked, "if-none-match": full.headers.get("etag")! },
        });
        assert.equal(again.status, 304);
        await again.body?.cancel();
        for (const field of ["accept-encoding", "origin"]) {
          assert.equal(
            varies(again.headers.get("vary"), field),
            varies(full.headers.get("vary"), field),
            `${field}: 200 says ${full.headers.get("vary")}, 304 ${again.headers.get("vary")}`,
          );
        }
        assert.equal(varies(again.headers.get("vary"), "accept-encoding"), encoding !== undefined);
      });
    }
  }
});

Deno.test("every answer varies by Origin, also to a request without one", async () => {
  await using relay = await serveServices({ engine: new ToneEngine(0.05) });
  const key = { "x-auth-key": MAIN_KEY };
  const requests: [string, RequestInit][] = [
    ["/health", {}],
    ["/peek", { headers: key }],
    ["/peek", { headers: key }], // the second from the read's cache
    ["/results", { headers: key }],
    ["/peek", {}], // a 401
    ["/blog/", {}],
    ["/podcast/feed.xml", {}],
    ["/openapi.json", {}],
    ["/no-such-path", {}],
    ["/submit", { method: "POST", headers: key, body: "https://example.com/a" }],
  ];
  for (const [path, init] of requests) {
    const res = await fetch(`${relay.url}${path}`, init);
    await res.body?.cancel();
    assert.ok(varies(res.headers.get("vary"), "origin"), `${path}: ${res.headers.get("vary")}`);
  }
  const extension = "chrome-extension://abcdefghijklmnop";
  const granted = await fetch(`${relay.url}/peek`, { headers: { ...key, origin: extension } });
  await granted.body?.cancel();
  assert.equal(granted.headers.get("access-control-allow-origin"), extension);
  assert.equal(granted.headers.get("vary")?.match(/origin/gi)?.length, 1);
});

Deno.test("HTTP/1.0 health checks without Host are answered; HTTP/1.1 without Host is still refused", async (t) => {
  await using relay = await serveServices({ engine: new ToneEngine(0.05) });
  await t.step("HAProxy's default option httpchk: OPTIONS / HTTP/1.0", async () => {
    const answer = await rawRequest(relay.url, "OPTIONS / HTTP/1.0\r\n\r\n");
    assert.match(answer.status, /^HTTP\/1\.[01] 204 /);
  });
  await t.step("GET /health HTTP/1.0, with and without a user agent", async () => {
    for (const headers of ["", "User-Agent: monitor/1.0\r\n", "Connection: close\r\n"]) {
      const answer = await rawRequest(relay.url, `GET /health HTTP/1.0\r\n${headers}\r\n`);
      assert.match(answer.status, /^HTTP\/1\.[01] 200 /, headers);
      assert.equal(typeof JSON.parse(answer.body), "object");
    }
    const head = await rawRequest(relay.url, "HEAD /health HTTP/1.0\r\n\r\n");
    assert.match(head.status, /^HTTP\/1\.[01] 200 /);
  });
  await t.step("an HTTP/1.1 client without Host, as curl -H 'Host:' sends it: 400", async () => {
    const curl = "User-Agent: curl/8.5.0\r\nAccept: */*\r\nConnection: close\r\n";
    for (const path of ["/health", "/"]) {
      const answer = await rawRequest(relay.url, `GET ${path} HTTP/1.1\r\n${curl}\r\n`);
      assert.equal(answer.status, "HTTP/1.1 400 Bad Request", path);
      assert.match(JSON.parse(answer.body).detail, /no Host header/);
    }
  });
  await t.step("a key, a body or a write without Host: 400, whatever the version", async () => {
    for (
      const request of [
        `GET /peek HTTP/1.0\r\nX-Auth-Key: ${MAIN_KEY}\r\n\r\n`,
        "POST /submit HTTP/1.0\r\nContent-Length: 1\r\n\r\nx",
        "DELETE /health HTTP/1.0\r\n\r\n",
      ]
    ) {
      const answer = await rawRequest(relay.url, request);
      assert.match(answer.status, /^HTTP\/1\.[01] 400 /, request);
    }
  });
  await t.step("with Host, OPTIONS says what a path allows", async () => {
    const res = await fetch(`${relay.url}/submit`, { method: "OPTIONS" });
    assert.equal(res.status, 204);
    assert.equal(res.headers.get("allow"), "POST");
  });
  await t.step("OPTIONS * says what the server allows", async () => {
    const { hostname, port, host } = new URL(relay.url);
    for (const version of ["1.1", "1.0"]) {
      const conn = await Deno.connect({ hostname, port: Number(port) });
      await conn.write(new TextEncoder().encode(
        `OPTIONS * HTTP/${version}\r\nHost: ${host}\r\nConnection: close\r\n\r\n`,
      ));
      const answer = await new Response(conn.readable).text();
      assert.match(answer, /^HTTP\/1\.[01] 204 /, answer);
      const allow = /\r\nallow: ([^\r]*)\r\n/i.exec(answer)?.[1] ?? "";
      for (const method of ["GET", "HEAD", "POST", "OPTIONS"]) {
        assert.ok(allow.includes(method), allow);
      }
    }
  });
});

Deno.test("MP3s answer 412 when If-Match or If-Unmodified-Since fails", async () => {
  await using relay = await serveServices({ engine: new ToneEngine(0.05) });
  const { id } = await relay.services.podcast.enqueue("Short", "Hello there.");
  await relay.services.podcast.idle(60_000);
  const url = `${relay.url}/podcast/${id}.mp3`;
  const whole = await fetch(url);
  const size = (await whole.arrayBuffer()).byteLength;
  const etag = whole.headers.get("etag")!;
  const lastModified = whole.headers.get("last-modified")!;
  const earlier = new Date(Date.parse(lastModified) - 60_000).toUTCString();
  const later = new Date(Date.parse(lastModified) + 60_000).toUTCString();
  const cases: [Record<string, string>, number][] = [
    [{ "if-match": etag }, 200],
    [{ "if-match": `"other", ${etag}` }, 200],
    [{ "if-match": "*" }, 200],
    [{ "if-match": '"other"' }, 412],
    [{ "if-match": `W/${etag}` }, 412], // If-Match compares strongly
    [{ "if-unmodified-since": lastModified }, 200],
    [{ "if-unmodified-since": later }, 200],
    [{ "if-unmodified-since": earlier }, 412],
    [{ "if-unmodified-since": "not a date" }, 200],
    // Not HTTP dates, though Date.parse reads them: ignored (RFC 9110).
    [{ "if-unmodified-since": "2026" }, 200],
    [{ "if-unmodified-since": earlier.replace(" GMT", "") }, 200],
    [{ "if-modified-since": "2099" }, 200],
    // The obsolete forms are read: RFC 850's and asctime's.
    [{ "if-unmodified-since": rfc850(earlier) }, 412],
    [{ "if-unmodified-since": asctime(earlier) }, 412],
    [{ "if-match": etag, "if-unmodified-since": earlier }, 200], // If-Match decides
    [{ "if-match": '"other"', range: "bytes=0-9" }, 412],
  ];
  for (const [headers, status] of cases) {
    for (const method of ["GET", "HEAD"]) {
      const res = await fetch(url, { method, headers });
      const body = await res.arrayBuffer();
      assert.equal(res.status, status, `${method} ${JSON.stringify(headers)}`);
      if (status === 412 && method === "GET") {
        assert.equal(res.headers.get("content-type"), "application/problem+json");
        assert.equal(res.headers.get("etag"), etag);
      }
      if (status === 200 && method === "GET") assert.equal(body.byteLength, size);
    }
  }
  const part = await fetch(url, { headers: { "if-match": etag, range: "bytes=0-9" } });
  assert.equal(part.status, 206);
  assert.equal((await part.arrayBuffer()).byteLength, 10);
});

Deno.test("an If-Match that cannot match is refused with 412 before anything is done; * passes", async () => {
  await using relay = await serveServices({ engine: new ToneEngine(0.05) });
  const key = { "x-auth-key": MAIN_KEY };
  const send = async (path: string, init: RequestInit = {}) => {
    const res = await fetch(`${relay.url}${path}`, init);
    return { status: res.status, type: res.headers.get("content-type"), body: await res.text() };
  };
  const queued = async () => (await send("/peek?queue=general", { headers: key })).body;
  // A write: refused, and nothing is queued.
  const before = await queued();
  const refused = await send("/submit?queue=general", {
    method: "POST",
    headers: { ...key, "if-match": '"zzz"' },
    body: "https://example.com/if-match",
  });
  assert.equal(refused.status, 412);
  assert.equal(refused.type, "application/problem+json");
  assert.deepEqual(await queued(), before);
  const star = await send("/submit?queue=general", {
    method: "POST",
    headers: { ...key, "if-match": "*" },
    body: "https://example.com/if-match",
  });
  assert.equal(star.status, 200, star.body);
  // A pull that would take the item: refused, the item stays.
  const pulled = await send("/pull?queue=general", { headers: { ...key, "if-match": '"a"' } });
  assert.equal(pulled.status, 412);
  assert.notDeepEqual(await queued(), before, "the item is still queued");
  // Reads: the API's (no tag) and a tagged document (its weak tag never matches strongly).
  for (const path of ["/peek?queue=general", "/results", "/openapi.json", "/blog/feed.xml"]) {
    assert.equal(
      (await send(path, { headers: { ...key, "if-match": '"zzz"' } })).status,
      412,
      path,
    );
    assert.equal((await send(path, { headers: { ...key, "if-match": "*" } })).status, 200, path);
  }
  const etag = (await fetch(`${relay.url}/openapi.json`).then(async (r) => {
    await r.body?.cancel();
    return r.headers.get("etag");
  }))!;
  assert.equal((await send("/openapi.json", { headers: { "if-match": etag } })).status, 412);
  // The key is asked for first.
  assert.equal((await send("/peek", { headers: { "if-match": '"zzz"' } })).status, 401);
});

Deno.test("a public podcast's feed, transcripts and audio and a public blog's feed are readable from any site; keyed answers never", async (t) => {
  const paths = (id: string) => [
    "/podcast/feed.xml",
    `/podcast/${id}.mp3`,
    `/podcast/${id}.txt`,
    "/blog/feed.xml",
  ];
  await t.step("public", async () => {
    await using relay = await serveServices({ engine: new ToneEngine(0.05) });
    const { id } = await relay.services.podcast.enqueue("Short", "Hello there.");
    await relay.services.podcast.idle(60_000);
    for (const path of paths(id)) {
      for (const origin of [undefined, "https://player.example", "chrome-extension://abcdef"]) {
        const res = await fetch(`${relay.url}${path}`, {
          headers: origin === undefined ? {} : { origin },
        });
        await res.body?.cancel();
        assert.equal(res.status, 200, path);
        assert.equal(res.headers.get("access-control-allow-origin"), "*", `${path} ${origin}`);
      }
    }
    // A preflight from any site is answered for them (a player that sends Range or a
    // condition asks first), and never for what needs a key.
    for (const path of paths(id)) {
      const asked = await preflight(`${relay.url}${path}`);
      assert.equal(asked.status, 204, path);
      assert.equal(asked.headers.get("access-control-allow-origin"), "*", path);
      assert.match(asked.headers.get("access-control-allow-headers") ?? "", /Range/, path);
    }
    assert.equal(
      (await preflight(`${relay.url}/peek`)).headers.get("access-control-allow-origin"),
      null,
    );
    // A 304 keeps it (a cache freshens its stored headers from the 304), and a range of
    // the audio has it: a player asks for both.
    for (const path of paths(id)) {
      const etag = (await fetch(`${relay.url}${path}`).then(async (r) => {
        await r.body?.cancel();
        return r.headers.get("etag");
      }))!;
      for (const origin of [undefined, "chrome-extension://abcdef"]) {
        const res = await fetch(`${relay.url}${path}`, {
          headers: { "if-none-match": etag, ...(origin === undefined ? {} : { origin }) },
        });
        assert.equal(res.status, 304, path);
        assert.equal(res.headers.get("access-control-allow-origin"), "*", `304 ${path} ${origin}`);
      }
    }
    const mp3 = `${relay.url}/podcast/${id}.mp3`;
    const part = await fetch(mp3, { headers: { range: "bytes=0-9" } });
    await part.body?.cancel();
    assert.equal(part.status, 206);
    assert.equal(part.headers.get("access-control-allow-origin"), "*");
    // Never on what needs a key, nor on the pages.
    for (const path of ["/peek", "/results", "/notes/", "/blog/", "/podcast/"]) {
      const res = await fetch(`${relay.url}${path}`, { headers: { "x-auth-key": MAIN_KEY } });
      await res.body?.cancel();
      assert.equal(res.headers.get("access-control-allow-origin"), null, path);
    }
  });
  await t.step("private", async () => {
    await using relay = await serveServices({
      engine: new ToneEngine(0.05),
      privateBlog: true,
      privatePodcast: true,
    });
    const { id } = await relay.services.podcast.enqueue("Short", "Hello there.");
    await relay.services.podcast.idle(60_000);
    for (const path of paths(id)) {
      for (const key of [undefined, READER_KEY]) {
        const res = await fetch(`${relay.url}${path}`, {
          headers: key === undefined ? {} : { "x-auth-key": key },
        });
        await res.body?.cancel();
        assert.equal(res.status, key === undefined ? 401 : 200, path);
        assert.equal(res.headers.get("access-control-allow-origin"), null, path);
      }
      // Nor a preflight from another site.
      const asked = await preflight(`${relay.url}${path}`);
      assert.equal(asked.headers.get("access-control-allow-origin"), null, path);
    }
  });
});

/** A CORS preflight of `url` from a page on another site, asking to send `Range`. */
async function preflight(url: string): Promise<Response> {
  const res = await fetch(url, {
    method: "OPTIONS",
    headers: {
      origin: "https://player.example",
      "access-control-request-method": "GET",
      "access-control-request-headers": "range",
    },
  });
  await res.body?.cancel();
  return res;
}

/** An IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`) in RFC 850's form. */
function rfc850(date: string): string {
  const [day, dd, mon, yyyy, time] = date.split(/,? /);
  const days = { Mon: "Monday", Tue: "Tuesday", Wed: "Wednesday", Thu: "Thursday" } as const;
  const rest = { Fri: "Friday", Sat: "Saturday", Sun: "Sunday" } as const;
  const name = { ...days, ...rest }[day as keyof typeof days | keyof typeof rest];
  return `${name}, ${dd}-${mon}-${yyyy!.slice(2)} ${time} GMT`;
}

/** An IMF-fixdate in C's asctime form (`Sun Nov  6 08:49:37 1994`). */
function asctime(date: string): string {
  const [day, dd, mon, yyyy, time] = date.split(/,? /);
  return `${day} ${mon} ${String(Number(dd)).padStart(2, " ")} ${time} ${yyyy}`;
}

/**
 * What the client says when `--url` does not lead to a relay: another web server (its page
 * would end as "Unexpected token '<'"), nothing listening, a TLS certificate refused. Each
 * message names the cause and what to do; servers are real, on 127.0.0.1.
 *
 * @module
 */

import assert from "node:assert/strict";
import { runCli } from "../_helpers.ts";

const KEY = "client-test-key-0123456789";

Deno.test("a --url that answers a web page is named as not a relay, with how to fix it", async () => {
  const pages: string[] = [];
  await using server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (req) => {
    pages.push(new URL(req.url).pathname);
    const status = req.method === "GET" ? 200 : 404;
    return new Response("<!doctype html><title>Router</title>", {
      status,
      headers: { "content-type": "text/html; charset=utf-8" },
    });
  });
  const url = `http://127.0.0.1:${server.addr.port}`;
  for (const args of [["submit", "hello"], ["results"], ["pull", "--queue", "general"]]) {
    const out = await runCli(args, { env: { RELAY_URL: url, RELAY_API_KEY: KEY } });
    assert.equal(out.code, 1, out.stderr);
    assert.match(
      out.stderr,
      new RegExp(`^relay: ${url} is not a relay: it answered HTTP (200|404) with a web page`),
    );
    assert.match(out.stderr, /check --url \(or RELAY_URL, or the config file of relay login\)/);
    assert.doesNotMatch(out.stderr, /Unexpected token/);
  }
  assert.ok(pages.length >= 3, "the server was asked");
});

Deno.test("a --url where nothing listens says so, and how to start the relay", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  const out = await runCli(["submit", "hello"], {
    env: { RELAY_URL: `http://127.0.0.1:${port}`, RELAY_API_KEY: KEY },
  });
  assert.equal(out.code, 1, out.stderr);
  assert.match(
    out.stderr,
    /Cannot reach the relay at \S+: connection refused \(is it running\? start it with relay serve, or check the port in --url\)/,
  );
});

/**
 * One authorisation path for every route, the API's and the built-in services': the
 * failed-key limit never refuses a valid key, a cookie never authorises a state-changing
 * request from another site (or without an `Origin`), and the origins `--allow-origin`
 * names get CORS answers (preflight and grants) while others get none.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createApp, type RelayApp } from "../../src/server/app.ts";
import { Logger } from "../../src/server/log.ts";
import { createBuiltinServices } from "../../src/builtin/services.ts";
import { assertProblem, KEY, makeStore } from "../_helpers.ts";

const APP_ID = "app-id-0123456789abcdef";
const ALLOWED = "https://dash.example";
const EVIL = "http://evil.example";
const FROM = { remoteAddr: { hostname: "192.0.2.7" } };

/** The real app with the built-in services on a temp store and data directory. */
async function relayWithServices(
  job: (app: RelayApp) => Promise<void>,
  options: { privatePodcast?: boolean; publicUrl?: string } = {},
): Promise<void> {
  await using base = await makeStore({ systemClock: true });
  const dataDir = await Deno.makeTempDir({ prefix: "relay-access-" });
  const services = createBuiltinServices({ dataDir, log: () => {} });
  const app = createApp({
    store: base.store,
    apiKey: KEY,
    logger: new Logger({ write: () => {} }),
    builtin: { services, appId: APP_ID, ...options },
    allowedOrigins: [ALLOWED],
  });
  try {
    await job(app);
  } finally {
    await services.stop();
    await Deno.remove(dataDir, { recursive: true });
  }
}

/** Publishes a post on the built-in blog with the app id; returns its id. */
async function newPost(app: RelayApp): Promise<string> {
  const res = await app.request("/downstream/api/publish", {
    method: "POST",
    headers: { "content-type": "application/json", "x-app-id": APP_ID },
    body: JSON.stringify({ title: "t", content: "c", targets: ["blog"] }),
  });
  assert.equal(res.status, 200);
  return (await res.json()).blog.post_id;
}

Deno.test("the built-in services accept a valid key after ten failed ones from the same address", async () => {
  await relayWithServices(async (app) => {
    for (let i = 0; i < 11; i++) {
      await (await app.request(`/notes/?key=guess-${i}`, {}, FROM)).body?.cancel();
    }
    await assertProblem(await app.request("/notes/?key=guess", {}, FROM), 429);
    for (
      const init of [
        { headers: { "x-auth-key": KEY } },
        { headers: { cookie: `relay_access=${KEY}` } },
      ]
    ) {
      const res = await app.request("/notes/", init, FROM);
      assert.equal(res.status, 200, JSON.stringify(init));
      await res.body?.cancel();
    }
    const byQuery = await app.request(`/notes/?key=${KEY}`, {}, FROM);
    assert.equal(byQuery.status, 200);
    await byQuery.body?.cancel();
  });
});

Deno.test("keyless requests to a private podcast do not lock the household's key out", async () => {
  await relayWithServices(async (app) => {
    // What a web page's <img> tags make a visitor's browser send: no key, no Origin.
    for (let i = 0; i < 12; i++) {
      await (await app.request("/podcast/feed.xml", {}, FROM)).body?.cancel();
    }
    const res = await app.request(`/podcast/feed.xml?key=${KEY}`, {}, FROM);
    assert.equal(res.status, 200);
    await res.body?.cancel();
  }, { privatePodcast: true });
});

Deno.test("a cookie does not authorise a state-changing request from another site or without an Origin", async () => {
  await relayWithServices(async (app) => {
    const id = await newPost(app);
    const del = (headers: Record<string, string>) =>
      app.request(`/downstream/delete/${id}`, {
        method: "POST",
        headers: { cookie: `relay_access=${KEY}`, ...headers },
      }, FROM);
    await assertProblem(await del({ origin: EVIL }), 403);
    await assertProblem(await del({}), 403);
    const still = await app.request(`/blog/${id}`);
    assert.equal(still.status, 200);
    await still.body?.cancel();
    // The relay's own page may.
    const own = await del({ origin: "http://localhost" });
    assert.equal(own.status, 303);
    assert.equal((await app.request(`/blog/${id}`)).status, 404);
  });
});

Deno.test("a request from another site's page is refused before its key is looked at, on the built-in services too", async () => {
  await relayWithServices(async (app) => {
    await assertProblem(
      await app.request("/notes/", { headers: { "x-auth-key": KEY, origin: EVIL } }),
      403,
    );
  });
});

Deno.test("a preflight from an allowed origin is answered, and the answers granted to it", async () => {
  await relayWithServices(async (app) => {
    const preflight = await app.request("/submit", {
      method: "OPTIONS",
      headers: {
        origin: ALLOWED,
        "access-control-request-method": "POST",
        "access-control-request-headers": "x-auth-key, content-type",
      },
    });
    assert.equal(preflight.status, 204);
    assert.equal(preflight.headers.get("access-control-allow-origin"), ALLOWED);
    assert.match(preflight.headers.get("access-control-allow-methods") ?? "", /POST/);
    const allowHeaders = (preflight.headers.get("access-control-allow-headers") ?? "")
      .toLowerCase();
    for (const name of ["x-auth-key", "last-event-id", "content-type"]) {
      assert.ok(allowHeaders.includes(name), allowHeaders);
    }
    assert.match(preflight.headers.get("access-control-max-age") ?? "", /^\d+$/);
    assert.match(preflight.headers.get("vary") ?? "", /origin/i);

    const granted = await app.request("/peek", {
      headers: { origin: ALLOWED, "x-auth-key": KEY },
    });
    assert.equal(granted.headers.get("access-control-allow-origin"), ALLOWED);
    assert.match(granted.headers.get("vary") ?? "", /origin/i);
    await granted.body?.cancel();
    // A refusal is granted too, so that the page can read why.
    const refused = await app.request("/peek", { headers: { origin: ALLOWED } });
    assert.equal(refused.status, 401);
    assert.equal(refused.headers.get("access-control-allow-origin"), ALLOWED);
    await refused.body?.cancel();

    const extension = "chrome-extension://abcdefghijklmnop";
    const fromExtension = await app.request("/peek", {
      method: "OPTIONS",
      headers: { origin: extension, "access-control-request-method": "GET" },
    });
    assert.equal(fromExtension.status, 204);
    assert.equal(fromExtension.headers.get("access-control-allow-origin"), extension);
  });
});

Deno.test("another site's page gets no CORS answer, and its preflight no permission", async () => {
  await relayWithServices(async (app) => {
    const preflight = await app.request("/submit", {
      method: "OPTIONS",
      headers: { origin: EVIL, "access-control-request-method": "POST" },
    });
    assert.equal(preflight.headers.get("access-control-allow-origin"), null);
    assert.notEqual(preflight.status, 204);
    await preflight.body?.cancel();
    const res = await app.request("/peek", { headers: { origin: EVIL, "x-auth-key": KEY } });
    assert.equal(res.status, 403);
    assert.equal(res.headers.get("access-control-allow-origin"), null);
    await res.body?.cancel();
    const plain = await app.request("/health");
    assert.equal(plain.headers.get("access-control-allow-origin"), null);
    await plain.body?.cancel();
  });
});

Deno.test("a page at the public URL is the relay's own, whatever Host a proxy in front sends", async () => {
  await relayWithServices(async (app) => {
    // nginx's default: the proxy passes the request on with Host naming the relay's address.
    const res = await app.request("http://127.0.0.1:8787/submit", {
      method: "POST",
      headers: { origin: "https://relay.example.org", "x-auth-key": KEY, host: "127.0.0.1:8787" },
      body: "from the web app behind a proxy",
    }, FROM);
    assert.equal(res.status, 200, await res.text());
    await assertProblem(
      await app.request("http://127.0.0.1:8787/submit", {
        method: "POST",
        headers: { origin: EVIL, "x-auth-key": KEY, host: "127.0.0.1:8787" },
        body: "from another site",
      }, FROM),
      403,
    );
  }, { publicUrl: "https://relay.example.org/" });
});

/**
 * Named keys with scopes: every scope/endpoint pair, the keys file (hashed,
 * reloaded while running, last use recorded), and `relay keys add|list|remove`.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import {
  addKey,
  KeyRing,
  lastUsedFile,
  readKeysFile,
  readLastUsed,
  type Scope,
  SCOPES,
} from "../../src/access/named_keys.ts";
import { pairingLines, pairingLink } from "../../src/access/pairing.ts";
import {
  assertProblem,
  eventually,
  KEY,
  makeApp,
  ManualClock,
  runCli,
  runRelay,
  startRelayProcess,
  withTempDir,
} from "../_helpers.ts";

/** Each endpoint with the scope gives it, and a request a granted key may send. */
const ENDPOINTS: ReadonlyArray<{ method: string; path: string; scope: Scope; body?: unknown }> = [
  { method: "POST", path: "/submit", scope: "submit", body: { content: "from a scoped key" } },
  { method: "GET", path: "/pull?queue=general", scope: "consume" },
  { method: "POST", path: "/ack", scope: "consume", body: { ids: ["general:999"] } },
  { method: "GET", path: "/qa-hosts", scope: "consume" },
  { method: "POST", path: "/push", scope: "push", body: { content: "a result" } },
  { method: "GET", path: "/peek", scope: "read" },
  { method: "HEAD", path: "/peek", scope: "read" },
  { method: "GET", path: "/results", scope: "read" },
  { method: "HEAD", path: "/results", scope: "read" },
  { method: "GET", path: "/results/stream", scope: "read" },
  { method: "GET", path: "/results/feed.xml", scope: "read" },
  { method: "HEAD", path: "/results/feed.xml", scope: "read" },
  {
    method: "POST",
    path: "/publish",
    scope: "publish",
    body: { title: "T", content: "C", targets: ["notes"] },
  },
  { method: "POST", path: "/clear", scope: "admin" },
  { method: "GET", path: "/stats", scope: "admin" },
  { method: "HEAD", path: "/stats", scope: "admin" },
  { method: "GET", path: "/metrics", scope: "admin" },
  { method: "HEAD", path: "/metrics", scope: "admin" },
];

/** Adds one key per scope to the keys file at `path`, named after it; returns the keys. */
function keyPerScope(path: string, now: number): Record<Scope, string> {
  return Object.fromEntries(
    SCOPES.map((scope) => [scope, addKey(path, scope, [scope], now)]),
  ) as Record<Scope, string>;
}

/**
 * The app with a keys file in `dir` holding one key per scope, named after it. Its
 * `closing` signal is aborted, so a granted results stream ends at once.
 */
async function scopedApp(dir: string) {
  const path = join(dir, "keys.json");
  const clock = new ManualClock();
  const keys = keyPerScope(path, clock.now);
  const t = await makeApp({
    keyRing: new KeyRing(path, clock.read, () => {}),
    closing: AbortSignal.abort(),
  });
  return { t, keys, path, clock, [Symbol.asyncDispose]: () => t[Symbol.asyncDispose]() };
}

function request(endpoint: (typeof ENDPOINTS)[number], key: string): RequestInit {
  return {
    method: endpoint.method,
    headers: { "x-auth-key": key, "content-type": "application/json" },
    ...(endpoint.body === undefined ? {} : { body: JSON.stringify(endpoint.body) }),
  };
}

Deno.test("a key without an endpoint's scope gets 403 for every such pair, and nothing changes", async () => {
  await withTempDir(async (dir) => {
    await using scoped = await scopedApp(dir);
    const { t, keys } = scoped;
    assert.equal((await t.call("/submit", { method: "POST", body: "queued before" })).status, 200);
    assert.equal((await t.call("/push", { method: "POST", body: "result before" })).status, 200);
    const before = await (await t.call("/stats")).json();

    for (const scope of SCOPES) {
      for (const endpoint of ENDPOINTS.filter((e) => e.scope !== scope)) {
        const res = await t.app.request(endpoint.path, request(endpoint, keys[scope]));
        const what = `${endpoint.method} ${endpoint.path} with a "${scope}" key`;
        if (endpoint.method === "HEAD") {
          assert.equal(res.status, 403, what);
          continue;
        }
        const detail = await assertProblem(res, 403);
        assert.match(detail, new RegExp(`"${scope}" may not use .*needs the "${endpoint.scope}"`));
      }
    }
    const after = await (await t.call("/stats")).json();
    assert.deepEqual(after.queues, before.queues);
    assert.deepEqual(after.results, before.results);
  });
});

Deno.test("a key with an endpoint's scope passes authentication (never 401 or 403)", async () => {
  await withTempDir(async (dir) => {
    await using scoped = await scopedApp(dir);
    const { t, keys, path, clock } = scoped;
    for (const endpoint of ENDPOINTS) {
      const res = await t.app.request(endpoint.path, request(endpoint, keys[endpoint.scope]));
      await res.body?.cancel();
      const what = `${endpoint.method} ${endpoint.path} with a "${endpoint.scope}" key`;
      assert.ok(![401, 403].includes(res.status), `${what}: ${res.status}`);
      // Each reached its handler: the answers the main key would get.
      const expected: Record<string, number[]> = {
        "/submit": [200],
        "/pull?queue=general": [200, 204],
        "/ack": [200],
        "/push": [200],
        "/publish": [503],
      };
      assert.ok((expected[endpoint.path] ?? [200, 204]).includes(res.status), what);
    }
    // A key with several scopes gets each of them.
    const both = addKey(path, "phone", ["submit", "read"], clock.now);
    clock.advance(1_000);
    const headers = { "x-auth-key": both };
    assert.equal(
      (await t.app.request("/submit", { method: "POST", body: "x", headers })).status,
      200,
    );
    assert.equal((await t.app.request("/peek", { headers })).status, 200);
    await assertProblem(await t.app.request("/stats", { headers }), 403);
  });
});

Deno.test("the main key keeps full access; a wrong key is still 401; a 403 is not a failed authentication", async () => {
  await withTempDir(async (dir) => {
    await using scoped = await scopedApp(dir);
    const { t, keys } = scoped;
    for (const endpoint of ENDPOINTS.filter((e) => e.path !== "/results/stream")) {
      const res = await t.app.request(endpoint.path, request(endpoint, KEY));
      await res.body?.cancel();
      assert.ok(![401, 403].includes(res.status), `${endpoint.method} ${endpoint.path}`);
    }
    await assertProblem(await t.app.request("/peek", { headers: { "x-auth-key": "nope" } }), 401);
    // Twenty 403s from one address do not make it rate limited (only failed keys count).
    const env = { remoteAddr: { hostname: "192.0.2.7" } };
    for (let i = 0; i < 20; i++) {
      const res = await t.app.request("/stats", { headers: { "x-auth-key": keys.read } }, env);
      await assertProblem(res, 403);
    }
    const ok = await t.app.request("/peek", { headers: { "x-auth-key": keys.read } }, env);
    assert.ok([200, 204].includes(ok.status));
  });
});

Deno.test("the keys file holds digests only, and the relay picks up added and removed keys", async () => {
  await withTempDir(async (dir) => {
    const path = join(dir, "keys.json");
    const clock = new ManualClock();
    const warnings: string[] = [];
    const ring = new KeyRing(path, clock.read, (line) => warnings.push(line));
    await using t = await makeApp({ keyRing: ring });
    const key = addKey(path, "laptop", ["read"], clock.now);
    assert.ok(!(await Deno.readTextFile(path)).includes(key), "the secret is not stored");
    assert.equal(readKeysFile(path)[0]?.sha256.length, 64);

    clock.advance(1_000);
    const headers = { "x-auth-key": key };
    assert.equal((await t.app.request("/results", { headers })).status, 200);

    // A broken file keeps the keys read before, and says so once.
    await Deno.writeTextFile(path, "{not json");
    clock.advance(1_000);
    assert.equal((await t.app.request("/results", { headers })).status, 200);
    clock.advance(1_000);
    assert.equal((await t.app.request("/results", { headers })).status, 200);
    assert.equal(warnings.filter((w) => w.includes("not JSON")).length, 1);

    await Deno.writeTextFile(path, JSON.stringify({ keys: [] }));
    clock.advance(1_000);
    await assertProblem(await t.app.request("/results", { headers }), 401);

    // A clock stepped back (NTP on a Pi without a real-time clock) does not stop reloading.
    const again = addKey(path, "again", ["read"], clock.now);
    clock.advance(-3_600_000);
    const res = await t.app.request("/results", { headers: { "x-auth-key": again } });
    assert.equal(res.status, 200);
  });
});

Deno.test("last use is recorded beside the keys file, at most once a minute and on flush", async () => {
  await withTempDir(async (dir) => {
    const path = join(dir, "keys.json");
    const clock = new ManualClock();
    const key = addKey(path, "phone", ["submit"], clock.now);
    const ring = new KeyRing(path, clock.read, () => {});
    assert.equal(ring.find(key)?.name, "phone");
    assert.deepEqual(readLastUsed(path), {}, "not written on every use");
    clock.advance(60_000);
    assert.equal(ring.find(key)?.name, "phone");
    assert.deepEqual(readLastUsed(path), { phone: clock.now });
    clock.advance(5_000);
    ring.find(key);
    ring.flush();
    assert.deepEqual(readLastUsed(path), { phone: clock.now });
    assert.ok(!(await Deno.readTextFile(lastUsedFile(path))).includes(key));
  });
});

Deno.test("relay keys add prints the key once; list shows names, scopes and last use, never a secret", async () => {
  await withTempDir(async (dir) => {
    // Before the relay's first start, when the database's folder does not exist yet.
    const db = join(dir, "data", "relay.kv");
    const added = await runRelay(["keys", "add", "phone", "--scope", "submit, read", "--db", db]);
    assert.equal(added.code, 0, added.stderr);
    const key = added.stdout.trim();
    assert.match(key, /^[A-Za-z0-9_-]{43}$/);
    assert.match(added.stderr, /shown only this once/);
    const second = await runCli([
      "keys",
      "add",
      "daemon",
      "--scope",
      "consume",
      "--scope",
      "push",
      "--db",
      db,
    ]);
    assert.equal(second.code, 0, second.stderr);

    const list = await runCli(["keys", "list", "--db", db]);
    assert.equal(list.code, 0, list.stderr);
    assert.match(list.stdout, /^NAME +SCOPES +CREATED \(UTC\) +LAST USED \(UTC\)$/m);
    assert.match(list.stdout, /^phone +submit,read +\d{4}-\d\d-\d\d \d\d:\d\d +never$/m);
    assert.match(list.stdout, /^daemon +consume,push /m);
    assert.ok(!list.stdout.includes(key));
    assert.ok(!list.stdout.includes(second.stdout.trim()));

    // Used over real HTTP: the relay records it when it stops.
    {
      await using relay = await startRelayProcess(join(dir, "data"), {
        env: { RELAY_API_KEY: KEY },
      });
      const res = await fetch(`${relay.url}/submit`, {
        method: "POST",
        headers: { "x-auth-key": key },
        body: "shared from the phone",
      });
      assert.equal(await res.text(), "OK (general)");
      const denied = await fetch(`${relay.url}/clear`, {
        method: "POST",
        headers: { "x-auth-key": key },
      });
      await assertProblem(denied, 403);
      // Removed while the relay runs: refused within a second or so.
      const removed = await runCli(["keys", "remove", "phone", "--db", db]);
      assert.equal(removed.code, 0, removed.stderr);
      await eventually(async () => {
        const res = await fetch(`${relay.url}/peek`, { headers: { "x-auth-key": key } });
        await res.body?.cancel();
        return res.status === 401;
      }, "the removed key to be refused");
      assert.equal((await relay.stop("SIGTERM")).code, 0);
    }
    const json = await runCli(["keys", "list", "--json", "--db", db]);
    const listed = JSON.parse(json.stdout) as Array<Record<string, unknown>>;
    assert.deepEqual(listed.map((k) => k.name), ["daemon"]);
    assert.equal(listed[0]?.last_used_at, null);
    assert.deepEqual(Object.keys(readLastUsed(join(dir, "data", "keys.json"))), ["phone"]);
    assert.equal((await Deno.stat(join(dir, "data", "keys.json"))).mode! & 0o777, 0o600);

    const again = await runCli(["keys", "remove", "phone", "--db", db]);
    assert.equal(again.code, 1);
    const bad = await runCli(["keys", "add", "x", "--scope", "root", "--db", db]);
    assert.equal(bad.code, 2);
    assert.match(
      bad.stderr,
      /invalid scope "root": use submit, consume, push, read, publish, admin/,
    );
  });
});

Deno.test("a relay whose keys file is invalid does not start, with one line saying why", async () => {
  await withTempDir(async (dir) => {
    const keysFile = join(dir, "mine.json");
    await Deno.writeTextFile(keysFile, JSON.stringify({ keys: [{ name: "a" }] }));
    const out = await runRelay(
      ["serve", "--port", "0", "--db", join(dir, "relay.kv"), "--keys-file", keysFile],
      { env: { RELAY_API_KEY: KEY } },
    );
    assert.notEqual(out.code, 0);
    assert.match(out.stderr, /^relay: invalid keys file ".*mine\.json": keys\.0\.sha256 /m);
  });
});

Deno.test("relay pair prints a QR code and the pairing link, with the main key or a new named key", async () => {
  await withTempDir(async (dir) => {
    const db = join(dir, "relay.kv");
    const main = await runCli(["pair", "--app-url", "https://nas.example:8787/", "--db", db], {
      env: { RELAY_API_KEY: KEY },
    });
    assert.equal(main.code, 0, main.stderr);
    const lines = main.stdout.trimEnd().split("\n");
    assert.equal(lines.at(-1), `https://nas.example:8787/app/#key=${KEY}`);
    assert.ok(lines.length > 10 && lines.slice(0, -1).every((line) => /[█▄▀]/.test(line)));

    const named = await runCli(
      ["pair", "--name", "kitchen-tablet", "--app-url", "http://192.0.2.1:8787", "--db", db],
      { env: { RELAY_API_KEY: KEY } },
    );
    assert.equal(named.code, 0, named.stderr);
    const link = named.stdout.trimEnd().split("\n").at(-1)!;
    const key = decodeURIComponent(link.replace("http://192.0.2.1:8787/app/#key=", ""));
    assert.notEqual(key, KEY);
    const ring = new KeyRing(join(dir, "keys.json"), Date.now, () => {});
    assert.deepEqual(ring.find(key)?.scopes, ["submit", "read", "publish"]);
    assert.equal(ring.find(key)?.name, "kitchen-tablet");
  });
});

Deno.test("relay pair without --app-url points at the port the relay on this machine listens on", async () => {
  await withTempDir(async (dir) => {
    const db = join(dir, "relay.kv");
    const none = await runCli(["pair", "--db", db], { env: { RELAY_API_KEY: KEY } });
    assert.equal(none.code, 0, none.stderr);
    assert.match(none.stdout.trimEnd().split("\n").at(-1)!, /^http:\/\/[^/]+:8787\/app\/#key=/);
    await using relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
    assert.notEqual(new URL(relay.url).port, "8787");
    const out = await runCli(["pair", "--db", db], { env: { RELAY_API_KEY: KEY } });
    assert.equal(out.code, 0, out.stderr);
    assert.equal(out.stdout.trimEnd().split("\n").at(-1), `${relay.url}/app/#key=${KEY}`);
  });
});

Deno.test("a key too long for a QR code still gets its pairing link", async () => {
  const link = pairingLink("http://192.0.2.1:8787", "k".repeat(3000));
  const lines = await pairingLines(link);
  assert.equal(lines.length, 2);
  assert.match(lines[0]!, /^\(no QR code: /);
  assert.equal(lines[1], link);
});

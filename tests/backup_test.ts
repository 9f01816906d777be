import assert from "node:assert/strict";
import { exportStore, ImportError, importStore, parseBackup } from "../src/backup.ts";
import { peek, push, readResults, submit } from "../src/store/store.ts";
import { join } from "node:path";
import { makeStore, runCli, runRelay, startRelayProcess, withTempDir } from "./_helpers.ts";

const KEY = "backup-test-key-0123456789";

Deno.test("exportStore() and importStore() round-trip queues, results and mark", async () => {
  await using source = await makeStore();
  const big = "ü".repeat(200_000);
  await submit(source.store, "https://zhihu.com/q/1", "qa");
  source.clock.advance(1000);
  await submit(source.store, big, "general");
  await submit(source.store, "plain", "general");
  const r1 = await push(source.store, "r1");
  await push(source.store, big);
  source.clock.advance(-60_000); // a clock that went back: t still grows
  const r3 = await push(source.store, "r3");
  const backup = parseBackup(JSON.stringify(await exportStore(source.store)));
  assert.equal(backup.results_hwm, r3.t);

  await using target = await makeStore();
  await importStore(target.store, backup);
  assert.deepEqual(
    [...(await peek(target.store)).values()].flat().map((i) => [i.queue, i.content, i.created_at]),
    [...(await peek(source.store)).values()].flat().map((i) => [i.queue, i.content, i.created_at]),
  );
  const results = await readResults(target.store, { since: 0, limit: 50 });
  assert.deepEqual(results.items.map((i) => i.t), [r1.t, r1.t + 1, r3.t]);
  assert.equal(results.items[1]!.content, big);
  target.clock.advance(-3_600_000);
  assert.equal((await push(target.store, "next")).t, r3.t + 1, "t continues after the mark");
});

Deno.test("importStore() refuses a store that holds anything, unless forced", async () => {
  await using source = await makeStore();
  await submit(source.store, "from backup", "article");
  const backup = await exportStore(source.store);
  await using target = await makeStore();
  await submit(target.store, "already here", "qa");
  await assert.rejects(importStore(target.store, backup), ImportError);
  await importStore(target.store, backup, { force: true });
  const all = [...(await peek(target.store)).values()].flat().map((i) => i.content);
  assert.deepEqual(all, ["from backup"]);
});

Deno.test("parseBackup() explains what is wrong with a file that is not a backup", () => {
  assert.throws(() => parseBackup("{"), /not JSON/);
  assert.throws(() => parseBackup('{"format": "other"}'), /not a relay backup \(format/);
});

Deno.test("relay export and relay import move a relay's data to a new database", async () => {
  const dir = await Deno.makeTempDir({ prefix: "relay-backup-test-" });
  const env = { RELAY_API_KEY: KEY };
  {
    await using relay = await startRelayProcess(`${dir}/old`, { env });
    const call = (path: string, body: string) =>
      fetch(`${relay.url}${path}`, { method: "POST", body, headers: { "x-auth-key": KEY } });
    assert.equal((await call("/submit", "queued link https://zhihu.com/q/9")).status, 200);
    assert.equal((await call("/push", "a result")).status, 200);
    // While the relay runs, the database is its own.
    const busy = await runCli(["export", "--db", `${dir}/old/relay.kv`]);
    assert.equal(busy.code, 1);
    assert.match(busy.stderr, /^relay: cannot export: the database .* is in use by another relay/);
    await relay.stop();
  }
  const file = `${dir}/backup.json`;
  // Export and import through real processes once, with the relay's permission set; the other
  // tests run them in process.
  const exported = await runRelay(["export", "--db", `${dir}/old/relay.kv`, "--out", file]);
  assert.equal(exported.code, 0, exported.stderr);
  assert.match(exported.stderr, /exported 1 queued items and 1 results/);
  assert.equal((await Deno.stat(file)).mode! & 0o777, 0o600);
  const imported = await runRelay(["import", file, "--db", `${dir}/new/relay.kv`]);
  assert.equal(imported.code, 0, imported.stderr);
  const again = await runCli(["import", file, "--db", `${dir}/new/relay.kv`]);
  assert.equal(again.code, 2, "a target that is not empty is a usage error");
  assert.match(again.stderr, /use --force/);
  await using relay = await startRelayProcess(`${dir}/new`, { env });
  const get = (path: string) => fetch(`${relay.url}${path}`, { headers: { "x-auth-key": KEY } });
  assert.deepEqual(await (await get("/pull")).json(), ["queued link https://zhihu.com/q/9"]);
  const page = await (await get("/results")).json();
  assert.deepEqual(page.items.map((i: { c: string }) => i.c), ["a result"]);
  await relay.stop();
  await Deno.remove(dir, { recursive: true });
});

/** A fetch with `key` as the X-Auth-Key; returns the status and the body's text. */
async function callWith(
  base: string,
  key: string,
  path: string,
  init: RequestInit = {},
): Promise<{ status: number; text: string }> {
  const res = await fetch(`${base}${path}`, { ...init, headers: { "x-auth-key": key } });
  return { status: res.status, text: await res.text() };
}

/** `relay keys list --json` for the database `db`. */
async function listKeys(db: string): Promise<unknown> {
  const out = await runCli(["keys", "list", "--json", "--db", db]);
  assert.equal(out.code, 0, out.stderr);
  return JSON.parse(out.stdout);
}

Deno.test("relay export/import move the named keys always and the main key with --include-secrets: every key that worked before still works", async () => {
  await withTempDir(async (dir) => {
    const oldDb = join(dir, "old", "relay.kv");
    const added: Record<string, string> = {};
    let before: { peek: string; results: string };
    let mainKey: string;
    {
      // No RELAY_API_KEY: the relay generates its main key beside the database.
      await using relay = await startRelayProcess(join(dir, "old"));
      mainKey = (await Deno.readTextFile(join(dir, "old", "api-key"))).trim();
      for (const [name, scopes] of [["phone", "submit,read"], ["daemon", "consume,push"]]) {
        const out = await runCli(["keys", "add", name!, "--scope", scopes!, "--db", oldDb]);
        assert.equal(out.code, 0, out.stderr);
        added[name!] = out.stdout.trim();
      }
      const phone = added.phone!;
      const post = (key: string, path: string, body: string) =>
        callWith(relay.url, key, path, { method: "POST", body });
      assert.equal((await post(phone, "/submit", "from the phone")).status, 200);
      assert.equal((await post(mainKey, "/submit", "https://zhihu.com/q/1")).status, 200);
      assert.equal((await post(added.daemon!, "/push", "a summary")).status, 200);
      assert.equal((await post(mainKey, "/push", "second result")).status, 200);
      before = {
        peek: (await callWith(relay.url, mainKey, "/peek")).text,
        results: (await callWith(relay.url, mainKey, "/results")).text,
      };
      // SIGTERM writes the last use of the named keys.
      assert.equal((await relay.stop("SIGTERM")).code, 0);
    }
    const keysBefore = await listKeys(oldDb) as Array<{ name: string; last_used_at: unknown }>;
    assert.deepEqual(keysBefore.map((k) => k.name), ["phone", "daemon"]);
    assert.ok(keysBefore.every((k) => typeof k.last_used_at === "number"), "both keys used");

    const plain = join(dir, "plain.json");
    const secret = join(dir, "secret.json");
    const exported = await runCli(["export", "--db", oldDb, "--out", plain]);
    assert.equal(exported.code, 0, exported.stderr);
    assert.match(exported.stderr, /exported 2 queued items and 2 results, 2 named keys to /);
    const withSecrets = await runCli(["export", "--db", oldDb, "--include-secrets"]);
    assert.equal(withSecrets.code, 0, withSecrets.stderr);
    await Deno.writeTextFile(secret, withSecrets.stdout);
    const plainText = await Deno.readTextFile(plain);
    assert.ok(!plainText.includes(mainKey), "the main key only with --include-secrets");
    const plainDoc = JSON.parse(plainText);
    assert.equal(plainDoc.version, 2);
    assert.equal(plainDoc.api_key, undefined);
    assert.deepEqual(
      plainDoc.keys.map((k: Record<string, unknown>) => Object.keys(k).sort()),
      [0, 1].map(() => ["created_at", "last_used_at", "name", "scopes", "sha256"]),
    );
    assert.ok(!plainText.includes(added.phone!), "named keys travel as digests");
    assert.equal(JSON.parse(withSecrets.stdout).api_key, mainKey);

    for (const [name, file] of [["plain", plain], ["secret", secret]] as const) {
      // Into directories that do not exist yet.
      const db = join(dir, name, "nested", "relay.kv");
      const imported = await runCli(["import", file, "--db", db]);
      assert.equal(imported.code, 0, imported.stderr);
      assert.match(imported.stderr, /imported 2 queued items and 2 results, 2 named keys/);
      assert.deepEqual(await listKeys(db), keysBefore, `${name}: scopes, created, last use`);
      await using relay = await startRelayProcess(join(dir, name, "nested"));
      const generated = (await Deno.readTextFile(join(dir, name, "nested", "api-key"))).trim();
      assert.equal(generated === mainKey, name === "secret");
      assert.equal((await callWith(relay.url, generated, "/peek")).text, before!.peek);
      assert.equal((await callWith(relay.url, generated, "/results")).text, before!.results);
      assert.equal(
        (await callWith(relay.url, mainKey, "/stats")).status,
        name === "secret" ? 200 : 401,
        `${name}: the old main key`,
      );
      assert.equal((await callWith(relay.url, added.phone!, "/peek")).status, 200);
      const pushed = await callWith(relay.url, added.daemon!, "/push", {
        method: "POST",
        body: "after the move",
      });
      assert.equal(pushed.status, 200, pushed.text);
      assert.equal((await callWith(relay.url, "not-a-key-0123456789", "/peek")).status, 401);
      await relay.stop();
    }
  });
});

Deno.test("relay import refuses a target with data, named keys or another main key, in one line with exit 2, unless --force", async () => {
  await withTempDir(async (dir) => {
    const source = join(dir, "source", "relay.kv");
    const added = await runCli(["keys", "add", "phone", "--scope", "read", "--db", source]);
    assert.equal(added.code, 0, added.stderr);
    const phone = added.stdout.trim();
    const file = join(dir, "backup.json");
    const exported = await runCli(["export", "--db", source, "--out", file], {
      env: { RELAY_API_KEY: KEY },
    });
    assert.equal(exported.code, 0, exported.stderr);
    const secret = join(dir, "secret.json");
    const withKey = await runCli(
      ["export", "--db", source, "--include-secrets", "--out", secret],
      {
        env: { RELAY_API_KEY: KEY },
      },
    );
    assert.equal(withKey.code, 0, withKey.stderr);
    assert.match(withKey.stderr, /and the main API key to /);

    // A target whose only content is a named key.
    const keyed = join(dir, "keyed", "relay.kv");
    assert.equal(
      (await runCli(["keys", "add", "other", "--scope", "admin", "--db", keyed])).code,
      0,
    );
    const refused = await runCli(["import", file, "--db", keyed]);
    assert.equal(refused.code, 2);
    assert.match(
      refused.stderr,
      /^relay: cannot import: the target is not empty \(.*keys\.json holds 1 named key\(s\)\): use --force to replace it\n$/,
    );
    const forced = await runCli(["import", file, "--db", keyed, "--force"]);
    assert.equal(forced.code, 0, forced.stderr);
    const names = (await listKeys(keyed) as Array<{ name: string }>).map((k) => k.name);
    assert.deepEqual(names, ["phone"], "--force replaces the keys");

    // A target with another main key, and the backup carries one.
    const other = join(dir, "other");
    await Deno.mkdir(other);
    await Deno.writeTextFile(join(other, "api-key"), "another-main-key-0123456789\n");
    const clash = await runCli(["import", secret, "--db", join(other, "relay.kv")]);
    assert.equal(clash.code, 2);
    assert.match(clash.stderr, /api-key holds another main key\): use --force/);
    // Without the main key in the backup there is nothing to clash with.
    const plain = await runCli(["import", file, "--db", join(other, "relay.kv")]);
    assert.equal(plain.code, 0, plain.stderr);
    assert.equal(
      (await Deno.readTextFile(join(other, "api-key"))).trim(),
      "another-main-key-0123456789",
    );
    const replaced = await runCli(["import", secret, "--db", join(other, "relay.kv"), "--force"]);
    assert.equal(replaced.code, 0, replaced.stderr);
    assert.equal((await Deno.readTextFile(join(other, "api-key"))).trim(), KEY);
    await using relay = await startRelayProcess(other);
    assert.equal((await callWith(relay.url, KEY, "/stats")).status, 200);
    assert.equal((await callWith(relay.url, phone, "/peek")).status, 204, "nothing queued");
    await relay.stop();
  });
});

Deno.test("relay import still reads a version 1 backup (no keys) and leaves the keys alone", async () => {
  await withTempDir(async (dir) => {
    const file = join(dir, "v1.json");
    await Deno.writeTextFile(
      file,
      JSON.stringify({
        format: "content-relay-backup",
        version: 1,
        exported_at: 1767225600000,
        results_hwm: 1767225600500,
        queues: {
          qa: [],
          article: [],
          general: [{ content: "kept from an old export", created_at: 1767225600000 }],
        },
        results: [{ t: 1767225600500, content: "old result" }],
      }),
    );
    const imported = await runCli(["import", file, "--db", join(dir, "new", "relay.kv")]);
    assert.equal(imported.code, 0, imported.stderr);
    assert.match(imported.stderr, /imported 1 queued items and 1 results into /);
    await using relay = await startRelayProcess(join(dir, "new"), { env: { RELAY_API_KEY: KEY } });
    assert.deepEqual(
      JSON.parse((await callWith(relay.url, KEY, "/pull")).text),
      ["kept from an old export"],
    );
    const results = JSON.parse((await callWith(relay.url, KEY, "/results")).text);
    assert.deepEqual(results.items, [{ t: 1767225600500, c: "old result" }]);
    await relay.stop();
    assert.deepEqual(await listKeys(join(dir, "new", "relay.kv")), []);
  });
});

Deno.test("parseBackup() names a version it does not know", () => {
  const doc = {
    format: "content-relay-backup",
    version: 3,
    exported_at: 0,
    results_hwm: 0,
    queues: { qa: [], article: [], general: [] },
    results: [],
  };
  assert.throws(() => parseBackup(JSON.stringify(doc)), /version: .*a newer relay wrote this file/);
});

Deno.test("parseBackup() refuses a queue this relay does not have and reads a missing one as empty", async () => {
  await using source = await makeStore();
  await submit(source.store, "kept", "general");
  const backup = await exportStore(source.store);
  const withExtra = { ...backup, queues: { ...backup.queues, later: [] } };
  assert.throws(() => parseBackup(JSON.stringify(withExtra)), /unknown queue "later"/);
  const { article: _, ...older } = backup.queues;
  assert.deepEqual(parseBackup(JSON.stringify({ ...backup, queues: older })).queues.article, []);
});

Deno.test("relay export and relay import refuse a speech command the relay would refuse, in one line with exit 2", async () => {
  await withTempDir(async (dir) => {
    const env = { RELAY_SPEECH_COMMAND: "piper | aplay" };
    for (const args of [["export"], ["import", `${dir}/none.json`]]) {
      const run = await runCli([...args, "--db", `${dir}/relay.kv`], { env });
      assert.equal(run.code, 2, run.stderr);
      assert.match(
        run.stderr,
        /^relay: invalid RELAY_SPEECH_COMMAND "piper \| aplay": holds shell syntax \(\|\)/,
      );
    }
  });
});

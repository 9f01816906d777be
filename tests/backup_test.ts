import assert from "node:assert/strict";
import { exportStore, ImportError, importStore, parseBackup } from "../src/backup.ts";
import { peek, push, readResults, submit } from "../src/store/store.ts";
import { makeStore, runRelay, startRelayProcess } from "./_helpers.ts";

const KEY = "backup-test-key-0123456789";

Deno.test("exportStore() and importStore() round-trip queues, results and the C40 mark", async () => {
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
  assert.equal((await push(target.store, "next")).t, r3.t + 1, "C40: t continues after the mark");
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
    // While the relay runs, the database is its own (C73).
    const busy = await runRelay(["export", "--db", `${dir}/old/relay.kv`]);
    assert.equal(busy.code, 1);
    assert.match(busy.stderr, /^relay: cannot export: the database .* is in use by another relay/);
    await relay.stop();
  }
  const file = `${dir}/backup.json`;
  const exported = await runRelay(["export", "--db", `${dir}/old/relay.kv`, "--out", file]);
  assert.equal(exported.code, 0, exported.stderr);
  assert.match(exported.stderr, /exported 1 queued items and 1 results/);
  assert.equal((await Deno.stat(file)).mode! & 0o777, 0o600);
  const imported = await runRelay(["import", file, "--db", `${dir}/new/relay.kv`]);
  assert.equal(imported.code, 0, imported.stderr);
  const again = await runRelay(["import", file, "--db", `${dir}/new/relay.kv`]);
  assert.equal(again.code, 1);
  assert.match(again.stderr, /use --force/);
  await using relay = await startRelayProcess(`${dir}/new`, { env });
  const get = (path: string) => fetch(`${relay.url}${path}`, { headers: { "x-auth-key": KEY } });
  assert.deepEqual(await (await get("/pull")).json(), ["queued link https://zhihu.com/q/9"]);
  const page = await (await get("/results")).json();
  assert.deepEqual(page.items.map((i: { c: string }) => i.c), ["a result"]);
  await relay.stop();
  await Deno.remove(dir, { recursive: true });
});

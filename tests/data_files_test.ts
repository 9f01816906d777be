/**
 * The modes of the relay's data files, with real relay processes started under a umask:
 * directories the relay creates are 0700, every file it writes 0600, and parents that
 * existed keep their mode.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { KEY, runRelay, startRelayProcess, withTempDir } from "./_helpers.ts";

/** Permission bits of `path`, as an octal string such as `"600"`. */
function mode(path: string): string {
  return (Deno.statSync(path).mode! & 0o777).toString(8);
}

/** Every file's mode in `dir` (not recursive), by name. */
function fileModes(dir: string): Record<string, string> {
  const modes: Record<string, string> = {};
  for (const entry of Deno.readDirSync(dir)) {
    if (entry.isFile) modes[entry.name] = mode(join(dir, entry.name));
  }
  return modes;
}

async function post(url: string, key: string, path: string, body: string): Promise<number> {
  const res = await fetch(`${url}${path}`, {
    method: "POST",
    body,
    headers: { "x-auth-key": key },
  });
  await res.body?.cancel();
  return res.status;
}

for (const umask of ["000", "022"]) {
  Deno.test(`data files under umask ${umask}: the relay creates its directories 0700 and writes every file 0600`, async () => {
    await withTempDir(async (base) => {
      Deno.chmodSync(base, 0o755);
      const data = join(base, "a", "b", "data");
      const db = join(data, "relay.kv");
      {
        // No RELAY_API_KEY: the relay writes api-key itself.
        await using relay = await startRelayProcess(data, { umask });
        const added = await runRelay(["keys", "add", "phone", "--scope", "submit", "--db", db], {
          umask,
        });
        assert.equal(added.code, 0, added.stderr);
        const main = Deno.readTextFileSync(join(data, "api-key")).trim();
        for (let i = 0; i < 20; i++) {
          assert.equal(
            await post(relay.url, main, "/submit", `item ${i} ${"x".repeat(5000)}`),
            200,
          );
          assert.equal(await post(relay.url, main, "/push", `result ${i}`), 200);
        }
        assert.equal(await post(relay.url, added.stdout.trim(), "/submit", "from the phone"), 200);
        assert.deepEqual(fileModes(data), {
          "api-key": "600",
          "app-id": "600",
          "keys.json": "600",
          "relay.kv": "600",
          "relay.kv-shm": "600",
          "relay.kv-wal": "600",
          "relay.kv.address": "600",
          "relay.kv.counters": "600",
          "relay.kv.lock": "600",
          "relay.kv.reserve": "600",
          "search.sqlite": "600",
          "search.sqlite-shm": "600",
          "search.sqlite-wal": "600",
        }, "while the relay runs");
        // SIGTERM writes the last use of the named key.
        assert.equal((await relay.stop("SIGTERM")).code, 0);
      }
      assert.deepEqual(fileModes(data), {
        "api-key": "600",
        "app-id": "600",
        "keys.json": "600",
        "keys.json.last-used": "600",
        "relay.kv": "600",
        "relay.kv.address": "600",
        "relay.kv.counters": "600",
        "relay.kv.lock": "600",
        "relay.kv.reserve": "600",
        "search.sqlite": "600",
      }, "after it stopped (no temporary files left)");
      assert.deepEqual(
        [join(base, "a"), join(base, "a", "b"), data].map(mode),
        ["700", "700", "700"],
        "each directory the relay created",
      );
      assert.equal(mode(base), "755", "an existing parent keeps its mode");

      // relay import: missing directories 0700, files 0600.
      const backup = join(base, "backup.json");
      const exported = await runRelay(
        ["export", "--db", db, "--include-secrets", "--out", backup],
        {
          umask,
        },
      );
      assert.equal(exported.code, 0, exported.stderr);
      assert.equal(mode(backup), "600");
      const moved = join(base, "private", "relay");
      const imported = await runRelay(["import", backup, "--db", join(moved, "relay.kv")], {
        umask,
      });
      assert.equal(imported.code, 0, imported.stderr);
      assert.deepEqual([join(base, "private"), moved].map(mode), ["700", "700"]);
      assert.equal(mode(base), "755");
      assert.deepEqual(fileModes(moved), {
        "api-key": "600",
        "keys.json": "600",
        "keys.json.last-used": "600",
        "relay.kv": "600",
        "relay.kv.counters": "600",
        "relay.kv.lock": "600",
      });
    });
  });
}

Deno.test("a database an older relay left 0644 is made 0600, and so are its -wal and -shm", async () => {
  await withTempDir(async (dir) => {
    const db = join(dir, "relay.kv");
    const kv = await Deno.openKv(db);
    await kv.set(["x"], 1);
    kv.close();
    Deno.chmodSync(db, 0o644);
    await using relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
    assert.equal(await post(relay.url, KEY, "/submit", "after the upgrade"), 200);
    assert.deepEqual(
      ["relay.kv", "relay.kv-wal", "relay.kv-shm"].map((name) => mode(join(dir, name))),
      ["600", "600", "600"],
    );
    await relay.stop();
  });
});

/**
 * The modes of the relay's data files, with real relay processes started under a umask:
 * directories the relay creates are 0700, every file it writes 0600, and parents that
 * existed keep their mode.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { eventually, KEY, runRelay, startRelayProcess, withTempDir } from "./_helpers.ts";

/** Permission bits of `path`, as an octal string such as `"600"`. */
function mode(path: string): string {
  return (Deno.statSync(path).mode! & 0o777).toString(8);
}

/** Every file's mode in `dir` (not recursive), by name. */
/**
 * A temporary file of an atomic write (`<name>.<uuid>.tmp`, renamed over `<name>` once
 * written): a listing of a running relay's directory may catch one, as the counters file is
 * written again every second.
 */
const ATOMIC_TEMPORARY = /\.[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.tmp$/;

/**
 * The mode of each file in `dir`, by name. With `running`, an atomic write's temporary file
 * is left out of the listing, its mode checked (0600) if it is still there when looked at.
 */
function fileModes(dir: string, options: { running?: boolean } = {}): Record<string, string> {
  const modes: Record<string, string> = {};
  for (const entry of Deno.readDirSync(dir)) {
    if (!entry.isFile) continue;
    const path = join(dir, entry.name);
    if (options.running === true && ATOMIC_TEMPORARY.test(entry.name)) {
      let found: string | undefined;
      try {
        found = mode(path);
      } catch (error) {
        if (!(error instanceof Deno.errors.NotFound)) throw error;
      }
      if (found !== undefined) assert.equal(found, "600", `${entry.name} while it is written`);
      continue;
    }
    modes[entry.name] = mode(path);
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
        // The search index writes its file once it has indexed the pushes, a moment later.
        await eventually(async () => {
          const res = await fetch(`${relay.url}/search?q=result`, {
            headers: { "x-auth-key": main },
          });
          const found = res.status === 200 && (await res.json()).items.length > 0;
          if (res.status !== 200) await res.body?.cancel();
          return found;
        }, "the pushed results in the search index");
        assert.deepEqual(fileModes(data, { running: true }), {
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

/**
 * Where client commands find the relay and its key (docs/cli/commands.md, "Finding the relay and the key"): on the
 * relay's machine, the service's data directory without flags; on a laptop, the config
 * file that `relay login` writes; and flag > environment > config file > default.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { REFUSED_URL, runCli, runRelay, startRelayProcess, withTempDir } from "../_helpers.ts";

const KEY = "config-test-key-0123456789";

Deno.test("client commands on the NAS find the service's data in the system data directory when ./data has none", async () => {
  await withTempDir(async (dir) => {
    const system = join(dir, "var-lib-relay");
    const cwd = join(dir, "home");
    await Deno.mkdir(cwd);
    // The service made its key and database there; this shell is somewhere else.
    await using relay = await startRelayProcess(system);
    const env = { RELAY_URL: relay.url };
    // The test entry script takes the service's data directory as its first argument.
    const onTheNas = `--system-data-dir=${system}`;
    const peek = await runRelay([onTheNas, "peek"], { env, cwd });
    assert.equal(peek.code, 0, peek.stderr);
    assert.equal(peek.stderr, "relay: nothing queued\n");
    const added = await runRelay([onTheNas, "keys", "add", "phone", "--scope", "submit"], {
      env,
      cwd,
    });
    assert.equal(added.code, 0, added.stderr);
    assert.match(added.stderr, new RegExp(`added key "phone" to ${join(system, "keys.json")};`));
    const listed = await runRelay([onTheNas, "keys", "list"], { env, cwd });
    assert.equal(listed.stderr, `relay: 1 key in ${join(system, "keys.json")}\n`);
    assert.match(listed.stdout, /^phone +submit /m);

    // A database in ./data wins: the command means the relay of this folder.
    await Deno.mkdir(join(cwd, "data"));
    await Deno.writeTextFile(join(cwd, "data", "relay.kv"), "");
    await Deno.writeTextFile(join(cwd, "data", "api-key"), "the-local-relays-key-000000\n");
    const local = await runRelay([onTheNas, "peek"], { env, cwd });
    assert.equal(local.code, 3, "the local key is not the service's");
    const localKeys = await runRelay([onTheNas, "keys", "list"], { env, cwd });
    assert.equal(
      localKeys.stderr,
      `relay: no keys file at ${join("data", "keys.json")} ` +
        "(add a key with: relay keys add <name> --scope …)\n",
    );
    await relay.stop();
  });
});

Deno.test("relay keys list names the file it read, with no keys or none yet", async () => {
  await withTempDir(async (dir) => {
    const keysFile = join(dir, "keys.json");
    const none = await runCli(["keys", "list", "--keys-file", keysFile]);
    assert.equal(none.code, 0);
    assert.equal(none.stdout, "");
    assert.equal(
      none.stderr,
      `relay: no keys file at ${keysFile} (add a key with: relay keys add <name> --scope …)\n`,
    );
    await Deno.writeTextFile(keysFile, JSON.stringify({ keys: [] }));
    const empty = await runCli(["keys", "list", "--keys-file", keysFile]);
    assert.equal(empty.stderr, `relay: no keys in ${keysFile}\n`);
    const json = await runCli(["keys", "list", "--json", "--keys-file", keysFile]);
    assert.equal(json.stdout, "[]\n");
  });
});

Deno.test("relay login checks the key, saves URL and key in a 0600 config file, and later commands use it (flag > env > file)", async () => {
  await withTempDir(async (dir) => {
    await using relay = await startRelayProcess(join(dir, "data"), {
      env: { RELAY_API_KEY: KEY },
    });
    const config = join(dir, "xdg");
    const file = join(config, "relay", "config");
    const base = { XDG_CONFIG_HOME: config };
    const exists = () => Deno.stat(file).then(() => true, () => false);

    // A key the relay refuses is not saved: exit 3.
    const wrong = await runCli(["login", "--url", relay.url], {
      env: base,
      stdin: "not-the-key\n",
    });
    assert.equal(wrong.code, 3, wrong.stderr);
    assert.match(wrong.stderr, /refused the API key \(401/);
    assert.equal(await exists(), false);
    // No key at all: a usage error.
    const none = await runCli(["login", "--url", relay.url], { env: base, stdin: "" });
    assert.equal(none.code, 2);
    assert.equal(await exists(), false);
    // An unreachable relay: exit 1, nothing saved.
    const dead = REFUSED_URL;
    const down = await runCli(["login", "--url", dead], { env: base, stdin: KEY });
    assert.equal(down.code, 1);
    assert.equal(await exists(), false);

    // The right key, from stdin, under a umask that would leave the file readable by all.
    const ok = await runRelay(["login", "--url", relay.url], {
      env: base,
      stdin: `${KEY}\n`,
      umask: "000",
    });
    assert.equal(ok.code, 0, ok.stderr);
    assert.equal(ok.stdout, "");
    assert.ok(!ok.stderr.includes(KEY));
    assert.match(ok.stderr, new RegExp(`accepted the key; saved both in ${file}\\n$`));
    assert.equal((await Deno.stat(file)).mode! & 0o777, 0o600);
    assert.equal((await Deno.stat(join(config, "relay"))).mode! & 0o777, 0o700);
    assert.equal(await Deno.readTextFile(file), `RELAY_URL=${relay.url}\nRELAY_API_KEY=${KEY}\n`);

    // No flags and no environment: the config file is enough.
    await fetch(`${relay.url}/push`, {
      method: "POST",
      headers: { "x-auth-key": KEY },
      body: "saved",
    }).then((res) => res.body?.cancel());
    const results = await runCli(["results"], { env: base });
    assert.equal(results.code, 0, results.stderr);
    assert.match(results.stdout, /\tsaved\n$/);
    // The environment wins over the file, and a flag over the environment.
    const envUrl = await runCli(["peek"], {
      env: { ...base, RELAY_URL: dead, RELAY_API_KEY: KEY },
    });
    assert.equal(envUrl.code, 1);
    assert.match(envUrl.stderr, /Cannot reach the relay at http:\/\/127\.0\.0\.1/);
    const flagUrl = await runCli(["peek", "--url", relay.url], {
      env: { ...base, RELAY_URL: dead },
    });
    assert.equal(flagUrl.code, 0, flagUrl.stderr);
    const envKey = await runCli(["peek"], { env: { ...base, RELAY_API_KEY: "other-key" } });
    assert.equal(envKey.code, 3);
    const keyFile = join(dir, "key.txt");
    await Deno.writeTextFile(keyFile, `${KEY}\n`);
    const flagKey = await runCli(["peek", "--api-key-file", keyFile], {
      env: { ...base, RELAY_API_KEY: "other-key" },
    });
    assert.equal(flagKey.code, 0, flagKey.stderr);

    // Logging in again (key from the environment) keeps the file's other lines.
    await Deno.writeTextFile(file, `# mine\nOTHER=1\n${await Deno.readTextFile(file)}`);
    const again = await runCli(["login"], {
      env: { ...base, RELAY_URL: relay.url, RELAY_API_KEY: KEY },
    });
    assert.equal(again.code, 0, again.stderr);
    assert.equal(
      await Deno.readTextFile(file),
      `# mine\nOTHER=1\nRELAY_URL=${relay.url}\nRELAY_API_KEY=${KEY}\n`,
    );
    await relay.stop();
  });
});

Deno.test("a key saved by relay login is sent only to the relay it was saved for", async () => {
  await withTempDir(async (dir) => {
    // Another server on this machine, recording every key it is sent.
    const seen: (string | null)[] = [];
    const other = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (req) => {
      seen.push(req.headers.get("x-auth-key"));
      return new Response(null, { status: 204 });
    });
    try {
      const config = join(dir, "xdg");
      await Deno.mkdir(join(config, "relay"), { recursive: true });
      await Deno.writeTextFile(
        join(config, "relay", "config"),
        `RELAY_URL=${REFUSED_URL}\nRELAY_API_KEY=${KEY}\n`,
      );
      const otherUrl = `http://127.0.0.1:${other.addr.port}`;
      for (const args of [["peek", "--url", otherUrl], ["peek"]]) {
        const run = await runRelay(args, {
          env: { XDG_CONFIG_HOME: config, ...(args.length === 1 ? { RELAY_URL: otherUrl } : {}) },
          cwd: dir,
        });
        assert.equal(run.code, 2, run.stderr);
        assert.match(run.stderr, /is never sent to another relay/);
      }
      assert.deepEqual(seen, []);
    } finally {
      await other.shutdown();
    }
  });
});

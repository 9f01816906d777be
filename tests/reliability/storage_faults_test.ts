/**
 * Reliability: storage faults with real file systems (docs/faults.md, "Storage faults").
 * A full disk is a small tmpfs filled up; a read-only one is a loop-mounted ext4 image that
 * the kernel remounts read-only after an error (as it does after real disk errors); a hard
 * link is `ln`; damaged files are a truncated database, pages overwritten with random bytes
 * and a write-ahead log with a damaged frame. Tests that mount need root: they are skipped,
 * with a line saying why, where mounting is not possible.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  assertProblem,
  eventually,
  KEY,
  printedLines,
  relayCall,
  type RelayProcess,
  runCli,
  runRelay,
  startRelayProcess,
  withTempDir,
} from "../_helpers.ts";
import { createApp } from "../../src/server/app.ts";
import { Logger } from "../../src/server/log.ts";
import { createStore } from "../../src/store/store.ts";
import {
  errorTrigger,
  fillDisk,
  freeBytes,
  mountExt4,
  mountTmpfs,
  NO_MOUNT,
  randomContent,
  sh,
} from "./_mounts.ts";

/** `/health`'s status and body. */
async function health(url: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${url}/health`);
  return { status: res.status, body: await res.json() };
}

/**
 * Starts the relay and expects it to refuse: returns its exit code and standard error. A
 * relay that starts listening instead is stopped and the test fails.
 */
/** The one line of a start {@linkcode expectRefusal} expects, which must exit with 2. */
async function refusalLine(
  dir: string,
  options: { args?: string[]; db?: string } = {},
): Promise<string> {
  const refused = await expectRefusal(dir, options);
  assert.equal(refused.code, 2);
  const lines = refused.stderr.trim().split("\n");
  assert.equal(lines.length, 1, refused.stderr);
  return lines[0]!;
}

async function expectRefusal(
  dir: string,
  options: { args?: string[]; db?: string } = {},
): Promise<{ code: number; stderr: string }> {
  let relay: RelayProcess;
  try {
    relay = await startRelayProcess(dir, {
      env: { RELAY_API_KEY: KEY },
      args: [...(options.db === undefined ? [] : ["--db", options.db]), ...(options.args ?? [])],
    });
  } catch (error) {
    const match = /^relay exited with (\d+) before listening:\n([\s\S]*)$/.exec(
      (error as Error).message,
    );
    assert.ok(match, String(error));
    return { code: Number(match[1]), stderr: match[2]! };
  }
  await relay.stop();
  assert.fail(`the relay started on a database it should refuse: ${relay.stdout.join("\n")}`);
}

Deno.test({
  name:
    "a full disk (tmpfs): 507 with Retry-After, /health 503 'disk full', pull, ack and clear still work, and it recovers by itself when space returns",
  ignore: NO_MOUNT !== undefined,
  async fn() {
    await using disk = await mountTmpfs("8m");
    await using relay = await startRelayProcess(disk.dir, { env: { RELAY_API_KEY: KEY } });
    const call = relayCall(relay.url);
    for (let i = 0; i < 3; i++) {
      const res = await call("/submit", { method: "POST", body: `before ${i}` });
      assert.equal(res.status, 200, await res.text());
    }
    // Another program takes all but 300 KiB of the disk.
    const filler = `${disk.dir}/filler`;
    await Deno.writeFile(filler, new Uint8Array(freeBytes(disk.dir) - 300 * 1024));

    let refused: Response | undefined;
    for (let i = 0; i < 40 && refused === undefined; i++) {
      const res = await call("/submit", { method: "POST", body: randomContent(60_000) });
      if (res.status === 200) await res.body?.cancel();
      else refused = res;
    }
    assert.ok(refused, "a submit was refused");
    assert.equal(refused.headers.get("retry-after"), "30");
    assert.match(await assertProblem(refused, 507), /^Cannot submit: the relay's disk is full\./);
    const push = await call("/push", { method: "POST", body: "a result" });
    assert.equal(push.headers.get("retry-after"), "30");
    assert.match(await assertProblem(push, 507), /^Cannot push: the relay's disk is full\./);
    const h = await health(relay.url);
    assert.equal(h.status, 503);
    assert.deepEqual({ ...h.body, ts: 0 }, { ok: false, ts: 0, db: "error", reason: "disk full" });
    assert.equal(typeof h.body.ts, "number");

    // What frees room still works on the full disk: a leased pull and its ack, a pull, clear.
    const leased = await call("/pull?lease=60&limit=1");
    assert.equal(leased.status, 200);
    const [item] = await leased.json() as Array<{ id: string }>;
    const acked = await call("/ack", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ ids: [item!.id] }),
    });
    assert.deepEqual(await acked.json(), { acked: 1, unknown: [] });
    const pulled = await call("/pull");
    assert.equal(pulled.status, 200);
    assert.ok((await pulled.json() as string[]).length >= 2);
    const cleared = await call("/clear", { method: "POST" });
    assert.equal(cleared.status, 200, await cleared.text());

    // Space returns: the next submits succeed by themselves (no /health poll needed).
    await Deno.remove(filler);
    await eventually(async () => {
      const res = await call("/submit", { method: "POST", body: `after ${crypto.randomUUID()}` });
      await res.body?.cancel();
      return res.status === 200;
    }, "a submit to succeed once space returned");
    await eventually(async () => (await health(relay.url)).status === 200, "/health to be 200");
    assert.deepEqual(
      { ...(await health(relay.url)).body, ts: 0 },
      { ok: true, ts: 0, db: "connected" },
    );
    assert.ok(relay.stderr.some((line) => line.includes("relay: storage: disk full")));
  },
});

Deno.test({
  name:
    "a full disk without the reserve: a pull is refused with 507 too, saying the room for pulls is used up, and nothing is lost",
  ignore: NO_MOUNT !== undefined,
  async fn() {
    await using disk = await mountTmpfs("4m");
    await using relay = await startRelayProcess(disk.dir, { env: { RELAY_API_KEY: KEY } });
    const call = relayCall(relay.url);
    assert.equal((await call("/submit", { method: "POST", body: "kept" })).status, 200);
    // The reserve is gone and another program takes every byte left.
    await Deno.remove(`${disk.dir}/relay.kv.reserve`);
    await fillDisk(disk.dir);
    const submit = await call("/submit", { method: "POST", body: randomContent(20_000) });
    assert.match(await assertProblem(submit, 507), /^Cannot submit: the relay's disk is full\./);
    const pull = await call("/pull");
    assert.equal(pull.headers.get("retry-after"), "30");
    assert.match(
      await assertProblem(pull, 507),
      /^Cannot pull: the relay's disk is full, and the room it sets aside for pulls, acks and clears is used up/,
    );
    // The refused pull handed out nothing and removed nothing.
    await Deno.remove(`${disk.dir}/filler`);
    await eventually(async () => {
      const res = await call("/pull");
      if (res.status !== 200) {
        await res.body?.cancel();
        return false;
      }
      assert.deepEqual(await res.json(), ["kept"]);
      return true;
    }, "the pull to work once space returned");
  },
});

Deno.test({
  name:
    "a file system remounted read-only (ext4 image): writes 503 with Retry-After, /health 503 'read-only file system', reads still answer",
  ignore: NO_MOUNT !== undefined,
  async fn() {
    await using disk = await mountExt4();
    const trigger = await errorTrigger(disk, "the read-only case");
    if (trigger === undefined) return;
    await using relay = await startRelayProcess(disk.dir, { env: { RELAY_API_KEY: KEY } });
    const call = relayCall(relay.url);
    const before = await call("/submit", { method: "POST", body: "kept" });
    assert.equal(before.status, 200);
    // The kernel's answer to a disk error with errors=remount-ro. `mount -o remount,ro` is
    // refused while the relay has the database open for writing.
    await Deno.writeTextFile(trigger, "relay test");
    const options = (await sh("findmnt", "-n", "-o", "OPTIONS", disk.dir)).stdout;
    assert.match(options, /emergency_ro|(^|,)ro(,|$)/);

    const submit = await call("/submit", { method: "POST", body: "refused" });
    assert.equal(submit.headers.get("retry-after"), "60");
    assert.match(await assertProblem(submit, 503), /^Cannot submit: the relay's disk is read-only/);
    const pull = await call("/pull");
    assert.match(await assertProblem(pull, 503), /^Cannot pull: the relay's disk is read-only/);
    const h = await health(relay.url);
    assert.equal(h.status, 503);
    assert.deepEqual(
      { ...h.body, ts: 0 },
      { ok: false, ts: 0, db: "error", reason: "read-only file system" },
    );
    const peek = await call("/peek?queue=general");
    assert.equal(peek.status, 200);
    assert.deepEqual(
      (await peek.json()).queues.general.map((i: { content: string }) => i.content),
      ["kept"],
    );
  },
});

Deno.test("a database whose pages were overwritten: writes 503 'damaged', /health 503 until restart, and the relay refuses to start on it (exit 2)", async () => {
  await withTempDir(async (dir) => {
    const path = `${dir}/relay.kv`;
    {
      await using relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
      const call = relayCall(relay.url);
      for (let i = 0; i < 60; i++) {
        const res = await call(`/submit?queue=${["qa", "article", "general"][i % 3]}`, {
          method: "POST",
          body: `item ${i} ${"x".repeat(3000)}`,
        });
        assert.equal(res.status, 200);
      }
      assert.equal((await relay.stop()).code, 0); // SQLite writes its log into the file
    }
    // Random bytes over every other page but the first two.
    const file = await Deno.open(path, { read: true, write: true });
    const size = (await file.stat()).size;
    for (let at = 8192; at + 4096 <= size; at += 8192) {
      await file.seek(at + 100, Deno.SeekMode.Start);
      await file.write(crypto.getRandomValues(new Uint8Array(2000)));
    }
    file.close();

    // The store on that file, as a relay that had not read it yet would see it.
    const kv = await Deno.openKv(path);
    try {
      const store = createStore(kv, { path });
      const app = createApp({ store, apiKey: KEY, logger: new Logger({ write: () => {} }) });
      const submit = await app.request("/submit", {
        method: "POST",
        headers: { "x-auth-key": KEY },
        body: "one more",
      });
      assert.equal(submit.headers.get("retry-after"), "60");
      assert.match(
        await assertProblem(submit, 503),
        /^Cannot submit: the relay's database is damaged\. Its operator must restore it/,
      );
      const res = await app.request("/health");
      assert.equal(res.status, 503);
      const body = await res.json();
      assert.equal(body.ok, false);
      assert.equal(body.db, "error");
      assert.match(body.reason, /^database damaged \(.+\)$/);
    } finally {
      kv.close();
    }

    const line = await refusalLine(dir);
    assert.match(line, /^relay: the database ".*relay\.kv" is damaged \(.+\): move it/);
  });
});

Deno.test("a hard link to the database: a second relay on the other name refuses (exit 2), so no acknowledged write is lost", async () => {
  await withTempDir(async (dir) => {
    await using first = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
    const call = relayCall(first.url);
    const before = await call("/submit", { method: "POST", body: "through the first name" });
    assert.equal(before.status, 200);
    await Deno.link(`${dir}/relay.kv`, `${dir}/linked.kv`);

    const line = await refusalLine(dir, { db: `${dir}/linked.kv` });
    assert.match(line, /^relay: the database ".*linked\.kv" has 2 names \(hard links\)/);
    assert.match(line, /find \/ -xdev -samefile /);
    // The first relay is untouched, and a restart on either name is refused too.
    assert.equal((await call("/submit", { method: "POST", body: "still" })).status, 200);
    assert.equal((await first.stop()).code, 0);
    assert.equal((await expectRefusal(dir)).code, 2);
    const exported = await runCli(["export", "--db", `${dir}/relay.kv`]);
    assert.equal(exported.code, 2);
    assert.match(exported.stderr, /^relay: cannot export: the database .* has 2 names/);
    // With the extra name gone, the relay starts and has both items.
    await Deno.remove(`${dir}/linked.kv`);
    await using again = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
    const peek = await (await relayCall(again.url)("/peek?queue=general")).json();
    assert.deepEqual(
      peek.queues.general.map((i: { content: string }) => i.content),
      ["through the first name", "still"],
    );
  });
});

Deno.test("a directory where the database should be: one line saying so (exit 2), not a hard link or a failing disk", async () => {
  await withTempDir(async (dir) => {
    // SQLite calls opening a directory a `disk I/O error`, and a directory has two links.
    await Deno.mkdir(`${dir}/relay.kv`);
    const line = await refusalLine(dir);
    assert.match(
      line,
      /^relay: cannot open the database ".*relay\.kv": it is a directory, not a database file$/,
    );
  });
});

Deno.test("a database emptied to zero bytes: the relay refuses to start (exit 2, one line), and relay import of a backup brings it back", async () => {
  await withTempDir(async (dir) => {
    const db = `${dir}/relay.kv`;
    {
      await using relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
      const call = relayCall(relay.url);
      for (let i = 0; i < 5; i++) {
        assert.equal((await call("/submit", { method: "POST", body: `item ${i}` })).status, 200);
      }
      assert.equal((await relay.stop()).code, 0);
    }
    const exported = await runCli(["export", "--db", db, "--out", `${dir}/backup.json`]);
    assert.equal(exported.code, 0, exported.stderr);
    await Deno.truncate(db, 0);
    for (const f of [`${db}-wal`, `${db}-shm`]) await Deno.remove(f).catch(() => {});

    const line = await refusalLine(dir);
    assert.match(
      line,
      /^relay: the database ".*relay\.kv" holds less than this relay wrote to it \(general\.accepted 5 → 0\)/,
    );
    assert.match(line, /relay import --force/);

    // The documented recovery: import the latest backup, then start.
    const imported = await runCli(["import", "--force", `${dir}/backup.json`, "--db", db]);
    assert.equal(imported.code, 0, imported.stderr);
    await using relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
    const peek = await (await relayCall(relay.url)("/peek?queue=general")).json();
    assert.equal(peek.queues.general.length, 5);
  });
});

Deno.test("a damaged write-ahead log that drops acknowledged writes: the relay refuses to start instead of serving what is left", async () => {
  await withTempDir(async (dir) => {
    const db = `${dir}/relay.kv`;
    const relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
    const call = relayCall(relay.url);
    for (let i = 0; i < 20; i++) {
      const res = await call("/submit", { method: "POST", body: `acknowledged ${i}` });
      assert.equal(res.status, 200);
    }
    // The counters file catches up within moments of the commits it counts.
    await eventually(
      async () => {
        try {
          const file = JSON.parse(await Deno.readTextFile(`${db}.counters`));
          return file.counters["general.accepted"] === 20;
        } catch {
          return false;
        }
      },
      "the counters file to count 20 items",
      5000,
    );
    await relay.stop("SIGKILL"); // the log is not written into the database on a kill
    const wal = await Deno.open(`${db}-wal`, { read: true, write: true });
    const size = (await wal.stat()).size;
    assert.ok(size > 20 * 4096, `the log holds the commits (${size} bytes)`);
    await wal.seek(Math.floor(size / 2), Deno.SeekMode.Start);
    await wal.write(new Uint8Array(64).fill(0xff));
    wal.close();

    const refused = await expectRefusal(dir);
    assert.equal(refused.code, 2);
    assert.match(
      refused.stderr.trim(),
      /^relay: the database ".*relay\.kv" holds less than this relay wrote to it \(general\.accepted 20 → \d+/,
    );
    // Deleting the counters file is the documented way to accept the loss.
    await Deno.remove(`${db}.counters`);
    await using accepted = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
    const peek = await (await relayCall(accepted.url)("/peek?queue=general")).json();
    assert.ok(peek.queues.general.length < 20, "the log lost writes: the refusal was right");
  });
});

Deno.test("--backup-every and --backup-keep: a running relay writes backups into backups/ (0700, files 0600) and keeps the newest N", async () => {
  await withTempDir(async (dir) => {
    await using relay = await startRelayProcess(dir, {
      env: { RELAY_API_KEY: KEY, RELAY_BACKUP_KEEP: "2" },
      args: ["--backup-every", "1s"],
    });
    const call = relayCall(relay.url);
    assert.equal((await call("/submit", { method: "POST", body: "backed up" })).status, 200);
    assert.equal((await call("/push", { method: "POST", body: "a result" })).status, 200);
    const backups = `${dir}/backups`;
    const list = () => {
      try {
        return [...Deno.readDirSync(backups)].map((e) => e.name).sort();
      } catch {
        return [];
      }
    };
    // Three backups after the submit: the first two of them are gone by then.
    const seen = new Set<string>();
    await eventually(
      () => {
        for (const name of list()) seen.add(name);
        return seen.size >= 4;
      },
      "four backups to be written",
      15_000,
    );
    await eventually(() => list().length === 2, "two backups kept");
    const names = list();
    for (const name of names) assert.match(name, /^relay-backup-\d{8}-\d{6}\.json$/);
    assert.equal((await Deno.stat(backups)).mode! & 0o777, 0o700);
    const newest = `${backups}/${names.at(-1)}`;
    assert.equal((await Deno.stat(newest)).mode! & 0o777, 0o600);
    const backup = JSON.parse(await Deno.readTextFile(newest));
    assert.equal(backup.format, "content-relay-backup");
    assert.deepEqual(backup.queues.general.map((i: { content: string }) => i.content), [
      "backed up",
    ]);
    assert.deepEqual(backup.results.map((r: { content: string }) => r.content), ["a result"]);
    assert.equal(backup.api_key, undefined, "no main key in automatic backups");
    assert.ok(relay.stdout.some((l) => /relay: backup written to .*relay-backup-/.test(l)));
  });
});

Deno.test("a backup that cannot be written is logged and the relay keeps serving", async () => {
  await withTempDir(async (dir) => {
    // Something that is not a folder where the backups go: even root cannot write into it.
    await Deno.writeTextFile(`${dir}/backups`, "not a folder");
    await using relay = await startRelayProcess(dir, {
      env: { RELAY_API_KEY: KEY },
      args: ["--backup-every", "1s"],
    });
    await eventually(
      () => printedLines(relay).some((l) => l.includes("automatic backup failed")),
      "the failed backup to be logged",
    );
    assert.equal(
      (await relayCall(relay.url)("/submit", { method: "POST", body: "x" })).status,
      200,
    );
  });
});

Deno.test("--backup-every and --backup-keep refuse values out of range with one line and exit 2", async () => {
  for (
    const [args, env, says] of [
      [
        ["--backup-every", "500ms"],
        {},
        /^relay: invalid --backup-every "500ms": must be a duration from 1s to 720h/,
      ],
      [[], { RELAY_BACKUP_EVERY: "often" }, /^relay: invalid RELAY_BACKUP_EVERY "often"/],
      [
        ["--backup-keep", "0"],
        {},
        /^relay: invalid --backup-keep "0": must be a whole number from 1 to 1000/,
      ],
    ] as const
  ) {
    const out = await runRelay(["serve", "--port", "0", ...args], { env: { ...env } });
    assert.equal(out.code, 2, out.stderr);
    assert.match(out.stderr, says);
  }
});

Deno.test("a database a later relay wrote (a later data format): the relay refuses to start (exit 2, one line) and changes nothing", async () => {
  await withTempDir(async (dir) => {
    const db = `${dir}/relay.kv`;
    {
      await using relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
      const call = relayCall(relay.url);
      assert.equal((await call("/submit", { method: "POST", body: "kept" })).status, 200);
      assert.equal((await relay.stop()).code, 0);
    }
    {
      const kv = await Deno.openKv(db);
      assert.equal((await kv.get(["format"])).value, 3, "this relay's format, written");
      await kv.set(["format"], 4);
      kv.close();
    }
    const line = await refusalLine(dir);
    assert.match(
      line,
      /^relay: the database was written by a later relay \(its data format is 4; this relay reads up to 3\): run that relay again, or move ".*relay\.kv"/,
    );
    // Nor does a backup read it: exit 2, one line.
    const exported = await runCli(["export", "--db", db, "--out", `${dir}/backup.json`]);
    assert.equal(exported.code, 2);
    assert.match(
      exported.stderr,
      /^relay: cannot export: the database was written by a later relay \(its data format is 4; this relay reads up to 3\)\n/,
    );
    const kv = await Deno.openKv(db);
    assert.equal((await kv.get(["format"])).value, 4);
    kv.close();
  });
});

/**
 * Reliability: a database file with pages overwritten by random bytes, as a failing SD card
 * leaves it (docs/faults.md, "A damaged database"). The relay must refuse to start on it
 * with exit code 2 and the steps that recover, and stop with exit code 2 when it finds the
 * damage while serving: never die in Deno KV (exit 1), which systemd restarts in a loop.
 *
 * @module
 */

import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import {
  assertProblem,
  KEY,
  relayCall,
  startRelayProcess,
  within,
  withTempDir,
} from "../_helpers.ts";
import { createApp } from "../../src/server/app.ts";
import { Logger } from "../../src/server/log.ts";
import { createStore } from "../../src/store/store.ts";

/** A log that keeps nothing. */
const QUIET = new Logger({ write: () => {} });

/** SQLite's page size for a Deno KV file. */
const PAGE_BYTES = 4096;

/** The pages of `path` that hold a table or an index, by name (SQLite's `dbstat`). */
function pagesInUse(path: string): Array<{ page: number; name: string; type: string }> {
  const db = new DatabaseSync(path, { readOnly: true });
  try {
    return (db.prepare("SELECT pageno, name, pagetype FROM dbstat").all() as Array<
      { pageno: number; name: string; pagetype: string }
    >).map((row) => ({ page: row.pageno, name: row.name, type: row.pagetype }));
  } finally {
    db.close();
  }
}

/** Overwrites each of `pages` (numbered from 1) of `path` with random bytes. */
async function overwritePages(path: string, pages: readonly number[]): Promise<void> {
  const file = await Deno.open(path, { read: true, write: true });
  try {
    for (const page of pages) {
      await file.seek((page - 1) * PAGE_BYTES, Deno.SeekMode.Start);
      await file.write(crypto.getRandomValues(new Uint8Array(PAGE_BYTES)));
    }
  } finally {
    file.close();
  }
}

/** A stopped relay's database in `dir` with items of `bytes` each in every queue, and results. */
async function fillDatabase(dir: string, bytes: number): Promise<void> {
  await using relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
  const call = relayCall(relay.url);
  for (let i = 0; i < 30; i++) {
    const queue = ["qa", "article", "general"][i % 3];
    const res = await call(`/submit?queue=${queue}`, {
      method: "POST",
      body: `item ${i} ${"x".repeat(bytes)}`,
    });
    assert.equal(res.status, 200, await res.text());
    const pushed = await call("/push", { method: "POST", body: `result ${i} ${"y".repeat(2000)}` });
    assert.equal(pushed.status, 200, await pushed.text());
  }
  // A clean stop writes the log into the database file, where the pages are overwritten.
  assert.equal((await relay.stop()).code, 0);
}

/** Starts the relay on `dir` and expects it to exit before listening; its code and stderr. */
async function refusedStart(dir: string): Promise<{ code: number; stderr: string }> {
  try {
    const relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
    await relay.stop();
  } catch (error) {
    const match = /^relay exited with (\d+) before listening:\n([\s\S]*)$/.exec(
      (error as Error).message,
    );
    assert.ok(match, String(error));
    return { code: Number(match[1]), stderr: match[2]!.trim() };
  }
  assert.fail("the relay started on a database with damaged pages");
}

Deno.test("a database with three random 4 KiB pages overwritten: the relay refuses to start, every time, with exit code 2 and the steps that recover", async () => {
  await withTempDir(async (dir) => {
    const base = `${dir}/base`;
    await Deno.mkdir(base);
    await fillDatabase(base, 3000);
    const pages = pagesInUse(`${base}/relay.kv`).map((p) => p.page).filter((p) => p > 1);
    for (let trial = 0; trial < 8; trial++) {
      const work = `${dir}/trial-${trial}`;
      await Deno.mkdir(work);
      for (const file of ["relay.kv", "relay.kv.counters"]) {
        await Deno.copyFile(`${base}/${file}`, `${work}/${file}`);
      }
      const chosen = new Set<number>();
      while (chosen.size < 3) chosen.add(pages[Math.floor(Math.random() * pages.length)]!);
      await overwritePages(`${work}/relay.kv`, [...chosen]);

      const refused = await refusedStart(work);
      const what = `pages ${[...chosen].join(", ")}: ${refused.stderr}`;
      assert.equal(refused.code, 2, what);
      assert.equal(refused.stderr.split("\n").length, 1, what);
      assert.match(
        refused.stderr,
        /^relay: the database ".*relay\.kv" is damaged \(.+\): move it and its -wal and -shm files aside, then restore the latest backup with relay import/,
        what,
      );
    }
  });
});

Deno.test("a database damaged while the relay serves: the request answers 503, and the relay stops with exit code 2 and the steps that recover", async () => {
  await withTempDir(async (dir) => {
    // Items of two parts: their content is read from the file when asked for, not held.
    await fillDatabase(dir, 100_000);
    await using relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
    const values = pagesInUse(`${dir}/relay.kv`).filter((p) =>
      p.name === "kv" && p.type === "overflow"
    );
    assert.ok(values.length > 50, `values on overflow pages (${values.length})`);
    await overwritePages(`${dir}/relay.kv`, values.map((p) => p.page));

    const res = await relayCall(relay.url)("/peek?queue=qa");
    assert.equal(res.status, 503, await res.text());
    // A relay that goes on serving never exits: give up on it after a generous while.
    const status = await within(relay.child.status, 30_000);
    assert.equal(status?.code, 2, `still running or another exit: ${relay.stderr.join("\n")}`);
    assert.ok(
      relay.stderr.some((line) =>
        /^relay: the database ".*relay\.kv" is damaged \(.+\): move it and its -wal and -shm files aside, then restore the latest backup with relay import/
          .test(line)
      ),
      relay.stderr.join("\n"),
    );
  });
});

Deno.test("a value whose bytes were damaged inside a whole page: the request answers 503 'damaged', not 500", async () => {
  await withTempDir(async (dir) => {
    const path = `${dir}/relay.kv`;
    {
      const kv = await Deno.openKv(path);
      const app = createApp({ store: createStore(kv, { path }), apiKey: KEY, logger: QUIET });
      const res = await app.request("/submit", {
        method: "POST",
        headers: { "x-auth-key": KEY },
        body: "x".repeat(100_000),
      });
      assert.equal(res.status, 200, await res.text());
      kv.close();
    }
    // The pages stay whole (SQLite's check finds nothing); the values' encoding tags do not.
    const db = new DatabaseSync(path);
    db.prepare("UPDATE kv SET v_encoding = 77 WHERE length(v) > 30000").run();
    db.close();

    const kv = await Deno.openKv(path);
    try {
      const app = createApp({ store: createStore(kv, { path }), apiKey: KEY, logger: QUIET });
      const res = await app.request("/peek?queue=general", { headers: { "x-auth-key": KEY } });
      assert.match(await assertProblem(res, 503), /^Cannot .*: the relay's database is damaged/);
      const health = await (await app.request("/health")).json();
      assert.match(health.reason, /^database damaged \(The value encoding 77 is unknown/);
    } finally {
      kv.close();
    }
  });
});

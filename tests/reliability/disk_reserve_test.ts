/**
 * Reliability: the room the relay sets aside for a full disk. Pulls and acks of large items
 * use it up; `/clear` must still work afterwards, since it is what lets the relay take new
 * items again without anyone freeing space. The disk is a real tmpfs, filled up. Needs root;
 * skipped, with a line saying why, where mounting is not possible.
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
  startRelayProcess,
} from "../_helpers.ts";
import { fillDisk, fillUntilRefused, mountTmpfs, NO_MOUNT, randomContent } from "./_mounts.ts";

const QUEUES = ["qa", "article", "general"] as const;

Deno.test({
  name:
    "a full disk after pulls of large items used up the room set aside: pulls get 507, and /clear still works",
  ignore: NO_MOUNT !== undefined,
  async fn() {
    await using disk = await mountTmpfs("64m");
    {
      await using relay = await startRelayProcess(disk.dir, { env: { RELAY_API_KEY: KEY } });
      const call = relayCall(relay.url);
      for (let i = 0; i < 60; i++) {
        const res = await call(`/submit?queue=${QUEUES[i % 3]}`, {
          method: "POST",
          body: randomContent(400_000),
        });
        assert.equal(res.status, 200, await res.text());
      }
      // A clean stop folds the write-ahead log into the database: every commit after the
      // restart needs new room on the disk.
      assert.equal((await relay.stop()).code, 0);
    }
    await using relay = await startRelayProcess(disk.dir, { env: { RELAY_API_KEY: KEY } });
    const call = relayCall(relay.url);
    await fillDisk(disk.dir);
    const submit = await call("/submit", { method: "POST", body: randomContent(20_000) });
    assert.match(await assertProblem(submit, 507), /^Cannot submit: the relay's disk is full\./);

    let refused: Response | undefined;
    let pulled = 0;
    for (let i = 0; i < 60 && refused === undefined; i++) {
      const res = await call(`/pull?queue=${QUEUES[i % 3]}&lease=60&limit=1`);
      if (res.status !== 200) {
        refused = res;
        break;
      }
      const [item] = await res.json() as Array<{ id: string }>;
      const acked = await call("/ack", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ ids: [item!.id] }),
      });
      if (acked.status !== 200) {
        refused = acked;
      } else {
        pulled++;
        await acked.body?.cancel();
      }
    }
    assert.ok(refused, `the room ran out (${pulled} items pulled and acknowledged)`);
    assert.match(
      await assertProblem(refused, 507),
      /^Cannot (pull|ack): the relay's disk is full, and the room it sets aside for pulls, acks and clears is used up/,
    );

    const cleared = await call("/clear", { method: "POST" });
    assert.equal(cleared.status, 200, await cleared.text());
    const stats = await (await call("/stats")).json();
    for (const queue of QUEUES) assert.equal(stats.queues[queue].depth, 0, queue);
  },
});

Deno.test({
  name: "an automatic backup is not written into the room a full disk left for pulls and acks",
  ignore: NO_MOUNT !== undefined,
  async fn() {
    await using disk = await mountTmpfs("8m");
    await using relay = await startRelayProcess(disk.dir, {
      env: { RELAY_API_KEY: KEY },
      args: ["--backup-every", "1s"],
    });
    const call = relayCall(relay.url);
    assert.equal(
      (await call("/submit?queue=general", { method: "POST", body: "kept" })).status,
      200,
    );
    await eventually(
      () => printedLines(relay).some((line) => line.includes("relay: backup written")),
      "a first backup",
    );
    // A backup being written when the disk filled up gives back its room when it fails.
    await fillUntilRefused(disk.dir, call);
    await eventually(
      () =>
        printedLines(relay).some((line) =>
          /automatic backup failed: the disk is full, and what room/.test(line)
        ),
      "a backup refused for the full disk",
    );
    const pulled = await call("/pull?queue=general");
    assert.equal(pulled.status, 200);
    assert.match(await pulled.text(), /kept/);
  },
});

Deno.test({
  name: "a relay started on a disk without room to open its database stops with one line saying so",
  ignore: NO_MOUNT !== undefined,
  async fn() {
    await using disk = await mountTmpfs("8m");
    {
      await using relay = await startRelayProcess(disk.dir, { env: { RELAY_API_KEY: KEY } });
      assert.equal((await relay.stop()).code, 0);
    }
    // SQLite needs room for the files beside the database (its log and the log's index),
    // which a clean stop removed.
    await fillDisk(disk.dir);
    await assert.rejects(
      () => startRelayProcess(disk.dir, { env: { RELAY_API_KEY: KEY } }),
      /relay exited with 2 before listening:\nrelay: cannot open the database "[^"]+": .+: the disk holding it is full \(\d+ bytes? free\)\n?$/,
    );
  },
});

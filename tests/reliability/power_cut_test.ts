/**
 * Reliability: what the relay writes must survive the file system failing right after, as in
 * a power cut. The failure is real: an ext4 image on a loop device whose journal the kernel
 * aborts on an error (`trigger_fs_error`), so whatever was not yet fsynced is gone once the
 * image is mounted again. Needs root; skipped, with a line saying why, where mounting is not
 * possible.
 *
 * @module
 */

import assert from "node:assert/strict";
import { eventually, KEY, relayCall, startRelayProcess } from "../_helpers.ts";
import { errorTrigger, mountExt4, NO_MOUNT, sh } from "./_mounts.ts";

Deno.test({
  name:
    "the api-key and app-id of a first start survive a file-system failure right after it: the next start serves the same key",
  ignore: NO_MOUNT !== undefined,
  async fn() {
    await using disk = await mountExt4();
    const trigger = await errorTrigger(disk, "the power-cut case");
    if (trigger === undefined) return;
    const data = `${disk.dir}/data`;
    const relay = await startRelayProcess(data);
    const key = (await Deno.readTextFile(`${data}/api-key`)).trim();
    const appId = (await Deno.readTextFile(`${data}/app-id`)).trim();
    assert.equal(key.length, 43);

    // The disk fails: nothing more reaches it, and what it had not been told to keep is lost.
    await Deno.writeTextFile(trigger, "relay test");
    await relay.stop("SIGKILL");
    const unmounted = await sh("umount", disk.dir);
    assert.equal(unmounted.code, 0, unmounted.stderr);
    const mounted = await sh("mount", "-o", "loop", disk.image, disk.dir);
    assert.equal(mounted.code, 0, mounted.stderr);

    assert.equal((await Deno.readTextFile(`${data}/api-key`)).trim(), key);
    assert.equal((await Deno.readTextFile(`${data}/app-id`)).trim(), appId);
    await using again = await startRelayProcess(data);
    assert.ok(again.stdout.some((line) => line === `relay: API key from ${data}/api-key`));
    const res = await relayCall(again.url)("/submit", {
      method: "POST",
      headers: { "x-auth-key": key },
      body: "with the key the phone was given",
    });
    assert.equal(res.status, 200, await res.text());
  },
});

Deno.test({
  name:
    "an automatic backup the relay logged as written survives a file-system failure right after it, whole",
  ignore: NO_MOUNT !== undefined,
  async fn() {
    await using disk = await mountExt4();
    const trigger = await errorTrigger(disk, "the power-cut case");
    if (trigger === undefined) return;
    const relay = await startRelayProcess(disk.dir, {
      env: { RELAY_API_KEY: KEY },
      args: ["--backup-every", "1s"],
    });
    const call = relayCall(relay.url);
    assert.equal((await call("/submit", { method: "POST", body: "backed up" })).status, 200);
    const written = /^relay: backup written to (\S+) \(1 queued items/;
    await eventually(
      () => relay.stdout.some((line) => written.test(line)),
      "a backup with the item to be written",
    );
    const path = written.exec(relay.stdout.find((line) => written.test(line))!)![1]!;

    await Deno.writeTextFile(trigger, "relay test");
    await relay.stop("SIGKILL");
    assert.equal((await sh("umount", disk.dir)).code, 0);
    assert.equal((await sh("mount", "-o", "loop", disk.image, disk.dir)).code, 0);

    const backup = JSON.parse(await Deno.readTextFile(path));
    assert.deepEqual(backup.queues.general.map((i: { content: string }) => i.content), [
      "backed up",
    ]);
  },
});

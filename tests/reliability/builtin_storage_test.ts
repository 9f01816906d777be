/**
 * Reliability: the built-in services (notes, blog, podcast) on a full disk answer as the API
 * does, 507 with `Retry-After` and a reason, never 500; so `POST /publish` reports a reason
 * a person can act on. The disk is a real tmpfs, filled up. Needs root; skipped, with a line
 * saying why, where mounting is not possible.
 *
 * @module
 */

import assert from "node:assert/strict";
import { assertProblem, eventually, KEY, relayCall, startRelayProcess } from "../_helpers.ts";
import { fillDisk, mountTmpfs, NO_MOUNT } from "./_mounts.ts";

Deno.test({
  name:
    "the built-in notes on a full disk: 507 with Retry-After and the reason, and POST /publish reports it",
  ignore: NO_MOUNT !== undefined,
  async fn() {
    await using disk = await mountTmpfs("8m");
    await using relay = await startRelayProcess(disk.dir, { env: { RELAY_API_KEY: KEY } });
    const call = relayCall(relay.url);
    const note = (title: string) =>
      call("/downstream/api/notes/import", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ title, content: "# A note\n\nKept as Markdown." }),
      });
    const before = await note("before");
    assert.equal(before.status, 200, await before.text());
    // The search index writes its file in the background once it has the note; a write it
    // failed on the full disk would give back the room it had taken, and the next note
    // would fit. So the disk is filled only once the note is found.
    await eventually(async () => {
      const res = await call("/search?q=before");
      const found = res.status === 200 && (await res.json()).items.length > 0;
      if (res.status !== 200) await res.body?.cancel();
      return found;
    }, "the note in the search index");

    await fillDisk(disk.dir);
    const refused = await note("on a full disk");
    assert.equal(
      refused.headers.get("retry-after"),
      "30",
      `${refused.status} ${await refused.clone().text()}`,
    );
    assert.match(
      await assertProblem(refused, 507),
      /^Cannot POST \/downstream\/api\/notes\/import: the relay's disk is full\./,
    );
    const published = await call("/publish", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ title: "On a full disk", content: "Text", targets: ["notes"] }),
    });
    const body = JSON.stringify(await published.json());
    assert.match(body, /507/, body);
    assert.doesNotMatch(body, /HTTP 500/, body);
  },
});

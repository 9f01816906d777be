/**
 * Reliability: the built-in services when the process has no file descriptor left, as when
 * every connection downloads an episode's audio (each download holds two: its connection and
 * the file). The answer must be 503 with `Retry-After`, never 500. The descriptors are used
 * up for real, by a child process (limited to 256) opening `/dev/null` until the kernel refuses,
 * so that the tests run beside this one keep theirs.
 *
 * @module
 */

import assert from "node:assert/strict";
import { withTempDir } from "../_helpers.ts";

/** A ready episode with `bytes` of audio in `dir`; its id. */
async function readyEpisode(dir: string, bytes: number): Promise<string> {
  const id = "20261123-114218-k3f9q2ab";
  await Deno.mkdir(`${dir}/podcast`, { recursive: true });
  const now = Date.now();
  const episode = {
    id,
    title: "Long listen",
    text: "Words.",
    created_at: now,
    state: "ready",
    chunks_total: 1,
    chunks_done: 1,
    bytes,
    duration_s: 1,
    finished_at: now,
  };
  await Deno.writeTextFile(`${dir}/podcast/${id}.json`, JSON.stringify(episode));
  await Deno.writeFile(`${dir}/podcast/${id}.mp3`, new Uint8Array(bytes));
  return id;
}

Deno.test({
  name:
    "an episode's audio asked for when no file descriptor is left: 503 with Retry-After and Connection: close, never 500",
  async fn() {
    await withTempDir(async (dir) => {
      const id = await readyEpisode(dir, 4096);
      // A child process with a low limit: the descriptors it uses up are its own.
      const child = new URL("./_descriptors_child.ts", import.meta.url).pathname;
      const config = new URL("../deno.json", import.meta.url).pathname;
      const out = await new Deno.Command("sh", {
        args: [
          "-c",
          `ulimit -n 256 && exec "${Deno.execPath()}" run -A --config "$0" "$1" "$2" "$3"`,
          config,
          child,
          dir,
          id,
        ],
        stdout: "piped",
        stderr: "piped",
      }).output();
      const stderr = new TextDecoder().decode(out.stderr);
      assert.ok(out.success, stderr);
      const seen = JSON.parse(new TextDecoder().decode(out.stdout).trim().split("\n").pop()!);
      assert.equal(seen.first, 200);
      assert.equal(seen.refused.status, 503);
      assert.equal(seen.refused.headers["content-type"], "application/problem+json");
      assert.equal(seen.refused.headers["retry-after"], "5");
      assert.equal(seen.refused.headers["connection"], "close");
      assert.match(
        JSON.parse(seen.refused.body).detail,
        /^Cannot GET \/podcast\/20261123-114218-k3f9q2ab\.mp3: the relay has as many files open as it may right now; try again shortly$/,
      );
      assert.deepEqual(seen.again, { status: 200, bytes: 4096 });
    });
  },
});

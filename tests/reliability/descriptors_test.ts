/**
 * Reliability: the built-in services when the process has no file descriptor left, as when
 * every connection downloads an episode's audio (each download holds two: its connection and
 * the file). The answer must be 503 with `Retry-After`, never 500. The descriptors are used
 * up for real, by this test process opening `/dev/null` until the kernel refuses.
 *
 * @module
 */

import assert from "node:assert/strict";
import { assertProblem, withTempDir } from "../_helpers.ts";
import { createBuiltinServices } from "../../src/server/routes/downstream.ts";

/** The soft limit on open files of this process (`ulimit -n`), or `undefined`. */
async function openFileLimit(): Promise<number | undefined> {
  const out = await new Deno.Command("sh", { args: ["-c", "ulimit -n"], stdout: "piped" })
    .output();
  const limit = Number(new TextDecoder().decode(out.stdout).trim());
  return Number.isInteger(limit) ? limit : undefined;
}

/** Runs `job` while this process holds every file descriptor it may open. */
async function withoutDescriptors<T>(job: () => T | Promise<T>): Promise<T> {
  const held: Deno.FsFile[] = [];
  try {
    for (;;) held.push(Deno.openSync("/dev/null"));
  } catch (error) {
    if (!/too many open files|os error 24/i.test(String(error))) {
      for (const file of held) file.close();
      throw error;
    }
  }
  try {
    return await job();
  } finally {
    for (const file of held) file.close();
  }
}

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

const LIMIT = await openFileLimit();

Deno.test({
  name:
    "an episode's audio asked for when no file descriptor is left: 503 with Retry-After and Connection: close, never 500",
  // Opening that many files takes a moment at most where the limit is modest.
  ignore: LIMIT === undefined || LIMIT > 65_536,
  async fn() {
    await withTempDir(async (dir) => {
      const id = await readyEpisode(dir, 4096);
      const services = createBuiltinServices({
        dataDir: dir,
        authorize: () => false,
        appId: "app-id-0123456789abcdef",
        log: () => {},
        logError: () => {},
      });
      // The episodes are read from their folder once, while descriptors are still there.
      const first = await services.app.request(`/podcast/${id}.mp3`, { method: "HEAD" });
      assert.equal(first.status, 200);

      const refused = await withoutDescriptors(() => services.app.request(`/podcast/${id}.mp3`));
      assert.equal(refused.headers.get("retry-after"), "5");
      assert.equal(refused.headers.get("connection"), "close");
      assert.match(
        await assertProblem(refused, 503),
        /^Cannot GET \/podcast\/20261123-114218-k3f9q2ab\.mp3: the relay has as many files open as it may right now; try again shortly$/,
      );
      const again = await services.app.request(`/podcast/${id}.mp3`);
      assert.equal(again.status, 200);
      assert.equal((await again.arrayBuffer()).byteLength, 4096);
    });
  },
});

/**
 * Reliability: an episode survives a SIGKILL at every step of its life. A real relay reads
 * an article aloud with its built-in engine and is stopped for good at one named step
 * (started by tests/reliability/_paused_relay.ts), killed with SIGKILL there, and started again on the same
 * data: the episode ends ready, its MP3 is whole frames with the recorded length and
 * duration, no part file is left, and audio that was complete before the kill is the same
 * bytes after it (never spoken again over it, never padded).
 * Every step is killed at with `RELAY_STRESS=1` (as CI runs it); three of them otherwise.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { PODCAST_STEPS } from "../../src/builtin/podcast.ts";
import {
  eventually,
  KEY,
  logMessage,
  startRelayProcess,
  STRESS,
  withTempDir,
} from "../_helpers.ts";
import { walkMp3 } from "../builtin/_mp3.ts";

/** About three chunks of speech: the second chunk's steps are reached. */
const TEXT = Array.from(
  { length: 36 },
  (_, i) => `Sentence ${i} of an article that the relay reads aloud.`,
).join(" ");

interface Listed {
  id: string;
  state: string;
  bytes: number;
  duration_s: number;
  chunks_done: number;
  chunks_total: number;
  error?: string;
}

async function episodes(url: string): Promise<Listed[]> {
  const res = await fetch(`${url}/podcast/episodes`);
  return (await res.json()).episodes;
}

/** The episode's files as the kill left them: the MP3's bytes, if any. */
async function audioAt(dir: string, id: string): Promise<Uint8Array | undefined> {
  return await Deno.readFile(join(dir, "podcast", `${id}.mp3`)).catch(() => undefined);
}

/**
 * The steps killed at in a short run (without `RELAY_STRESS=1`): audio appended past the
 * recorded progress, every chunk spoken but the file not yet in place, the file in place but
 * the episode not yet ready. The long run kills at every step.
 */
const SHORT_RUN_STEPS = ["appended", "completed", "renamed"];

for (const step of PODCAST_STEPS) {
  Deno.test({
    name: `a relay killed at the podcast step "${step}" finishes the episode as one valid MP3`,
    ignore: !STRESS && !SHORT_RUN_STEPS.includes(step),
  }, async () => {
    await withTempDir(async (dir) => {
      let id: string;
      let before: Uint8Array | undefined;
      {
        // The relay, started by a test entry script that pauses its podcast at this step.
        await using relay = await startRelayProcess(dir, {
          env: { RELAY_API_KEY: KEY },
          entry: { script: "tests/reliability/_paused_relay.ts", args: [step] },
        });
        const res = await fetch(`${relay.url}/publish`, {
          method: "POST",
          headers: { "x-auth-key": KEY, "content-type": "application/json" },
          body: JSON.stringify({
            title: "Kill",
            content: TEXT,
            targets: ["podcast"],
          }),
        });
        assert.equal(res.status, 200);
        await res.body?.cancel();
        const paused = new RegExp(`podcast paused at ${step} \\(episode (\\S+),`);
        await eventually(
          () => relay.stdout.some((line) => paused.test(logMessage(line))),
          `the pause at ${step}`,
          120_000,
        );
        id = paused.exec(relay.stdout.map(logMessage).find((l) => paused.test(l))!)![1]!;
        before = await audioAt(dir, id);
        await relay.stop("SIGKILL");
      }
      assert.equal(before !== undefined, ["renamed", "ready"].includes(step), "MP3 at the kill");

      await using relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
      let done: Listed | undefined;
      await eventually(
        async () => {
          done = (await episodes(relay.url)).find((e) => e.id === id);
          assert.notEqual(done?.state, "failed", done?.error ?? "");
          return done?.state === "ready";
        },
        "the episode to be ready",
        120_000,
      );
      const audio = (await audioAt(dir, id))!;
      if (before !== undefined) assert.deepEqual(audio, before, "complete audio was rewritten");
      assert.equal(audio.length, done!.bytes);
      assert.equal(done!.chunks_done, done!.chunks_total);
      const walk = walkMp3(audio); // throws at anything that is not a frame (zeros, a cut)
      // Every frame but the silent Info frame at the start is audio.
      assert.ok(Math.abs((walk.frames - 1) * 576 / 22050 - done!.duration_s) < 1e-6);
      await assert.rejects(Deno.stat(join(dir, "podcast", `${id}.mp3.part`)));
    });
  });
}

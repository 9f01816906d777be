/**
 * The podcast's episode files on a real temporary directory, spoken by a fast engine (a
 * tone per chunk, real MP3 encoding): what a crash leaves behind is recovered without losing
 * good audio, and speaking writes each chunk's audio and a small progress record, not the
 * whole episode again.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { type Episode, Podcast } from "../../src/builtin/podcast.ts";
import type { TtsEngine } from "../../src/builtin/tts.ts";
import { walkMp3 } from "./_mp3.ts";
import { ToneEngine } from "./_services.ts";
import { pathOf, PROGRAMS, testGroup } from "../_optional.ts";

function sentences(count: number): string {
  return Array.from({ length: count }, (_, i) => `This is sentence ${i} of the article.`)
    .join(" ");
}

function podcastIn(dataDir: string, engine: TtsEngine = new ToneEngine()): Podcast {
  return new Podcast({ dataDir, engine, clock: Date.now, log: () => {} });
}

/** Speaks everything queued in `dataDir` with `engine`, then stops the worker. */
async function speakAll(dataDir: string, engine: TtsEngine = new ToneEngine()): Promise<Podcast> {
  const podcast = podcastIn(dataDir, engine);
  podcast.start();
  await podcast.idle(120_000);
  await podcast.stop();
  return podcast;
}

/** Runs `job` on a fresh data directory holding one ready episode of `count` sentences. */
async function withReadyEpisode(
  count: number,
  job: (dataDir: string, ready: Episode) => Promise<void>,
): Promise<void> {
  const dataDir = await Deno.makeTempDir({ prefix: "relay-podcast-" });
  try {
    const queued = await podcastIn(dataDir).enqueue("Episode", sentences(count));
    const ready = (await (await speakAll(dataDir)).get(queued.id))!;
    assert.equal(ready.state, "ready", ready.error ?? "");
    await job(dataDir, ready);
  } finally {
    await Deno.remove(dataDir, { recursive: true });
  }
}

/**
 * Writes a ready episode's record back as it was just before "ready" was saved: as this
 * relay writes it (the text in a file of its own), or as earlier relays did (the text in the
 * record).
 */
async function asBeforeReady(dir: string, episode: Episode, legacy: boolean): Promise<void> {
  const { finished_at: _f, text, ...rest } = episode;
  await Deno.writeTextFile(
    join(dir, `${episode.id}.json`),
    JSON.stringify({ ...rest, ...(legacy ? { text } : {}), state: "synthesising" }),
  );
}

for (const legacy of [true, false]) {
  const format = legacy ? "an earlier relay's record" : "its record";
  Deno.test(`Podcast never overwrites a finished MP3 left by a crash between its rename and its ready record (${format})`, async () => {
    await withReadyEpisode(60, async (dataDir, ready) => {
      const audioPath = join(dataDir, "podcast", `${ready.id}.mp3`);
      const audio = await Deno.readFile(audioPath);
      // The crash: the part file was renamed, the record still says "synthesising".
      await asBeforeReady(join(dataDir, "podcast"), ready, legacy);
      const engine = new ToneEngine();
      const episode = (await (await speakAll(dataDir, engine)).get(ready.id))!;
      assert.equal(episode.state, "ready", episode.error ?? "");
      assert.deepEqual(await Deno.readFile(audioPath), audio, "the MP3 was rewritten");
      assert.equal(episode.bytes, audio.length);
      assert.equal(engine.chunks, 0, "nothing is spoken again");
      await assert.rejects(Deno.stat(`${audioPath}.part`));
    });
  });
}

for (const part of ["missing", "short"] as const) {
  Deno.test(`Podcast resumes only from its part file: a ${part} part starts the episode again`, async () => {
    await withReadyEpisode(60, async (dataDir, ready) => {
      // A record that claims every chunk is done, no MP3, and no part file or a short one.
      const dir = join(dataDir, "podcast");
      const audio = await Deno.readFile(join(dir, `${ready.id}.mp3`));
      await Deno.remove(join(dir, `${ready.id}.mp3`));
      if (part === "short") {
        const half = audio.subarray(0, audio.length / 2);
        await Deno.writeFile(join(dir, `${ready.id}.mp3.part`), half);
      }
      await asBeforeReady(dir, ready, false);
      const episode = (await (await speakAll(dataDir)).get(ready.id))!;
      assert.equal(episode.state, "ready", episode.error ?? "");
      const again = await Deno.readFile(join(dir, `${ready.id}.mp3`));
      assert.equal(again.length, episode.bytes);
      assert.deepEqual(again, audio, "spoken again from the start, the same");
      assert.ok(walkMp3(again).frames > 10);
    });
  });
}

Deno.test("Podcast writes each chunk's audio and a small progress record, not the text again per chunk", async () => {
  const dataDir = await Deno.makeTempDir({ prefix: "relay-podcast-" });
  try {
    const text = sentences(2_500); // ~95 KB, ~190 chunks
    const queued = await podcastIn(dataDir).enqueue("Long", text);
    // Judged on the files themselves, not on the process's write counters, which the test
    // runner's other files (run in parallel, in this process) move too.
    const textFile = join(dataDir, "podcast", `${queued.id}.txt`);
    const written = await Deno.stat(textFile);
    await speakAll(dataDir, new ToneEngine(0.05));
    const episode = (await podcastIn(dataDir).get(queued.id))!;
    assert.equal(episode.state, "ready", episode.error ?? "");
    assert.ok(episode.chunks_total > 100);
    // The text was written once, when queued: the same file, never replaced.
    const after = await Deno.stat(textFile);
    assert.equal(after.ino, written.ino);
    assert.equal(after.mtime?.getTime(), written.mtime?.getTime());
    assert.equal(await Deno.readTextFile(textFile), text);
    // The record each chunk rewrites is small: progress, not the text.
    const record = await Deno.stat(join(dataDir, "podcast", `${queued.id}.json`));
    assert.ok(record.size < 1024, `the record has ${record.size} bytes`);
  } finally {
    await Deno.remove(dataDir, { recursive: true });
  }
});

/** The duration check reads the MP3 with FFmpeg's ffprobe. */
const ffprobeTest = testGroup("the MP3's duration read by ffprobe", PROGRAMS.ffprobe);

ffprobeTest({
  name: "Podcast writes an Info frame, so ffprobe reads the exact duration, not an estimate",
  fn: async () => {
    await withReadyEpisode(40, async (dataDir, episode) => {
      const path = join(dataDir, "podcast", `${episode.id}.mp3`);
      const walk = walkMp3(await Deno.readFile(path));
      // The Info frame is a frame too, but silent: the audio is every frame after it.
      const exact = ((walk.frames - 1) * 576) / 22050;
      assert.ok(Math.abs(episode.duration_s - exact) < 1e-6, `${episode.duration_s} vs ${exact}`);
      const out = await new Deno.Command(pathOf(PROGRAMS.ffprobe), {
        args: ["-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", path],
        stdout: "piped",
      }).output();
      assert.equal(Number(new TextDecoder().decode(out.stdout).trim()), Number(exact.toFixed(6)));
    });
  },
});

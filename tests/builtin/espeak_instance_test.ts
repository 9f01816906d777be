/**
 * eSpeak NG's instance when its module file changes under it (real eSpeak NG, a real copy of
 * `espeak-ng.wasm` on a temporary directory): the data files are read from that file chunk
 * after chunk, so a file cut short or gone fails the chunk with one sentence naming the file,
 * the podcast records that sentence as the episode's failure and speaks the next one.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { compileEspeak } from "../../src/builtin/espeak_instance.ts";
import { Podcast } from "../../src/builtin/podcast.ts";
import { EspeakWasm } from "../../src/builtin/tts.ts";

const PACKAGED = new URL("espeak-ng.wasm", import.meta.resolve("espeak-ng"));

/** Runs `job` with a copy of the packaged `espeak-ng.wasm` in a temporary directory. */
async function withCopy(job: (path: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "relay-espeak-" });
  try {
    const path = join(dir, "espeak-ng.wasm");
    await Deno.copyFile(PACKAGED, path);
    await job(path);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** Whether `error` is one line that names `path` and says `why`. */
function oneSentence(error: unknown, path: string, why: RegExp): boolean {
  const message = error instanceof Error ? error.message : String(error);
  return !message.includes("\n") && message.includes(path) &&
    message.startsWith("cannot read eSpeak NG's data from ") && why.test(message);
}

Deno.test("a module file cut short or gone fails the chunk with one sentence, and a new instance speaks once it is back", async () => {
  await withCopy(async (path) => {
    const compiled = await compileEspeak(new URL(`file://${path}`));
    const engine = new EspeakWasm(compiled);
    // English read its files; Mandarin's are read from the file at its first chunk.
    const english = await engine.synthesize("Spoken before the file changed.", "en-us");
    await Deno.truncate(path, compiled.leftOut.fileOffset + 1024);
    await assert.rejects(
      () => engine.synthesize("中文的一段话。", "cmn"),
      (error) => oneSentence(error, path, /shorter than when it was compiled/),
    );
    // The instance was dropped: a new one reads the whole table again, and fails the same way.
    await assert.rejects(
      () => engine.synthesize("Spoken before the file changed.", "en-us"),
      (error) => oneSentence(error, path, /shorter than when it was compiled/),
    );
    await Deno.remove(path);
    await assert.rejects(
      () => engine.synthesize("Spoken before the file changed.", "en-us"),
      (error) => oneSentence(error, path, /No such file/),
    );
    await Deno.copyFile(PACKAGED, path);
    const again = await engine.synthesize("Spoken before the file changed.", "en-us");
    assert.deepEqual(again.samples, english.samples);
    assert.ok((await engine.synthesize("中文的一段话。", "cmn")).samples.length > 11025);
    engine.close();
  });
});

Deno.test("the podcast records a module file cut short as the episode's one-sentence failure, and speaks the next episode", async () => {
  await withCopy(async (path) => {
    const compiled = await compileEspeak(new URL(`file://${path}`));
    const dataDir = await Deno.makeTempDir({ prefix: "relay-podcast-" });
    const lines: string[] = [];
    const podcast = new Podcast({
      dataDir,
      engine: new EspeakWasm(compiled),
      clock: Date.now,
      log: (line) => lines.push(line),
    });
    try {
      await Deno.truncate(path, compiled.leftOut.fileOffset + 1024);
      podcast.start();
      const failed = await podcast.enqueue("Cut short", "A sentence that cannot be spoken.");
      await podcast.idle(60_000);
      const record = (await podcast.get(failed.id))!;
      assert.equal(record.state, "failed");
      assert.ok(oneSentence(record.error, path, /shorter/), record.error ?? "no error");
      assert.ok(lines.some((line) => line.includes(`episode ${failed.id} failed`)), lines.join());

      await Deno.copyFile(PACKAGED, path);
      const next = await podcast.enqueue("Whole again", "A sentence spoken once the file is back.");
      await podcast.idle(60_000);
      const ready = (await podcast.get(next.id))!;
      assert.equal(ready.state, "ready", ready.error ?? "");
      assert.ok(ready.duration_s > 1);
    } finally {
      await podcast.stop();
      await Deno.remove(dataDir, { recursive: true });
    }
  });
});

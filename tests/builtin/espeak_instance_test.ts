/**
 * eSpeak NG's instance when its module file changes under it (real eSpeak NG, a real copy of
 * `espeak-ng.wasm` on a temporary directory): the data files are read from that file chunk
 * after chunk, so a file cut short or gone fails the chunk with one sentence naming the file,
 * the podcast records that sentence as the episode's failure and speaks the next one. A
 * build laid out otherwise (its memory may grow, its data elsewhere) is refused with
 * `EspeakLayoutError`, and the engine then speaks the glue's own way, the same audio.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { compileEspeak, EspeakLayoutError } from "../../src/builtin/espeak_instance.ts";
import { Podcast } from "../../src/builtin/podcast.ts";
import { EspeakWasm } from "../../src/builtin/tts.ts";
import type { SpeechLang } from "../../src/builtin/speech_lang.ts";

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
    const english = await engine.synthesize("Spoken before the file changed.", "en");
    await Deno.truncate(path, compiled.leftOut.fileOffset + 1024);
    await assert.rejects(
      () => engine.synthesize("中文的一段话。", "zh"),
      (error) => oneSentence(error, path, /bytes, not the \d+ it had when it was compiled/),
    );
    // The instance was dropped: a new one reads the whole table again, and fails the same way.
    await assert.rejects(
      () => engine.synthesize("Spoken before the file changed.", "en"),
      (error) => oneSentence(error, path, /bytes, not the \d+ it had when it was compiled/),
    );
    await Deno.remove(path);
    await assert.rejects(
      () => engine.synthesize("Spoken before the file changed.", "en"),
      (error) => oneSentence(error, path, /No such file/),
    );
    await Deno.copyFile(PACKAGED, path);
    const again = await engine.synthesize("Spoken before the file changed.", "en");
    assert.deepEqual(again.samples, english.samples);
    assert.ok((await engine.synthesize("中文的一段话。", "zh")).samples.length > 11025);
    engine.close();
    // A file of another size is another build, whose bytes are not read as the data files.
    await Deno.writeFile(path, new Uint8Array(1), { append: true });
    await assert.rejects(
      () => new EspeakWasm(compiled).synthesize("Spoken before the file changed.", "en"),
      (error) => oneSentence(error, path, /has \d+ bytes, not the \d+ it had/),
    );
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
      assert.ok(oneSentence(record.error, path, /not the \d+ it had/), record.error ?? "no error");
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

/** The byte offset of the memory section's limits in a module's bytes. */
function memoryLimits(bytes: Uint8Array): number {
  let at = 8;
  for (;;) {
    const id = bytes[at]!;
    let size = 0;
    let body = at + 1;
    for (let shift = 0;; shift += 7) {
      const byte = bytes[body++]!;
      size += (byte & 0x7f) * 2 ** shift;
      if ((byte & 0x80) === 0) break;
    }
    if (id === 5) return body + 1; // after the count, which is 1
    at = body + size;
  }
}

Deno.test("a build whose memory may grow is refused as laid out otherwise", async () => {
  await withCopy(async (path) => {
    const bytes = await Deno.readFile(path);
    const limits = memoryLimits(bytes);
    // The packaged build: a maximum (flag 1) of 512 pages, its initial size, in two bytes
    // each; a maximum of 513 keeps the file's length.
    assert.deepEqual([...bytes.subarray(limits, limits + 5)], [1, 0x80, 0x04, 0x80, 0x04]);
    bytes[limits + 3] = 0x81;
    await Deno.writeFile(path, bytes);
    await assert.rejects(
      () => compileEspeak(new URL(`file://${path}`)),
      (error) => error instanceof EspeakLayoutError && /may grow/.test(error.message),
    );
  });
});

Deno.test("a build laid out otherwise is spoken the glue's own way, the same audio", async () => {
  const compiled = await compileEspeak();
  const usual = new EspeakWasm(compiled);
  // Told that its data lies past its file table, the instance refuses the layout.
  const { leftOut } = compiled;
  const otherwise = new EspeakWasm({
    ...compiled,
    leftOut: { ...leftOut, address: leftOut.address + leftOut.length },
  });
  for (
    const [text, voice] of [
      ["Spoken the glue's own way.", "en"],
      ["中文的一段话，说得比较长。", "zh"],
      ["Spoken the glue's own way.", "en"],
    ] as const
  ) {
    const expected = await usual.synthesize(text, voice);
    assert.ok(expected.samples.length > 11025);
    assert.deepEqual((await otherwise.synthesize(text, voice)).samples, expected.samples);
  }
  await assert.rejects(
    () => otherwise.synthesize("No such voice.", "xx-nowhere" as SpeechLang),
    (error: Error) => /^espeak-ng wrote no audio/.test(error.message),
  );
  usual.close();
  otherwise.close();
});

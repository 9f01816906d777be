import assert from "node:assert/strict";
import { Mp3SegmentEncoder } from "../../src/builtin/mp3.ts";
import { EspeakWasm, EspeakWorker } from "../../src/builtin/tts.ts";
import { parseWav } from "../../src/builtin/wav.ts";
import type { SpeechLang } from "../../src/builtin/speech_lang.ts";
import { splitForSpeech } from "../../src/builtin/speech_text.ts";
import { walkMp3 } from "./_mp3.ts";

Deno.test("splitForSpeech keeps whole sentences under the limit, Chinese and English", () => {
  const text = "# Title\n\nFirst sentence. Second one! 第一句。第二句？\n\n" +
    "A [link](http://example.com) and `code`.";
  const chunks = splitForSpeech(text, 30);
  for (const chunk of chunks) assert.ok(chunk.length <= 30, chunk);
  const joined = chunks.join(" ");
  assert.ok(joined.includes("First sentence."));
  assert.ok(joined.includes("第一句。"));
  assert.ok(joined.includes("A link and code."));
  assert.ok(!joined.includes("http"));
  assert.ok(!joined.includes("#"));
  assert.deepEqual(splitForSpeech("  ...  \n\n !!! "), []);
});

Deno.test("splitForSpeech cuts an overlong sentence and loses no word", () => {
  const words = Array.from({ length: 300 }, (_, i) => `w${i}`);
  const chunks = splitForSpeech(words.join(" "), 100);
  assert.ok(chunks.length > 5);
  for (const chunk of chunks) assert.ok(chunk.length <= 100);
  assert.deepEqual(chunks.join(" ").split(" "), words);
  const han = "字".repeat(250);
  assert.deepEqual(splitForSpeech(han, 100).join(""), han);
});

Deno.test("the built-in engine speaks English and Mandarin into MP3 that decodes", async () => {
  const engine = new EspeakWasm();
  const encoder = new Mp3SegmentEncoder();
  for (
    const [text, lang] of [["Hello from the relay. This is a test.", "en"], [
      "你好，这是一个测试。",
      "zh",
    ]] as const
  ) {
    const pcm = await engine.synthesize(text, lang);
    assert.deepEqual(pcm.sampleRate, 22050);
    assert.ok(pcm.samples.length > 22050); // more than a second
    assert.ok(pcm.samples.some((s) => Math.abs(s) > 1000), "not silence");
    const mp3 = await encoder.encode(pcm);
    const walk = walkMp3(mp3);
    assert.deepEqual(walk.sampleRate, 22050);
    assert.deepEqual(walk.kbps, 48);
    // Within a frame or two of the PCM's duration (the encoder pads its start and end).
    const seconds = pcm.samples.length / pcm.sampleRate;
    assert.ok(Math.abs(walk.seconds - seconds) < 0.2, `${walk.seconds} vs ${seconds}`);
  }
});

Deno.test("one instance speaks chunk after chunk as a fresh one would", async () => {
  const engine = new EspeakWasm();
  const first = await engine.synthesize("The first chunk, spoken first.", "en");
  await engine.synthesize("中文的一段话，说得比较长。", "zh");
  await engine.synthesize("A longer chunk in between, to leave something behind.", "en");
  const again = await engine.synthesize("The first chunk, spoken first.", "en");
  assert.deepEqual(again.samples, first.samples);
  const fresh = await new EspeakWasm().synthesize("中文的一段话，说得比较长。", "zh");
  assert.deepEqual(
    (await engine.synthesize("中文的一段话，说得比较长。", "zh")).samples,
    fresh.samples,
  );
  engine.close();
});

Deno.test("a chunk the engine fails is one sentence, and the next chunk is spoken", async () => {
  const worker = new EspeakWorker();
  try {
    await assert.rejects(
      () => worker.synthesize("No such voice.", "xx-nowhere" as SpeechLang),
      (error: Error) =>
        /^espeak-ng wrote no audio/.test(error.message) && !error.message.includes("\n"),
    );
    const next = await worker.synthesize("Spoken after the failure.", "en");
    assert.ok(next.samples.length > 11025);
  } finally {
    worker.close();
  }
  // A chunk still waiting when the thread is closed is rejected, not left hanging.
  const waiting = worker.synthesize("Closed before it is spoken.", "en");
  worker.close();
  await assert.rejects(() => waiting, /closed/);
});

Deno.test("a chunk failed in this thread leaves the process's exit code alone", async () => {
  const engine = new EspeakWasm();
  await assert.rejects(
    () => engine.synthesize("No such voice.", "xx-nowhere" as SpeechLang),
    /espeak-ng wrote no audio/,
  );
  // eSpeak NG's exit(1) is the chunk's failure, not the relay's.
  assert.equal(Deno.exitCode, 0);
  assert.ok((await engine.synthesize("Spoken after the failure.", "en")).samples.length > 0);
  engine.close();
});

Deno.test("text that looks like an option is spoken, not taken for one", async () => {
  const pcm = await new EspeakWasm().synthesize("--version and -w /etc/passwd", "en");
  assert.ok(pcm.samples.length > 11025);
});

Deno.test("MP3 segments appended one after another make one valid file", async () => {
  const encoder = new Mp3SegmentEncoder();
  const tone = (seconds: number) => {
    const samples = new Int16Array(22050 * seconds);
    for (let i = 0; i < samples.length; i++) samples[i] = Math.sin(i / 10) * 8000;
    return { samples, sampleRate: 22050 };
  };
  const a = await encoder.encode(tone(2));
  const b = await encoder.encode(tone(3));
  const both = new Uint8Array(a.length + b.length);
  both.set(a);
  both.set(b, a.length);
  const walk = walkMp3(both);
  assert.ok(Math.abs(walk.seconds - 5) < 0.3, String(walk.seconds));
  await assert.rejects(() => encoder.encode({ samples: new Int16Array(10), sampleRate: 12345 }));
});

Deno.test("parseWav reads 16-bit stereo and pipe-written WAVE files, refuses others", () => {
  const header = (dataSize: number, channels: number) => {
    const bytes = new Uint8Array(44 + 8);
    const view = new DataView(bytes.buffer);
    bytes.set(new TextEncoder().encode("RIFF"), 0);
    bytes.set(new TextEncoder().encode("WAVEfmt "), 8);
    view.setUint32(16, 16, true);
    view.setUint16(20, 1, true);
    view.setUint16(22, channels, true);
    view.setUint32(24, 16000, true);
    view.setUint16(34, 16, true);
    bytes.set(new TextEncoder().encode("data"), 36);
    view.setUint32(40, dataSize, true);
    view.setInt16(44, 1000, true);
    view.setInt16(46, 3000, true);
    view.setInt16(48, -100, true);
    view.setInt16(50, -300, true);
    return bytes;
  };
  const stereo = parseWav(header(8, 2));
  assert.deepEqual(stereo.sampleRate, 16000);
  assert.deepEqual(Array.from(stereo.samples), [2000, -200]);
  assert.deepEqual(parseWav(header(0xffffffff, 1)).samples.length, 4);
  assert.deepEqual(parseWav(header(0, 1)).samples.length, 4);
  assert.throws(() => parseWav(new TextEncoder().encode("ID3 not a wave file at all")));
});

Deno.test("the built-in engine on its worker thread speaks the same as in this thread", async () => {
  const worker = new EspeakWorker();
  try {
    const [a, b] = await Promise.all([
      worker.synthesize("Hello from the worker.", "en"),
      worker.synthesize("你好。", "zh"),
    ]);
    const direct = await new EspeakWasm().synthesize("Hello from the worker.", "en");
    assert.equal(a.sampleRate, 22050);
    assert.deepEqual(a.samples, direct.samples);
    assert.ok(b.samples.length > 11025);
  } finally {
    worker.close();
  }
  // Closed, it starts again when asked.
  const again = await worker.synthesize("Again.", "en");
  assert.ok(again.samples.length > 0);
  worker.close();
});

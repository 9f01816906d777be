/**
 * The household's speech command, run for real: Debian's `espeak-ng` program (installed by
 * `.ci/run`) as the engine, ffmpeg writing WAVE at another rate and channel count, and small
 * shell programs that hang, fail, flood their output or write something else than WAVE.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { CommandEngine } from "../../src/builtin/speech_command.ts";
import { commandWords } from "../../src/util/command_words.ts";
import { serveServices } from "./_services.ts";
import { readAloud } from "./_read_aloud.ts";

const FAST = { timeoutMs: 2_000, maxBytes: 1 << 20 };

/** Whether Debian's espeak-ng program is installed (`.ci/run` installs it). */
const espeak = await new Deno.Command("espeak-ng", { args: ["--version"], stdout: "null" })
  .output().then((out) => out.success, () => false);
/** Whether FFmpeg is installed (`.ci/run` installs it). */
const ffmpeg = await new Deno.Command("ffmpeg", { args: ["-version"], stdout: "null" })
  .output().then((out) => out.success, () => false);

Deno.test("Debian's espeak-ng as the speech command speaks each language it is given", {
  ignore: !espeak,
}, async () => {
  const engine = await CommandEngine.fromLine("espeak-ng --stdin --stdout -v {lang}");
  assert.equal(engine.name, "espeak-ng (speech command)");
  for (
    const [text, lang] of [["Hello from the relay.", "en"], ["你好，这是一个测试。", "zh"]] as const
  ) {
    const pcm = await engine.synthesize(text, lang);
    assert.equal(pcm.sampleRate, 22050);
    assert.ok(pcm.samples.length > 22050 / 2, `${lang}: ${pcm.samples.length}`);
    assert.ok(pcm.samples.some((s) => Math.abs(s) > 1000), "not silence");
  }
});

Deno.test("a WAVE file at another rate and with two channels is mixed down and resampled", {
  ignore: !ffmpeg,
}, async () => {
  // ffmpeg writes one second of a tone at 16 kHz in stereo to a pipe (its data size unknown).
  const engine = await CommandEngine.fromLine(
    "ffmpeg -nostdin -v error -f lavfi -i sine=frequency=440:duration=1 -ar 16000 -ac 2 -f wav -",
  );
  const pcm = await engine.synthesize("ignored", "en");
  assert.equal(pcm.sampleRate, 22050);
  assert.ok(Math.abs(pcm.samples.length - 22050) < 50, String(pcm.samples.length));
  assert.ok(pcm.samples.some((s) => Math.abs(s) > 1000), "not silence");
});

Deno.test(
  "a speech command that hangs, fails, floods or writes no WAVE fails its chunk with one sentence",
  {
    ignore: !espeak,
  },
  async (t) => {
    await t.step("hangs, with a child of its own: both are killed", async () => {
      const marker = `${60 + Math.floor(Math.random() * 1000)}.5`;
      const engine = await CommandEngine.fromLine(
        `sh -c "sleep ${marker} & sleep ${marker}"`,
        FAST,
      );
      await assert.rejects(
        () => engine.synthesize("words", "en"),
        (error: Error) => error.message === "sh took longer than 2 s",
      );
      const ps = await new Deno.Command("ps", { args: ["-eo", "args"], stdout: "piped" }).output();
      assert.ok(!new TextDecoder().decode(ps.stdout).includes(`sleep ${marker}`), "none left");
    });
    await t.step("exits 1: the first line of its error output", async () => {
      const engine = await CommandEngine.fromLine(
        `sh -c "echo 'no voice for {lang}' >&2; exit 1"`,
        FAST,
      );
      await assert.rejects(
        () => engine.synthesize("words", "ja"),
        (error: Error) => error.message === "sh failed (exit 1): no voice for ja",
      );
    });
    await t.step("floods its output", async () => {
      const engine = await CommandEngine.fromLine("cat /dev/zero", FAST);
      await assert.rejects(
        () => engine.synthesize("words", "en"),
        (error: Error) => error.message === "cat wrote more than 1 MiB of audio for one chunk",
      );
    });
    await t.step(
      "floods its error output, then writes WAVE: the error output is dropped",
      async () => {
        const engine = await CommandEngine.fromLine(
          `sh -c "head -c 3000000 /dev/zero >&2; exec espeak-ng --stdin --stdout -v {lang}"`,
          { timeoutMs: 20_000, maxBytes: 1 << 20 },
        );
        assert.ok((await engine.synthesize("Hello.", "en")).samples.length > 0);
      },
    );
    await t.step("writes something else than WAVE", async () => {
      await assert.rejects(
        async () =>
          (await CommandEngine.fromLine("echo not a wave", FAST)).synthesize("words", "en"),
        (error: Error) => error.message === "echo: the engine's output is not a WAVE file",
      );
    });
    await t.step("cannot start", async () => {
      await assert.rejects(
        async () =>
          (await CommandEngine.fromLine("/no/such/program {lang}", FAST)).synthesize("words", "en"),
        /^Error: cannot run \/no\/such\/program: no such program \(install it, or give its full path/,
      );
    });
  },
);

Deno.test("the speech command is split into words without a shell; shell syntax is refused", async () => {
  assert.deepEqual(
    await commandWords(`piper --model '/opt/voices/en US.onnx' -x "a \\"b\\"" $HOME {lang}`),
    ["piper", "--model", "/opt/voices/en US.onnx", "-x", 'a "b"', "$HOME", "{lang}"],
  );
  await assert.rejects(() => commandWords("piper | aplay"), /shell syntax \(\|\)/);
  await assert.rejects(() => commandWords("piper > out.wav"), /shell syntax \(>\)/);
  await assert.rejects(() => commandWords("piper # a comment"), /shell syntax \(#\)/);
  await assert.rejects(() => commandWords("   "), /is empty/);
  // A quote left open, as a shell refuses it; quotes and escapes inside others are fine.
  await assert.rejects(
    () => commandWords(`espeak-ng --stdin "-v {lang}`),
    /has a double quote that is never closed/,
  );
  await assert.rejects(() => commandWords("espeak-ng 'it"), /has a single quote that is never/);
  await assert.rejects(() => commandWords("piper x.onnx # Amy's voice"), /shell syntax \(#\)/);
  assert.deepEqual(await commandWords(`a "it's" 'say "hi"' b\\"c`), [
    "a",
    "it's",
    'say "hi"',
    'b"c',
  ]);
  await assert.rejects(
    () => CommandEngine.fromLine("a && b"),
    /^Error: the speech command holds shell syntax/,
  );
});

Deno.test(
  "the relay speaks a mixed article through --speech-command, each passage with its {lang}",
  {
    ignore: !espeak,
  },
  async () => {
    const dir = await Deno.makeTempDir({ prefix: "relay-speech-" });
    const log = join(dir, "langs.log");
    // A wrapper as a household would write one: note the language, then speak with espeak-ng.
    const command = `sh -c 'echo "$0" >> ${log}; exec espeak-ng --stdin --stdout -v "$0"' {lang}`;
    await using relay = await serveServices({
      speechCommand: await CommandEngine.fromLine(command),
    });
    const episode = await readAloud(
      relay,
      "Mixed",
      "Tomatoes want sun.\n\n番茄需要阳光、水和耐心。\n\nトマトは日当たりの良い場所で育てます。",
    );
    assert.ok(episode.duration_s > 2);
    assert.equal(episode.skipped, undefined, "the command has every language");
    assert.deepEqual((await Deno.readTextFile(log)).trim().split("\n"), ["en", "zh", "ja"]);
    await Deno.remove(dir, { recursive: true });
  },
);

Deno.test("a speech command's failure is the episode's failure, with its one sentence", async () => {
  await using relay = await serveServices({
    speechCommand: await CommandEngine.fromLine(`sh -c "echo 'no model' >&2; exit 1"`),
  });
  const episode = await readAloud(relay, "Fails", "Nothing will be heard.", "failed");
  assert.equal(episode.error, "sh failed (exit 1): no model");
});

Deno.test(
  "a language the command has no voice for (exit 3) is spoken by the built-in engine, or left out when it has none either",
  {
    ignore: !espeak,
  },
  async () => {
    const command =
      `sh -c 'case "$0" in ko|ja) exit 3;; esac; exec espeak-ng --stdin --stdout -v "$0"' {lang}`;
    await using relay = await serveServices({
      speechCommand: await CommandEngine.fromLine(command),
    });
    const english = "Tomatoes want sun. Most of this article is in English, so the relay " +
      "speaks its own sentences in English, whatever else it holds.";
    const episode = await readAloud(
      relay,
      "Three languages",
      `${english}\n\n토마토는 햇빛이 필요합니다.\n\nトマトは日当たりの良い場所で育てます。\n\n` +
        "トマトの実は赤くなったら収穫します。\n\nPick them red.",
    );
    assert.deepEqual(episode.skipped, ["ja"]);
    const transcript = await (await fetch(`${relay.url}/podcast/${episode.id}.txt`)).text();
    assert.equal(
      transcript,
      `${english}\n` +
        "토마토는 햇빛이 필요합니다.\n" +
        "A passage in Japanese is left out: there is no voice for it.\nPick them red.\n",
    );
    const rss = await (await fetch(`${relay.url}/podcast/feed.xml`)).text();
    assert.ok(rss.includes("Not read aloud: the passages in Japanese"), rss);
  },
);

/**
 * Chapters and transcripts of episodes. An engine that sounds a tone only where a heading is
 * spoken (silence elsewhere, as long as the text) makes the chapters checkable against the audio
 * itself: ffmpeg decodes the MP3 and each chapter must start where its heading's tone is heard.
 * Then the whole path with the built-in engine: an article result published over HTTP has its
 * chapters linked from the feed and served as Podcasting 2.0 JSON, and its transcript is the
 * words as spoken.
 *
 * @module
 */

import assert from "node:assert/strict";
import { feedXml } from "../_xml.ts";
import { Podcast } from "../../src/builtin/podcast.ts";
import { chaptersOf } from "../../src/builtin/podcast_files.ts";
import type { SpeechLang } from "../../src/builtin/speech_lang.ts";
import type { Pcm, TtsEngine } from "../../src/builtin/tts.ts";
import { writeArticleResult } from "../../src/article_result.ts";
import { serveServices } from "./_services.ts";
import { readAloud } from "./_read_aloud.ts";

const RATE = 22050;

/** Whether FFmpeg is installed (`.ci/run` installs it): the audio is checked with it. */
const ffmpeg = await new Deno.Command("ffmpeg", { args: ["-version"], stdout: "null" })
  .output().then((out) => out.success, () => false);

/**
 * Silence for every chunk, 2 ms per character, but a chunk that starts with a heading ("Part …")
 * opens with 0.2 s of a loud tone: where the heading is heard.
 */
class HeadingToneEngine implements TtsEngine {
  readonly name = "heading tone";
  readonly said: Array<{ text: string; lang: SpeechLang }> = [];
  constructor(readonly voices: readonly SpeechLang[] = ["en", "zh"]) {}
  speaks(lang: SpeechLang): boolean {
    return this.voices.includes(lang);
  }
  synthesize(text: string, lang: SpeechLang): Promise<Pcm> {
    this.said.push({ text, lang });
    const samples = new Int16Array(Math.round(RATE * (0.3 + text.length * 0.002)));
    if (/^Part /.test(text)) {
      for (let i = 0; i < RATE * 0.2; i++) {
        samples[i] = Math.round(Math.sin((2 * Math.PI * 880 * i) / RATE) * 12000);
      }
    }
    return Promise.resolve({ samples, sampleRate: RATE });
  }
}

/** Seconds from the start where a loud run begins after at least 0.1 s of quiet. */
function onsets(pcm: Int16Array): number[] {
  const found: number[] = [];
  let quiet = RATE;
  for (let i = 0; i < pcm.length; i++) {
    if (Math.abs(pcm[i]!) > 3000) {
      if (quiet >= RATE * 0.1) found.push(i / RATE);
      quiet = 0;
    } else quiet++;
  }
  return found;
}

async function run(command: string, args: string[]): Promise<Uint8Array> {
  const output = await new Deno.Command(command, { args, stdout: "piped", stderr: "null" })
    .output();
  assert.ok(output.success, `${command} failed`);
  return output.stdout;
}

function prose(words: number, seed: string): string {
  return Array.from({ length: words }, (_, i) => `${seed}${i % 7}`).join(" ") + ".";
}

Deno.test(
  "chapters start where their headings are heard, ascending, the last before the end of the MP3",
  {
    ignore: !ffmpeg,
  },
  async () => {
    const dataDir = await Deno.makeTempDir({ prefix: "relay-chapters-" });
    try {
      const engine = new HeadingToneEngine();
      const podcast = new Podcast({ dataDir, engine, clock: Date.now, log: () => {} });
      const text = [
        "Opening words before any heading. " + prose(120, "intro"),
        "## Part one",
        prose(300, "alpha"),
        "## Part two",
        prose(40, "beta"),
        "### Part three: the detail",
        prose(500, "gamma"),
        "#### Too deep for a chapter",
        prose(30, "delta"),
      ].join("\n\n");
      const queued = await podcast.enqueue("An episode", text);
      podcast.start();
      await podcast.idle(120_000);
      await podcast.stop();
      const episode = (await podcast.get(queued.id))!;
      assert.equal(episode.state, "ready", episode.error ?? "");

      const json = chaptersOf(episode)!;
      assert.equal(json.version, "1.2.0");
      assert.deepEqual(json.chapters.map((c) => c.title), [
        "An episode",
        "Part one",
        "Part two",
        "Part three: the detail",
      ]);
      const starts = json.chapters.map((c) => c.startTime);
      assert.equal(starts[0], 0);
      for (let i = 1; i < starts.length; i++) assert.ok(starts[i]! > starts[i - 1]!, `${starts}`);

      const path = podcast.audioPath(episode.id);
      const probed = Number(
        new TextDecoder().decode(
          await run("ffprobe", [
            "-v",
            "error",
            "-show_entries",
            "format=duration",
            "-of",
            "csv=p=0",
            path,
          ]),
        ).trim(),
      );
      assert.ok(Math.abs(probed - episode.duration_s) < 0.1, `${probed} vs ${episode.duration_s}`);
      assert.ok(starts.at(-1)! < probed);

      // Where each heading is heard in the decoded audio: within 60 ms of its chapter (the
      // encoder's delay at the start of each segment is about 50 ms).
      const decoded = await run("ffmpeg", [
        "-v",
        "error",
        "-i",
        path,
        "-f",
        "s16le",
        "-ac",
        "1",
        "-ar",
        String(RATE),
        "-",
      ]);
      const heard = onsets(new Int16Array(decoded.buffer, 0, decoded.length >> 1));
      assert.equal(heard.length, 3, `${heard}`);
      heard.forEach((at, i) => {
        assert.ok(
          Math.abs(at - starts[i + 1]!) < 0.06,
          `heading ${i} heard at ${at}, chapter ${starts[i + 1]}`,
        );
      });

      // The transcript is what the engine was asked to say, in order.
      const transcript = await Deno.readTextFile(podcast.transcriptPath(episode.id));
      assert.equal(transcript, engine.said.map((s) => s.text).join("\n") + "\n");
      assert.ok(transcript.includes("Too deep for a chapter."));
    } finally {
      await Deno.remove(dataDir, { recursive: true });
    }
  },
);

Deno.test("a passage in a language without a voice is left out with one sentence, noted for the description", async () => {
  const dataDir = await Deno.makeTempDir({ prefix: "relay-chapters-" });
  try {
    const engine = new HeadingToneEngine(["en", "zh"]);
    const podcast = new Podcast({ dataDir, engine, clock: Date.now, log: () => {} });
    const text = [
      "Tomatoes want sun, water and patience, and a little care every day. " +
      "Most of this article is in English, so its own sentences are said in English.",
      "トマトは日当たりの良い場所で育てます。水は朝にあげましょう。",
      "トマトの実は赤くなったら収穫します。",
      "番茄需要阳光、水和耐心。",
      "Pick them when they are red.",
    ].join("\n\n");
    const queued = await podcast.enqueue("Mixed", text);
    podcast.start();
    await podcast.idle(120_000);
    await podcast.stop();
    const episode = (await podcast.get(queued.id))!;
    assert.equal(episode.state, "ready", episode.error ?? "");
    assert.deepEqual(episode.skipped, ["ja"]);
    assert.deepEqual(engine.said.map((s) => s.lang), ["en", "en", "zh", "en"]);
    assert.ok(engine.said.every((s) => !/[ぁ-んァ-ン]/.test(s.text)), "no kana reached a voice");
    assert.equal(
      engine.said[1]!.text,
      "A passage in Japanese is left out: there is no voice for it.",
    );
    assert.equal(engine.said[2]!.text, "番茄需要阳光、水和耐心。");
  } finally {
    await Deno.remove(dataDir, { recursive: true });
  }
});

Deno.test("an article published for reading aloud: chapters in the feed and as JSON, the transcript as spoken", async () => {
  await using relay = await serveServices();
  const content = writeArticleResult({
    title: "Tending tomatoes",
    byline: "By Jane Doe",
    siteName: "Garden Weekly",
    url: "https://garden.example/tomatoes",
    summary: "Tomatoes want sun.",
    markdown: "Tomatoes want sun, water and patience.\n\n## Planting\n\nPlant them deep.\n\n" +
      "## Picking\n\n| Variety | Days to harvest |\n|---|---|\n| Roma | 75 |\n\nPick them red.",
  });
  // As a publish sends it: the article result as its Markdown, a plain text beside it.
  const episode = await readAloud(relay, "Tending tomatoes", {
    content: "Tending tomatoes: a plain text that is not read when the Markdown is there.",
    content_md: content,
  });
  const rss = feedXml.parse(await (await fetch(`${relay.url}/podcast/feed.xml`)).text()).rss;
  const link = rss.channel.item["podcast:chapters"];
  assert.equal(link["@type"], "application/json+chapters");
  const chapters = await fetch(`${relay.url}${new URL(link["@url"]).pathname}`);
  assert.equal(chapters.headers.get("content-type"), "application/json+chapters; charset=utf-8");
  const json = await chapters.json();
  assert.equal(json.version, "1.2.0");
  assert.deepEqual(json.chapters.map((c: { title: string }) => c.title), [
    "Tending tomatoes",
    "Planting",
    "Picking",
  ]);
  assert.equal(json.chapters[0].startTime, 0);
  assert.ok(json.chapters.at(-1).startTime < episode.duration_s);

  const transcript = await (await fetch(`${relay.url}/podcast/${episode.id}.txt`)).text();
  assert.equal(
    transcript,
    "Tending tomatoes. From Garden Weekly, by Jane Doe. Tomatoes want sun, water and patience.\n" +
      "Planting. Plant them deep.\n" +
      "Picking. Variety: Roma; days to harvest: 75. Pick them red.\n",
  );
  const missing = await fetch(`${relay.url}/podcast/nothing.chapters.json`);
  assert.equal(missing.status, 404);
  await missing.body?.cancel();
});

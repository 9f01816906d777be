/**
 * Read-aloud figures for docs/benchmarks.md: the built-in engine (eSpeak NG as
 * WebAssembly) with MP3 encoding (LAME as WebAssembly), through the relay's own podcast
 * worker, on this machine.
 *
 * - a 5,000-word English article and a 5,000-character Chinese one: real-time factor
 *   (processing time ÷ audio length; below 1 is faster than real time), split into
 *   speaking and encoding, and the process's peak resident memory while it runs;
 * - time to first episode ready: a fresh relay data directory, one short article published
 *   over HTTP, until the feed has it (includes compiling the WebAssembly).
 *
 * - the text for speech on adversarial inputs (runs of `[`, of `![`, nested emphasis, a line
 *   with no space) of 100, 200 and 400 KB: milliseconds in this thread (the relay runs it on a
 *   worker thread), which grow in proportion to the length.
 *
 * - per engine (`engines`): the built-in engine and the speech command with Debian's
 *   `espeak-ng` program, on the same 5,000-word article: real-time factor, seconds from the
 *   start of the episode to its first chunk's audio, the relay's peak RSS over its RSS before,
 *   and the command's own peak RSS (its processes' maximum, from GNU time's `%M`).
 *
 * Run: `deno run -A bench/tts.ts` (prints Markdown tables); `deno run -A bench/tts.ts english`
 * runs only the 5,000-word English article, through the worker (the memory figure);
 * `deno run -A bench/tts.ts text` only the adversarial inputs; `deno run -A bench/tts.ts
 * engines` the engines side by side (needs `espeak-ng` and `/usr/bin/time`).
 *
 * @module
 */

import { createBuiltinServices } from "../src/builtin/services.ts";
import { createApp } from "../src/server/app.ts";
import { Logger } from "../src/server/log.ts";
import { createStore } from "../src/store/store.ts";
import { Podcast } from "../src/builtin/podcast.ts";
import { splitForSpeech } from "../src/builtin/speech_text.ts";
import type { SpeechLang } from "../src/builtin/speech_lang.ts";
import { EspeakWasm, EspeakWorker, type Pcm, type TtsEngine } from "../src/builtin/tts.ts";
import { CommandEngine } from "../src/builtin/speech_command.ts";

/** Wraps an engine to add up the time it spends speaking. */
class Timed implements TtsEngine {
  readonly name: string;
  speakingMs = 0;
  /** When the first chunk's audio came back, `performance.now()` ms. */
  firstAudioAt: number | undefined;
  constructor(readonly inner: TtsEngine) {
    this.name = inner.name;
  }
  close(): void {
    this.inner.close?.();
  }
  async synthesize(text: string, voice: SpeechLang): Promise<Pcm> {
    const started = performance.now();
    try {
      return await this.inner.synthesize(text, voice);
    } finally {
      this.speakingMs += performance.now() - started;
      this.firstAudioAt ??= performance.now();
    }
  }
  speaks(lang: SpeechLang): boolean {
    return this.inner.speaks?.(lang) ?? true;
  }
}

/** Deterministic prose: `words` words in sentences of 8–20 words. */
function englishArticle(words: number): string {
  const vocabulary = ("the relay keeps a small queue of links and notes for the household " +
    "while everyone sleeps it reads articles aloud so that a long walk becomes time to " +
    "listen to what was saved during the week and nothing is lost when the phone is " +
    "offline because the server holds every item until it is read").split(" ");
  let seed = 42;
  const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31);
  const sentences: string[] = [];
  let count = 0;
  while (count < words) {
    const length = Math.min(8 + (next() % 13), words - count);
    const sentence = Array.from({ length }, () => vocabulary[next() % vocabulary.length]);
    sentences.push(`${sentence.join(" ")}.`.replace(/^./, (c) => c.toUpperCase()));
    count += length;
  }
  return sentences.join(" ");
}

function chineseArticle(chars: number): string {
  const sentences = [
    "中继服务器在夜里保存家里每个人收藏的链接和笔记。",
    "散步的时候可以听一听这一周保存下来的文章。",
    "手机离线的时候什么也不会丢失，因为服务器会一直保留它们。",
    "朗读的声音根据文字自动选择普通话或者英语。",
  ];
  let text = "";
  for (let i = 0; text.length < chars; i++) text += sentences[i % sentences.length];
  return text;
}

/**
 * Runs `job` while sampling resident memory every 20 ms.
 *
 * @returns Peak RSS, bytes, and how late a 20 ms timer fired, ms (what a request arriving
 *   then would wait): the 99th percentile and the longest.
 */
async function sample(
  job: () => Promise<void>,
): Promise<{ peak: number; stallMs: number; p99Ms: number }> {
  let peak = Deno.memoryUsage().rss;
  const lags: number[] = [];
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    lags.push(Math.max(0, now - last - 20));
    last = now;
    peak = Math.max(peak, Deno.memoryUsage().rss);
  }, 20);
  try {
    await job();
  } finally {
    clearInterval(timer);
  }
  lags.sort((a, b) => a - b);
  return {
    peak: Math.max(peak, Deno.memoryUsage().rss),
    stallMs: lags[lags.length - 1] ?? 0,
    p99Ms: lags[Math.floor(lags.length * 0.99)] ?? 0,
  };
}

async function article(
  label: string,
  text: string,
  inner: TtsEngine = new EspeakWorker(),
): Promise<string> {
  const dataDir = await Deno.makeTempDir({ prefix: "relay-bench-tts-" });
  const engine = new Timed(inner);
  const podcast = new Podcast({ dataDir, engine, clock: Date.now, log: () => {} });
  const episode = await podcast.enqueue(label, text);
  const before = Deno.memoryUsage().rss;
  const started = performance.now();
  const { peak, stallMs, p99Ms } = await sample(async () => {
    podcast.start();
    await podcast.idle(3_600_000);
    await podcast.stop();
  });
  const totalMs = performance.now() - started;
  const done = (await podcast.get(episode.id))!;
  if (done.state !== "ready") throw new Error(`${label}: ${done.state} ${done.error ?? ""}`);
  await Deno.remove(dataDir, { recursive: true });
  const audioS = done.duration_s;
  const encodeMs = totalMs - engine.speakingMs;
  return `| ${label} | ${done.chunks_total} | ${(audioS / 60).toFixed(1)} min | ${
    (done.bytes / 1024 / 1024).toFixed(1)
  } MB | ${(totalMs / 1000).toFixed(1)} s | ${(totalMs / 1000 / audioS).toFixed(3)} | ${
    (engine.speakingMs / 1000 / audioS).toFixed(3)
  } | ${(encodeMs / 1000 / audioS).toFixed(3)} | ${Math.round(before / 2 ** 20)} → ${
    Math.round(peak / 2 ** 20)
  } MiB (+${Math.round((peak - before) / 2 ** 20)}) | ${Math.round(p99Ms)} / ${
    Math.round(stallMs)
  } ms |`;
}

async function firstEpisode(): Promise<number> {
  const dataDir = await Deno.makeTempDir({ prefix: "relay-bench-tts-" });
  const services = createBuiltinServices({ dataDir, log: () => {} });
  const kv = await Deno.openKv(`${dataDir}/relay.kv`);
  const app = createApp({
    store: createStore(kv),
    apiKey: "bench-key-0123456789",
    logger: new Logger({ write: () => {} }),
    builtin: { services, appId: "bench" },
  });
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    (request, info) => app.fetch(request, info),
  );
  services.start();
  const url = `http://127.0.0.1:${server.addr.port}`;
  const started = performance.now();
  const res = await fetch(`${url}/downstream/api/publish`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-app-id": "bench" },
    body: JSON.stringify({
      title: "First",
      content: englishArticle(150),
      targets: ["nas"],
      transform: "read",
    }),
  });
  await res.body?.cancel();
  for (;;) {
    const feed = await (await fetch(`${url}/podcast/feed.xml`)).text();
    if (feed.includes("<enclosure")) break;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  const ms = performance.now() - started;
  await services.stop();
  await server.shutdown();
  kv.close();
  await Deno.remove(dataDir, { recursive: true });
  return ms;
}

/** Milliseconds to cut each adversarial input of 100, 200 and 400 KB into chunks. */
function adversarialText(): string[] {
  const inputs: Record<string, (bytes: number) => string> = {
    "`[` × n": (n) => "[".repeat(n),
    "`![` × n/2": (n) => "![".repeat(n / 2),
    "`[a](` × n/4": (n) => "[a](".repeat(n / 4),
    "`*_` … `_*` nested": (n) => "*_".repeat(n / 4) + "x" + "_*".repeat(n / 4),
    "one line, no space": (n) => "a".repeat(n),
  };
  splitForSpeech("Warm *up* [a](b) ![c](d).");
  const rows = ["| input | 100 KB | 200 KB | 400 KB |", "|---|---|---|---|"];
  for (const [name, make] of Object.entries(inputs)) {
    const cells = [100_000, 200_000, 400_000].map((n) => {
      const text = make(n);
      const started = performance.now();
      splitForSpeech(text);
      return `${Math.round(performance.now() - started)} ms`;
    });
    rows.push(`| ${name} | ${cells.join(" | ")} |`);
  }
  return rows;
}

/**
 * One engine's row: the 5,000-word article through the podcast worker. `childLog` is the file
 * GNU time appends each run's peak RSS (KiB) to, for a speech command.
 */
async function engineRow(label: string, inner: TtsEngine, childLog?: string): Promise<string> {
  const dataDir = await Deno.makeTempDir({ prefix: "relay-bench-tts-" });
  const engine = new Timed(inner);
  const podcast = new Podcast({ dataDir, engine, clock: Date.now, log: () => {} });
  const episode = await podcast.enqueue(label, englishArticle(5000));
  const before = Deno.memoryUsage().rss;
  const started = performance.now();
  const { peak } = await sample(async () => {
    podcast.start();
    await podcast.idle(3_600_000);
    await podcast.stop();
  });
  const totalS = (performance.now() - started) / 1000;
  const done = (await podcast.get(episode.id))!;
  if (done.state !== "ready") throw new Error(`${label}: ${done.state} ${done.error ?? ""}`);
  await Deno.remove(dataDir, { recursive: true });
  const firstS = ((engine.firstAudioAt ?? started) - started) / 1000;
  const child = childLog === undefined ? "—" : `${
    Math.round(
      Math.max(...(await Deno.readTextFile(childLog)).trim().split("\n").map(Number)) / 1024,
    )
  } MiB`;
  return `| ${label} | ${done.chunks_total} | ${(done.duration_s / 60).toFixed(1)} min | ${
    totalS.toFixed(1)
  } s | ${(totalS / done.duration_s).toFixed(3)} | ${firstS.toFixed(2)} s | +${
    Math.round((peak - before) / 2 ** 20)
  } MiB | ${child} |`;
}

if (Deno.args.includes("engines")) {
  const log = await Deno.makeTempFile({ prefix: "relay-bench-rss-" });
  console.log(
    `Deno ${Deno.version.deno}, ${Deno.build.target}, ${navigator.hardwareConcurrency} cores`,
  );
  console.log("");
  console.log(
    "| engine, 5,000 words | chunks | audio | wall time | RTF | to first audio | relay peak RSS over before | command's peak RSS |",
  );
  console.log("|---|---|---|---|---|---|---|---|");
  console.log(await engineRow("built in (eSpeak NG, WebAssembly)", new EspeakWorker()));
  const command = await CommandEngine.fromLine(
    `/usr/bin/time -a -o ${log} -f %M espeak-ng --stdin --stdout -v {lang}`,
  );
  console.log(await engineRow("speech command: espeak-ng program", command, log));
  await Deno.remove(log);
  Deno.exit(0);
}

if (Deno.args.includes("text")) {
  console.log(adversarialText().join("\n"));
  Deno.exit(0);
}

const onlyEnglish = Deno.args.includes("english");
const first = onlyEnglish ? 0 : await firstEpisode();
console.log(
  `Deno ${Deno.version.deno}, ${Deno.build.target}, ${navigator.hardwareConcurrency} cores`,
);
console.log("");
if (!onlyEnglish) {
  console.log(
    `Time to first episode ready (150 words, fresh start, over HTTP): ${Math.round(first)} ms`,
  );
}
console.log("");
console.log(
  "| article | chunks | audio | MP3 | wall time | RTF | RTF speaking | RTF encoding | RSS before → peak | event-loop delay p99 / max |",
);
console.log("|---|---|---|---|---|---|---|---|---|---|");
console.log(await article("English, 5,000 words", englishArticle(5000)));
if (!onlyEnglish) {
  console.log(await article("Chinese, 5,000 characters", chineseArticle(5000)));
  console.log(
    await article(
      "English, 5,000 words, engine in the main thread",
      englishArticle(5000),
      new EspeakWasm(),
    ),
  );
}
if (!onlyEnglish) {
  console.log("");
  console.log(adversarialText().join("\n"));
}

/**
 * The built-in podcast: episodes queued by the read-aloud call are spoken in the background,
 * one at a time, never inside the request. Each episode is a JSON file in `<data>/podcast/`
 * (title, text, state) and, once spoken, an MP3 file beside it.
 *
 * The text is cut into chunks of whole sentences; each chunk is spoken and encoded as a
 * self-contained MP3 segment and appended to `<id>.mp3.part`, and the episode's file
 * records how many chunks and bytes are done. A relay that stops (or crashes) in the middle
 * resumes after restart at the first chunk not recorded, cutting the part file back to the
 * recorded length. The file opens with an Info (Xing) frame, written empty before the first
 * chunk and filled in with the episode's length (xing.ts) when the last chunk is done; then
 * the part file is renamed to `<id>.mp3`.
 *
 * Retention: after an episode is finished, the oldest ready episodes beyond `keep`
 * episodes or `maxDiskBytes` of audio are deleted (audio and record), and the oldest failed
 * ones beyond `keep` failures.
 *
 * @module
 */

import { join } from "node:path";
import { Mp3SegmentEncoder } from "./mp3.ts";
import {
  isId,
  newId,
  PRIVATE_FILE_MODE,
  readDirIfExists,
  readTextIfExists,
  removeIfExists,
  writeAtomically,
} from "../util/files.ts";
import { chooseVoice, splitForSpeech, type TtsEngine } from "./tts.ts";
import { infoPlaceholder, writeInfoTag } from "./xing.ts";

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}

/** Where an episode is: queued, being spoken, ready to play, or failed (with why). */
export type EpisodeState = "queued" | "synthesising" | "ready" | "failed";

/** An episode's record. */
export interface Episode {
  /** Its id: its file names and its guid. */
  readonly id: string;
  /** The episode's title (the publish request's `title`). */
  readonly title: string;
  /** The text spoken (the publish request's `content`). */
  readonly text: string;
  /** When it was queued, epoch ms. */
  readonly created_at: number;
  /** Where the episode is. */
  readonly state: EpisodeState;
  /** Chunks of text in all (0 until synthesis starts). */
  readonly chunks_total: number;
  /** Chunks spoken and appended to the audio. */
  readonly chunks_done: number;
  /** Bytes of audio written for the chunks done. */
  readonly bytes: number;
  /** Seconds of audio for the chunks done. */
  readonly duration_s: number;
  /** When it became ready or failed, epoch ms. */
  readonly finished_at?: number;
  /** Why it failed: one sentence. */
  readonly error?: string;
}

/** Retention limits: the oldest finished episodes beyond them are deleted. */
export interface Retention {
  /** Episodes kept at most. */
  readonly keep: number;
  /** Bytes of audio kept at most. */
  readonly maxDiskBytes: number;
}

/** Default retention: 100 episodes, 1 GiB of audio. */
export const DEFAULT_RETENTION: Retention = { keep: 100, maxDiskBytes: 1024 ** 3 };

/** Figures for `/stats` and `/metrics`. */
export interface PodcastStats {
  /** Episodes by state. */
  readonly episodes: Readonly<Record<EpisodeState, number>>;
  /** Bytes of episode audio on disk (ready files and parts). */
  readonly audio_bytes: number;
  /** Episodes deleted by the retention limits since start. */
  readonly evicted: number;
  /** The limits in force: episodes kept, bytes of audio kept. */
  readonly retention: { readonly keep: number; readonly max_disk_bytes: number };
}

function isEpisode(value: unknown): value is Episode {
  const e = value as Partial<Episode> | null;
  return typeof e?.id === "string" && isId(e.id) && typeof e.title === "string" &&
    typeof e.text === "string" && typeof e.created_at === "number" &&
    ["queued", "synthesising", "ready", "failed"].includes(e.state ?? "") &&
    typeof e.chunks_done === "number" && typeof e.bytes === "number";
}

/**
 * The episodes and the background worker that speaks them. Call {@linkcode start} once;
 * {@linkcode stop} lets the chunk being spoken finish and returns (the episode resumes at
 * the next start).
 */
export class Podcast {
  /** The folder of episode records and audio. */
  readonly dir: string;
  readonly #engine: TtsEngine;
  readonly #clock: () => number;
  readonly #log: (line: string) => void;
  readonly #retention: Retention;
  readonly #encoder = new Mp3SegmentEncoder();
  #episodes: Promise<Map<string, Episode>> | undefined;
  #wake: (() => void) | undefined;
  #running: Promise<void> | undefined;
  #stopping = false;
  /** Set by enqueue and stop: the worker looks again before it sleeps. */
  #kicked = false;
  /** While the worker handles an episode, up to its retention pass after it is finished. */
  #speaking = false;
  #evicted = 0;

  /**
   * The episodes in `<data>/podcast/`, spoken by `options.engine`.
   *
   * @param options.dataDir The relay's data directory; episodes go in `podcast/`.
   * @param options.engine What speaks.
   * @param options.clock Source of time, epoch ms.
   * @param options.log Where one line per finished or failed episode goes.
   * @param options.retention Limits; default {@linkcode DEFAULT_RETENTION}.
   */
  constructor(options: {
    dataDir: string;
    engine: TtsEngine;
    clock: () => number;
    log: (line: string) => void;
    retention?: Retention;
  }) {
    this.dir = join(options.dataDir, "podcast");
    this.#engine = options.engine;
    this.#clock = options.clock;
    this.#log = options.log;
    this.#retention = options.retention ?? DEFAULT_RETENTION;
  }

  /** The engine's name, for the start line. */
  get engineName(): string {
    return this.#engine.name;
  }

  /**
   * Queues an episode; the worker picks it up at once.
   *
   * @returns The queued record.
   * @throws the file system's errors (then nothing is queued).
   */
  async enqueue(title: string, text: string): Promise<Episode> {
    const episodes = await this.#load();
    const now = this.#clock();
    const episode: Episode = {
      id: newId(now),
      title,
      text,
      created_at: now,
      state: "queued",
      chunks_total: 0,
      chunks_done: 0,
      bytes: 0,
      duration_s: 0,
    };
    await this.#save(episode, episodes);
    this.#kick();
    return episode;
  }

  /** Writes an episode as exported; one that was not ready is queued again. */
  async restore(episode: Episode): Promise<void> {
    if (!isEpisode(episode)) throw new Error("not an episode");
    const episodes = await this.#load();
    const { finished_at: _f, error: _e, ...rest } = episode;
    await this.#save({
      ...rest,
      state: "queued",
      chunks_total: 0,
      chunks_done: 0,
      bytes: 0,
      duration_s: 0,
    }, episodes);
    this.#kick();
  }

  /** Every episode, newest first. */
  async list(): Promise<Episode[]> {
    return [...(await this.#load()).values()].sort((a, b) =>
      b.created_at - a.created_at || b.id.localeCompare(a.id)
    );
  }

  /** One episode, or `undefined`. */
  async get(id: string): Promise<Episode | undefined> {
    return (await this.#load()).get(id);
  }

  /** The path of a ready episode's MP3 file. */
  audioPath(id: string): string {
    return join(this.dir, `${id}.mp3`);
  }

  /** Figures for `/stats` and `/metrics`. */
  async stats(): Promise<PodcastStats> {
    const counts: Record<EpisodeState, number> = {
      queued: 0,
      synthesising: 0,
      ready: 0,
      failed: 0,
    };
    let audio = 0;
    for (const episode of (await this.#load()).values()) {
      counts[episode.state]++;
      audio += episode.bytes;
    }
    return {
      episodes: counts,
      audio_bytes: audio,
      evicted: this.#evicted,
      retention: { keep: this.#retention.keep, max_disk_bytes: this.#retention.maxDiskBytes },
    };
  }

  /** Starts the background worker: it resumes unfinished episodes, oldest first. */
  start(): void {
    if (this.#running !== undefined) return;
    this.#stopping = false;
    this.#running = this.#work().catch((error) => {
      this.#log(`relay: podcast worker stopped: ${String(error)}`);
    });
  }

  /** Stops the worker after the chunk being spoken; resolves when it has stopped. */
  async stop(): Promise<void> {
    this.#stopping = true;
    this.#kick();
    await this.#running;
    this.#running = undefined;
    this.#engine.close?.();
  }

  /**
   * Resolves once no episode is queued or being spoken, and the worker has finished with the
   * last one (its retention pass included), for tests and the benchmark.
   *
   * @param timeoutMs Gives up after this long, ms.
   * @throws {Error} when it gives up.
   */
  async idle(timeoutMs: number): Promise<void> {
    const end = Date.now() + timeoutMs;
    while (this.#speaking || (await this.#next()) !== undefined) {
      if (Date.now() > end) throw new Error("the podcast worker is still busy");
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  #kick(): void {
    this.#kicked = true;
    this.#wake?.();
  }

  async #work(): Promise<void> {
    while (!this.#stopping) {
      this.#kicked = false;
      const next = await this.#next();
      if (next === undefined) {
        // A kick while #next was reading means there may be work, or a stop: look again.
        if (this.#kicked) continue;
        await new Promise<void>((resolve) => {
          this.#wake = resolve;
        });
        this.#wake = undefined;
        continue;
      }
      this.#speaking = true;
      try {
        await this.#speak(next);
      } finally {
        this.#speaking = false;
      }
    }
  }

  async #next(): Promise<Episode | undefined> {
    const waiting = [...(await this.#load()).values()]
      .filter((e) => e.state === "queued" || e.state === "synthesising")
      .sort((a, b) => a.created_at - b.created_at || a.id.localeCompare(b.id));
    return waiting[0];
  }

  /** Speaks one episode from where it stopped; records failure instead of throwing. */
  async #speak(start: Episode): Promise<void> {
    const episodes = await this.#load();
    const chunks = splitForSpeech(start.text);
    const part = join(this.dir, `${start.id}.mp3.part`);
    let episode: Episode = { ...start, state: "synthesising", chunks_total: chunks.length };
    try {
      if (chunks.length === 0) throw new Error("the text has nothing to read aloud");
      // Cut the part file back to what the record says is done: a crash may have left a
      // segment half written after it.
      const file = await Deno.open(part, { create: true, write: true, mode: PRIVATE_FILE_MODE });
      try {
        await Deno.chmod(part, PRIVATE_FILE_MODE);
        await file.truncate(episode.bytes);
      } finally {
        file.close();
      }
      await this.#save(episode, episodes);
      for (let i = episode.chunks_done; i < chunks.length; i++) {
        if (this.#stopping) return;
        const text = chunks[i]!;
        const pcm = await this.#engine.synthesize(text, chooseVoice(text));
        const audio = await this.#encoder.encode(pcm);
        // The file opens with an empty Info frame, filled in once the episode is done.
        const mp3 = episode.bytes === 0 ? concat(infoPlaceholder(audio), audio) : audio;
        const out = await Deno.open(part, { append: true });
        try {
          let offset = 0;
          while (offset < mp3.length) offset += await out.write(mp3.subarray(offset));
          await out.sync();
        } finally {
          out.close();
        }
        episode = {
          ...episode,
          chunks_done: i + 1,
          bytes: episode.bytes + mp3.length,
          duration_s: episode.duration_s + pcm.samples.length / pcm.sampleRate,
        };
        await this.#save(episode, episodes);
      }
      await writeInfoTag(part);
      await Deno.rename(part, this.audioPath(episode.id));
      episode = { ...episode, state: "ready", finished_at: this.#clock() };
      await this.#save(episode, episodes);
      this.#log(
        `relay: podcast episode ${episode.id} ready (${Math.round(episode.duration_s)} s, ` +
          `${episode.bytes} bytes)`,
      );
      await this.#enforceRetention(episodes);
    } catch (error) {
      if (!episodes.has(episode.id)) return; // deleted meanwhile
      const reason = error instanceof Error ? error.message : String(error);
      await removeIfExists(part).catch(() => false);
      const { bytes: _b, ...rest } = episode;
      episode = { ...rest, bytes: 0, state: "failed", error: reason, finished_at: this.#clock() };
      await this.#save(episode, episodes).catch(() => {});
      this.#log(`relay: podcast episode ${episode.id} failed: ${reason}`);
      await this.#enforceRetention(episodes).catch(() => {});
    }
  }

  /**
   * Deletes the oldest ready episodes beyond the limits, and the oldest failed ones beyond
   * `keep` failures: ready and failed episodes are counted apart, so that failures never
   * push out audio. The newest ready episode always stays, whatever its size.
   */
  async #enforceRetention(episodes: Map<string, Episode>): Promise<void> {
    for (const state of ["ready", "failed"] as const) {
      const finished = [...episodes.values()]
        .filter((e) => e.state === state)
        .sort((a, b) => b.created_at - a.created_at || b.id.localeCompare(a.id));
      let kept = 0;
      let bytes = 0;
      for (const episode of finished) {
        if (
          kept >= 1 && (kept + 1 > this.#retention.keep ||
            bytes + episode.bytes > this.#retention.maxDiskBytes)
        ) {
          await removeIfExists(this.audioPath(episode.id));
          await removeIfExists(join(this.dir, `${episode.id}.json`));
          episodes.delete(episode.id);
          this.#evicted++;
          continue;
        }
        kept++;
        bytes += episode.bytes;
      }
    }
  }

  async #save(episode: Episode, episodes: Map<string, Episode>): Promise<void> {
    await writeAtomically(join(this.dir, `${episode.id}.json`), JSON.stringify(episode));
    episodes.set(episode.id, episode);
  }

  #load(): Promise<Map<string, Episode>> {
    this.#episodes ??= (async () => {
      const episodes = new Map<string, Episode>();
      for await (const entry of readDirIfExists(this.dir)) {
        if (!entry.isFile || !entry.name.endsWith(".json")) continue;
        try {
          const episode = JSON.parse(await readTextIfExists(join(this.dir, entry.name)) ?? "");
          if (isEpisode(episode) && `${episode.id}.json` === entry.name) {
            episodes.set(episode.id, episode);
          }
        } catch {
          // Not an episode file: left alone.
        }
      }
      return episodes;
    })().catch((error) => {
      this.#episodes = undefined;
      throw error;
    });
    return this.#episodes;
  }
}

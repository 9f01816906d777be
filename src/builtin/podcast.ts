/**
 * The built-in podcast: episodes queued by the read-aloud call are spoken in the background,
 * one at a time, never inside the request. Each episode has, in `<data>/podcast/`, its text
 * (`<id>.txt`, written once), a small record (`<id>.json`: title, state, progress) and, once
 * spoken, an MP3 file.
 *
 * The text is cut into chunks of whole sentences (on a worker thread); each chunk is spoken
 * and encoded as a self-contained MP3 segment and appended to `<id>.mp3.part` behind an Info
 * frame that will record the file's frames and length, and the record notes how many chunks
 * and bytes are done (a few hundred bytes a chunk: the text is not written again). Every
 * step can be cut off by a crash, and the next start carries on from what the disk holds:
 *
 * - an `<id>.mp3` whose frames all check out is finished: it is never written again, only
 *   its record is (the crash fell between the rename and the record);
 * - otherwise the episode resumes from its part file only: cut back to the recorded length,
 *   at the first chunk not recorded; a part file that is missing or shorter than recorded
 *   means starting the episode again, never padding a file to a length;
 * - when the last chunk is done, every frame of the part file is checked, the Info frame gets
 *   its counts, the file is synced, and only then is it renamed to `<id>.mp3` and the episode
 *   called ready.
 *
 * For the crash tests, the `pauseAt` option makes the worker stop for good at a step (see
 * {@linkcode PodcastStep}) and say so in one log line, so that a test can kill the relay exactly
 * there; the relay never sets it (tests/reliability/_paused_relay.ts starts one that does).
 *
 * Retention: after an episode is finished, the oldest ready episodes beyond `keep`
 * episodes or `maxDiskBytes` of audio are deleted (audio, text and record), and the oldest
 * failed ones beyond `keep` failures.
 *
 * @module
 */

import { join } from "node:path";
import { infoFrame, Mp3SegmentEncoder, segmentSeconds, walkMp3File } from "./mp3.ts";
import { newId, PRIVATE_FILE_MODE, removeIfExists, writeAtomically } from "../util/files.ts";
import { ChangeCache } from "../util/change_cache.ts";
import {
  appendSynced,
  type Episode,
  EpisodeFiles,
  type EpisodeState,
  isRecord,
  progressed,
  sizeOf,
  syncDirectory,
} from "./episodes.ts";
import { splitOffThread, type TtsEngine } from "./tts.ts";
import { NoVoiceError } from "./speech_command.ts";
import { HeldAtStop } from "./room_gate.ts";
import type { SpeechLang } from "./speech_lang.ts";
import { type Spoken, spokenChunks } from "./speech_chunks.ts";

export type { Chapter, Episode, EpisodeState } from "./episodes.ts";

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

/**
 * The steps of an episode's life where the `pauseAt` option stops the worker, for the
 * crash tests: `started` (the part file is open and the record says "synthesising", nothing
 * spoken yet), `appended` (the second chunk's audio is in the part file and synced, its
 * progress not yet recorded), `recorded` (the second chunk's progress is recorded),
 * `completed` (the Info frame has its counts and the part file is synced, not yet renamed),
 * `renamed` (the part file is now the MP3 file, the record still says "synthesising") and
 * `ready` (the record says "ready"; the retention pass has not run).
 */
export type PodcastStep = "started" | "appended" | "recorded" | "completed" | "renamed" | "ready";

/** Every step of an episode's life, in order: the names the `pauseAt` option takes. */
export const PODCAST_STEPS: readonly PodcastStep[] = [
  "started",
  "appended",
  "recorded",
  "completed",
  "renamed",
  "ready",
];

/**
 * The episodes and the background worker that speaks them. Call {@linkcode start} once;
 * {@linkcode stop} lets the chunk being spoken finish and returns (the episode resumes at
 * the next start).
 */
export class Podcast {
  /** The folder of episode records and audio. */
  readonly dir: string;
  /** Told of each episode queued, restored or deleted by retention (the search index). */
  onChange: ((id: string, removed: boolean) => void) | undefined;
  readonly #engine: TtsEngine;
  readonly #fallback: TtsEngine | undefined;
  readonly #clock: () => number;
  readonly #log: (line: string) => void;
  readonly #retention: Retention;
  #encoder = new Mp3SegmentEncoder();
  readonly #files: EpisodeFiles;
  readonly #pauseAt: PodcastStep | undefined;
  #episodes: Promise<Map<string, Episode>> | undefined;
  /** The feed, made once per change of the episodes and kept (`feeds.ts`). */
  readonly feedCache: ChangeCache = new ChangeCache();
  #wake: (() => void) | undefined;
  #running: Promise<void> | undefined;
  #stopping = false;
  /** Set by enqueue and stop: the worker looks again before it sleeps. */
  #kicked = false;
  /** While the worker handles an episode, up to its retention pass after it is finished. */
  #speaking = false;
  /** An episode was handled since the worker last found nothing to do. */
  #spoke = false;
  #evicted = 0;

  /**
   * The episodes in `<data>/podcast/`, spoken by `options.engine`.
   *
   * @param options.dataDir The relay's data directory; episodes go in `podcast/`.
   * @param options.engine What speaks.
   * @param options.fallback What speaks a chunk in a language `engine` says it has no voice for
   *   ({@linkcode NoVoiceError}); without it, or when it has none either, the passage is left out.
   * @param options.clock Source of time, epoch ms.
   * @param options.log Where one line per finished or failed episode goes.
   * @param options.retention Limits; default {@linkcode DEFAULT_RETENTION}.
   * @param options.pauseAt For crash tests: the step where the worker stops for good; default
   *   none.
   */
  constructor(options: {
    dataDir: string;
    engine: TtsEngine;
    fallback?: TtsEngine | undefined;
    clock: () => number;
    log: (line: string) => void;
    retention?: Retention;
    pauseAt?: PodcastStep;
  }) {
    this.dir = join(options.dataDir, "podcast");
    this.#files = new EpisodeFiles(this.dir);
    this.#engine = options.engine;
    this.#fallback = options.fallback;
    this.#clock = options.clock;
    this.#log = options.log;
    this.#retention = options.retention ?? DEFAULT_RETENTION;
    this.#pauseAt = options.pauseAt;
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
    // The text first: a record is never without its text.
    await this.#files.writeText(episode.id, text);
    await this.#save(episode, episodes);
    this.onChange?.(episode.id, false);
    this.#kick();
    return episode;
  }

  /** Writes an episode as exported; one that was not ready is queued again. */
  async restore(episode: Episode): Promise<void> {
    if (!isRecord(episode) || typeof episode.text !== "string") {
      throw new Error("not an episode");
    }
    const episodes = await this.#load();
    const { finished_at: _f, error: _e, ...rest } = episode;
    await this.#files.writeText(episode.id, episode.text);
    await this.#save({
      ...rest,
      state: "queued",
      chunks_total: 0,
      chunks_done: 0,
      bytes: 0,
      duration_s: 0,
    }, episodes);
    this.onChange?.(episode.id, false);
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
    return this.#files.audioPath(id);
  }

  /** The path of a ready episode's transcript (missing for an episode spoken before they were kept). */
  transcriptPath(id: string): string {
    return this.#files.transcriptPath(id);
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
    this.#fallback?.close?.();
  }

  /**
   * Resolves once no episode is queued or being spoken, and the worker has finished with the
   * last one (its retention pass included): for a caller that must wait until everything it
   * queued is spoken and the old episodes are gone, as bench/tts.ts does (a state it could not
   * tell from the episodes' records, which say "ready" before the retention pass).
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

  /** Whether the engine has a voice for `lang` (an engine that cannot tell has every one). */
  readonly #speaks = (lang: SpeechLang) => this.#engine.speaks?.(lang) ?? true;

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
        // Nothing to speak: the engine drops what it holds (its speech thread, with the
        // compiled module and the instance), and the MP3 encoder (LAME's 16 MB of WebAssembly
        // memory) goes with it, until next time.
        if (this.#spoke) {
          this.#engine.close?.();
          this.#fallback?.close?.();
          this.#encoder = new Mp3SegmentEncoder();
        }
        this.#spoke = false;
        await new Promise<void>((resolve) => {
          this.#wake = resolve;
        });
        this.#wake = undefined;
        continue;
      }
      this.#speaking = true;
      this.#spoke = true;
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
    let episode = start;
    try {
      if (await this.#finishedBefore(episode, episodes)) return;
      const split = await splitOffThread(episode.text);
      if (split.length === 0) throw new Error("the text has nothing to read aloud");
      episode = await this.#resume(episode, split.length, episodes);
      let chunks = spokenChunks(split, this.#speaks, episode.skipped);
      await this.#reached("started", episode);
      for (let i = episode.chunks_done; i < chunks.length; i++) {
        if (this.#stopping) return;
        try {
          episode = await this.#speakChunk(episode, chunks[i]!, episodes);
        } catch (error) {
          // No voice for this language anywhere: its passages are left out from here on (the
          // record notes it with the next chunk's progress), and this chunk says so instead.
          if (!(error instanceof NoVoiceError) || episode.skipped?.includes(error.lang)) {
            throw error;
          }
          episode = { ...episode, skipped: [...(episode.skipped ?? []), error.lang] };
          chunks = spokenChunks(split, this.#speaks, episode.skipped);
          i--;
        }
      }
      const transcript = chunks.map((chunk) => chunk.text).filter((text) => text !== "");
      await writeAtomically(this.transcriptPath(episode.id), `${transcript.join("\n")}\n`);
      episode = await this.#finish(episode, episodes);
      await this.#reached("ready", episode);
      await this.#enforceRetention(episodes);
    } catch (error) {
      if (!episodes.has(episode.id)) return; // deleted meanwhile
      // A chunk held for want of disk space when the relay stopped: resumed at the next start.
      if (error instanceof HeldAtStop) return;
      const reason = error instanceof Error ? error.message : String(error);
      await removeIfExists(this.#files.partPath(episode.id)).catch(() => false);
      const { bytes: _b, ...rest } = episode;
      episode = { ...rest, bytes: 0, state: "failed", error: reason, finished_at: this.#clock() };
      await this.#save(episode, episodes).catch(() => {});
      this.#log(`relay: podcast episode ${episode.id} failed: ${reason}`);
      await this.#enforceRetention(episodes).catch(() => {});
    }
  }

  /**
   * When the episode's MP3 file is there and every frame of it checks out, a crash fell
   * between its rename and its "ready" record: records it as ready (the file is not
   * touched) and says `true`.
   */
  async #finishedBefore(episode: Episode, episodes: Map<string, Episode>): Promise<boolean> {
    const audio = await this.#checkedAudio(this.audioPath(episode.id));
    if (audio === undefined) return false;
    await removeIfExists(this.#files.partPath(episode.id));
    await this.#save({
      ...episode,
      state: "ready",
      chunks_done: episode.chunks_total,
      bytes: audio.bytes,
      duration_s: audio.seconds,
      finished_at: this.#clock(),
    }, episodes);
    this.#log(`relay: podcast episode ${episode.id} ready (its audio was complete)`);
    await this.#enforceRetention(episodes);
    return true;
  }

  /** The frames of the MP3 file at `path` if they all check out (with its Info frame's counts). */
  async #checkedAudio(path: string): Promise<{ bytes: number; seconds: number } | undefined> {
    try {
      const walk = await walkMp3File(path);
      const counted = walk.info === undefined ||
        (walk.info.frames === walk.frames && walk.info.bytes === walk.bytes);
      if (walk.frames > 0 && counted) return walk;
      this.#log(`relay: podcast audio ${path} is incomplete: speaking it again`);
    } catch (error) {
      if (error instanceof Deno.errors.NotFound) return undefined;
      this.#log(`relay: podcast audio ${path} is damaged (${String(error)}): speaking it again`);
    }
    return undefined;
  }

  /**
   * Where to carry on: after the chunks recorded, with the part file cut back to the bytes
   * recorded (a crash may have left part of a segment after them), when the part file holds
   * at least that much and the text still cuts into as many chunks. Otherwise from the
   * start, with an empty part file: a missing or short part file is never padded.
   *
   * @returns The episode as "synthesising", saved.
   */
  async #resume(episode: Episode, total: number, episodes: Map<string, Episode>): Promise<Episode> {
    const part = this.#files.partPath(episode.id);
    const resumable = episode.chunks_total === total && episode.chunks_done > 0 &&
      episode.chunks_done <= total && episode.bytes > 0 && await sizeOf(part) >= episode.bytes;
    {
      using file = await Deno.open(part, { create: true, write: true, mode: PRIVATE_FILE_MODE });
      await Deno.chmod(part, PRIVATE_FILE_MODE);
      await file.truncate(resumable ? episode.bytes : 0);
    }
    const { chapters: _c, skipped: _s, ...anew } = episode;
    const next: Episode = resumable ? { ...episode, state: "synthesising", chunks_total: total } : {
      ...anew,
      state: "synthesising",
      chunks_total: total,
      chunks_done: 0,
      bytes: 0,
      duration_s: 0,
    };
    await this.#save(next, episodes);
    return next;
  }

  /**
   * Speaks the next chunk, appends its MP3 segment to the part file (behind a placeholder
   * Info frame, for the first) and syncs it, then records the progress, with the chapter the
   * chunk starts at the audio's length so far: the record is a few hundred bytes, whatever the
   * text's length.
   */
  async #speakChunk(
    episode: Episode,
    chunk: Spoken,
    episodes: Map<string, Episode>,
  ): Promise<Episode> {
    const segment = chunk.text === "" ? new Uint8Array(0) : await this.#segment(chunk);
    const head = episode.bytes === 0 && segment.length >= 4
      ? infoFrame(segment.subarray(0, 4))
      : new Uint8Array(0);
    if (segment.length > 0) await appendSynced(this.#files.partPath(episode.id), [head, segment]);
    const second = episode.chunks_done >= 1;
    if (second) await this.#reached("appended", episode);
    // The audio as it plays, frame by frame: the chapters start exactly where it says.
    const next = progressed(episode, chunk, head.length + segment.length, segmentSeconds(segment));
    await this.#save(next, episodes);
    if (second) await this.#reached("recorded", next);
    return next;
  }

  /**
   * One chunk spoken and encoded as an MP3 segment; by the fallback engine when the engine has no
   * voice for its language and the fallback has one.
   *
   * @throws {NoVoiceError} when neither has a voice for it.
   */
  async #segment(chunk: Spoken): Promise<Uint8Array> {
    const pcm = await this.#engine.synthesize(chunk.text, chunk.lang).catch((error) => {
      if (!(error instanceof NoVoiceError) || !this.#fallback?.speaks?.(chunk.lang)) throw error;
      return this.#fallback.synthesize(chunk.text, chunk.lang);
    });
    const segment = await this.#encoder.encode(pcm);
    // Half a minute of samples (about 1 MB) given back now, not at the garbage collector's
    // next pass: the main thread allocates little, so that pass can be many chunks away.
    if (pcm.samples.buffer instanceof ArrayBuffer) pcm.samples.buffer.transfer(0);
    return segment;
  }

  /**
   * Checks every frame of the part file, writes the counts into its Info frame, syncs it,
   * renames it to the MP3 file and records the episode as ready, in that order.
   *
   * @throws {Error} when the part file is not whole MP3 frames of the recorded length.
   */
  async #finish(episode: Episode, episodes: Map<string, Episode>): Promise<Episode> {
    const part = this.#files.partPath(episode.id);
    if (episode.bytes === 0) throw new Error("the speech engine made no audio");
    const walk = await walkMp3File(part);
    if (walk.bytes !== episode.bytes || walk.info === undefined) {
      throw new Error(`the audio file is not what was recorded (${walk.bytes} bytes)`);
    }
    {
      using file = await Deno.open(part, { read: true, write: true });
      const header = new Uint8Array(4);
      await file.read(header);
      const frame = infoFrame(header, { frames: walk.frames, bytes: walk.bytes });
      await file.seek(0, Deno.SeekMode.Start);
      let offset = 0;
      while (offset < frame.length) offset += await file.write(frame.subarray(offset));
      await file.sync();
    }
    await this.#reached("completed", episode);
    await Deno.rename(part, this.audioPath(episode.id));
    await syncDirectory(this.dir);
    await this.#reached("renamed", episode);
    const ready: Episode = {
      ...episode,
      state: "ready",
      bytes: walk.bytes,
      duration_s: walk.seconds,
      finished_at: this.#clock(),
    };
    await this.#save(ready, episodes);
    this.#log(
      `relay: podcast episode ${ready.id} ready (${Math.round(ready.duration_s)} s, ` +
        `${ready.bytes} bytes)`,
    );
    return ready;
  }

  /** For crash tests: at the step named, says so and stops here until the process is killed. */
  async #reached(step: PodcastStep, episode: Episode): Promise<void> {
    if (this.#pauseAt !== step) return;
    this.#log(
      `relay: podcast paused at ${step} (episode ${episode.id}, chunk ${episode.chunks_done} ` +
        `of ${episode.chunks_total})`,
    );
    await new Promise<never>(() => {});
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
          await this.#files.remove(episode.id);
          episodes.delete(episode.id);
          this.feedCache.changed();
          this.#evicted++;
          this.onChange?.(episode.id, true);
          continue;
        }
        kept++;
        bytes += episode.bytes;
      }
    }
  }

  async #save(episode: Episode, episodes: Map<string, Episode>): Promise<void> {
    await this.#files.save(episode);
    episodes.set(episode.id, episode);
    this.feedCache.changed();
  }

  #load(): Promise<Map<string, Episode>> {
    this.#episodes ??= this.#files.readAll().catch((error) => {
      this.#episodes = undefined;
      throw error;
    });
    return this.#episodes;
  }
}

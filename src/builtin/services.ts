/**
 * The relay's own notes store, blog and podcast as one value, so that a fresh relay
 * publishes with no other service (docs/publishing-builtin.md). No HTTP here: the server
 * serves them as route-table entries like every other endpoint, and `POST /publish` calls
 * them directly.
 *
 * @module
 */

import { BlogStore } from "./blog.ts";
import { SiteOrigin } from "./site.ts";
import { NotesStore } from "./notes.ts";
import { Podcast, type PodcastStats, type PodcastStep, type Retention } from "./podcast.ts";
import { EspeakWorker, type TtsEngine } from "./tts.ts";
import type { CommandEngine } from "./speech_command.ts";
import { RoomGate } from "./room_gate.ts";

/** Options of {@linkcode createBuiltinServices}. */
export interface BuiltinOptions {
  /** The relay's data directory: `notes/`, `blog/` and `podcast/` go in it. */
  readonly dataDir: string;
  /** Source of time, epoch ms; default `Date.now`. */
  readonly clock?: () => number;
  /** Where the podcast worker's lines go; default `console.log`. */
  readonly log?: (line: string) => void;
  /** The speech engine; default {@linkcode EspeakWorker}, or `speechCommand` when given. */
  readonly engine?: TtsEngine;
  /**
   * The household's speech command (`--speech-command`), made with
   * {@linkcode CommandEngine.fromLine}.
   */
  readonly speechCommand?: CommandEngine | undefined;
  /** Podcast retention limits. */
  readonly retention?: Retention;
  /** For crash tests only: the step where the podcast's worker stops for good. */
  readonly podcastPauseAt?: PodcastStep | undefined;
  /**
   * Whether the relay has room for new content (its store's `roomForContent`): while it says
   * no, the podcast's spoken chunks wait before their audio is written ({@linkcode RoomGate}).
   * Default: always room.
   */
  readonly roomForContent?: () => Promise<boolean>;
  /**
   * Origin for absolute URLs in feeds, pages and `redirect_url`, e.g.
   * `https://relay.example.org` (`--public-url`); default where the relay listens.
   */
  readonly publicUrl?: string | undefined;
}

/** A note, post or episode that was added (published, saved, restored) or removed. */
export interface BuiltinChange {
  /** Which service's. */
  readonly kind: "note" | "post" | "episode";
  /** Its id: the note's `doc_id`, the post's `post_id`, the episode's `id`. */
  readonly id: string;
  /** `true` when it was deleted (a post deleted, an episode past the podcast's retention). */
  readonly removed: boolean;
}

/** The built-in services: their stores and the podcast's background worker. */
export interface BuiltinServices {
  /** The notes store (its files in `<data>/notes/`). */
  readonly notes: NotesStore;
  /** The blog's posts (`<data>/blog/`). */
  readonly blog: BlogStore;
  /** The podcast's episodes and their worker (`<data>/podcast/`). */
  readonly podcast: Podcast;
  /** The origin of the services' absolute URLs (feeds, pages, `redirect_url`). */
  readonly site: SiteOrigin;
  /**
   * Tells where the relay listens (`http://host:port`): the origin of absolute URLs when
   * there is no public URL. A request's `Host` never is.
   */
  listening(url: string): void;
  /**
   * Tells `listener` of every note, post and episode added or removed from now on, once its
   * files are written (the search index keeps itself current this way). One listener: a
   * second call replaces the first.
   */
  watch(listener: (change: BuiltinChange) => void): void;
  /** Starts the podcast worker (resumes unfinished episodes). */
  start(): void;
  /** Stops the podcast worker after the chunk being spoken. */
  stop(): Promise<void>;
  /** Figures for `/stats` and `/metrics`: posts, notes, episodes by state, audio bytes. */
  stats(): Promise<{ notes: number; posts: number; podcast: PodcastStats }>;
}

/**
 * Opens the built-in services over `options.dataDir`; the podcast worker waits for
 * `start()`.
 *
 * @example
 * ```ts
 * const services = createBuiltinServices({ dataDir: "data" });
 * services.start();
 * ```
 */
export function createBuiltinServices(options: BuiltinOptions): BuiltinServices {
  const clock = options.clock ?? Date.now;
  const notes = new NotesStore(options.dataDir, clock);
  const blog = new BlogStore(options.dataDir, clock);
  const log = options.log ?? ((line: string) => console.log(line));
  const gate = new RoomGate(options.roomForContent ?? (() => Promise.resolve(true)), log);
  const engine = gate.gated(
    options.engine ??
      (options.speechCommand ?? new EspeakWorker()),
  );
  const podcast = new Podcast({
    dataDir: options.dataDir,
    engine,
    // The built-in engine speaks what the household's command has no voice for (its thread
    // starts only if it is asked).
    ...(options.speechCommand && !options.engine
      ? { fallback: gate.gated(new EspeakWorker()) }
      : {}),
    clock,
    log,
    ...(options.retention ? { retention: options.retention } : {}),
    ...(options.podcastPauseAt ? { pauseAt: options.podcastPauseAt } : {}),
  });
  const site = new SiteOrigin(options.publicUrl);
  return {
    notes,
    blog,
    site,
    listening: (url) => site.listening(url),
    podcast,
    watch(listener) {
      notes.onChange = (id, removed) => listener({ kind: "note", id, removed });
      blog.onChange = (id, removed) => listener({ kind: "post", id, removed });
      podcast.onChange = (id, removed) => listener({ kind: "episode", id, removed });
    },
    start() {
      gate.start();
      podcast.start();
    },
    stop() {
      gate.stop();
      return podcast.stop();
    },
    async stats() {
      return {
        notes: await notes.count(),
        posts: (await blog.list()).length,
        podcast: await podcast.stats(),
      };
    },
  };
}

/**
 * The podcast's files other than audio. Its artwork, `podcast-artwork.png` beside this
 * module: 3000 × 3000 px, RGB, flat colours (55 KB), because Apple Podcasts lists only a
 * podcast with square artwork of 1400 to 3000 px, JPEG or PNG in RGB (the web app's 512 px
 * icon was too small); the compile tasks embed it with `--include`. It is the relay's logo,
 * so it is public even when the podcast is private. And each episode's transcript, the words as
 * they were spoken, which the feed names in `podcast:transcript`, and its chapters as Podcasting
 * 2.0's JSON chapters, which the feed names in `podcast:chapters`.
 *
 * @module
 */

import type { Episode } from "./podcast.ts";
import { scriptLanguage } from "./speech_lang.ts";
import { readTextIfExists } from "../util/files.ts";

/** Where the artwork is served; the feed's `itunes:image` and `<image>` name it. */
export const ARTWORK_PATH = "/podcast/artwork.png";

let artwork: Promise<Uint8Array<ArrayBuffer>> | undefined;

/**
 * The artwork as a response: PNG, cached for a day by apps and proxies (it changes only
 * with the relay's version).
 *
 * @throws the file system's errors, when the file is missing from an installation.
 */
export async function artworkResponse(): Promise<Response> {
  artwork ??= Deno.readFile(new URL("./podcast-artwork.png", import.meta.url)).catch((error) => {
    artwork = undefined;
    throw error;
  });
  return new Response(await artwork, {
    headers: { "content-type": "image/png", "cache-control": "public, max-age=86400" },
  });
}

/**
 * An episode's transcript as UTF-8 plain text in its language (`Content-Language`): the words
 * as spoken (the file at `path`, written with its audio), or its text as published for an
 * episode spoken before transcripts were kept.
 *
 * @throws the file system's errors but a missing file.
 */
export async function transcriptResponse(episode: Episode, path: string): Promise<Response> {
  const spoken = await readTextIfExists(path);
  return new Response(spoken ?? episode.text, {
    headers: {
      "content-type": "text/plain; charset=utf-8",
      // RFC 9110's header for the language of a body, as `lang` is for a page.
      "content-language": scriptLanguage(episode.text, episode.skipped),
    },
  });
}

/** Podcasting 2.0's JSON chapters: a version and the chapters, start times in seconds. */
export interface ChaptersJson {
  /** The format's version, "1.2.0". */
  readonly version: string;
  /** The chapters, ascending by start, each before the end of the audio. */
  readonly chapters: ReadonlyArray<{ readonly startTime: number; readonly title: string }>;
}

/**
 * An episode's chapters in Podcasting 2.0's JSON chapters format, or `undefined` when it has
 * none. Start times are the recorded ones (the audio of the chunks before, frame by frame),
 * rounded to milliseconds; a chapter that starts where the next one does (a heading with nothing
 * spoken under it) gives way to the next; the first chapter starts at 0 (titled with the
 * episode's title when the text does not open with a heading).
 */
export function chaptersOf(episode: Episode): ChaptersJson | undefined {
  const recorded = episode.chapters ?? [];
  if (recorded.length === 0) return undefined;
  const chapters: Array<{ startTime: number; title: string }> = [];
  if ((recorded[0]?.start_s ?? 0) > 0) chapters.push({ startTime: 0, title: episode.title });
  for (const chapter of recorded) {
    const startTime = Math.round(chapter.start_s * 1000) / 1000;
    if (startTime >= episode.duration_s) break;
    if (chapters.at(-1)?.startTime === startTime) chapters.pop();
    chapters.push({ startTime, title: chapter.title });
  }
  return { version: "1.2.0", chapters };
}

/** An episode's chapters as a response (`application/json+chapters`), or a 404's `undefined`. */
export function chaptersResponse(episode: Episode): Response | undefined {
  const chapters = chaptersOf(episode);
  if (chapters === undefined) return undefined;
  return new Response(JSON.stringify(chapters), {
    headers: { "content-type": "application/json+chapters; charset=utf-8" },
  });
}

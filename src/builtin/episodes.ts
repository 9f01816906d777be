/**
 * The podcast's episodes on disk, in `<data>/podcast/`: per episode its text (`<id>.txt`,
 * written once), its record (`<id>.json`: title, state, progress; a few hundred bytes,
 * rewritten as the episode moves on, with the chapters and the languages left out so far), its
 * audio (`<id>.mp3.part` while it is spoken, then `<id>.mp3`) and its transcript, the words as
 * spoken (`<id>.transcript.txt`, written whole before the audio is renamed). Earlier relays kept the text inside the record; such a record is
 * rewritten in this layout when it is first read.
 *
 * @module
 */

import { join } from "node:path";
import {
  isId,
  readDirIfExists,
  readTextIfExists,
  removeIfExists,
  writeAtomically,
} from "../util/files.ts";

/** A chapter of an episode: where it starts in the audio, and its title (a heading's words). */
export interface Chapter {
  /** Seconds from the start of the audio: the audio of every chunk spoken before it. */
  readonly start_s: number;
  /** The heading's words, or the article's title. */
  readonly title: string;
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
  /** The chapters started by the chunks done, in order (none for an episode without headings). */
  readonly chapters?: readonly Chapter[];
  /** Languages of passages left out for want of a voice (`speech_lang.ts` tags). */
  readonly skipped?: readonly string[];
  /** When it became ready or failed, epoch ms. */
  readonly finished_at?: number;
  /** Why it failed: one sentence. */
  readonly error?: string;
}
/** An episode's record on disk (`<id>.json`): all of it but its text (`<id>.txt`). */
export type EpisodeRecord = Omit<Episode, "text">;

/** A record as read: an earlier relay wrote the text into it. */
export function isRecord(value: unknown): value is EpisodeRecord & { text?: unknown } {
  const e = value as Partial<Episode> | null;
  return typeof e?.id === "string" && isId(e.id) && typeof e.title === "string" &&
    typeof e.created_at === "number" &&
    ["queued", "synthesising", "ready", "failed"].includes(e.state ?? "") &&
    typeof e.chunks_done === "number" && typeof e.bytes === "number";
}

export function recordOf(episode: Episode): EpisodeRecord {
  const { text: _text, ...record } = episode;
  return record;
}

/**
 * The episode after one more chunk: its bytes and seconds of audio added, the chapter the chunk
 * starts (at the audio's length before it) and the language it left out, if any, noted.
 *
 * @param bytes Bytes appended to the audio for the chunk.
 * @param seconds Seconds of audio in them.
 */
export function progressed(
  episode: Episode,
  chunk: { readonly chapter?: string; readonly skipped?: string },
  bytes: number,
  seconds: number,
): Episode {
  const chapters = chunk.chapter === undefined ? episode.chapters : [
    ...(episode.chapters ?? []),
    { start_s: episode.duration_s, title: chunk.chapter },
  ];
  const skipped = chunk.skipped === undefined || episode.skipped?.includes(chunk.skipped)
    ? episode.skipped
    : [...(episode.skipped ?? []), chunk.skipped];
  return {
    ...episode,
    chunks_done: episode.chunks_done + 1,
    bytes: episode.bytes + bytes,
    duration_s: episode.duration_s + seconds,
    ...(chapters === undefined ? {} : { chapters }),
    ...(skipped === undefined ? {} : { skipped }),
  };
}

/** Appends `parts` to the file at `path` and syncs it to the disk. */
export async function appendSynced(path: string, parts: readonly Uint8Array[]): Promise<void> {
  using out = await Deno.open(path, { append: true });
  for (const part of parts) {
    let offset = 0;
    while (offset < part.length) offset += await out.write(part.subarray(offset));
  }
  await out.sync();
}

/** Size of the file at `path`, bytes, or -1 when there is none. */
export async function sizeOf(path: string): Promise<number> {
  try {
    return (await Deno.stat(path)).size;
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return -1;
    throw error;
  }
}

/** Syncs a directory, so that a rename in it survives a power cut (best effort). */
export async function syncDirectory(path: string): Promise<void> {
  try {
    using dir = await Deno.open(path, { read: true });
    await dir.sync();
  } catch {
    // Some file systems cannot sync a directory: the rename is then as durable as they make it.
  }
}

/** An episode's files: where each is, reading them all, writing and removing them. */
export class EpisodeFiles {
  /** The folder of the episodes' files. */
  readonly dir: string;

  /** @param dir The folder of the episodes' files (`<data>/podcast`). */
  constructor(dir: string) {
    this.dir = dir;
  }

  /** The MP3 file of a finished episode. */
  audioPath(id: string): string {
    return join(this.dir, `${id}.mp3`);
  }

  /**
   * Writes the episode's record, not its text (written once, by {@linkcode writeText}).
   *
   * @throws the file system's errors.
   */
  async save(episode: Episode): Promise<void> {
    await writeAtomically(join(this.dir, `${episode.id}.json`), JSON.stringify(recordOf(episode)));
  }

  /**
   * Writes an episode's text, before its first record: a record is never without its text.
   *
   * @throws the file system's errors.
   */
  async writeText(id: string, text: string): Promise<void> {
    await writeAtomically(this.textPath(id), text);
  }

  /**
   * Removes an episode: its record first, so that a crash halfway leaves only files that
   * {@linkcode readAll} removes.
   */
  async remove(id: string): Promise<void> {
    await removeIfExists(join(this.dir, `${id}.json`));
    await this.removeFiles(id);
  }

  /** Removes an episode's files but its record: audio, part file, text, transcript. */
  async removeFiles(id: string): Promise<void> {
    await removeIfExists(this.audioPath(id));
    await removeIfExists(this.partPath(id));
    await removeIfExists(this.textPath(id));
    await removeIfExists(this.transcriptPath(id));
  }

  /** The file of an episode's transcript: the words as spoken, once its audio is complete. */
  transcriptPath(id: string): string {
    return join(this.dir, `${id}.transcript.txt`);
  }

  /** The part file an episode's audio is written to while it is spoken. */
  partPath(id: string): string {
    return join(this.dir, `${id}.mp3.part`);
  }

  /** The file of an episode's text. */
  textPath(id: string): string {
    return join(this.dir, `${id}.txt`);
  }

  /**
   * Reads every record and its text. Files of an episode without a record (an enqueue cut
   * off before its record, a deletion cut off after it) are removed.
   */
  async readAll(): Promise<Map<string, Episode>> {
    const episodes = new Map<string, Episode>();
    const others = new Set<string>();
    for await (const entry of readDirIfExists(this.dir)) {
      if (!entry.isFile) continue;
      const [, id, kind] = /^(.+?)\.(json|txt|transcript\.txt|mp3|mp3\.part)$/.exec(entry.name) ??
        [];
      if (id === undefined || !isId(id)) continue;
      if (kind !== "json") {
        others.add(id);
        continue;
      }
      const episode = await this.#readEpisode(id).catch(() => undefined);
      if (episode !== undefined) episodes.set(id, episode);
    }
    for (const id of others) {
      if (!episodes.has(id) && await sizeOf(join(this.dir, `${id}.json`)) < 0) {
        await this.removeFiles(id).catch(() => {});
      }
    }
    return episodes;
  }

  async #readEpisode(id: string): Promise<Episode | undefined> {
    const record: unknown = JSON.parse(
      await readTextIfExists(join(this.dir, `${id}.json`)) ?? "",
    );
    if (!isRecord(record) || record.id !== id) return undefined;
    if (typeof record.text === "string") {
      return await this.#migrate({ ...record, text: record.text });
    }
    const text = await readTextIfExists(this.textPath(id));
    return text === undefined ? undefined : { ...record, text };
  }

  /**
   * A record written by an earlier relay holds its text: the text moves to its own file. An
   * unfinished episode starts again (its chunks were cut by earlier rules), unless its MP3
   * file turns out to be complete.
   */
  async #migrate(episode: Episode): Promise<Episode> {
    const unfinished = episode.state === "queued" || episode.state === "synthesising";
    const migrated: Episode = unfinished
      ? { ...episode, chunks_done: 0, bytes: 0, duration_s: 0 }
      : episode;
    await writeAtomically(this.textPath(episode.id), episode.text);
    await writeAtomically(
      join(this.dir, `${episode.id}.json`),
      JSON.stringify(recordOf(migrated)),
    );
    return migrated;
  }
}

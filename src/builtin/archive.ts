/**
 * The built-in services in a backup (`relay export`, `relay import`): every note file as
 * stored, every post, and every podcast episode's title and text. Episode audio is not
 * carried: an imported episode is queued and spoken again, so nothing a user published is
 * lost on a move and the backup stays small.
 *
 * @module
 */

import { z } from "zod";
import { BlogStore, type Post } from "./blog.ts";
import { isId } from "../util/files.ts";
import { NotesStore } from "./notes.ts";
import { Podcast } from "./podcast.ts";
import type { TtsEngine } from "./tts.ts";

const idSchema = z.string().refine(isId, { error: "not an id the relay makes" });
const textSchema = z.string().refine((text) => text.isWellFormed(), {
  error: "not valid Unicode",
});

/** What a backup holds of the built-in services. Times are epoch ms. */
export const publishedSchema = z.object({
  notes: z.array(z.object({ doc_id: idSchema, file: textSchema })),
  posts: z.array(z.object({
    post_id: idSchema,
    title: textSchema,
    content: textSchema,
    content_md: textSchema.optional(),
    tags: z.array(textSchema),
    created_at: z.number().int().nonnegative(),
  })),
  episodes: z.array(z.object({
    id: idSchema,
    title: textSchema,
    text: textSchema,
    created_at: z.number().int().nonnegative(),
  })),
});

/** The built-in services' part of a backup (see {@linkcode publishedSchema}). */
export type Published = z.infer<typeof publishedSchema>;

/** An engine that is never asked to speak: export and import only read and write records. */
const SILENT: TtsEngine = {
  name: "none",
  synthesize: () => Promise.reject(new Error("not speaking during a backup")),
};

/**
 * Reads the built-in services' data from the data directory.
 *
 * @throws the file system's errors.
 */
export async function exportPublished(dataDir: string): Promise<Published> {
  const notes = new NotesStore(dataDir, Date.now);
  const noteFiles: Published["notes"] = [];
  for (const note of (await notes.list()).reverse()) {
    const file = await notes.read(note.doc_id);
    if (file !== undefined) noteFiles.push({ doc_id: note.doc_id, file });
  }
  const posts = (await new BlogStore(dataDir, Date.now).list()).reverse();
  const podcast = new Podcast({ dataDir, engine: SILENT, clock: Date.now, log: () => {} });
  const episodes = (await podcast.list()).reverse()
    .filter((episode) => episode.state !== "failed")
    .map(({ id, title, text, created_at }) => ({ id, title, text, created_at }));
  return {
    notes: noteFiles,
    posts: posts.map((post) => ({ ...post, tags: [...post.tags] })),
    episodes,
  };
}

/** How many notes, posts and episodes a backup holds, for a command's message. */
export function describePublished(published: Published): string {
  return `${published.notes.length} notes, ${published.posts.length} posts and ` +
    `${published.episodes.length} podcast episodes`;
}

/**
 * Writes the built-in services' data into the data directory: note files and posts as
 * they were (same ids), episodes queued to be spoken again when the relay starts. An item
 * with the id of one already there replaces it.
 *
 * @throws the file system's errors.
 */
export async function importPublished(dataDir: string, published: Published): Promise<void> {
  const notes = new NotesStore(dataDir, Date.now);
  for (const note of published.notes) await notes.restore(note.doc_id, note.file);
  const blog = new BlogStore(dataDir, Date.now);
  for (const post of published.posts) await blog.restore(post as Post);
  const podcast = new Podcast({ dataDir, engine: SILENT, clock: Date.now, log: () => {} });
  for (const episode of published.episodes) {
    await podcast.restore({
      ...episode,
      state: "queued",
      chunks_total: 0,
      chunks_done: 0,
      bytes: 0,
      duration_s: 0,
    });
  }
}

/**
 * The built-in blog's posts: one JSON file per post in `<data>/blog/`, named by the post's
 * id. Files rather than the relay's database: a household backs the folder up with the
 * notes, and nothing here needs transactions (a post is written once and deleted once).
 * The posts are kept in memory after the first read; this process is the only writer.
 *
 * @module
 */

import { join } from "node:path";
import {
  isId,
  newId,
  readDirIfExists,
  readTextIfExists,
  removeIfExists,
  writeAtomically,
} from "../util/files.ts";

/** A published post. */
export interface Post {
  /** Its id: in its URL (`/blog/{post_id}`) and its file name. */
  readonly post_id: string;
  /** Its title. */
  readonly title: string;
  /** The plain summary (`content` of the publish request). */
  readonly content: string;
  /** The Markdown original, rendered instead of `content` when present. */
  readonly content_md?: string;
  /** Its tags. */
  readonly tags: readonly string[];
  /** When it was published, epoch ms. */
  readonly created_at: number;
}

function isPost(value: unknown): value is Post {
  const post = value as Partial<Post> | null;
  return typeof post?.post_id === "string" && isId(post.post_id) &&
    typeof post.title === "string" && typeof post.content === "string" &&
    (post.content_md === undefined || typeof post.content_md === "string") &&
    Array.isArray(post.tags) && typeof post.created_at === "number";
}

/** The posts in `<data>/blog/`. */
export class BlogStore {
  /** The folder holding the post files. */
  readonly dir: string;
  readonly #clock: () => number;
  #posts: Promise<Map<string, Post>> | undefined;

  /**
   * Reads and writes posts in `<data>/blog/`.
   *
   * @param dataDir The relay's data directory; posts go in its `blog/` folder.
   * @param clock Source of time, epoch ms.
   */
  constructor(dataDir: string, clock: () => number) {
    this.dir = join(dataDir, "blog");
    this.#clock = clock;
  }

  /**
   * Publishes a post.
   *
   * @returns The post as stored.
   * @throws the file system's errors (then nothing is published).
   */
  async publish(input: Omit<Post, "post_id" | "created_at">): Promise<Post> {
    const posts = await this.#load();
    const now = this.#clock();
    const post: Post = { ...input, post_id: newId(now), created_at: now };
    await this.#write(post);
    posts.set(post.post_id, post);
    return post;
  }

  /** Writes a post as it was exported (same id, same time). */
  async restore(post: Post): Promise<void> {
    if (!isPost(post)) throw new Error("not a post");
    const posts = await this.#load();
    await this.#write(post);
    posts.set(post.post_id, post);
  }

  /** A post, or `undefined` when there is none with that id. */
  async get(postId: string): Promise<Post | undefined> {
    return (await this.#load()).get(postId);
  }

  /** Every post, newest first. */
  async list(): Promise<Post[]> {
    return [...(await this.#load()).values()].sort((a, b) =>
      b.created_at - a.created_at || b.post_id.localeCompare(a.post_id)
    );
  }

  /**
   * Deletes a post: its file and its place in the index and the feed.
   *
   * @returns `false` when there was no such post.
   */
  async delete(postId: string): Promise<boolean> {
    const posts = await this.#load();
    if (!isId(postId) || !posts.has(postId)) return false;
    await removeIfExists(join(this.dir, `${postId}.json`));
    posts.delete(postId);
    return true;
  }

  async #write(post: Post): Promise<void> {
    await writeAtomically(join(this.dir, `${post.post_id}.json`), JSON.stringify(post, null, 2));
  }

  #load(): Promise<Map<string, Post>> {
    this.#posts ??= (async () => {
      const posts = new Map<string, Post>();
      for await (const entry of readDirIfExists(this.dir)) {
        if (!entry.isFile || !entry.name.endsWith(".json")) continue;
        const text = await readTextIfExists(join(this.dir, entry.name));
        try {
          const post = JSON.parse(text ?? "null");
          if (isPost(post) && `${post.post_id}.json` === entry.name) posts.set(post.post_id, post);
        } catch {
          // Not a post file: left alone.
        }
      }
      return posts;
    })().catch((error) => {
      this.#posts = undefined;
      throw error;
    });
    return this.#posts;
  }
}

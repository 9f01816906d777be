/**
 * The built-in blog's posts: one JSON file per post in `<data>/blog/`, named by the post's
 * id. Files rather than the relay's database: a household backs the folder up with the
 * notes, and nothing here needs transactions (a post is written once and deleted once).
 * The posts are kept in memory after the first read; this process is the only writer.
 *
 * A post's body is rendered to HTML once, when it is published, and kept beside it in
 * `<id>.v<version>.html`: the blog and its feed are public, and rendering on every read let
 * a few readers of large posts use up the relay's memory. A post with no rendering of the
 * renderer's current version (published before, or rendered by an older renderer) is
 * rendered when first read. Renders run one at a time, each on a thread of its own, so
 * that however many readers come at once only one rendering's memory is held, and requests
 * are answered while it runs.
 *
 * @module
 */

import { join } from "node:path";
import pLimit from "p-limit";
import { ChangeCache } from "../util/change_cache.ts";
import { readArticleResult } from "../article_result.ts";
import { RENDERER_VERSION, renderOffThread } from "./render_thread.ts";
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

/**
 * What describes a post in its page's `<meta name="description">` and its feed entry: its
 * plain `content`, which the fan-out makes the summary of a reader's article that has one
 * (`publishing.ts`); a post stored whole as an article result (`article_result.ts`) in its
 * `content_md`, as earlier relays kept some, by that result's summary.
 */
export function postDescription(post: Post): string {
  return readArticleResult(post.content_md ?? "")?.summary ?? post.content;
}

function isPost(value: unknown): value is Post {
  const post = value as Partial<Post> | null;
  return typeof post?.post_id === "string" && isId(post.post_id) &&
    typeof post.title === "string" && typeof post.content === "string" &&
    (post.content_md === undefined || typeof post.content_md === "string") &&
    Array.isArray(post.tags) && typeof post.created_at === "number";
}

/** Renders at once at most: each holds a whole post's HTML and markdown-it's tokens. */
const RENDERS_AT_ONCE = 1;

/** The posts in `<data>/blog/`. */
export class BlogStore {
  /** The folder holding the post files. */
  readonly dir: string;
  /** Told of each post published, restored or deleted, once its files are (the search index). */
  onChange: ((postId: string, removed: boolean) => void) | undefined;
  readonly #clock: () => number;
  #posts: Promise<Map<string, Post>> | undefined;
  readonly #renderLimit = pLimit(RENDERS_AT_ONCE);
  /** Renders under way, by post id: a second reader waits for the first one's. */
  readonly #rendering = new Map<string, Promise<string>>();
  #renders = 0;
  /** The feed, made once per change of the posts and kept (`feeds.ts`). */
  readonly feedCache: ChangeCache = new ChangeCache();

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
    await this.#render(post);
    await this.#write(post);
    posts.set(post.post_id, post);
    this.feedCache.changed();
    this.onChange?.(post.post_id, false);
    return post;
  }

  /**
   * A post's body as HTML: its stored rendering, read from its file, or (when there is none
   * of the current renderer's version) rendered now, stored and returned.
   *
   * @returns `undefined` when there is no post with that id.
   * @throws the file system's errors.
   */
  async body(postId: string): Promise<string | undefined> {
    const post = (await this.#load()).get(postId);
    if (post === undefined) return undefined;
    return await readTextIfExists(this.#htmlPath(postId, RENDERER_VERSION)) ??
      await this.#render(post);
  }

  /** Posts rendered since this store was made (published, or first read after an upgrade). */
  get renders(): number {
    return this.#renders;
  }

  /** Writes a post as it was exported (same id, same time). */
  async restore(post: Post): Promise<void> {
    if (!isPost(post)) throw new Error("not a post");
    const posts = await this.#load();
    await this.#write(post);
    posts.set(post.post_id, post);
    this.feedCache.changed();
    this.onChange?.(post.post_id, false);
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
    this.feedCache.changed();
    this.onChange?.(postId, true);
    await removeIfExists(this.#htmlPath(postId, RENDERER_VERSION));
    return true;
  }

  #htmlPath(postId: string, version: number): string {
    return join(this.dir, `${postId}.v${version}.html`);
  }

  /** Renders a post's body and stores it, one render at a time, once per post at a time. */
  #render(post: Post): Promise<string> {
    const running = this.#rendering.get(post.post_id);
    if (running !== undefined) return running;
    const render = this.#renderLimit(async () => {
      const html = await renderOffThread(post.content_md ?? post.content);
      this.#renders++;
      await writeAtomically(this.#htmlPath(post.post_id, RENDERER_VERSION), html);
      // The rendering of an older renderer is of no more use.
      for (let version = 1; version < RENDERER_VERSION; version++) {
        await removeIfExists(this.#htmlPath(post.post_id, version));
      }
      return html;
    }).finally(() => this.#rendering.delete(post.post_id));
    this.#rendering.set(post.post_id, render);
    return render;
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

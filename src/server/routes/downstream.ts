/**
 * The built-in publishing services as one Hono app, so that a fresh relay publishes with
 * no other service: the downstream API under `/downstream` (the same paths, requests and
 * answers as an external notes store, blog and podcast queue), the notes under `/notes/`,
 * the blog under `/blog/` and the podcast under `/podcast/`. See docs/publishing-builtin.md.
 *
 * {@linkcode createBuiltinServices} returns the app and the podcast's background worker;
 * the relay mounts the app beside its own routes and starts and stops the worker with
 * itself.
 *
 * @module
 */

import { type Context, Hono } from "hono";
import { getCookie } from "hono/cookie";
import { z } from "zod";
import { AuthFailureLimiter, presentedKey } from "../auth.ts";
import { readLimited } from "../body.ts";
import { byteRange, fileTag, notModified, notModifiedResponse } from "../validators.ts";
import { HttpError, problemResponse } from "../../errors.ts";
import { BlogStore } from "../../builtin/blog.ts";
import { NotesStore, parseTags } from "../../builtin/notes.ts";
import type { SiteUrls } from "../../builtin/html.ts";
import { Podcast, type PodcastStats, type Retention } from "../../builtin/podcast.ts";
import { CommandEngine, EspeakWorker, type TtsEngine } from "../../builtin/tts.ts";
import { keysMatch } from "../auth.ts";

/** The cookie the built-in blog's delete accepts: the relay's key or a publishing key. */
export const ACCESS_COOKIE = "relay_access";

/** The prefix of the downstream API: the default `{publish_url}` is `{base}/downstream`. */
export const DOWNSTREAM_PATH = "/downstream";

/**
 * Whether a key may do something: `read` (list and read notes; private blog and podcast)
 * or `publish` (delete a blog post). The relay's main key may do everything.
 */
export type Authorize = (key: string, scope: "read" | "publish") => boolean;

/** Options of {@linkcode createBuiltinServices}. */
export interface BuiltinOptions {
  /** The relay's data directory: `notes/`, `blog/` and `podcast/` go in it. */
  readonly dataDir: string;
  /** Checks a presented key. */
  readonly authorize: Authorize;
  /** The `X-App-ID` the read-aloud queue accepts (`RELAY_APP_ID`, else generated). */
  readonly appId: string;
  /**
   * Origin for absolute URLs in feeds, pages and `redirect_url`, e.g.
   * `https://relay.example.org` (`--public-url`); default the request's own origin.
   */
  readonly publicUrl?: string | undefined;
  /** Source of time, epoch ms; default `Date.now`. */
  readonly clock?: () => number;
  /** Where the podcast worker's lines go; default `console.log`. */
  readonly log?: (line: string) => void;
  /**
   * Where an unexpected error of a service goes, with its cause; default `console.error`
   * (the relay passes its logger's `error`, which never blocks).
   */
  readonly logError?: (msg: string, cause: unknown) => void;
  /** The speech engine; default {@linkcode EspeakWorker}, or `ttsCommand` when given. */
  readonly engine?: TtsEngine;
  /** An external speech command (`--tts-command`); see {@linkcode CommandEngine}. */
  readonly ttsCommand?: string | undefined;
  /** The blog needs a key with `read` scope (`--private-blog`). */
  readonly privateBlog?: boolean;
  /** The podcast feed and audio need a key with `read` scope (`--private-podcast`). */
  readonly privatePodcast?: boolean;
  /** Podcast retention limits. */
  readonly retention?: Retention;
  /** Largest request body, bytes; default 768 KiB. */
  readonly maxBodyBytes?: number;
}

/** The built-in services: their routes and their background worker. */
export interface BuiltinServices {
  /** The routes; mount with `app.route("/", services.app)`. */
  readonly app: Hono;
  /** Every path pattern the app serves, for a 404 message. */
  readonly paths: readonly string[];
  /** The notes store (its files in `<data>/notes/`). */
  readonly notes: NotesStore;
  /** The blog's posts (`<data>/blog/`). */
  readonly blog: BlogStore;
  /** The podcast's episodes and their worker (`<data>/podcast/`). */
  readonly podcast: Podcast;
  /** Starts the podcast worker (resumes unfinished episodes). */
  start(): void;
  /** Stops the podcast worker after the chunk being spoken. */
  stop(): Promise<void>;
  /** Figures for `/stats`: posts, notes, episodes by state, audio bytes. */
  stats(): Promise<{ notes: number; posts: number; podcast: PodcastStats }>;
}

const JSON_TYPE = "application/json; charset=utf-8";

// The pages (markdown-it, ~20 MB) and the feeds (feed, ~14 MB) are loaded when first asked
// for, not when the relay starts: docs/benchmarks.md, "Idle memory".
const loadPages = () => import("../../builtin/html.ts");
const loadFeeds = () => import("../../builtin/feeds.ts");

function json(value: unknown, status = 200): Response {
  return new Response(JSON.stringify(value), { status, headers: { "content-type": JSON_TYPE } });
}

function text(name: string) {
  return z
    .string({ error: `field "${name}" must be a string` })
    .refine((t) => t.isWellFormed(), { error: `field "${name}" is not valid Unicode` });
}

function required(name: string, max: number) {
  return text(name)
    .refine((t) => t.trim() !== "", { error: `field "${name}" must not be empty` })
    .refine((t) => t.length <= max, { error: `field "${name}" is longer than ${max} characters` });
}

const TITLE_MAX = 500;
const TAGS_MAX = 2000;
const CONTENT_MAX = 1_000_000;

const notesSchema = z.object({
  title: required("title", TITLE_MAX),
  content: required("content", CONTENT_MAX),
  content_format: z.literal(1, { error: 'field "content_format" must be 1 (Markdown)' })
    .optional(),
  tags: text("tags").refine((t) => t.length <= TAGS_MAX, {
    error: `field "tags" is longer than ${TAGS_MAX} characters`,
  }).optional(),
  folder_id: z.unknown().optional(),
});

const publishSchema = z.object({
  title: required("title", TITLE_MAX),
  content: required("content", CONTENT_MAX),
  content_md: text("content_md").optional(),
  tags: text("tags").refine((t) => t.length <= TAGS_MAX, {
    error: `field "tags" is longer than ${TAGS_MAX} characters`,
  }).optional(),
  targets: z.array(z.enum(["blog", "nas"], { error: 'a target is "blog" or "nas"' }), {
    error: 'field "targets" must be an array holding "blog" or "nas"',
  }).min(1, { error: 'field "targets" must hold "blog" or "nas"' }),
  transform: z.literal("read", { error: 'field "transform" must be "read"' }).optional(),
}).refine((b) => !b.targets.includes("nas") || b.transform === "read", {
  error: 'target "nas" (read aloud) needs "transform": "read"',
}).refine((b) => b.targets.includes("nas") || b.transform === undefined, {
  error: 'the blog takes no "transform"',
});

function parse<T>(schema: z.ZodType<T>, input: unknown, action: string): T {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  throw new HttpError(400, `Cannot ${action}: ${result.error.issues[0]?.message ?? "bad request"}`);
}

/** Reads a JSON object body within the size limit, or throws the 415/413/400 problem. */
async function readJson(c: Context, limit: number, action: string): Promise<unknown> {
  const type = c.req.header("content-type")?.split(";")[0]?.trim().toLowerCase();
  if (type !== "application/json") {
    throw new HttpError(415, `Cannot ${action}: send the body as application/json`);
  }
  const bytes = await readLimited(c.req.raw, limit);
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch {
    throw new HttpError(400, `Cannot ${action}: the body is not valid JSON`);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new HttpError(400, `Cannot ${action}: the body must be a JSON object`);
  }
  return value;
}

/**
 * The byte range a `Range` header asks for, RFC 9110 §14: one range, `bytes=a-b`, `a-`
 * or `-n`.
 *
 * @returns `undefined` when there is no usable Range header (serve the whole file);
 *   `"unsatisfiable"` when it asks for bytes past the end; else the first and last byte.
 */
export function parseRange(
  header: string | undefined,
  size: number,
): { start: number; end: number } | "unsatisfiable" | undefined {
  const match = header === undefined ? null : /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (match === null) return undefined;
  const [, from, to] = match;
  if (from === "" && to === "") return undefined;
  if (from === "") {
    const suffix = Number(to);
    if (suffix === 0) return "unsatisfiable";
    return { start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(from);
  const end = to === "" ? size - 1 : Math.min(Number(to), size - 1);
  if (start >= size) return "unsatisfiable";
  if (end < start) return undefined;
  return { start, end };
}

/** Serves a file with `Accept-Ranges`, answering a Range request with 206. */
async function serveFile(c: Context, path: string, type: string): Promise<Response> {
  let file: Deno.FsFile;
  try {
    file = await Deno.open(path, { read: true });
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) {
      throw new HttpError(404, "No such episode audio");
    }
    throw error;
  }
  const { size, mtime } = await file.stat();
  const validators = { etag: fileTag(size, mtime?.getTime() ?? 0), lastModified: mtime?.getTime() };
  const headers: Record<string, string> = {
    "content-type": type,
    "accept-ranges": "bytes",
    "cache-control": "public, max-age=86400",
    etag: validators.etag,
    ...(mtime ? { "last-modified": mtime.toUTCString() } : {}),
  };
  if (notModified(c.req.raw, validators)) {
    file.close();
    return notModifiedResponse(new Headers(headers));
  }
  const range = byteRange(c.req.raw, size, validators);
  if (range === "unsatisfiable") {
    file.close();
    return problemResponse(416, `Cannot serve that range: the file has ${size} bytes`, {
      "content-range": `bytes */${size}`,
    });
  }
  if (c.req.method === "HEAD") {
    file.close();
    return new Response(null, { headers: { ...headers, "content-length": String(size) } });
  }
  if (range === undefined) {
    return new Response(file.readable, {
      headers: { ...headers, "content-length": String(size) },
    });
  }
  await file.seek(range.start, Deno.SeekMode.Start);
  let left = range.end - range.start + 1;
  let open = true;
  const close = () => {
    if (open) file.close();
    open = false;
  };
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const buffer = new Uint8Array(Math.min(64 * 1024, left));
        const read = left > 0 ? await file.read(buffer) : null;
        if (read === null || read === 0) {
          close();
          controller.close();
          return;
        }
        left -= read;
        controller.enqueue(buffer.subarray(0, read));
        if (left === 0) {
          close();
          controller.close();
        }
      } catch (error) {
        close();
        controller.error(error);
      }
    },
    cancel: close,
  });
  return new Response(body, {
    status: 206,
    headers: {
      ...headers,
      "content-length": String(range.end - range.start + 1),
      "content-range": `bytes ${range.start}-${range.end}/${size}`,
    },
  });
}

/**
 * Builds the built-in services.
 *
 * @example
 * ```ts
 * const services = createBuiltinServices({ dataDir: "data", authorize, appId });
 * app.route("/", services.app);
 * services.start();
 * ```
 */
export function createBuiltinServices(options: BuiltinOptions): BuiltinServices {
  const clock = options.clock ?? Date.now;
  const log = options.log ?? ((line: string) => console.log(line));
  const logError = options.logError ??
    ((msg: string, cause: unknown) => console.error(`${msg}:`, cause));
  const limit = options.maxBodyBytes ?? 768 * 1024;
  const notes = new NotesStore(options.dataDir, clock);
  const blog = new BlogStore(options.dataDir, clock);
  const engine = options.engine ??
    (options.ttsCommand ? new CommandEngine(options.ttsCommand) : new EspeakWorker());
  const podcast = new Podcast({
    dataDir: options.dataDir,
    engine,
    clock,
    log,
    ...(options.retention ? { retention: options.retention } : {}),
  });

  const urls = (c: Context): SiteUrls => ({
    origin: (options.publicUrl ?? new URL(c.req.url).origin).replace(/\/+$/, ""),
  });

  // Failed keys, app ids and cookies count per client address as on the relay's own
  // endpoints: after 10 in a minute the address gets 429 whatever it sends.
  const failures = new AuthFailureLimiter(clock);
  const addressOf = (c: Context): string | undefined =>
    (c.env as { remoteAddr?: { hostname?: string } } | undefined)?.remoteAddr?.hostname;
  const checkLimit = (c: Context) => {
    const address = addressOf(c);
    const wait = address === undefined ? 0 : failures.retryAfter(address);
    if (wait > 0) {
      throw new HttpError(
        429,
        `Too many failed authentications from ${address}: try again in ${wait} s`,
        { "retry-after": String(wait) },
      );
    }
  };
  const refuse = (c: Context, detail: string): never => {
    const address = addressOf(c);
    if (address !== undefined) failures.fail(address);
    throw new HttpError(401, detail);
  };

  /** The key a request presents: header, query parameter or the access cookie. */
  const keyOf = (c: Context): string | undefined =>
    presentedKey(c.req.raw.headers, new URL(c.req.url)) ??
      getCookie(c, ACCESS_COOKIE);

  const requireKey = (c: Context, scope: "read" | "publish", what: string) => {
    checkLimit(c);
    const key = keyOf(c);
    if (key === undefined) {
      refuse(
        c,
        `${what} needs a key: send it in the X-Auth-Key header, the key query parameter ` +
          `or the ${ACCESS_COOKIE} cookie`,
      );
    } else if (!options.authorize(key, scope)) {
      refuse(c, `${what} needs a key with the "${scope}" scope`);
    }
  };

  /**
   * Saving a note or publishing a post needs the app id (`X-App-ID`, which the relay's own
   * publish client sends) or a key with the publish scope: the downstream API is reachable
   * by anyone who can reach the relay, and a public blog must not take posts from them.
   */
  const requireWriter = (c: Context, what: string) => {
    checkLimit(c);
    const appId = c.req.header("x-app-id");
    if (appId !== undefined && appId !== "" && keysMatch(appId, options.appId)) return;
    const key = keyOf(c);
    if (key !== undefined && options.authorize(key, "publish")) return;
    refuse(
      c,
      `${what} needs the X-App-ID header (RELAY_APP_ID, or the relay's app-id file) or a key ` +
        `with the "publish" scope`,
    );
  };

  const app = new Hono();
  const paths: string[] = [];
  type Handler = (c: Context) => Promise<Response>;
  const route = (methods: readonly string[], path: string, handler: Handler) => {
    paths.push(path);
    const allow = methods.join(", ");
    app.all(path, async (c) => {
      try {
        if (!methods.includes(c.req.method)) {
          throw new HttpError(405, `Cannot ${c.req.method} ${c.req.path}: use ${allow}`, {
            allow,
          });
        }
        return await handler(c);
      } catch (error) {
        if (error instanceof HttpError) {
          return problemResponse(error.status, error.message, error.headers);
        }
        logError("relay: built-in services: unexpected error", error);
        return problemResponse(500, "Internal error: the relay logged the cause");
      }
    });
  };
  const GET = ["GET", "HEAD"] as const;

  // The downstream API: what POST /publish calls, built in.
  route(["POST"], `${DOWNSTREAM_PATH}/api/notes/import`, async (c) => {
    requireWriter(c, "Saving a note");
    const body = parse(notesSchema, await readJson(c, limit, "save the note"), "save the note");
    const note = await notes.save({
      title: body.title.trim(),
      markdown: body.content,
      tags: parseTags(body.tags),
    });
    return json({ code: 0, doc_id: note.doc_id });
  });

  route(["POST"], `${DOWNSTREAM_PATH}/api/publish`, async (c) => {
    const raw = await readJson(c, limit, "publish");
    const wantsNas = Array.isArray((raw as { targets?: unknown }).targets) &&
      (raw as { targets: unknown[] }).targets.includes("nas");
    // The app id is checked before anything else about a read-aloud request.
    if (wantsNas) {
      checkLimit(c);
      const given = c.req.header("x-app-id");
      if (given === undefined || given === "" || !keysMatch(given, options.appId)) {
        refuse(
          c,
          given ? "Wrong X-App-ID" : "Reading aloud needs the X-App-ID header (RELAY_APP_ID)",
        );
      }
    } else requireWriter(c, "Publishing a post");
    const body = parse(publishSchema, raw, "publish");
    const answer: Record<string, unknown> = {};
    if (body.targets.includes("blog")) {
      const post = await blog.publish({
        title: body.title.trim(),
        content: body.content,
        ...(body.content_md?.trim() ? { content_md: body.content_md } : {}),
        tags: parseTags(body.tags),
      });
      answer.blog = {
        status: "success",
        post_id: post.post_id,
        redirect_url: `${urls(c).origin}/blog/${post.post_id}`,
      };
    }
    if (wantsNas) {
      const episode = await podcast.enqueue(body.title.trim(), body.content);
      answer.status = "success";
      answer.message = `queued for reading aloud as episode ${episode.id}`;
      answer.episode_id = episode.id;
    }
    return json(answer);
  });

  route(["POST"], `${DOWNSTREAM_PATH}/delete/:post_id`, async (c) => {
    checkLimit(c);
    const cookie = getCookie(c, ACCESS_COOKIE);
    if (cookie === undefined || !options.authorize(cookie, "publish")) {
      refuse(
        c,
        `Deleting a post needs the ${ACCESS_COOKIE} cookie holding the relay's key or a key ` +
          `with the "publish" scope`,
      );
    }
    const id = c.req.param("post_id") ?? "";
    if (!(await blog.delete(id))) throw new HttpError(404, "No such blog post");
    return new Response(null, { status: 303, headers: { location: `${urls(c).origin}/blog/` } });
  });

  // Notes: private, a key with the read scope.
  const listNotes: Handler = async (c) => {
    requireKey(c, "read", "Listing notes");
    return json({ notes: await notes.list() });
  };
  route(GET, "/notes", listNotes);
  route(GET, "/notes/", listNotes);
  route(GET, "/notes/:doc_id", async (c) => {
    requireKey(c, "read", "Reading a note");
    const file = await notes.read(c.req.param("doc_id") ?? "");
    if (file === undefined) throw new HttpError(404, "No such note");
    return new Response(file, { headers: { "content-type": "text/markdown; charset=utf-8" } });
  });

  // The blog: public unless --private-blog.
  const blogIndex: Handler = async (c) => {
    if (options.privateBlog) requireKey(c, "read", "This blog is private: reading it");
    const { blogIndexPage, PAGE_HEADERS } = await loadPages();
    return new Response(blogIndexPage(await blog.list(), urls(c)), { headers: PAGE_HEADERS });
  };
  route(GET, "/blog", blogIndex);
  route(GET, "/blog/", blogIndex);
  route(GET, "/blog/feed.xml", async (c) => {
    if (options.privateBlog) requireKey(c, "read", "This blog is private: reading it");
    const { blogAtom } = await loadFeeds();
    return new Response(blogAtom(await blog.list(), urls(c)), {
      headers: { "content-type": "application/atom+xml; charset=utf-8" },
    });
  });
  route(GET, "/blog/posts", async (c) => {
    if (options.privateBlog) requireKey(c, "read", "This blog is private: reading it");
    const origin = urls(c).origin;
    return json({
      feed_url: `${origin}/blog/feed.xml`,
      posts: (await blog.list()).map((post) => ({
        post_id: post.post_id,
        title: post.title,
        tags: post.tags,
        created_at: post.created_at,
        url: `${origin}/blog/${post.post_id}`,
      })),
    });
  });
  route(GET, "/blog/:post_id", async (c) => {
    if (options.privateBlog) requireKey(c, "read", "This blog is private: reading it");
    const post = await blog.get(c.req.param("post_id") ?? "");
    if (post === undefined) throw new HttpError(404, "No such blog post");
    const { postPage, PAGE_HEADERS } = await loadPages();
    return new Response(postPage(post, urls(c)), { headers: PAGE_HEADERS });
  });

  // The podcast: public unless --private-podcast.
  const podcastIndex: Handler = async (c) => {
    if (options.privatePodcast) requireKey(c, "read", "This podcast is private: reading it");
    const { podcastPage, PAGE_HEADERS } = await loadPages();
    const page = podcastPage(await podcast.list(), urls(c), { qr: !options.privatePodcast });
    return new Response(page, { headers: PAGE_HEADERS });
  };
  route(GET, "/podcast", podcastIndex);
  route(GET, "/podcast/", podcastIndex);
  route(GET, "/podcast/episodes", async (c) => {
    if (options.privatePodcast) requireKey(c, "read", "This podcast is private: reading it");
    const origin = urls(c).origin;
    return json({
      feed_url: `${origin}/podcast/feed.xml`,
      episodes: (await podcast.list()).map(({ text: _text, ...episode }) => ({
        ...episode,
        ...(episode.state === "ready" ? { audio_url: `${origin}/podcast/${episode.id}.mp3` } : {}),
      })),
    });
  });
  route(GET, "/podcast/feed.xml", async (c) => {
    if (options.privatePodcast) requireKey(c, "read", "This podcast is private: reading it");
    // A private feed read with ?key= passes the key on to its enclosures.
    const key = options.privatePodcast ? c.req.query("key") : undefined;
    const { podcastRss } = await loadFeeds();
    return new Response(podcastRss(await podcast.list(), urls(c), key), {
      headers: { "content-type": "application/rss+xml; charset=utf-8" },
    });
  });
  // The feed's address as a QR code, for subscribing from a phone's podcast app. A private
  // podcast's feed address carries the key it was asked with.
  route(GET, "/podcast/qr.svg", async (c) => {
    const key = options.privatePodcast ? c.req.query("key") : undefined;
    if (options.privatePodcast) requireKey(c, "read", "This podcast is private: reading it");
    const feed = `${urls(c).origin}/podcast/feed.xml${
      key === undefined ? "" : `?key=${encodeURIComponent(key)}`
    }`;
    const { default: QRCode } = await import("qrcode");
    const svg = await QRCode.toString(feed, { type: "svg", margin: 2, errorCorrectionLevel: "M" });
    return new Response(svg, {
      headers: { "content-type": "image/svg+xml", "cache-control": "no-store" },
    });
  });
  route(GET, "/podcast/:file", async (c) => {
    if (options.privatePodcast) requireKey(c, "read", "This podcast is private: reading it");
    const match = /^(.+)\.mp3$/.exec(c.req.param("file") ?? "");
    const episode = match ? await podcast.get(match[1]!) : undefined;
    if (episode === undefined || episode.state !== "ready") {
      throw new HttpError(404, "No such episode audio");
    }
    return await serveFile(c, podcast.audioPath(episode.id), "audio/mpeg");
  });

  // Used when the app is served alone; a relay that mounts it answers with its own 404.
  app.notFound((c) => problemResponse(404, `Nothing at "${c.req.path.slice(0, 100)}"`));

  return {
    app,
    paths,
    notes,
    blog,
    podcast,
    start: () => podcast.start(),
    stop: () => podcast.stop(),
    async stats() {
      return {
        notes: await notes.count(),
        posts: (await blog.list()).length,
        podcast: await podcast.stats(),
      };
    },
  };
}

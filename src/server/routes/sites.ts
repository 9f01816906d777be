/**
 * The built-in services' pages for people and their apps: the notes (`/notes/`, a key with
 * the `read` scope), the blog (`/blog/`) and the podcast (`/podcast/`), each public unless
 * `--private-blog` or `--private-podcast` makes it need a `read` key. They are route-table
 * entries like the API's, so the app checks method, `Origin` and key the same way for all.
 * See docs/publishing-builtin.md.
 *
 * @module
 */

import { HttpError } from "../../errors.ts";
import type { SiteUrls } from "../../builtin/html.ts";
import {
  ARTWORK_PATH,
  artworkResponse,
  chaptersResponse,
  transcriptResponse,
} from "../../builtin/podcast_files.ts";
import { robotsResponse } from "../../builtin/site.ts";
import { podcastFeedKey } from "../../access/podcast_feed_key.ts";
import { grantedToAll } from "../cors.ts";
import { selfLinkKey, withKeyedSelf } from "../self_link.ts";
import { json } from "../responses.ts";
import { serveFile } from "../file_server.ts";
import type { BuiltinPublishing, Handler, Route, Routes } from "../route.ts";
import { siteOrigin } from "./downstream.ts";

// The pages and the feeds (feed, ~14 MB) are loaded when first asked for, not when the
// relay starts: docs/benchmarks.md, "Idle memory".
const loadPages = () => import("../../builtin/html.ts");
const loadFeeds = () => import("../../builtin/feeds.ts");

const GET = ["GET", "HEAD"] as const;

/**
 * A route that reads: open, or needing a `read` key when `needsKey`; with `podcastFeed`, the
 * podcast's feed key is taken as such a key.
 */
function reading(needsKey: boolean | undefined, handler: Handler, podcastFeed = false): Route {
  return needsKey
    ? { scope: "read", methods: GET, handler, podcastFeed }
    : { open: true, methods: GET, handler };
}

/**
 * `route` as one whose answers are readable from any origin when it needs no key (a public
 * feed, transcript or audio, answered with `grantedToAll`): its preflight is answered too.
 */
function toAnyOrigin(route: Route): Route {
  return route.open ? { ...route, anyOrigin: true } : route;
}

/** The notes, a key with the `read` scope: the list and one note's file. */
function noteRoutes(builtin: BuiltinPublishing): Routes {
  const { notes } = builtin.services;
  const list: Handler = async () => json({ notes: await notes.list() });
  return {
    "/notes": reading(true, list),
    "/notes/": reading(true, list),
    "/notes/:doc_id": reading(true, async (c) => {
      const file = await notes.read(c.req.param("doc_id") ?? "");
      if (file === undefined) throw new HttpError(404, "No such note");
      return new Response(file, { headers: { "content-type": "text/markdown; charset=utf-8" } });
    }),
  };
}

/**
 * The blog: its index, Atom feed, posts as JSON and each post's page.
 *
 * @param feedKey The blog feed's key, which its self link carries when a private blog's feed
 *   is read with the main key in `?key=`.
 */
function blogRoutes(builtin: BuiltinPublishing, feedKey: string | undefined): Routes {
  const { blog } = builtin.services;
  const urls = (): SiteUrls => ({ origin: siteOrigin(builtin) });
  const index: Handler = async () => {
    const { blogIndexPage, PAGE_HEADERS } = await loadPages();
    return new Response(blogIndexPage(await blog.list(), urls()), { headers: PAGE_HEADERS });
  };
  const closed = builtin.privateBlog;
  return {
    "/blog": reading(closed, index),
    "/blog/": reading(closed, index),
    "/blog/feed.xml": toAnyOrigin(reading(closed, async (c, url) => {
      const { blogFeed } = await loadFeeds();
      const headers = { "content-type": "application/atom+xml; charset=utf-8" };
      const atom = await blogFeed(blog, urls());
      if (!closed) return grantedToAll(new Response(atom, { headers }));
      const self = selfLinkKey(c, url, feedKey);
      if (self === undefined) return new Response(atom, { headers });
      return new Response(withKeyedSelf(new TextDecoder().decode(atom), self), { headers });
    })),
    "/blog/posts": reading(closed, async () => {
      const origin = urls().origin;
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
    }),
    "/blog/:post_id": reading(closed, async (c) => {
      const post = await blog.get(c.req.param("post_id") ?? "");
      const body = post && await blog.body(post.post_id);
      if (post === undefined || body === undefined) throw new HttpError(404, "No such blog post");
      const { postPage, PAGE_HEADERS } = await loadPages();
      return new Response(postPage(post, body, urls()), { headers: PAGE_HEADERS });
    }),
  };
}

/** The podcast: its page, episodes as JSON, RSS feed, the feed's QR code and the audio. */
function podcastRoutes(builtin: BuiltinPublishing): Routes {
  const { podcast } = builtin.services;
  const closed = builtin.privatePodcast;
  const urls = (): SiteUrls => ({ origin: siteOrigin(builtin) });
  // A podcast app sends no header, so a private podcast's addresses carry a key; never the
  // caller's (often the main key), which would travel to the app and to whatever service it
  // syncs subscriptions with: the feed key, which opens the podcast's reads and nothing else.
  const key = closed ? podcastFeedKey(builtin.appId) : undefined;
  const query = key === undefined ? "" : `?key=${encodeURIComponent(key)}`;
  const podcastReading = (handler: Handler) => reading(closed, handler, true);
  const index: Handler = async () => {
    const { podcastPage, PAGE_HEADERS } = await loadPages();
    const page = podcastPage(await podcast.list(), urls(), { key });
    return new Response(page, { headers: PAGE_HEADERS });
  };
  return {
    "/podcast": podcastReading(index),
    "/podcast/": podcastReading(index),
    "/podcast/episodes": podcastReading(async () => {
      const origin = urls().origin;
      return json({
        feed_url: `${origin}/podcast/feed.xml${query}`,
        episodes: (await podcast.list()).map(({ text: _text, ...episode }) => ({
          ...episode,
          ...(episode.state === "ready"
            ? { audio_url: `${origin}/podcast/${episode.id}.mp3${query}` }
            : {}),
        })),
      });
    }),
    "/podcast/feed.xml": toAnyOrigin(podcastReading(async () => {
      const { podcastFeed } = await loadFeeds();
      const settings = builtin.podcastFeed;
      const feed = new Response(await podcastFeed(podcast, urls(), { key, settings }), {
        headers: { "content-type": "application/rss+xml; charset=utf-8" },
      });
      return closed ? feed : grantedToAll(feed);
    })),
    // The feed's address as a QR code, for subscribing from a phone's podcast app.
    "/podcast/qr.svg": podcastReading(async () => {
      const feed = `${urls().origin}/podcast/feed.xml${query}`;
      const { default: QRCode } = await import("qrcode");
      const svg = await QRCode.toString(feed, {
        type: "svg",
        margin: 2,
        errorCorrectionLevel: "M",
      });
      return new Response(svg, {
        headers: { "content-type": "image/svg+xml", "cache-control": "no-store" },
      });
    }),
    // Public even for a private podcast: an app shows it before it has asked for a key.
    [ARTWORK_PATH]: reading(false, () => artworkResponse()),
    "/podcast/:file": toAnyOrigin(podcastReading(async (c) => {
      const match = /^(.+?)\.(mp3|txt|chapters\.json)$/.exec(c.req.param("file") ?? "");
      const episode = match ? await podcast.get(match[1]!) : undefined;
      if (episode === undefined || episode.state !== "ready") {
        throw new HttpError(404, "No such episode audio");
      }
      // A public podcast's files may be read by a web player on any site.
      if (match?.[2] === "txt") {
        const transcript = await transcriptResponse(episode, podcast.transcriptPath(episode.id));
        return closed ? transcript : grantedToAll(transcript);
      }
      if (match?.[2] === "chapters.json") {
        const chapters = chaptersResponse(episode);
        if (chapters === undefined) throw new HttpError(404, "This episode has no chapters");
        return closed ? chapters : grantedToAll(chapters);
      }
      const audio = await serveFile(c.req.raw, podcast.audioPath(episode.id), {
        type: "audio/mpeg",
        // A private one is kept by the app that asked, not by a shared cache in between: such
        // a cache keys on the address, and a key sent in a header is not part of it.
        cacheControl: `${closed ? "private" : "public"}, max-age=86400`,
        notFound: "No such episode audio",
      });
      return closed ? audio : grantedToAll(audio);
    })),
  };
}

/**
 * The built-in services' pages, feeds and files: notes, blog, podcast.
 *
 * @param builtin The services and whether the blog and podcast are private.
 * @param feedKeys The feeds' keys by their path (`feed_keys.ts`), for their self links.
 */
export function siteRoutes(
  builtin: BuiltinPublishing,
  feedKeys: ReadonlyMap<string, string> = new Map(),
): Routes {
  return {
    ...noteRoutes(builtin),
    ...blogRoutes(builtin, feedKeys.get("/blog/feed.xml")),
    ...podcastRoutes(builtin),
    "/robots.txt": reading(false, () => Promise.resolve(robotsResponse(builtin))),
  };
}

/**
 * The feeds: the blog's Atom feed (built with the npm package `feed`) and the podcast's
 * RSS 2.0 feed with the iTunes tags podcast apps read (AntennaPod, Apple Podcasts): one
 * `<item>` per ready episode with title, description, pubDate, a guid that never changes,
 * `<enclosure url length type="audio/mpeg">` and `itunes:duration`. Every URL is absolute
 * (`--public-url`, else where the relay listens; never a request's `Host`), since a phone
 * fetches them.
 *
 * @module
 */

import { Feed } from "feed";
import type { BlogStore, Post } from "./blog.ts";
import { escapeHtml, type SiteUrls } from "./html.ts";
import { formatDuration } from "./html.ts";
import type { Episode } from "./podcast.ts";
import { chooseVoice } from "./tts.ts";

/** Entries in the Atom feed at most, newest first: a reader wants what is new. */
const FEED_ENTRIES = 20;
/** Newest entries that carry the post's whole body; older ones carry a summary and a link. */
const FULL_ENTRIES = 5;
/**
 * Bytes of post bodies (HTML, UTF-8) in the feed at most: a body that would pass it gives
 * way to a summary, so that a feed of large posts stays small enough for a phone.
 */
const FEED_BODY_BYTES = 512 * 1024;
/** Characters of a post's plain summary in an entry without its body. */
const SUMMARY_CHARS = 500;

/** The feed's author: Atom wants one, and the relay knows no person's name. */
const FEED_AUTHOR = "Content Relay";

/** One entry of the blog's feed: the post, and its body as HTML when the feed carries it. */
export interface FeedEntry {
  /** The post. */
  readonly post: Post;
  /** Its rendered body; without it the entry has the plain summary. */
  readonly body?: string | undefined;
}

/**
 * The blog's Atom feed as UTF-8 bytes, made once per change of the posts and kept: its
 * newest {@linkcode FEED_ENTRIES} posts, the newest {@linkcode FULL_ENTRIES} with their
 * stored HTML while within {@linkcode FEED_BODY_BYTES}. Reading it renders nothing.
 *
 * @throws the file system's errors (reading a post's stored body).
 */
export function blogFeed(blog: BlogStore, urls: SiteUrls): Promise<Uint8Array<ArrayBuffer>> {
  return blog.cached(`atom ${urls.origin}`, async () => {
    const posts = (await blog.list()).slice(0, FEED_ENTRIES);
    const encoder = new TextEncoder();
    const entries: FeedEntry[] = [];
    let budget = FEED_BODY_BYTES;
    for (const [index, post] of posts.entries()) {
      let body: string | undefined;
      if (index < FULL_ENTRIES && budget > 0) {
        body = await blog.body(post.post_id);
        const bytes = body === undefined ? 0 : encoder.encode(body).length;
        if (bytes > budget) body = undefined;
        else budget -= bytes;
      }
      entries.push({ post, body });
    }
    return encoder.encode(blogAtom(entries, urls));
  });
}

/** The blog's Atom feed (RFC 4287) of `entries`, newest first. */
export function blogAtom(entries: readonly FeedEntry[], urls: SiteUrls): string {
  const newest = entries[0]?.post.created_at ?? 0;
  const feed = new Feed({
    title: "Blog",
    id: `${urls.origin}/blog/`,
    link: `${urls.origin}/blog/`,
    updated: new Date(newest),
    feedLinks: { atom: `${urls.origin}/blog/feed.xml` },
    author: { name: FEED_AUTHOR },
    copyright: "",
    generator: "Content Relay",
  });
  for (const { post, body } of entries) {
    const link = `${urls.origin}/blog/${post.post_id}`;
    const plain = post.content.replace(/\s+/g, " ").trim();
    const summary = plain.length > SUMMARY_CHARS ? `${plain.slice(0, SUMMARY_CHARS)}…` : plain;
    feed.addItem({
      // Atom's title here is of type "html": escaped, so that a title is shown as written.
      title: xmlChars(escapeHtml(post.title)),
      id: link,
      link,
      date: new Date(post.created_at),
      ...(body === undefined
        ? { description: xmlChars(escapeHtml(summary)) }
        : { content: xmlChars(body) }),
      // A category's term is what readers file it under; the library leaves "<" unescaped
      // in attributes, which XML forbids: drop it.
      category: post.tags.map((tag) => {
        const term = xmlChars(tag).replace(/[<>]/g, "");
        return { term, name: term };
      }),
    });
  }
  return feed.atom1();
}

const XML_ENTITIES: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&apos;",
};

/**
 * Drops the characters XML 1.0 forbids anywhere, even escaped or in CDATA: control
 * characters other than tab and line breaks, U+FFFE, U+FFFF and lone surrogates. A feed
 * holding one is refused whole by a strict reader.
 */
export function xmlChars(text: string): string {
  return text
    // deno-lint-ignore no-control-regex
    .replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\ufffe\uffff]/g, "")
    .replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, "");
}

/** Escapes text for XML element content and attribute values; drops characters XML forbids. */
export function escapeXml(text: string): string {
  return xmlChars(text).replace(/[&<>"']/g, (c) => XML_ENTITIES[c]!);
}

/** Characters of an episode's text in its description at most. */
const DESCRIPTION_CHARS = 400;

/**
 * The podcast's RSS 2.0 feed: ready episodes, newest first.
 *
 * @param key For a private podcast read with `?key=`: the key, added to the enclosures'
 *   URLs so that a podcast app, which sends no header, can fetch the audio too.
 */
export function podcastRss(episodes: readonly Episode[], urls: SiteUrls, key?: string): string {
  const site = `${urls.origin}/podcast/`;
  const query = key === undefined ? "" : `?key=${encodeURIComponent(key)}`;
  const items = episodes.filter((e) => e.state === "ready").map((episode) => {
    const audio = `${urls.origin}/podcast/${episode.id}.mp3${query}`;
    const text = episode.text.replace(/\s+/g, " ").trim();
    const description = text.length > DESCRIPTION_CHARS
      ? `${text.slice(0, DESCRIPTION_CHARS)}…`
      : text;
    return `    <item>
      <title>${escapeXml(episode.title)}</title>
      <description>${escapeXml(description)}</description>
      <pubDate>${new Date(episode.created_at).toUTCString()}</pubDate>
      <guid isPermaLink="false">relay-episode-${episode.id}</guid>
      <link>${escapeXml(site)}</link>
      <enclosure url="${escapeXml(audio)}" length="${episode.bytes}" type="audio/mpeg"/>
      <itunes:duration>${formatDuration(episode.duration_s)}</itunes:duration>
      <itunes:explicit>false</itunes:explicit>
    </item>`;
  });
  const newest = episodes.find((e) => e.state === "ready");
  // The feed's language: the one most ready episodes are read in.
  const ready = episodes.filter((e) => e.state === "ready");
  const chinese = ready.filter((e) => chooseVoice(e.text.slice(0, 2000)) === "cmn").length;
  const language = ready.length > 0 && chinese * 2 >= ready.length ? "zh-cn" : "en";
  return `<?xml version="1.0" encoding="UTF-8"?>
<rss version="2.0" xmlns:itunes="http://www.itunes.com/dtds/podcast-1.0.dtd" xmlns:atom="http://www.w3.org/2005/Atom">
  <channel>
    <title>Read aloud</title>
    <link>${escapeXml(site)}</link>
    <atom:link href="${
    escapeXml(`${urls.origin}/podcast/feed.xml`)
  }" rel="self" type="application/rss+xml"/>
    <description>Articles read aloud by the household's relay.</description>
    <language>${language}</language>
    <lastBuildDate>${new Date(newest?.created_at ?? 0).toUTCString()}</lastBuildDate>
    <itunes:author>Content Relay</itunes:author>
    <itunes:summary>Articles read aloud by the household's relay.</itunes:summary>
    <itunes:explicit>false</itunes:explicit>
    <itunes:category text="Technology"/>
    <itunes:image href="${escapeXml(`${urls.origin}/app/icon-512.png`)}"/>
${items.join("\n")}
  </channel>
</rss>
`;
}

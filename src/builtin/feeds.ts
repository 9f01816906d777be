/**
 * The feeds: the blog's Atom feed (built with the npm package `feed`) and the podcast's
 * RSS 2.0 feed with the iTunes tags podcast apps read (AntennaPod, Apple Podcasts): one
 * `<item>` per ready episode with title, description, pubDate, a guid that never changes,
 * `<enclosure url length type="audio/mpeg">` and `itunes:duration`. Every URL is absolute
 * (`--public-url`, else the request's origin), since a phone fetches them.
 *
 * @module
 */

import { Feed } from "feed";
import type { Post } from "./blog.ts";
import { escapeHtml, renderPostBody, type SiteUrls } from "./html.ts";
import { formatDuration } from "./html.ts";
import type { Episode } from "./podcast.ts";
import { chooseVoice } from "./tts.ts";

/** Posts in the Atom feed at most, newest first. */
const FEED_POSTS = 50;

/** The blog's Atom feed. */
export function blogAtom(posts: readonly Post[], urls: SiteUrls): string {
  const newest = posts[0]?.created_at ?? 0;
  const feed = new Feed({
    title: "Blog",
    id: `${urls.origin}/blog/`,
    link: `${urls.origin}/blog/`,
    updated: new Date(newest),
    feedLinks: { atom: `${urls.origin}/blog/feed.xml` },
    copyright: "",
    generator: "Content Relay",
  });
  for (const post of posts.slice(0, FEED_POSTS)) {
    const link = `${urls.origin}/blog/${post.post_id}`;
    feed.addItem({
      // Atom's title here is of type "html": escaped, so that a title is shown as written.
      title: xmlChars(escapeHtml(post.title)),
      id: link,
      link,
      date: new Date(post.created_at),
      content: xmlChars(renderPostBody(post)),
      // The feed library leaves "<" unescaped in attributes, which XML forbids: drop it.
      category: post.tags.map((tag) => ({ name: xmlChars(tag).replace(/[<>]/g, "") })),
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

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

import { Buffer } from "node:buffer";
import { createHash } from "node:crypto";
import { Feed } from "feed";
import { type BlogStore, type Post, postDescription } from "./blog.ts";
import { readArticleResult } from "../article_result.ts";
import { formatDuration, postLanguage, type SiteUrls } from "./html.ts";
import { escapeHtml, xmlChars } from "../util/escape.ts";
import type { Episode, Podcast } from "./podcast.ts";
import { ARTWORK_PATH } from "./podcast_files.ts";
import { plainTitle, renderMarkdown } from "./render.ts";
import { languageName, scriptLanguage, SPEECH_LANGS, type SpeechLang } from "./speech_lang.ts";

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
  return blog.feedCache.get(`atom ${urls.origin}`, async () => {
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

/**
 * The blog's Atom feed (RFC 4287) of `entries`, newest first, each entry in its post's language
 * (`xml:lang`, {@linkcode postLanguage} as its page says it).
 */
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
    const plain = postDescription(post).replace(/\s+/g, " ").trim();
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
  return withEntryLanguages(feed.atom1(), entries.map(({ post }) => postLanguage(post)));
}

/** The library's start tag of an entry, and the CDATA sections that hold all a post's words. */
const ENTRY_OR_CDATA = /<!\[CDATA\[[\s\S]*?\]\]>|<entry>/g;

/**
 * `atom` with the n-th `<entry>` start tag saying `langs[n]` as `xml:lang` (XML's attribute for
 * the language of an element's content, which RFC 4287 allows on any Atom element); an entry
 * whose language is `und` says none. The `feed` library has no option or extension for an
 * attribute on an entry, so its output is amended at those start tags only: every word of a
 * post is in a CDATA section (title, summary, content), which is passed over whole, and outside
 * them the library writes only element names, addresses, dates and attributes without `<`, so
 * `<entry>` there is always the start tag. Should the count of start tags found differ from the
 * count of languages (another version of the library), the feed is returned as it was.
 */
export function withEntryLanguages(atom: string, langs: readonly string[]): string {
  let index = 0;
  const amended = atom.replace(ENTRY_OR_CDATA, (match) => {
    if (match !== "<entry>") return match;
    const lang = langs[index++];
    return lang === undefined || lang === "und" ? match : `<entry xml:lang="${escapeHtml(lang)}">`;
  });
  return index === langs.length ? amended : atom;
}

/**
 * The podcast's RSS feed ({@linkcode podcastRss}) as UTF-8 bytes, made once per change of the
 * episodes and kept, as the blog's is ({@linkcode blogFeed}): podcast apps poll it.
 *
 * @param options As {@linkcode podcastRss} takes them; they are fixed while the relay runs,
 *   and the origin and key are part of what the kept feed is for.
 * @throws the file system's errors (reading the episodes).
 */
export function podcastFeed(
  podcast: Podcast,
  urls: SiteUrls,
  options: { key?: string | undefined; settings?: PodcastFeedSettings | undefined } = {},
): Promise<Uint8Array<ArrayBuffer>> {
  return podcast.feedCache.get(`rss ${urls.origin} ${options.key ?? ""}`, async () => {
    return new TextEncoder().encode(podcastRss(await podcast.list(), urls, options));
  });
}

/** Characters of an episode's text in its description at most. */
const DESCRIPTION_CHARS = 400;

/** Apple's namespace of the `itunes:` tags. */
const ITUNES_NAMESPACE = "http://www.itunes.com/dtds/podcast-1.0.dtd";

/** Podcasting 2.0's namespace, for `podcast:guid` and `podcast:transcript`. */
const PODCAST_NAMESPACE = "https://podcastindex.org/namespace/1.0";

/** The UUID namespace of `podcast:guid`, fixed by the Podcasting 2.0 specification. */
const PODCAST_GUID_NAMESPACE = "ead4c236-bf58-58c6-a2c6-a6b28d128cb6";

/** The feed's author and owner name: the relay knows no person's name. */
const PODCAST_AUTHOR = "Content Relay";

/** Settings of the podcast's feed. */
export interface PodcastFeedSettings {
  /**
   * The feed's language, a BCP 47 tag such as `en` or `zh-cn` (`--podcast-language`);
   * default the language of the first episode's script.
   */
  readonly language?: string | undefined;
  /** The owner's address for `itunes:owner` (`--podcast-email`); Apple writes to it. */
  readonly email?: string | undefined;
}

/**
 * A name-based (version 5, SHA-1) UUID, RFC 9562: the same name in the same namespace
 * always gives the same UUID.
 */
export function uuidV5(name: string, namespace: string): string {
  const bytes = createHash("sha1")
    .update(Buffer.from(namespace.replace(/-/g, ""), "hex"))
    .update(name, "utf8")
    .digest()
    .subarray(0, 16);
  bytes[6] = (bytes[6]! & 0x0f) | 0x50;
  bytes[8] = (bytes[8]! & 0x3f) | 0x80;
  const hex = bytes.toString("hex");
  return [hex.slice(0, 8), hex.slice(8, 12), hex.slice(12, 16), hex.slice(16, 20), hex.slice(20)]
    .join("-");
}

/**
 * The podcast's `podcast:guid`: the UUID v5 of the feed's URL without its scheme and
 * trailing slashes, as the Podcasting 2.0 namespace defines it; it stays when the feed moves
 * only if the app is told, so it follows the configured address.
 */
export function podcastGuid(feedUrl: string): string {
  return uuidV5(feedUrl.replace(/^[a-z]+:\/\//i, "").replace(/\/+$/, ""), PODCAST_GUID_NAMESPACE);
}

/**
 * An item's Podcasting 2.0 tags: `podcast:transcript` (the words as spoken) and, for an episode
 * with chapters, `podcast:chapters`; `query` carries a private podcast's feed key.
 */
function podcastItemTags(episode: Episode, urls: SiteUrls, query: string) {
  const file = `${urls.origin}/podcast/${episode.id}`;
  const transcript = {
    name: "podcast:transcript",
    objects: {
      _attributes: {
        url: `${file}.txt${query}`,
        type: "text/plain",
        language: scriptLanguage(episode.text, episode.skipped),
      },
    },
  };
  if (!episode.chapters?.length) return [transcript];
  const chapters = {
    name: "podcast:chapters",
    objects: {
      _attributes: { url: `${file}.chapters.json${query}`, type: "application/json+chapters" },
    },
  };
  return [transcript, chapters];
}

/** The note that passages were left out for want of a voice ("Not read aloud: …"), if any were. */
export function skippedNote(episode: Episode): string | undefined {
  const langs = (episode.skipped ?? []).filter((lang): lang is SpeechLang =>
    (SPEECH_LANGS as readonly string[]).includes(lang)
  );
  if (langs.length === 0) return undefined;
  return `Not read aloud: the passages in ${langs.map(languageName).join(", ")}, ` +
    `for which the speech engine has no voice.`;
}

/**
 * The podcast's RSS 2.0 feed (built with the npm package `feed`): ready episodes, newest
 * first, with the iTunes tags Apple requires (square artwork, owner, category, explicit),
 * each episode's title as plain text ({@linkcode plainTitle}) and description as rendered
 * HTML (a literal `<b>` in the text stays text, passages left out for want of a voice are named
 * first), and Podcasting 2.0's `podcast:guid`, `podcast:transcript` (the words as spoken) and
 * `podcast:chapters` (for an episode with headings).
 *
 * @param options.key For a private podcast: its feed key (`podcast_feed_key.ts`), added to
 *   the feed's own address (`atom:link`) and the enclosures' and transcripts' URLs so that a
 *   podcast app, which sends no header, can fetch them too.
 * @param options.settings Language and owner address.
 */
export function podcastRss(
  episodes: readonly Episode[],
  urls: SiteUrls,
  options: { key?: string | undefined; settings?: PodcastFeedSettings | undefined } = {},
): string {
  const site = `${urls.origin}/podcast/`;
  const feedUrl = `${urls.origin}/podcast/feed.xml`;
  const artwork = `${urls.origin}${ARTWORK_PATH}`;
  const query = options.key === undefined ? "" : `?key=${encodeURIComponent(options.key)}`;
  const first = episodes.at(-1);
  const language = options.settings?.language ??
    (first === undefined ? "en" : scriptLanguage(first.text, first.skipped));
  const ready = episodes.filter((e) => e.state === "ready");
  const feed = new Feed({
    title: "Read aloud",
    description: "Articles read aloud by the household's relay.",
    id: site,
    link: site,
    language,
    image: artwork,
    updated: new Date(ready[0]?.created_at ?? 0),
    // A private feed's own address keeps its key: an app that follows it stays subscribed.
    feedLinks: { rss: `${feedUrl}${query}` },
    generator: "Content Relay",
    copyright: "",
  });
  // The iTunes tags are written here, not by the library's podcast mode: that one adds
  // Google Play's retired tags, and an owner without the address Apple requires in it.
  const email = options.settings?.email;
  if (email !== undefined) {
    const owner = { "itunes:name": { _text: PODCAST_AUTHOR }, "itunes:email": { _text: email } };
    feed.addExtension({ name: "itunes:owner", objects: owner });
  }
  for (
    const [name, objects] of [
      ["itunes:author", { _text: PODCAST_AUTHOR }],
      ["itunes:image", { _attributes: { href: artwork } }],
      ["itunes:category", { _attributes: { text: "Technology" } }],
      ["itunes:explicit", { _text: "false" }],
      ["itunes:type", { _text: "episodic" }],
      ["podcast:guid", { _text: podcastGuid(feedUrl) }],
    ] as const
  ) feed.addExtension({ name, objects });
  for (const episode of ready) {
    const text = episode.text.trim();
    // An episode read from the reader's article says its summary, when the article has one.
    const summary = readArticleResult(text)?.summary;
    const excerpt = summary ?? markdownExcerpt(text, DESCRIPTION_CHARS);
    const skipped = skippedNote(episode);
    feed.addItem({
      // Plain text: a podcast app shows an item's title as it is, markup and all.
      title: xmlChars(plainTitle(episode.title)),
      link: site,
      guid: `relay-episode-${episode.id}`,
      date: new Date(episode.created_at),
      description: xmlChars(renderMarkdown(skipped ? `_${skipped}_\n\n${excerpt}` : excerpt)),
      audio: {
        url: `${urls.origin}/podcast/${episode.id}.mp3${query}`,
        length: episode.bytes,
        type: "audio/mpeg",
      },
      extensions: [
        { name: "itunes:duration", objects: { _text: formatDuration(episode.duration_s) } },
        ...(summary === undefined
          ? []
          : [{ name: "itunes:summary", objects: { _text: xmlChars(summary) } }]),
        { name: "itunes:explicit", objects: { _text: "false" } },
        ...podcastItemTags(episode, urls, query),
      ],
    });
  }
  // The feed library declares only the namespaces it writes itself.
  return hexEncodedTitles(feed.rss2()).replace(
    "<rss ",
    `<rss xmlns:itunes="${ITUNES_NAMESPACE}" xmlns:podcast="${PODCAST_NAMESPACE}" `,
  );
}

/**
 * The start of an episode's Markdown for its description, at most `max` characters: whole
 * blocks (paragraphs, lists, headings), so that no link, emphasis or code span is cut open
 * and shown as raw marks; when the first block alone is longer, its text without marks, cut
 * at a word. `…` says that more follows.
 */
function markdownExcerpt(text: string, max: number): string {
  if (text.length <= max) return text;
  const blocks = text.split(/\n[ \t]*\n/);
  let kept = "";
  for (const block of blocks) {
    const longer = kept === "" ? block : `${kept}\n\n${block}`;
    if (longer.length > max) break;
    kept = longer;
  }
  if (kept !== "") return `${kept}\n\n…`;
  const plain = plainTitle(blocks[0]!).slice(0, max);
  const space = plain.lastIndexOf(" ");
  // As text, not Markdown: what is left of the marks must not make new ones.
  const cut = (space > max / 2 ? plain.slice(0, space) : plain).replace(/[\\`*_[\]<>#&]/g, "\\$&");
  return `${cut}…`;
}

/**
 * An RSS feed's titles with `&`, `<` and `>` written as hexadecimal character references
 * rather than inside a CDATA section, as the feed library writes them: an RSS title is plain
 * text, and the RSS Advisory Board's profile (which the W3C feed validator checks) asks for
 * these characters so encoded, since apps that read titles as HTML take `<friends>` in a
 * CDATA section for a tag. A title split over several sections (one holding `]]>`) is left
 * as written.
 */
function hexEncodedTitles(rss: string): string {
  return rss.replace(
    /<title><!\[CDATA\[([\s\S]*?)\]\]><\/title>/g,
    (whole, text: string) =>
      text.includes("<![CDATA[") || text.includes("]]>")
        ? whole
        : `<title>${
          text.replace(/[&<>]/g, (c) => `&#x${c.charCodeAt(0).toString(16).toUpperCase()};`)
        }</title>`,
  );
}

/**
 * The public pages of the built-in services: the blog's index and posts, and the podcast's
 * episode list. A post's body comes rendered by the blog (render.ts: raw HTML off, safe
 * link schemes only); every other value is escaped. The pages carry no script at all, and
 * their Content-Security-Policy forbids any.
 *
 * @module
 */

import { type Post, postDescription } from "./blog.ts";
import { languageOf } from "./language.ts";
import { scriptLanguage } from "./speech_lang.ts";
import type { Episode } from "./podcast.ts";
import { escapeHtml } from "../util/escape.ts";

/** Headers of every page: HTML, and a policy under which no script can run. */
export const PAGE_HEADERS: Readonly<Record<string, string>> = {
  "content-type": "text/html; charset=utf-8",
  "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; img-src * data:; " +
    "media-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
};

const STYLE = `
:root { color-scheme: light dark; --fg: #1d1d1f; --bg: #fdfdfc; --muted: #6b6b70;
  --link: #0b57d0; --rule: #e3e3e0; --code: #f2f2ef; }
@media (prefers-color-scheme: dark) { :root { --fg: #e8e8e6; --bg: #161618; --muted: #a0a0a6;
  --link: #8ab4f8; --rule: #333338; --code: #232326; } }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg);
  font: 18px/1.65 system-ui, -apple-system, "Segoe UI", "PingFang SC", "Noto Sans CJK SC",
  "Microsoft YaHei", sans-serif; }
main { max-width: 42rem; margin: 0 auto; padding: 1.5rem 1.1rem 4rem; overflow-wrap: anywhere; }
a { color: var(--link); }
h1 { font-size: 1.9rem; line-height: 1.25; margin: 0.4rem 0 0.3rem; }
.meta { color: var(--muted); font-size: 0.9rem; margin-bottom: 1.8rem; }
.tag { display: inline-block; border: 1px solid var(--rule); border-radius: 1rem;
  padding: 0 0.55rem; margin: 0.2rem 0.3rem 0 0; font-size: 0.8rem; }
nav { font-size: 0.95rem; }
article img, article video { max-width: 100%; height: auto; }
pre, code { background: var(--code); border-radius: 4px; font-size: 0.88em; }
pre { padding: 0.8rem; overflow-x: auto; }
blockquote { margin: 0; padding-left: 1rem; border-left: 3px solid var(--rule); color: var(--muted); }
table { border-collapse: collapse; display: block; overflow-x: auto; }
td, th { border: 1px solid var(--rule); padding: 0.3rem 0.6rem; }
ul.posts { list-style: none; padding: 0; }
ul.posts li { padding: 0.9rem 0; border-bottom: 1px solid var(--rule); }
ul.posts a.title { font-size: 1.15rem; font-weight: 600; text-decoration: none; }
.state-failed { color: #c5221f; }
audio { width: 100%; margin-top: 0.4rem; }
img.qr { background: #fff; border-radius: 6px; }
`;

/** Characters of a page's meta description at most: what search results show. */
const DESCRIPTION_CHARS = 160;

/** A page's description for `<meta name="description">`: the start of `text`, on one line. */
function describe(text: string): string {
  const line = text.replace(/\s+/g, " ").trim();
  return line.length > DESCRIPTION_CHARS ? `${line.slice(0, DESCRIPTION_CHARS - 1)}…` : line;
}

/**
 * What every page has: its title, description, the relay's icon, `head`, and its language
 * (`lang`, default `en`: the pages' own words are English).
 */
interface PageHead {
  readonly title: string;
  readonly description: string;
  readonly urls: SiteUrls;
  readonly head?: string;
  readonly lang?: string;
}

function page(
  { title, description, urls, head = "", lang = "en" }: PageHead,
  body: string,
): string {
  // The web app's icon, so that a browser asks for no /favicon.ico, which does not exist.
  const icon = `${urls.origin}/app/icon.svg`;
  return `<!doctype html>
<html lang="${escapeHtml(lang)}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<meta name="description" content="${escapeHtml(describe(description))}">
<link rel="icon" type="image/svg+xml" href="${escapeHtml(icon)}">
<style>${STYLE}</style>
${head}
</head>
<body><main>
${body}
</main></body>
</html>
`;
}

function date(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

function tags(list: readonly string[]): string {
  return list.map((tag) => `<span class="tag">${escapeHtml(tag)}</span>`).join("");
}

/** Where the pages link to: absolute URLs (`--public-url`, else where the relay listens). */
export interface SiteUrls {
  /** e.g. `https://relay.example.org` (no trailing slash). */
  readonly origin: string;
}

const FEED_LINK = (origin: string) =>
  `<link rel="alternate" type="application/atom+xml" title="Blog" href="${
    escapeHtml(`${origin}/blog/feed.xml`)
  }">`;

/**
 * The language a post is written in ({@linkcode languageOf} of its title and summary): the
 * `lang` of its page and of its entry in the index.
 */
export function postLanguage(post: Post): string {
  return languageOf(`${post.title}\n${post.content}`);
}

/** The blog's index page: every post, newest first, each entry in its own language. */
export function blogIndexPage(posts: readonly Post[], urls: SiteUrls): string {
  const items = posts.map((post) =>
    `<li lang="${escapeHtml(postLanguage(post))}"><a class="title" href="${
      escapeHtml(`${urls.origin}/blog/${post.post_id}`)
    }">${escapeHtml(post.title)}</a><div class="meta"><time datetime="${
      new Date(post.created_at).toISOString()
    }">${date(post.created_at)}</time> ${tags(post.tags)}</div></li>`
  ).join("\n");
  const description = posts.length === 0
    ? "No posts yet."
    : `Posts of the household's relay, newest first: ${posts.map((p) => p.title).join(", ")}`;
  return page(
    { title: "Blog", description, urls, head: FEED_LINK(urls.origin) },
    `<h1>Blog</h1>
<nav><a href="${escapeHtml(`${urls.origin}/blog/feed.xml`)}">Atom feed</a></nav>
${posts.length === 0 ? "<p>No posts yet.</p>" : `<ul class="posts">\n${items}\n</ul>`}`,
  );
}

/** The text of a heading's HTML, for comparing: no tags, entities read, spaces folded. */
function headingText(html: string): string {
  const entities: Record<string, string> = { amp: "&", lt: "<", gt: ">", quot: '"' };
  return html.replace(/<[^>]*>/g, "")
    .replace(
      /&(amp|lt|gt|quot);|&#(\d+);/g,
      (_, name, code) => name ? entities[name]! : String.fromCharCode(Number(code)),
    )
    .replace(/\s+/g, " ").trim().toLowerCase();
}

/** Whether a body's heading repeats the title: either holds the other. */
function sameHeading(headingHtml: string, title: string): boolean {
  const heading = headingText(headingHtml);
  const plain = title.replace(/\s+/g, " ").trim().toLowerCase();
  return heading !== "" && (plain.includes(heading) || heading.includes(plain));
}

/**
 * One post's page: title, date, tags and the body. The post's title is the page's heading;
 * a body that opens with a heading saying the same (`# Title` in the Markdown, often the
 * title itself or the part of it after a series name) loses that one, so that the page
 * does not show its title twice. The page is in the post's language
 * ({@linkcode postLanguage}); its link back to the blog says it is English.
 *
 * @param body The post's body as the blog rendered it (HTML).
 */
export function postPage(post: Post, body: string, urls: SiteUrls): string {
  const own = /^\s*<h1[^>]*>([\s\S]*?)<\/h1>\n?/.exec(body);
  const repeats = own !== undefined && own !== null && sameHeading(own[1]!, post.title);
  const rest = repeats ? body.slice(own[0].length) : body;
  const lang = postLanguage(post);
  return page(
    {
      title: post.title,
      description: postDescription(post),
      urls,
      head: FEED_LINK(urls.origin),
      lang,
    },
    `<nav lang="en"><a href="${escapeHtml(`${urls.origin}/blog/`)}">← Blog</a></nav>
<article>
<h1>${escapeHtml(post.title)}</h1>
<div class="meta"><time datetime="${new Date(post.created_at).toISOString()}">${
      date(post.created_at)
    }</time> ${tags(post.tags)}</div>
${rest}
</article>`,
  );
}

/** What an episode's state says to a person. */
export function describeState(episode: Episode): string {
  switch (episode.state) {
    case "queued":
      return "queued";
    case "synthesising":
      return `synthesising (${episode.chunks_done} of ${episode.chunks_total || "?"} parts)`;
    case "ready":
      return `ready, ${formatDuration(episode.duration_s)}`;
    case "failed":
      return `failed: ${episode.error}`;
  }
}

/** `H:MM:SS` or `M:SS`, as itunes:duration and people read it. */
export function formatDuration(seconds: number): string {
  const total = Math.max(0, Math.round(seconds));
  const h = Math.floor(total / 3600), m = Math.floor((total % 3600) / 60), s = total % 60;
  const mm = h > 0 ? String(m).padStart(2, "0") : String(m);
  return `${h > 0 ? `${h}:` : ""}${mm}:${String(s).padStart(2, "0")}`;
}

/**
 * The podcast's page: the feed URL to subscribe to (as text, and as a QR code), and every
 * episode with its state and a player.
 *
 * @param options.key For a private podcast: its feed key (`podcast_feed_key.ts`), which the
 *   feed's, the QR code's and the audio's addresses carry, since neither a podcast app nor
 *   an `<audio>` or `<img>` element sends a header.
 */
export function podcastPage(
  episodes: readonly Episode[],
  urls: SiteUrls,
  options: { key?: string | undefined } = {},
): string {
  const query = options.key === undefined ? "" : `?key=${encodeURIComponent(options.key)}`;
  const feed = `${urls.origin}/podcast/feed.xml${query}`;
  // Each episode in the language it is read in; the page's own words are English.
  const items = episodes.map((episode) =>
    `<li lang="${escapeHtml(scriptLanguage(episode.text, episode.skipped))}"><span class="title">${
      escapeHtml(episode.title)
    }</span><div class="meta${episode.state === "failed" ? " state-failed" : ""}">${
      date(episode.created_at)
    } · ${escapeHtml(describeState(episode))}</div>${
      episode.state === "ready"
        ? `<audio controls preload="none" src="${
          escapeHtml(`${urls.origin}/podcast/${episode.id}.mp3${query}`)
        }"></audio>`
        : ""
    }</li>`
  ).join("\n");
  const description = "Articles read aloud by the household's relay: subscribe in a podcast app.";
  return page(
    { title: "Podcast", description, urls },
    `<h1>Podcast</h1>
<img class="qr" src="${
      escapeHtml(`${urls.origin}/podcast/qr.svg${query}`)
    }" alt="QR code of the feed's address" width="160" height="160">
<p>Subscribe in a podcast app with this address:<br><a href="${escapeHtml(feed)}">${
      escapeHtml(feed)
    }</a></p>
${episodes.length === 0 ? "<p>No episodes yet.</p>" : `<ul class="posts">\n${items}\n</ul>`}`,
  );
}

/**
 * The results feed as Atom (RFC 4287), for any feed reader: `GET /results/feed.xml`. Each
 * result is one entry with its whole content, its Markdown rendered to HTML as the blog renders
 * a post (builtin/render.ts, the one markdown-it set-up for HTML)
 * with raw HTML off (a `<script>` in a result is shown as text, never run by a reader) and
 * links limited to the schemes markdown-it deems safe. The feed is built with the npm package
 * `feed`, like the blog's, and both libraries load with the first request for it.
 *
 * @module
 */

import { Feed } from "feed";
import { renderMarkdown } from "../builtin/render.ts";
import { readArticleResult, readFailureResult } from "../article_result.ts";
import { escapeHtml, xmlChars } from "../util/escape.ts";

/** One result as the store gives it. */
export interface FeedResult {
  /** Push time and cursor, epoch ms. */
  readonly t: number;
  /** The result's content (Markdown, or plain text). */
  readonly content: string;
}

/** Characters of an entry's title at most (a result's first line can be a whole paragraph). */
const TITLE_CHARS = 120;

/**
 * The results feed as an Atom document, newest entry first.
 *
 * @param results The results, in any order.
 * @param origin The relay's public origin, e.g. `https://relay.example.org` (no key: the feed's
 *   own links must not carry one).
 * @returns The XML text.
 */
export function resultsAtom(results: readonly FeedResult[], origin: string): string {
  const newest = [...results].sort((a, b) => b.t - a.t);
  const feed = new Feed({
    title: "Relay results",
    description: "What the relay's readers and workers made of the links and text it was sent",
    id: `${origin}/results/feed.xml`,
    link: `${origin}/app/`,
    updated: new Date(newest[0]?.t ?? 0),
    feedLinks: { atom: `${origin}/results/feed.xml` },
    copyright: "",
    generator: "Content Relay",
    // RFC 4287 requires an author of the feed (or of every entry): the relay's readers.
    author: { name: "Content Relay", link: `${origin}/app/` },
  });
  for (const result of newest) {
    const content = xmlChars(result.content);
    const article = readArticleResult(content);
    const failure = article === undefined ? readFailureResult(content) : undefined;
    feed.addItem({
      // Atom's title is of type "html" here: escaped, so a title is shown as written.
      title: escapeHtml(shortened(article?.title ?? entryTitle(content))),
      // The cursor never repeats, also after a clear or a restart: a stable entry id.
      id: `${origin}/results#${result.t}`,
      // An article links to the page it was read from; a failure to the link it could not read.
      link: (article?.url ?? failure?.url ?? `${origin}/app/`).replace(/[<>"]/g, ""),
      date: new Date(result.t),
      content: renderMarkdown(content), // as the blog renders a post: one set-up
    });
  }
  return feed.atom1();
}

/** The title of a result that is not an article: its first line, without a heading's `#`. */
function entryTitle(content: string): string {
  return content.trim().split("\n", 1)[0]!.replace(/^#+\s*/, "").trim();
}

/** A title within {@linkcode TITLE_CHARS}, cut with an ellipsis. */
function shortened(title: string): string {
  return title.length > TITLE_CHARS ? `${title.slice(0, TITLE_CHARS - 1)}…` : title;
}

/**
 * Reading a link for `relay work --extract`: fetch the page (src/client/fetch_page.ts), parse
 * it with linkedom (a DOM without a browser: no script on the page runs), find the article and
 * write it as Markdown (src/client/article.ts). This module loads Readability, Turndown,
 * linkedom and chardet, so the worker imports it only when it reads its first link: plain
 * `relay submit` loads none of them.
 *
 * @module
 */

import { parseHTML } from "linkedom";
import { type Article, articleResult, extractArticle, type PageDocument } from "./article.ts";
import { fetchPage, type FetchPageOptions, PageError } from "./fetch_page.ts";
import { capForDom, checkShape, MAX_DOM_CHARS } from "./page_shape.ts";
import { NEAR_EMPTY_WORDS, NEEDS_BROWSER, needsBrowser, wordCount } from "./page_wall.ts";
import { linkedArticle, withLinkedArticle } from "./json_ld.ts";

export { PageError, relayAddresses } from "./fetch_page.ts";
export { checkShape } from "./page_shape.ts";
export type { Article } from "./article.ts";

/** What {@linkcode readLink} made of a link. */
export interface ReadLink {
  /** The article found. */
  article: Article;
  /** The result to push: the article as Markdown, with a note when the page was cut. */
  result: string;
}

/**
 * Fetches `url` and extracts its article.
 *
 * @param url An `http:` or `https:` link.
 * @param options The fetch's time limit (ms), size cap (bytes) and `Accept-Language`.
 * @returns The article and the Markdown result.
 * @throws {PageError} when the page cannot be fetched (see {@linkcode fetchPage}) or has no
 *   article, or one of fewer than {@linkcode NEAR_EMPTY_WORDS} words; not retryable, saying
 *   that the page needs a browser, when it shows it (src/client/page_wall.ts).
 */
export async function readLink(url: string, options: FetchPageOptions): Promise<ReadLink> {
  const page = await fetchPage(url, options);
  const { html, cut } = capForDom(withoutScripts(page.html));
  checkShape(html);
  const { document } = parseHTML(html) as unknown as { document: PageDocument };
  const found = extractArticle(document, page.url, true);
  const article = found && withLinkedArticle(found, linkedArticle(page.html));
  const words = article === null ? 0 : wordCount(article.text ?? article.markdown);
  if (article === null || words < NEAR_EMPTY_WORDS) {
    // A near-empty article is not one: never pushed, so never published.
    if (needsBrowser(page.html)) throw new PageError(NEEDS_BROWSER, false);
    throw new PageError(
      article === null
        ? "no article found on the page"
        : `no article found on the page (only ${words} words of text)`,
    );
  }
  let result = articleResult(article);
  if (page.truncated) {
    result += `\n_The page was longer than ${sizeText(options.maxBytes)}: ` +
      "only its beginning was read._\n";
  } else if (cut) {
    result += `\n_The page's text was longer than ${sizeText(MAX_DOM_CHARS)} without its ` +
      "scripts: only its beginning was read._\n";
  }
  return { article, result };
}

/** A JSON-LD block's start tag: data, not code; Readability reads its title and authors. */
const LINKED_DATA = /^<script\b[^>]*\btype\s*=\s*["']?application\/ld\+json/i;

/** What {@linkcode withoutScripts} takes out: no article is in them, and pages carry megabytes. */
const DROPPED = /<(script|style)\b|<!--/gi;

/**
 * The page without its scripts, styles and comments, taken out before parsing: on many pages
 * they are most of the bytes (bundles, inline JSON), and the reader runs none of them. One pass
 * forward, whatever the page holds: an element that is not closed ends the page.
 */
export function withoutScripts(html: string): string {
  const kept: string[] = [];
  let at = 0;
  DROPPED.lastIndex = 0;
  for (let open = DROPPED.exec(html); open !== null; open = DROPPED.exec(html)) {
    kept.push(html.slice(at, open.index));
    const close = open[1] === undefined ? /-->/g : new RegExp(`</${open[1]}\\s*>`, "gi");
    close.lastIndex = open.index + open[0].length;
    const end = close.exec(html);
    at = end === null ? html.length : end.index + end[0].length;
    DROPPED.lastIndex = at;
    if (LINKED_DATA.test(html.slice(open.index, open.index + 1000))) {
      kept.push(html.slice(open.index, at));
    }
  }
  kept.push(html.slice(at));
  return kept.join("");
}

/** A size in bytes as people write it: `5 MiB`, `64 KiB`, `900 bytes`. */
function sizeText(bytes: number): string {
  if (bytes >= 1 << 20 && bytes % (1 << 20) === 0) return `${bytes / (1 << 20)} MiB`;
  if (bytes >= 1024 && bytes % 1024 === 0) return `${bytes / 1024} KiB`;
  return `${bytes} bytes`;
}

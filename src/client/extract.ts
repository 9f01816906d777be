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

export { PageError } from "./fetch_page.ts";
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
 *   article.
 */
export async function readLink(url: string, options: FetchPageOptions): Promise<ReadLink> {
  const page = await fetchPage(url, options);
  const { document } = parseHTML(page.html) as unknown as { document: PageDocument };
  const article = extractArticle(document, page.url);
  if (article === null) throw new PageError("no article found on the page");
  let result = articleResult(article);
  if (page.truncated) {
    result += `\n_The page was longer than ${sizeText(options.maxBytes)}: ` +
      "only its beginning was read._\n";
  }
  return { article, result };
}

/** A size in bytes as people write it: `5 MiB`, `64 KiB`, `900 bytes`. */
function sizeText(bytes: number): string {
  if (bytes >= 1 << 20 && bytes % (1 << 20) === 0) return `${bytes / (1 << 20)} MiB`;
  if (bytes >= 1024 && bytes % 1024 === 0) return `${bytes / 1024} KiB`;
  return `${bytes} bytes`;
}

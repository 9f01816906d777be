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

export { PageError, relayAddresses } from "./fetch_page.ts";
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
  const html = withoutScripts(page.html);
  checkShape(html);
  const { document } = parseHTML(html) as unknown as { document: PageDocument };
  const article = extractArticle(document, page.url);
  if (article === null) throw new PageError("no article found on the page");
  let result = articleResult(article);
  if (page.truncated) {
    result += `\n_The page was longer than ${sizeText(options.maxBytes)}: ` +
      "only its beginning was read._\n";
  }
  return { article, result };
}

/**
 * Most elements of a page the reader reads, once its scripts are gone. Readability's time and
 * the memory of the page's DOMs grow with its elements: measured on our 2-core machine under
 * load, a page of dense article with 9,900 elements took 4.4 s and a peak of 360 MB, with
 * 14,700 5.4 s and 360 MB, with 19,600 7.5 s and 600 MB (docs/benchmarks.md, "Reading a
 * link"). A long news page has 2,000 to 5,000. A page with more is reported as too large:
 * reading it again would not help.
 */
const MAX_ELEMENTS = 15_000;

/**
 * Deepest nesting of elements the reader reads. Readability walks up from each element, and
 * linkedom nests what a browser would close (an unclosed `<p>` holds the next): on our machine
 * 1,000 nested elements took 1.2 s, 5,000 took 44 s and 14,000 overflowed the stack. Real pages
 * nest a few dozen deep.
 */
const MAX_DEPTH = 500;

/** Elements that never hold others and have no end tag (WHATWG HTML, "void elements"). */
const VOID = new Set(
  "area base br col embed hr img input link meta param source track wbr".split(" "),
);

/** Elements whose start tag closes an open one of the same name (`<li>a<li>b`). */
const SIBLINGS = new Set("p li dt dd tr td th option".split(" "));

/** A start or end tag; `[^<>]` keeps each try within one tag, so the scan stays linear. */
const TAG = /<(\/)?([a-zA-Z][\w:-]*)[^<>]*?(\/)?>/g;

/**
 * Refuses a page too large or too deep to read, from its tags, before it is parsed: parsing
 * such a page is itself the cost to avoid.
 *
 * @throws {PageError} not retryable: more than {@linkcode MAX_ELEMENTS} elements, or nesting
 *   deeper than {@linkcode MAX_DEPTH}.
 */
export function checkShape(html: string): void {
  let elements = 0;
  let deepest = 0;
  const stack: string[] = [];
  const open = new Map<string, number>(); // how many of each name the stack holds
  const pop = () => {
    const name = stack.pop()!;
    open.set(name, open.get(name)! - 1);
    return name;
  };
  for (const [, end, tag, selfClosing] of html.matchAll(TAG)) {
    const name = tag!.toLowerCase();
    if (end) {
      // An end tag closes its element and whatever was left open inside it.
      if (open.get(name)) { while (pop() !== name); }
      continue;
    }
    elements++;
    // "<div/>" opens a div in HTML (the slash means nothing there): only void elements and
    // the elements of SVG and MathML, where the parser honours it, close themselves.
    const foreign = (open.get("svg") ?? 0) + (open.get("math") ?? 0) > 0;
    if (VOID.has(name) || (selfClosing && foreign)) continue;
    // "<p>a<p>b": the parser closes the first paragraph, as a browser does.
    if (SIBLINGS.has(name) && stack.at(-1) === name) pop();
    stack.push(name);
    open.set(name, (open.get(name) ?? 0) + 1);
    deepest = Math.max(deepest, stack.length);
  }
  if (elements > MAX_ELEMENTS) {
    throw new PageError(
      `the page is too large to read: ${elements} elements, the most is ${MAX_ELEMENTS}`,
      false,
    );
  }
  if (deepest > MAX_DEPTH) {
    throw new PageError(
      `the page is nested too deep to read: ${deepest} levels, the most is ${MAX_DEPTH}`,
      false,
    );
  }
}

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

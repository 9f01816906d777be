/**
 * The article of a web page as Markdown: Mozilla's Readability finds the main article (leaving
 * out navigation, headers, footers, comments and ads) and Turndown writes it as Markdown, with
 * its GFM plugin for tables and strikethrough. The same code runs in two places: in Deno over a
 * linkedom document (`relay work --extract`, src/client/extract.ts) and in the browser
 * extension's content script over the page the user has open, so both readers write the same
 * result for the same page.
 *
 * Sources: Readability's README (github.com/mozilla/readability), Turndown's README
 * (github.com/mixmark-io/turndown).
 *
 * @module
 */

import { Readability } from "@mozilla/readability";
import { writeArticleResult } from "../article_result.ts";
import TurndownService from "turndown";
// @ts-types="./turndown_gfm.d.ts"
import { gfm } from "turndown-plugin-gfm";
import { removeWidgets, type TidyElement, tidyTables } from "./article_tidy.ts";

/**
 * The parts of a DOM element the reader touches. The relay is type-checked without the DOM's
 * own types (they clash with Deno's), so the reader names what it needs: a browser's elements
 * and linkedom's both have these.
 */
export interface PageElement {
  /** The element's text, as the DOM gives it. */
  readonly textContent: string | null;
  /** The element's children as HTML (set to parse HTML into it). */
  innerHTML: string;
  /** The first child node, or `null`. */
  readonly firstChild: unknown;
  /** Takes the element out of its document. */
  remove(): void;
  /** Sets an attribute. */
  setAttribute(name: string, value: string): void;
  /** Inserts `node` before `before` (at the end when `null`). */
  insertBefore(node: PageElement, before: unknown): unknown;
  /** The first descendant that matches a CSS selector. */
  querySelector(selectors: string): PageElement | null;
}

/** The parts of a DOM document the reader touches (a browser's, or linkedom's). */
export interface PageDocument {
  /** `<head>`, or `null` in a document without one. */
  readonly head: PageElement | null;
  /** The root element. */
  readonly documentElement: PageElement | null;
  /** A deep copy of the document. */
  cloneNode(deep: boolean): unknown;
  /** A new element of this document, not yet in its tree. */
  createElement(tag: string): PageElement;
  /** Every element that matches a CSS selector. */
  querySelectorAll(selectors: string): ArrayLike<PageElement>;
  /** The first element that matches a CSS selector. */
  querySelector(selectors: string): PageElement | null;
}

/** What a reader made of one page: the fields of the result it pushes. */
export interface Article {
  /** The article's title (Readability's, from `<title>` or the page's heading). */
  title: string;
  /** The author line when the page gives one. */
  byline?: string;
  /** The site's name when the page gives one (`og:site_name`). */
  siteName?: string;
  /** The page's address, as it was fetched (after redirects). */
  url: string;
  /** The article's body in Markdown, without its title. */
  markdown: string;
  /** The article's body as plain text (what a read-aloud service speaks), when known. */
  text?: string;
}

/**
 * Finds the main article of `document` and writes it as Markdown. The document is cloned first
 * unless `owned`: Readability rearranges the tree it reads, and in the extension that tree is
 * the user's page.
 *
 * @param document A parsed HTML document (a browser's, or linkedom's `parseHTML(html).document`).
 * @param url The page's address: relative links and images are made absolute against it.
 * @param owned The document is the caller's to spend (the reader's, parsed for this alone): not
 *   copied, which spares a second DOM (11 MiB of 234 at the peak on a 1 MB Wikipedia page).
 * @returns The article, or `null` when Readability finds none (an empty page, a login form).
 */
export function extractArticle(
  document: PageDocument,
  url: string,
  owned = false,
): Article | null {
  const copy = owned ? document : document.cloneNode(true) as PageDocument;
  setBase(copy, url);
  // The page's one <h1>, read before Readability rearranges (and often drops) it.
  const h1s = Array.from(copy.querySelectorAll("h1"));
  const site = siteHeading(copy, h1s);
  const h1 = h1s.length === 1 && !site ? oneLine(h1s[0]!.textContent ?? "") : "";
  removeWidgets(copy as unknown as TidyElement);
  const found = new Readability(copy as never).parse();
  if (!found?.content) return null;
  const { title, markdown: body, text } = htmlToMarkdown(copy, found.content, {
    found: withoutSite(found.title ?? "", [site, found.siteName ?? ""]),
    h1,
    url,
  });
  if (!body) return null;
  const article: Article = { title, url, markdown: body };
  if (text) article.text = text;
  const byline = found.byline?.trim();
  if (byline) article.byline = byline;
  const siteName = found.siteName?.trim();
  if (siteName) article.siteName = siteName;
  return article;
}

/**
 * The result a reader pushes for an article: the text {@linkcode writeArticleResult} writes
 * (`# <title>`, the byline, `Source: <site>, <url>`, then the article's Markdown).
 *
 * @param article What {@linkcode extractArticle} returned.
 * @returns Markdown text ending in one newline.
 */
export function articleResult(article: Article): string {
  return writeArticleResult(article);
}

/** What separates an article's title from the site's name in a `<title>`. */
const SEPARATOR = /\s+[|\-–—:·»]\s+/;

/**
 * The text of the page's `<h1>` when it is the site's name or logo rather than the article's
 * heading (a blog theme that puts the site's name in the only `<h1>`): it sits in the page's
 * header or is a link to the site's home, or the `<title>` ends with it after a separator.
 * `""` when it is the article's own (or there is not exactly one).
 */
function siteHeading(document: PageDocument, h1s: PageElement[]): string {
  if (h1s.length !== 1) return "";
  const h1 = h1s[0]! as PageElement & Pick<TidyElement, "closest" | "getAttribute">;
  const text = oneLine(h1.textContent ?? "");
  const names = `${h1.getAttribute("class") ?? ""} ${h1.getAttribute("id") ?? ""}`;
  const home = h1.querySelector('a[href="/"], a[rel="home"]') ?? h1.closest('a[href="/"]');
  if (home || /logo|brand|site-?(title|name)/i.test(names) || h1.closest("header nav, nav")) {
    return text;
  }
  const title = oneLine(document.querySelector("title")?.textContent ?? "").split(SEPARATOR);
  if (title.length > 1 && title.at(-1)!.toLowerCase() === text.toLowerCase()) return text;
  return "";
}

/** A title without the site's name at its end or start (`Tending tomatoes | Garden Weekly`). */
function withoutSite(title: string, sites: string[]): string {
  const full = oneLine(title);
  const isSite = (part: string) =>
    sites.some((name) => name && part.toLowerCase() === oneLine(name).toLowerCase());
  const separators = [...full.matchAll(new RegExp(SEPARATOR.source, "g"))];
  const first = separators[0], last = separators.at(-1);
  if (!first || !last) return full;
  if (isSite(full.slice(last.index + last[0].length))) return full.slice(0, last.index);
  if (isSite(full.slice(0, first.index))) return full.slice(first.index + first[0].length);
  return full;
}

/** Readability resolves links against `document.baseURI`: give the copy the page's address. */
function setBase(document: PageDocument, url: string): void {
  const head = document.head ?? document.documentElement;
  if (!head) return;
  for (const old of Array.from(document.querySelectorAll("base"))) old.remove();
  const base = document.createElement("base");
  base.setAttribute("href", url);
  head.insertBefore(base, head.firstChild);
}

/** Turndown with the options a reader of Markdown expects: `#` headings, `-` lists, fences. */
function turndown(): TurndownService {
  const service = new TurndownService({
    headingStyle: "atx",
    bulletListMarker: "-",
    codeBlockStyle: "fenced",
    emDelimiter: "_",
  });
  service.use(gfm);
  // Images by their address, without their alt text: the alt text describes a picture and is
  // not the article's text (read aloud or searched, it repeats the caption or says "logo").
  // One inlined as a data: URL is left out: it would put its bytes in the result.
  service.addRule("imageByAddress", {
    filter: "img",
    replacement: (_content, node) => {
      const image = node as unknown as { getAttribute(name: string): string | null };
      const src = image.getAttribute("src") ?? "";
      if (!/^https?:\/\//i.test(src)) return "";
      return `![](${src.replace(/[()\s]/g, encodeURIComponent)})`;
    },
  });
  // Readability keeps no scripts, but a page's <noscript> or <style> must not become text.
  service.remove(["script", "style", "noscript", "iframe", "form", "button"]);
  return service;
}

/**
 * Readability's article HTML as Markdown, and the article's title. The HTML is parsed into an
 * element of `owner` (no script runs: an element made with `innerHTML` does not run its
 * scripts) so that a first heading that repeats the title can be dropped, since the result
 * prints the title itself.
 *
 * The title is Readability's, except that a `<title>` holding the page's one `<h1>` and more
 * (the site's name: "Tending tomatoes | Garden Weekly", which Readability keeps whole when the
 * heading is short) gives way to that `<h1>`. A page whose `<title>` Readability could not find
 * (a title outside `<head>` in broken HTML) takes its first heading, and one without either its
 * address.
 */
function htmlToMarkdown(
  owner: PageDocument,
  html: string,
  names: { found: string; h1: string; url: string },
): { title: string; markdown: string; text: string } {
  const container = owner.createElement("div");
  container.innerHTML = html;
  tidyTables(container as unknown as TidyElement, (tag) => owner.createElement(tag) as never);
  const first = container.querySelector("h1, h2");
  const heading = oneLine(first?.textContent ?? "");
  const full = oneLine(names.found);
  const title = names.h1 && full.toLowerCase().includes(names.h1.toLowerCase())
    ? names.h1
    : full || heading || names.url;
  if (first && heading.toLowerCase() === title.toLowerCase()) first.remove();
  // Turndown gets the HTML as text and parses it with its own parser (domino in Deno, the
  // browser's DOMParser in the extension): linkedom's elements lack `table.rows`, which the GFM
  // table rule reads.
  const text = blockText(container as unknown as TextNode);
  return { title, markdown: turndown().turndown(container.innerHTML).trim(), text };
}

/** What {@linkcode blockText} reads of a DOM node (linkedom's or a browser's). */
export interface TextNode {
  readonly nodeType: number;
  readonly nodeName: string;
  readonly nodeValue: string | null;
  readonly textContent: string | null;
  readonly childNodes: ArrayLike<TextNode>;
}

/** Elements whose text stands apart from what is around it: a paragraph each. */
const BLOCKS = new Set(
  ("ADDRESS ARTICLE ASIDE BLOCKQUOTE CAPTION CENTER DD DETAILS DIALOG DIV DL DT FIELDSET " +
    "FIGCAPTION FIGURE FOOTER FORM H1 H2 H3 H4 H5 H6 HEADER HGROUP HR LEGEND LI MAIN MENU NAV " +
    "OL P PRE SEARCH SECTION SUMMARY TABLE TR UL").split(" "),
);

/**
 * Elements whose text is not the article's: code the page runs, and footnote marks.
 *
 * @param name The element's name, upper case.
 */
function skipped(node: TextNode, name: string): boolean {
  if (name === "SCRIPT" || name === "STYLE" || name === "NOSCRIPT" || name === "TEMPLATE") {
    return true;
  }
  // `[4]`, `[a]`, `[citation needed]`: read aloud or summarised, they break sentences apart.
  return name === "SUP" && /^\s*\[[^\]]{1,30}\]\s*$/.test(node.textContent ?? "");
}

/**
 * The article's text as paragraphs: each block element's text on one line (the source's line
 * breaks fall mid-sentence), blocks apart by a blank line. Readability's `textContent` joins
 * blocks with nothing between them, so a paragraph's last sentence ran into the next heading
 * (`…precisely zero.Five things we learned`), which summaries and speech then read as one.
 * Wikipedia's `[edit]` links at the end of its headings are left out as well. The walk keeps its own
 * stack: a page's nesting depth cannot exhaust the call stack.
 *
 * @param root The article's container element.
 * @returns Paragraphs joined by `\n\n`; `""` when there is no text.
 */
export function blockText(root: TextNode): string {
  const paragraphs: string[] = [];
  let line = "";
  const end = () => {
    // A line break is a space within a paragraph; two in a row part paragraphs (pages that
    // write their paragraphs with <br><br>). Wikipedia's headings end in an [edit] link.
    for (const part of line.split(/\n\s*\n/)) {
      const text = oneLine(part).replace(/\s*\[edit\]$/, "");
      if (text) paragraphs.push(text);
    }
    line = "";
  };
  // A node to read, or `null` for the end of a block element.
  const stack: (TextNode | null)[] = [root];
  while (stack.length > 0) {
    const node = stack.pop()!;
    if (node === null) {
      end();
      continue;
    }
    if (node.nodeType === 3) {
      line += node.nodeValue ?? "";
      continue;
    }
    if (node.nodeType !== 1) continue;
    const name = node.nodeName.toUpperCase();
    if (skipped(node, name)) continue;
    if (name === "BR") {
      line += "\n";
      continue;
    }
    if (BLOCKS.has(name)) {
      end();
      stack.push(null);
    }
    // Table cells side by side: a space between them.
    if (name === "TD" || name === "TH") line += " ";
    for (let i = node.childNodes.length - 1; i >= 0; i--) stack.push(node.childNodes[i]!);
  }
  end();
  return paragraphs.join("\n\n");
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, " ").trim();
}

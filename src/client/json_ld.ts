/**
 * A page's own account of its article: the `articleBody` and `author` of its JSON-LD
 * (`<script type="application/ld+json">`, schema.org's `Article`, `NewsArticle`, `BlogPosting`
 * and their kin), which many news sites give whole beside the markup. The reader drops every
 * script before it parses a page (src/client/extract.ts), so these blocks are read from the
 * page's text first, in one pass forward.
 *
 * @module
 */

import TurndownService from "turndown";
import type { Article } from "./article.ts";
import { wordCount } from "./page_wall.ts";

/** A `<script` start tag; its attributes are bounded, so the scan stays linear. */
const SCRIPT_TAG = /<script\b([^>]{0,1000})>/gi;

/** JSON-LD read at most, characters: far above any article, below a page's bundles. */
const MAX_JSON_CHARS = 2 * 1024 * 1024;

/** schema.org types whose `articleBody` is the page's article. */
const ARTICLE_TYPE = /^(?:\w*Article|BlogPosting|LiveBlogPosting|Report)$/;

/** What a page's JSON-LD says of its article. */
export interface LinkedArticle {
  /** The longest `articleBody` of an article node, as the page gives it (plain text). */
  body?: string;
  /** The names of its authors, comma-separated. */
  author?: string;
}

/**
 * Reads the JSON-LD blocks of `html`: the longest `articleBody` of a node whose `@type` is an
 * article type (in arrays and `@graph` too), and that node's authors. Blocks that are not valid
 * JSON are skipped.
 *
 * @param html The page as text, scripts included.
 * @returns What was found; empty when nothing.
 */
export function linkedArticle(html: string): LinkedArticle {
  const found: LinkedArticle = {};
  let read = 0;
  SCRIPT_TAG.lastIndex = 0;
  for (let tag = SCRIPT_TAG.exec(html); tag !== null; tag = SCRIPT_TAG.exec(html)) {
    const start = tag.index + tag[0].length;
    const end = html.indexOf("</script", start);
    const stop = end < 0 ? html.length : end;
    SCRIPT_TAG.lastIndex = stop;
    if (!/type\s*=\s*["']?application\/ld\+json/i.test(tag[1] ?? "")) continue;
    read += stop - start;
    if (read > MAX_JSON_CHARS) break;
    let data: unknown;
    try {
      data = JSON.parse(html.slice(start, stop));
    } catch {
      continue;
    }
    visit(data, found, 0);
  }
  return found;
}

/** Walks JSON-LD nodes (objects, arrays, `@graph`, properties) to a bounded depth, keeping the best body. */
function visit(node: unknown, found: LinkedArticle, depth: number): void {
  if (depth > 8 || node === null || typeof node !== "object") return;
  if (Array.isArray(node)) {
    for (const item of node) visit(item, found, depth + 1);
    return;
  }
  const record = node as Record<string, unknown>;
  const types = [record["@type"]].flat().filter((t): t is string => typeof t === "string");
  const body = record.articleBody;
  if (
    types.some((t) => ARTICLE_TYPE.test(t)) && typeof body === "string" &&
    body.length > (found.body?.length ?? 0)
  ) {
    found.body = body;
    const author = authorNames(record.author);
    if (author) found.author = author;
    else delete found.author;
  }
  // Article nodes also sit in `@graph` and under properties (`mainEntity` of a `WebPage`).
  for (const value of Object.values(record)) {
    if (value !== null && typeof value === "object") visit(value, found, depth + 1);
  }
}

/** An `author` value's names: a string, a `Person` with a `name`, or a list of those. */
function authorNames(author: unknown): string {
  return [author].flat().map((one) =>
    typeof one === "string"
      ? one
      : typeof (one as { name?: unknown } | null)?.name === "string"
      ? (one as { name: string }).name
      : ""
  ).map((name) => name.trim()).filter((name) => name && !/^https?:/i.test(name)).join(", ");
}

/**
 * Readability's text below this share of the JSON-LD body's words (in words) is taken as cut
 * short (a page that splits its article into blocks Readability drops, a teaser in the
 * markup), and the body is used instead; measured on the news corpus (docs/benchmarks.md,
 * "Article quality").
 */
const SHORT_SHARE = 0.6;

/** Markup in an `articleBody`: some sites put HTML there; such a body is not used. */
const MARKUP = /<\/?(?:p|div|br|span|a|em|strong|b|i|h\d|ul|li|img|figure)\b/i;

/**
 * `article` with what its page's JSON-LD says better: the `articleBody` as its paragraphs when
 * Readability's text has under {@linkcode SHORT_SHARE} of its words, and the JSON-LD authors
 * as the byline when the page names none in its markup.
 *
 * @param article What Readability found.
 * @param linked The page's JSON-LD ({@linkcode linkedArticle}).
 * @returns A new article; `article` itself is not changed.
 */
export function withLinkedArticle(article: Article, linked: LinkedArticle): Article {
  const out = { ...article };
  if (!out.byline && linked.author) out.byline = linked.author;
  const body = linked.body?.trim() ?? "";
  if (!body || MARKUP.test(body)) return out;
  const text = body.replace(/\s+/g, " ");
  if (wordCount(out.text ?? out.markdown) >= SHORT_SHARE * wordCount(text)) return out;
  const escape = new TurndownService();
  out.text = text;
  out.markdown = body.split(/\s*\n\s*/).filter((line) => line).map((line) =>
    escape.escape(line.replace(/\s+/g, " "))
  ).join("\n\n");
  return out;
}

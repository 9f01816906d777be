/**
 * The reader's result text, written and read in one place. A reader (`relay work --extract`, the
 * browser extension) pushes each article it read to the results feed as Markdown that a person can
 * read as it is, and that the results feed, the web app and the publishing path read back into its
 * fields through {@linkcode readArticleResult}, never with patterns of their own:
 *
 * ```text
 * # <title>
 *
 * <byline>                                   (when the page names its author)
 *
 * Source: <site name>, <https://…>          ("Source: <https://…>" without a site name)
 *
 * ## Summary                                 (when the reader was asked for one)
 *
 * <at most a few sentences, one paragraph>
 *
 * _<how the summary was made>_               (when it says something, e.g. a fallback)
 *
 * ---
 *
 * <the article's Markdown>
 * ```
 *
 * A link that could not be read is one line, `Could not read <url>: <why>`
 * ({@linkcode failureResult}). Results written before the summary existed (a `Source: <url>`
 * line without angle brackets, a `byline · site` line) read back too.
 *
 * This module imports nothing: the server, the client, the built-in services and the web app's
 * bundle all use it.
 *
 * @module
 */

/** The fields of an article result. Every string is one line except `markdown`. */
export interface ArticleResult {
  /** The article's title. */
  title: string;
  /** The author line when the page gives one ("By Jane Doe"). */
  byline?: string;
  /** The site's name when the page gives one ("Garden Weekly"). */
  siteName?: string;
  /** The page's address (after redirects): an `http:` or `https:` URL. */
  url: string;
  /** A short summary of the article, one paragraph of plain sentences, when one was made. */
  summary?: string;
  /** How the summary was made, when it needs saying ("offline: the model did not answer"). */
  summaryNote?: string;
  /** The article's body in Markdown, without its title. */
  markdown: string;
}

/** A result that says a link could not be read, and why. */
export interface FailureResult {
  /** The link as it was submitted. */
  url: string;
  /** Why, in words ("HTTP 404", "the page needs a browser …"). */
  reason: string;
}

/** The heading of the summary section. */
const SUMMARY_HEADING = "## Summary";
/** The thematic break that ends the summary section (a `---` after a blank line). */
const SUMMARY_END = "---";

/**
 * Writes an article as the result text a reader pushes (the shape in this module's doc).
 *
 * @param article The article; its one-line fields have their white space folded.
 * @returns Markdown text ending in one newline.
 */
export function writeArticleResult(article: ArticleResult): string {
  const lines = [`# ${oneLine(article.title) || article.url}`, ""];
  const byline = oneLine(article.byline ?? "");
  if (byline) lines.push(byline, "");
  const site = oneLine(article.siteName ?? "");
  lines.push(`Source: ${site ? `${site}, ` : ""}<${article.url}>`, "");
  const summary = oneLine(article.summary ?? "");
  if (summary) {
    lines.push(SUMMARY_HEADING, "", summary, "");
    const note = oneLine(article.summaryNote ?? "");
    if (note) lines.push(`_${note}_`, "");
    lines.push(SUMMARY_END, "");
  }
  lines.push(article.markdown.trim(), "");
  return lines.join("\n");
}

/**
 * Reads a result text back into an article's fields.
 *
 * @param text A result's content, as pushed.
 * @returns The article, or `undefined` when the text is not an article result (a note pushed as
 *   it is, a failure, anything without a `# title` first and a `Source:` line in its head).
 */
export function readArticleResult(text: string): ArticleResult | undefined {
  const lines = text.replace(/\r\n?/g, "\n").split("\n");
  const title = /^# (.+)$/.exec(lines[0] ?? "")?.[1]?.trim();
  if (!title) return undefined;
  let at = skipBlank(lines, 1);
  let byline: string | undefined;
  if (!SOURCE.test(lines[at] ?? "")) {
    byline = lines[at]?.trim();
    at = skipBlank(lines, at + 1);
  }
  const source = SOURCE.exec(lines[at] ?? "");
  if (!source || byline?.startsWith("#")) return undefined;
  const article: ArticleResult = { title, url: source[2] ?? source[3]!, markdown: "" };
  const site = source[1]?.trim();
  if (site) article.siteName = site;
  if (byline) setByline(article, byline, site);
  at = skipBlank(lines, at + 1);
  if (lines[at] === SUMMARY_HEADING) at = readSummary(lines, at, article);
  article.markdown = lines.slice(at).join("\n").trim();
  return article;
}

/**
 * The one-line result of a link that could not be read.
 *
 * @param url The link as submitted.
 * @param reason Why, in words; folded to one line.
 * @returns `Could not read <url>: <reason>`.
 */
export function failureResult(url: string, reason: string): string {
  return `Could not read ${url}: ${oneLine(reason)}`;
}

/**
 * Reads a failure result back.
 *
 * @param text A result's content.
 * @returns The link and the reason, or `undefined` when the text is not a failure result.
 */
export function readFailureResult(text: string): FailureResult | undefined {
  const found = /^Could not read (\S+): (.+)$/.exec(text.trim());
  return found ? { url: found[1]!, reason: found[2]! } : undefined;
}

// "Source: Site, <url>", "Source: <url>", or an older result's "Source: url".
const SOURCE = /^Source: (?:(.+), )?(?:<(https?:\/\/[^\s>]+)>|(https?:\/\/\S+))$/;

function skipBlank(lines: readonly string[], from: number): number {
  let at = from;
  while (at < lines.length && lines[at]!.trim() === "") at++;
  return at;
}

/** An older result's `byline · site` line gives the site too, when the Source line did not. */
function setByline(article: ArticleResult, byline: string, site: string | undefined): void {
  const parts = byline.split(" · ");
  if (!site && parts.length > 1) {
    article.siteName = parts.pop()!.trim();
    byline = parts.join(" · ");
  }
  if (byline) article.byline = byline;
}

/**
 * Reads the summary's paragraph and note, from its heading at `heading` up to the closing `---`;
 * returns where the body starts (the heading itself when nothing closes the section: then it is
 * the article's own heading).
 */
function readSummary(lines: readonly string[], heading: number, article: ArticleResult): number {
  const from = heading + 1;
  const end = lines.indexOf(SUMMARY_END, from);
  if (end < 0) return heading;
  const paragraphs = lines.slice(from, end).join("\n").trim().split(/\n\s*\n/);
  const last = paragraphs.at(-1) ?? "";
  if (paragraphs.length > 1 && /^_.*_$/.test(last)) {
    article.summaryNote = last.slice(1, -1);
    paragraphs.pop();
  }
  const summary = oneLine(paragraphs.join(" "));
  if (summary) article.summary = summary;
  return skipBlank(lines, end + 1);
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, " ").trim();
}

/**
 * Markdown to HTML for the blog's posts and the podcast's descriptions, with markdown-it:
 * raw HTML off (a `<tag>` in a post is shown as text) and links limited to safe schemes
 * (markdown-it refuses `javascript:`, `vbscript:`, `file:` and `data:` other than images).
 * The blog runs it on a thread of its own (render_thread.ts), which also holds the version
 * of the HTML made here: raise `RENDERER_VERSION` there whenever a change here changes the
 * HTML of some Markdown.
 *
 * @module
 */

import MarkdownIt from "markdown-it";

const markdown = new MarkdownIt({ html: false, linkify: true, typographer: false });

/** Renders Markdown (or plain text, which is Markdown too) as HTML, on this thread. */
export function renderMarkdown(text: string): string {
  return markdown.render(text);
}

/** The entities markdown-it writes in text, and the characters they stand for. */
const ENTITIES: Readonly<Record<string, string>> = {
  "&amp;": "&",
  "&lt;": "<",
  "&gt;": ">",
  "&quot;": '"',
};

/**
 * The HTML elements a title may have been marked up with (text-level ones, headings,
 * paragraphs, line breaks): their tags are dropped. Anything else in angle brackets, such as
 * `<listen>` or `a <b` in a sentence, is text and stays.
 */
const HTML_TAG =
  /<\/?(a|abbr|b|big|br|cite|code|del|dfn|div|em|font|h[1-6]|i|img|ins|kbd|mark|p|q|s|samp|small|span|strike|strong|sub|sup|time|tt|u|var)\b[^<>]*>/gi;

/**
 * A title as plain text, with no markup left: HTML tags dropped ({@linkcode HTML_TAG}), Markdown's inline marks
 * (`**bold**`, `_em_`, `` `code` ``, `[text](url)`, a leading `#`) read as markdown-it reads
 * them and kept as their text, white space folded. For an RSS item's `<title>`, which
 * podcast apps show as text (RSS 2.0 leaves open whether it may hold HTML, and apps differ).
 *
 * @param title A title as it was published, e.g. `**Why** <i>this</i> matters`.
 * @returns e.g. `Why this matters`.
 */
export function plainTitle(title: string): string {
  const withoutTags = title.replace(HTML_TAG, "").replace(/^\s*#+\s+/, "");
  return markdown.renderInline(withoutTags)
    .replace(/<[^>]*>/g, "")
    .replace(/&(amp|lt|gt|quot);/g, (entity) => ENTITIES[entity]!)
    .replace(/\s+/g, " ")
    .trim();
}

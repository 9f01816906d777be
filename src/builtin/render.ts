/**
 * Markdown to HTML for the blog's posts and the podcast's descriptions, with markdown-it:
 * raw HTML off (a `<tag>` in a post is shown as text) and links limited to safe schemes
 * (markdown-it refuses `javascript:`, `vbscript:`, `file:` and `data:` other than images).
 *
 * Rendering a large post costs real time and memory (a 380 KB Markdown table took about
 * 200 ms and tens of MiB), so the blog renders a post once, when it is published, and
 * keeps the HTML; {@linkcode RENDERER_VERSION} names what this module produces, and a
 * stored rendering of another version is made again.
 *
 * @module
 */

import MarkdownIt from "markdown-it";

/**
 * The version of the HTML this module makes. Raise it whenever a change here changes the
 * HTML of some Markdown: every stored rendering is then made again, once, when next read.
 */
export const RENDERER_VERSION = 1;

const markdown = new MarkdownIt({ html: false, linkify: true, typographer: false });

/** Renders Markdown (or plain text, which is Markdown too) as HTML. */
export function renderMarkdown(text: string): string {
  return markdown.render(text);
}

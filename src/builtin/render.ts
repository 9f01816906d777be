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

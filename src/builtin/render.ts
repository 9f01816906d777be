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

/** Renders Markdown (or plain text, which is Markdown too) as HTML, on this thread. */
export function renderMarkdown(text: string): string {
  return markdown.render(text);
}

/**
 * Renders Markdown as HTML on a thread of its own (`render_worker.ts`), ended after: the
 * relay keeps answering while a large post is rendered, and the render's memory goes with
 * the thread. Where the thread cannot start (a binary compiled without the worker's
 * module), renders on this thread.
 */
export function renderOffThread(text: string): Promise<string> {
  let worker: Worker;
  try {
    worker = new Worker(new URL("./render_worker.ts", import.meta.url).href, { type: "module" });
  } catch {
    return Promise.resolve(renderMarkdown(text));
  }
  return new Promise((resolve) => {
    worker.onmessage = (event: MessageEvent<string>) => {
      worker.terminate();
      resolve(event.data);
    };
    worker.onerror = (event) => {
      event.preventDefault();
      worker.terminate();
      resolve(renderMarkdown(text));
    };
    worker.postMessage(text);
  });
}

/**
 * The blog's render thread: a post's Markdown is rendered here, so that a large post (a
 * 380 KB table took over a second on a small machine, in one piece) never holds up the
 * relay's requests. One message in (the Markdown), one out (the HTML); the blog starts a
 * thread for each render and ends it after, which gives its memory back at once.
 *
 * @module
 */

/// <reference lib="deno.worker" />

import { renderMarkdown } from "./render.ts";

self.onmessage = (event: MessageEvent<string>) => {
  self.postMessage(renderMarkdown(event.data));
};

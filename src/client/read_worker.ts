/**
 * The reader's thread: one link read here (fetch, parse, extraction, Markdown), one answer
 * posted back. src/client/read_thread.ts starts a thread for each link and terminates it at the
 * page's deadline, so that no page, however hostile, holds the reader longer than that, and
 * the page's DOMs are given back at once when the thread ends.
 *
 * @module
 */

/// <reference lib="deno.worker" />

import { readLink } from "./extract.ts";
import { PageError } from "./fetch_page.ts";
import type { ReadAnswer, ReadRequest } from "./read_thread.ts";

self.onmessage = async (event: MessageEvent<ReadRequest>) => {
  const { url, options } = event.data;
  let answer: ReadAnswer;
  try {
    answer = { ok: true, read: await readLink(url, options) };
  } catch (error) {
    answer = {
      ok: false,
      message: error instanceof Error ? error.message : String(error),
      page: error instanceof PageError,
      retryable: error instanceof PageError ? error.retryable : true,
    };
  }
  self.postMessage(answer);
};

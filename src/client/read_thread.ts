/**
 * Reading one link in a thread of its own (src/client/read_worker.ts), under one deadline that
 * covers the fetch, the parse, the extraction and the Markdown: at the deadline the thread is
 * terminated, whatever it is doing (a page that makes the extractor crawl would otherwise
 * hold the reader for hours), and the link ends as `took longer than N s`, the thread's memory
 * (the page, its DOMs) given back with it. A thread that answered is kept for the next link:
 * starting one loads the extractor anew, which took 2 s per link on a loaded 2-core machine.
 *
 * @module
 */

import type { FetchPageOptions } from "./fetch_page.ts";
import type { ReadLink } from "./extract.ts";

/** What the reader's thread is asked: one link, and how to fetch it. */
export interface ReadRequest {
  /** The link. */
  url: string;
  /** How to fetch it (no signal or resolver: they cannot cross to a thread). */
  options: Omit<FetchPageOptions, "signal" | "resolve">;
}

/** What the reader's thread answers: the article, or why there is none. */
export type ReadAnswer =
  | { ok: true; read: ReadLink }
  | {
    ok: false;
    /** The reason, as the error said it. */
    message: string;
    /** Whether it was the page's failure (a `PageError`), not the extractor's. */
    page: boolean;
    /** Whether another attempt may succeed. */
    retryable: boolean;
  };

/** Time the thread's own fetch limit is given past the deadline, ms, so the deadline ends it. */
const FETCH_GRACE_MS = 1_000;

/** The thread kept after its last answer, for the next link. */
let idle: Worker | undefined;

/** Ends the thread kept for the next link, if any (the worker is stopping). */
export function closeReadThread(): void {
  idle?.terminate();
  idle = undefined;
}

/**
 * Reads `url` in a thread of its own, terminated at `options.timeoutMs`.
 *
 * @param url An `http:` or `https:` link.
 * @param options The fetch's options; `timeoutMs` is the deadline of the whole reading, ms.
 * @returns The thread's answer; at the deadline, or when the worker is stopping (`signal`), a
 *   failure saying so.
 */
export function readInThread(
  url: string,
  options: ReadRequest["options"],
  signal?: AbortSignal,
): Promise<ReadAnswer> {
  const thread = idle ??
    new Worker(new URL("./read_worker.ts", import.meta.url).href, { type: "module" });
  idle = undefined;
  return new Promise<ReadAnswer>((resolve) => {
    const end = (answer: ReadAnswer, keep = false) => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", stop);
      if (keep && idle === undefined) idle = thread;
      else thread.terminate();
      resolve(answer);
    };
    const seconds = options.timeoutMs / 1000;
    const timer = setTimeout(() =>
      end({
        ok: false,
        message: `took longer than ${seconds} s (fetching and reading one page; ` +
          "a larger --timeout gives slow pages more time)",
        page: true,
        retryable: true,
      }), options.timeoutMs);
    const stop = () => end({ ok: false, message: "stopped", page: true, retryable: false });
    signal?.addEventListener("abort", stop, { once: true });
    // A thread whose extractor failed (not the page) may be left in any state: not kept.
    thread.onmessage = (event: MessageEvent<ReadAnswer>) =>
      end(event.data, event.data.ok || event.data.page);
    thread.onerror = (event: ErrorEvent) => {
      event.preventDefault();
      end({ ok: false, message: event.message, page: false, retryable: true });
    };
    const request: ReadRequest = {
      url,
      options: { ...options, timeoutMs: options.timeoutMs + FETCH_GRACE_MS },
    };
    thread.postMessage(request);
  });
}

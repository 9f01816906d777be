/**
 * The extension's content script: reads the article of the page it is injected into, with the
 * relay's own extractor (src/client/article.ts), so that the browser and `relay work --extract`
 * write the same result for the same page. `deno task extension` bundles it, with Readability
 * and Turndown, into one `content.js` for the browser.
 *
 * The background injects this file, then calls `globalThis.relayReadPage()` in the same
 * (isolated) world. The page never sees the function, and the script never sees the relay's
 * key: it only returns what it read.
 *
 * @module
 */

import { articleResult, extractArticle, type PageDocument } from "../src/client/article.ts";

/** What the content script tells the background about the page it read. */
export type PageReading =
  | { ok: true; url: string; title: string; result: string }
  | { ok: false; url: string; reason: string };

// The little of the DOM this script reads; Deno's types have no DOM, and a `lib="dom"`
// reference would change the types of every file `deno task check` reads.
declare const document: PageDocument & { readonly contentType: string };
declare const location: { readonly href: string };
declare const performance: {
  getEntriesByType(type: "navigation"): ArrayLike<{ responseStatus?: number }>;
};

/**
 * Reads the open page: its article as the Markdown result the relay's readers push, or why
 * there is none (an HTTP error status, a document that is not HTML, no article found).
 *
 * @returns A {@linkcode PageReading}; never throws (an extractor error becomes a reason).
 */
function readPage(): PageReading {
  const url = location.href;
  // Chromium and Firefox give the status of the navigation; older browsers leave it out (0).
  const status = performance.getEntriesByType("navigation")[0]?.responseStatus ?? 0;
  if (status >= 400) return { ok: false, url, reason: `HTTP ${status}` };
  const type = document.contentType;
  if (type !== "text/html" && type !== "application/xhtml+xml") {
    return { ok: false, url, reason: `not an HTML page (${type})` };
  }
  try {
    const article = extractArticle(document, url);
    if (article === null) return { ok: false, url, reason: "no article found" };
    return { ok: true, url, title: article.title, result: articleResult(article) };
  } catch (error) {
    return { ok: false, url, reason: `the extractor failed (${String(error)})` };
  }
}

const scope = globalThis as { relayReadPage?: () => PageReading; relayReady?: boolean };
scope.relayReadPage = readPage;
// executeScript answers with the value of the file's last statement, and Firefox refuses one it
// cannot copy (such as a function): so the file ends on a plain value.
scope.relayReady = true;

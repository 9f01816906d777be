/**
 * Fetching a web page as a careful browser would, for `relay work --extract`: a browser's
 * User-Agent and `Accept-Language`, only `http:` and `https:` (also after a redirect), at most
 * {@linkcode MAX_REDIRECTS} redirects, one time limit for the whole exchange (headers and
 * body, so a server that drips its page slowly is cut off), and a cap on the bytes read, past
 * which the page is cut rather than buffered whole. Whatever a hostile page does, the fetch
 * costs at most the time limit and the cap's bytes.
 *
 * The bytes are decoded by src/client/charset.ts; a page that is not HTML (a PDF, an image)
 * is refused before its body is read.
 *
 * @module
 */

import { decodeHtml } from "./charset.ts";

/**
 * Most redirects followed: browsers allow 20, but a page that
 * needs more than a handful is a loop or a tracker chain.
 */
export const MAX_REDIRECTS = 5;

/**
 * The User-Agent sent: a current Firefox on Linux. Sites answer a library's own User-Agent
 * with a block page or a bare shell more often than a browser's.
 */
export const BROWSER_USER_AGENT =
  "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0";

/** Media types read as HTML (WHATWG MIME Sniffing, "HTML MIME type", and XHTML). */
const HTML_TYPES = new Set(["text/html", "application/xhtml+xml"]);

/** Statuses that redirect (RFC 9110, section 15.4), with a `Location` to follow. */
const REDIRECTS = new Set([301, 302, 303, 307, 308]);

/** A page that could not be read, with the reason as a few words for the results feed. */
export class PageError extends Error {
  /** Whether another attempt later may succeed (`false` for a link of another scheme). */
  readonly retryable: boolean;

  /**
   * @param reason Why, in a few words: `HTTP 404`, `no answer within 20 s`, ….
   * @param retryable Whether another attempt may succeed.
   */
  constructor(reason: string, retryable = true) {
    super(reason);
    this.name = "PageError";
    this.retryable = retryable;
  }
}

/** Options of {@linkcode fetchPage}. */
export interface FetchPageOptions {
  /** The time limit of the whole fetch, redirects and body included, ms. */
  timeoutMs: number;
  /** The most bytes of a page's body read (after decompression); the rest is left unread. */
  maxBytes: number;
  /** The `Accept-Language` header sent, e.g. `en-GB,en;q=0.8`. */
  acceptLanguage: string;
  /** Abandons the fetch (the worker is stopping). */
  signal?: AbortSignal;
}

/** A fetched HTML page. */
export interface Page {
  /** The page's address after redirects. */
  url: string;
  /** The page decoded to text. */
  html: string;
  /** The charset it was decoded with, as `TextDecoder` names it (`utf-8`, `gbk`, …). */
  charset: string;
  /** Whether the body was longer than `maxBytes` and was cut there. */
  truncated: boolean;
}

/**
 * Fetches `url` and decodes it as HTML.
 *
 * @param url An absolute `http:` or `https:` URL.
 * @returns The page, cut at `options.maxBytes` when longer.
 * @throws {PageError} for another scheme (not retryable), an HTTP error status, too many
 *   redirects, the time limit, a refused connection, or a body that is not HTML.
 */
export async function fetchPage(url: string, options: FetchPageOptions): Promise<Page> {
  const timeout = AbortSignal.timeout(options.timeoutMs);
  const signal = options.signal ? AbortSignal.any([timeout, options.signal]) : timeout;
  try {
    const { res, url: last } = await follow(checkedUrl(url), options, signal);
    const type = mediaType(res.headers.get("content-type"));
    if (type !== "" && !HTML_TYPES.has(type)) {
      await res.body?.cancel();
      throw new PageError(`not a web page but ${type}`);
    }
    const { bytes, truncated } = await readCapped(res, options.maxBytes);
    if (type === "" && !looksLikeHtml(bytes)) {
      throw new PageError("not a web page (no Content-Type, and the body is not HTML)");
    }
    const { text, charset } = decodeHtml(bytes, res.headers.get("content-type"));
    return { url: last, html: text, charset, truncated };
  } catch (error) {
    if (error instanceof PageError) throw error;
    if (timeout.aborted) {
      throw new PageError(`no complete answer within ${options.timeoutMs / 1000} s`);
    }
    if (options.signal?.aborted) throw new PageError("stopped", false);
    throw new PageError(networkReason(error));
  }
}

/** Follows redirects by hand, so that each hop's scheme is checked and the hops counted. */
async function follow(
  start: URL,
  options: FetchPageOptions,
  signal: AbortSignal,
): Promise<{ res: Response; url: string }> {
  let url = start;
  for (let hop = 0;; hop++) {
    const res = await fetch(url, {
      redirect: "manual",
      signal,
      headers: {
        "user-agent": BROWSER_USER_AGENT,
        "accept": "text/html,application/xhtml+xml;q=0.9,*/*;q=0.8",
        "accept-language": options.acceptLanguage,
      },
    });
    const location = res.headers.get("location");
    if (REDIRECTS.has(res.status) && location !== null) {
      await res.body?.cancel();
      if (hop === MAX_REDIRECTS) throw new PageError(`more than ${MAX_REDIRECTS} redirects`);
      url = checkedUrl(new URL(location, url).href);
      continue;
    }
    if (!res.ok) {
      await res.body?.cancel();
      throw new PageError(`HTTP ${res.status}`);
    }
    return { res, url: url.href };
  }
}

/**
 * Parses `url`, refusing anything but `http:` and `https:` (a `javascript:` or `file:` link in
 * a queue, or a redirect to one).
 *
 * @throws {PageError} not retryable.
 */
export function checkedUrl(url: string): URL {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new PageError("not a valid link", false);
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
    throw new PageError(`only http and https links are read, not ${parsed.protocol}`, false);
  }
  return parsed;
}

/** Reads at most `max` bytes of the body and cancels the rest. */
async function readCapped(
  res: Response,
  max: number,
): Promise<{ bytes: Uint8Array; truncated: boolean }> {
  const chunks: Uint8Array[] = [];
  let total = 0;
  let truncated = false;
  const reader = res.body?.getReader();
  while (reader) {
    const { done, value } = await reader.read();
    if (done) break;
    const room = max - total;
    if (value.byteLength > room) {
      chunks.push(value.subarray(0, room));
      total += room;
      truncated = true;
      await reader.cancel().catch(() => {});
      break;
    }
    chunks.push(value);
    total += value.byteLength;
  }
  const bytes = new Uint8Array(total);
  let at = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, at);
    at += chunk.byteLength;
  }
  return { bytes, truncated };
}

/** The media type of a `Content-Type` header, lower case, without parameters; `""` if none. */
function mediaType(header: string | null): string {
  return (header ?? "").split(";")[0]!.trim().toLowerCase();
}

/** A body served without a type is HTML when its first non-blank character opens a tag. */
function looksLikeHtml(bytes: Uint8Array): boolean {
  const start = new TextDecoder("latin1").decode(bytes.subarray(0, 512)).replace(/^\uFEFF/, "");
  return /^\s*</.test(start);
}

/** Why fetch() failed, in a few words. */
function networkReason(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  if (/connection refused/i.test(text)) return "connection refused";
  if (/dns|lookup|name or service not known/i.test(text)) return "no such host";
  if (/certificate|tls/i.test(text)) return "its TLS certificate was refused";
  return text.split("\n")[0]!.replace(/^error sending request[^:]*: /i, "");
}

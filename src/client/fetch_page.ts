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
 * Every hop is held to the address policy (src/client/address_policy.ts): the name is resolved
 * here, every address it resolves to is checked, and the connection goes only to those checked
 * addresses. That is why the request is made with `node:http`/`node:https` and their `lookup`
 * option rather than `fetch`: `fetch` resolves the name again by itself (a name that answers a
 * public address to the check and a loopback one to the connection, DNS rebinding, would pass),
 * and Deno's `fetch` cannot be pinned to an address for `https:` (its `tcp` transport sends no
 * TLS). With `lookup`, TLS still names the host (SNI) and the certificate is checked against
 * the host name, not the address (measured on Deno 2.9.5: a certificate for another name is
 * refused).
 *
 * @module
 */

import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import { lookup as dnsLookup } from "node:dns/promises";
import type { IncomingMessage } from "node:http";
import type { Readable } from "node:stream";
import type { LookupOptions } from "node:dns";
import { createBrotliDecompress, createGunzip, createInflate } from "node:zlib";
import { decodeHtml } from "./charset.ts";
import {
  type AddressPolicy,
  canonicalIp,
  hostOf,
  hostRefusal,
  isIpLiteral,
  refusal,
} from "./address_policy.ts";

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
  /** The hosts allowed despite the address policy, and the relay's own addresses. */
  policy: AddressPolicy;
  /**
   * Resolves a host name to its addresses (default: the system's resolver, every address).
   * Tests give one that maps a test name to a loopback address.
   */
  resolve?: (host: string) => Promise<string[]>;
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
      res.body.destroy();
      throw new PageError(`not a web page but ${type}`);
    }
    const { bytes, truncated } = await readCapped(res.body, options.maxBytes);
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

/** Follows redirects by hand, so that each hop's scheme and address are checked. */
async function follow(
  start: URL,
  options: FetchPageOptions,
  signal: AbortSignal,
): Promise<{ res: Answer; url: string }> {
  let url = start;
  for (let hop = 0;; hop++) {
    const res = await get(url, options, signal);
    const location = res.headers.get("location");
    if (REDIRECTS.has(res.status) && location !== null) {
      res.body.destroy();
      if (hop === MAX_REDIRECTS) throw new PageError(`more than ${MAX_REDIRECTS} redirects`);
      url = checkedUrl(new URL(location, url).href);
      continue;
    }
    if (res.status < 200 || res.status > 299) {
      res.body.destroy();
      throw new PageError(`HTTP ${res.status}`);
    }
    return { res, url: url.href };
  }
}

/**
 * The addresses of the relay at `relayUrl` (its `--url`), as the address policy writes them:
 * the reader refuses them like private ones, since the relay's machine may serve more than
 * the relay. A name that does not resolve gives none.
 */
export async function relayAddresses(relayUrl: string): Promise<string[]> {
  const host = hostOf(new URL(relayUrl));
  const found = isIpLiteral(host) ? [host] : await systemResolve(host).catch(() => []);
  return found.map((address) => canonicalIp(address) ?? address);
}

/** One answer: its status, headers and (decompressed) body. */
interface Answer {
  status: number;
  headers: Headers;
  body: Readable;
}

/** The system's resolver: every address of `host`, IPv4 and IPv6. */
async function systemResolve(host: string): Promise<string[]> {
  const found = await dnsLookup(host, { all: true, verbatim: true });
  return found.map((entry) => entry.address);
}

/** The callback of a `node:net` `lookup`, in both its forms. */
type LookupCallback = (
  error: Error | null,
  address: string | Array<{ address: string; family: number }>,
  family?: number,
) => void;

/**
 * Sends one GET to `url` over a connection to a checked address only.
 *
 * @throws {PageError} not retryable, when the host or any address it resolves to is refused.
 */
function get(url: URL, options: FetchPageOptions, signal: AbortSignal): Promise<Answer> {
  const early = hostRefusal(url, options.policy);
  if (early !== undefined) throw new PageError(early, false);
  let refused: PageError | undefined;
  const resolve = options.resolve ?? systemResolve;
  // Called by the connection itself, so the addresses checked are the ones connected to.
  const lookup = (host: string, how: LookupOptions, done: LookupCallback) => {
    resolve(host).then((addresses) => {
      if (addresses.length === 0) throw new Error(`getaddrinfo ENOTFOUND ${host}`);
      for (const address of addresses) {
        const why = refusal(url, address, options.policy);
        if (why !== undefined) throw refused = new PageError(why, false);
      }
      const all = addresses.map((address) => ({ address, family: address.includes(":") ? 6 : 4 }));
      if (how.all) done(null, all);
      else done(null, all[0]!.address, all[0]!.family);
    }).catch((error: Error) => done(error, ""));
  };
  const send = url.protocol === "https:" ? httpsRequest : httpRequest;
  return new Promise((resolved, reject) => {
    const req = send(url, {
      method: "GET",
      signal,
      ...(isIpLiteral(url.hostname) ? {} : { lookup }),
      headers: {
        "user-agent": BROWSER_USER_AGENT,
        "accept": "text/html,application/xhtml+xml;q=0.9,*/*;q=0.8",
        "accept-language": options.acceptLanguage,
        "accept-encoding": "gzip, deflate, br",
      },
    }, (res) => {
      const headers = new Headers();
      for (const [name, value] of Object.entries(res.headers)) {
        for (const one of Array.isArray(value) ? value : [value ?? ""]) headers.append(name, one);
      }
      try {
        resolved({ status: res.statusCode ?? 0, headers, body: decoded(res) });
      } catch (error) {
        res.destroy();
        reject(error);
      }
    });
    req.on("error", (error) => reject(refused ?? error));
    req.end();
  });
}

/** The body of `res`, decompressed as its `Content-Encoding` says. */
function decoded(res: IncomingMessage): Readable {
  const coding = String(res.headers["content-encoding"] ?? "identity").trim().toLowerCase();
  const decoder = coding === "gzip" || coding === "x-gzip"
    ? createGunzip()
    : coding === "deflate"
    ? createInflate()
    : coding === "br"
    ? createBrotliDecompress()
    : undefined;
  if (decoder === undefined) {
    if (coding === "identity" || coding === "") return res;
    throw new PageError(`the page is compressed as ${coding}, which the reader cannot read`);
  }
  res.on("error", (error) => decoder.destroy(error));
  return res.pipe(decoder);
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

/** Reads at most `max` bytes of the body and drops the rest. */
async function readCapped(
  body: Readable,
  max: number,
): Promise<{ bytes: Uint8Array; truncated: boolean }> {
  const chunks: Uint8Array[] = [];
  let total = 0;
  let truncated = false;
  for await (const value of body as AsyncIterable<Uint8Array>) {
    const room = max - total;
    if (value.byteLength > room) {
      chunks.push(value.subarray(0, room));
      total += room;
      truncated = true;
      break;
    }
    chunks.push(value);
    total += value.byteLength;
  }
  body.destroy();
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

/**
 * Why the request failed, in a few words that name the cause and what to do, from the error's
 * `code` (Node's `ECONNREFUSED`, `ENOTFOUND`, OpenSSL's certificate codes) or its message.
 */
export function networkReason(error: unknown): string {
  const code = String((error as { code?: unknown })?.code ?? "");
  const text = error instanceof Error ? error.message : String(error);
  if (code === "ECONNREFUSED" || /connection refused/i.test(text)) {
    return "connection refused (nothing answers at that address: the site may be down; " +
      "try the link in a browser)";
  }
  if (
    code === "ENOTFOUND" || code === "EAI_AGAIN" || /getaddrinfo|dns|name or service/i.test(text)
  ) {
    return "no such host (the name does not resolve: check the link for a typo, or this " +
      "machine's DNS)";
  }
  if (/CERT|SSL|TLS|SELF_SIGNED|UNABLE_TO_VERIFY/i.test(code) || /certificate|tls/i.test(text)) {
    return `its TLS certificate was refused (${text.split("\n")[0]}): the site's certificate ` +
      "is not valid for its name; the reader does not skip the check, read it in a browser";
  }
  if (code === "ECONNRESET") return "the site closed the connection (try again later)";
  if (code === "EHOSTUNREACH" || code === "ENETUNREACH") {
    return "the site's network cannot be reached from this machine (check its connection)";
  }
  return text.split("\n")[0]!;
}

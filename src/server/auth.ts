/**
 * The shared-secret check and, the scopes of named keys
 * and the limit on failed authentications, as one middleware,
 * {@linkcode createRequireKey}, that the app puts in front of every route that needs a
 * key.
 *
 * @module
 */

import { parse as parseCookies } from "hono/utils/cookie";
import { HttpError, truncate } from "../errors.ts";
import type { KeyRing, Scope } from "../access/named_keys.ts";

/** The request header that carries the API key. */
export const KEY_HEADER = "x-auth-key";

/** The query parameter that carries the API key when the header is absent. */
export const KEY_PARAM = "key";

/**
 * The cookie that may carry a key where neither header nor query can (a browser showing a
 * private blog, `relay blog-delete` against the built-in blog). Whoever sets it should make
 * it `SameSite=Strict; HttpOnly` (and `Secure` over HTTPS); the relay never sets it.
 */
export const ACCESS_COOKIE = "relay_access";

/** The request header that carries the relay's app id, in place of a key (`RELAY_APP_ID`). */
export const APP_ID_HEADER = "x-app-id";

/**
 * The key a request presents: the `X-Auth-Key` header when present, even if empty;
 * otherwise the `key` query parameter; otherwise `undefined`. The query is parsed only
 * when the header is absent.
 *
 * @param headers The request headers.
 * @param url The request URL, parsed or as received (then parsed only when the header is
 *   absent).
 */
export function presentedKey(headers: Headers, url: URL | string): string | undefined {
  const header = headers.get(KEY_HEADER);
  if (header !== null) return header;
  const query = typeof url === "string" ? URL.parse(url)?.searchParams : url.searchParams;
  return query?.get(KEY_PARAM) ?? undefined;
}

/** The key in the {@linkcode ACCESS_COOKIE} cookie, or `undefined` without one. */
function cookieKey(headers: Headers): string | undefined {
  const cookie = headers.get("cookie");
  if (cookie === null || !cookie.includes(ACCESS_COOKIE)) return undefined;
  return parseCookies(cookie, ACCESS_COOKIE)[ACCESS_COOKIE];
}

/**
 * Methods that change nothing (RFC 9110.1). `GET /pull` does change something, so a
 * cookie opens only the `read` scope's routes with them.
 */
const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

/**
 * Compares a presented key with the expected one in constant time: every UTF-16 code
 * unit of `expected` is compared with the one at the same place in `given` (0 past its
 * end), each difference, and a difference in length, folded into one value tested once.
 * The time taken depends only on the length of `expected`, which is fixed; never on where
 * the two first differ, nor on `given`'s length. No digest and no copy of either key is
 * made (a SHA-256 per request was a tenth of a cached read's time).
 *
 * @param given The key the request presented.
 * @param expected The configured key.
 * @returns `true` when the keys are equal.
 */
export function keysMatch(given: string, expected: string): boolean {
  const length = expected.length;
  const givenLength = given.length;
  let difference = givenLength ^ length;
  for (let i = 0; i < length; i++) {
    difference |= expected.charCodeAt(i) ^ (i < givenLength ? given.charCodeAt(i) : 0);
  }
  return difference === 0;
}

/** What the access log must never show (docs/api/rules.md, "Other rules"). */
export interface Secrets {
  /** The main key. */
  readonly mainKey: string;
  /** Whether `text` is one of the named keys (by its digest; not counted as a use). */
  readonly isNamedKey?: ((text: string) => boolean) | undefined;
  /** The private podcast's feed key (`podcast_feed_key.ts`), when the relay has a podcast. */
  readonly podcastFeedKey?: string | undefined;
  /** The feeds' keys (`feed_keys.ts`). */
  readonly feedKeys?: readonly string[] | undefined;
}

/**
 * Characters of a request target the access log shows; a longer one is cut and the rest
 * counted (`…(+65000)`), so that a client cannot fill the log with one request.
 */
export const LOGGED_TARGET_CHARS = 512;

/** A run between the delimiters of a path and query. */
const SEGMENT = /[^/?&;=#]+/g;

/** Characters of a named key: 256 bits in base64url. */
const NAMED_KEY_CHARS = 43;

/** What a named key looks like: 256 bits in base64url, standing alone. */
const KEY_TOKEN = /(?<![A-Za-z0-9_-])[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])/g;

/** Percent-decodes `text` as far as it can (a malformed escape is left as it is). */
function percentDecode(text: string): string {
  if (!text.includes("%")) return text;
  return text.replace(/(?:%[0-9A-Fa-f]{2})+/g, (run) => {
    try {
      return decodeURIComponent(run);
    } catch {
      return run;
    }
  });
}

/** Whether `text` (decoded) holds the main key, a named key or the podcast's feed key. */
function holdsKey(text: string, secrets: Secrets): boolean {
  if (secrets.mainKey !== "" && text.includes(secrets.mainKey)) return true;
  if (secrets.podcastFeedKey !== undefined && text.includes(secrets.podcastFeedKey)) return true;
  if (secrets.feedKeys?.some((key) => text.includes(key))) return true;
  const isNamedKey = secrets.isNamedKey;
  if (isNamedKey === undefined || text.length < NAMED_KEY_CHARS) return false;
  for (const [token] of text.matchAll(KEY_TOKEN)) if (isNamedKey(token)) return true;
  return false;
}

/**
 * The request target (path and query) of a request URL for the access log, with what could
 * be a key replaced by `REDACTED` (docs/api/rules.md, "Other rules"):
 * - the value of every query parameter whose name, percent-decoded and in any case, holds
 *   `key` (`key=`, `KEY=`, `k%65y=`, `api_key=`), parameters being separated by `&` or `;`;
 * - the main key wherever it appears, as sent or percent-encoded;
 * - any part of the path or query (between `/`, `?`, `&`, `;`, `=`) that, decoded, holds
 *   the main key, a named key or the podcast's feed key.
 *
 * Works on the raw string, so a request whose URL does not parse (a bad `Host` header) is
 * logged without its key too. A target longer than {@linkcode LOGGED_TARGET_CHARS} is cut
 * and ends in `…(+N)`, N the characters left out.
 *
 * @param rawUrl The request URL as received, e.g. `http://relay/peek?key=s3cret`.
 * @param secrets The keys to look for; without them only parameters are redacted.
 * @returns Path and query, e.g. `/peek?key=REDACTED&queue=qa`.
 */
export function redactedTarget(rawUrl: string, secrets?: Secrets): string {
  const scheme = rawUrl.indexOf("://");
  const slash = rawUrl.indexOf("/", scheme < 0 ? 0 : scheme + 3);
  const target = slash < 0 ? "/" : rawUrl.slice(slash);
  // Enough beyond the part shown that a key crossing its end is still found whole.
  let shown = target.slice(0, 2 * LOGGED_TARGET_CHARS);
  const question = shown.indexOf("?");
  if (question >= 0) {
    const parts = shown.slice(question + 1).split(/([&;])/);
    for (let i = 0; i < parts.length; i += 2) {
      const part = parts[i]!;
      const equals = part.indexOf("=");
      if (equals < 0) continue;
      const name = percentDecode(part.slice(0, equals).replaceAll("+", " ")).toLowerCase();
      if (name.includes(KEY_PARAM)) parts[i] = `${part.slice(0, equals)}=REDACTED`;
    }
    shown = `${shown.slice(0, question + 1)}${parts.join("")}`;
  }
  if (secrets !== undefined && holdsKey(percentDecode(shown), secrets)) {
    const { mainKey } = secrets;
    if (mainKey !== "") {
      shown = shown.replaceAll(mainKey, "REDACTED")
        .replaceAll(encodeURIComponent(mainKey), "REDACTED");
    }
    shown = shown.replace(
      SEGMENT,
      (segment) =>
        holdsKey(percentDecode(segment.replaceAll("+", " ")), secrets) ||
          holdsKey(percentDecode(segment), secrets)
          ? "REDACTED"
          : segment,
    );
  }
  if (target.length <= LOGGED_TARGET_CHARS) return shown;
  return `${shown.slice(0, LOGGED_TARGET_CHARS)}…(+${target.length - LOGGED_TARGET_CHARS})`;
}

/**
 * {@linkcode redactedTarget} with `secrets`, remembering its last answer: a client asking
 * for the same URL again and again (a poll, a load) has it redacted once. Only a target
 * shorter than a named key is remembered, so that one holding a key named later is never
 * answered from memory.
 */
export function targetRedactor(secrets?: Secrets): (rawUrl: string) => string {
  let lastUrl = "";
  let lastTarget = "";
  return (rawUrl) => {
    if (rawUrl === lastUrl) return lastTarget;
    const target = redactedTarget(rawUrl, secrets);
    const scheme = rawUrl.indexOf("://");
    const slash = rawUrl.indexOf("/", scheme < 0 ? 0 : scheme + 3);
    if (slash >= 0 && rawUrl.length - slash < NAMED_KEY_CHARS) {
      lastUrl = rawUrl;
      lastTarget = target;
    }
    return target;
  };
}

/** Failed authentications an address may make within {@linkcode AUTH_FAILURE_WINDOW_MS}. */
const AUTH_FAILURE_LIMIT = 10;

/** The window over which failed authentications are counted, ms. */
const AUTH_FAILURE_WINDOW_MS = 60_000;

/** Addresses remembered at most; the ones with the oldest failures are forgotten first. */
const MAX_TRACKED_ADDRESSES = 10_000;

/** Keys shorter than this draw a warning at start. */
export const WEAK_KEY_LENGTH = 16;

/**
 * Counts failed authentications per client address. After
 * {@linkcode AUTH_FAILURE_LIMIT} failures within {@linkcode AUTH_FAILURE_WINDOW_MS}, the
 * address is refused (429) until its oldest failure leaves the window, whatever key it
 * sends: checking the key while refusing would still let it guess. Addresses with no
 * failures are never slowed down. In memory only; a restart forgets.
 */
export class AuthFailureLimiter {
  readonly #clock: () => number;
  readonly #failures = new Map<string, number[]>();

  /**
   * Makes a limiter that has seen no failures.
   *
   * @param clock Source of time, epoch ms.
   */
  constructor(clock: () => number) {
    this.#clock = clock;
  }

  /**
   * Whether `address` is refused now.
   *
   * @returns Seconds until it may try again (≥ 1), or 0 when it may try now.
   */
  retryAfter(address: string): number {
    const recent = this.#recent(address);
    if (recent.length < AUTH_FAILURE_LIMIT) return 0;
    const freeAt = recent[recent.length - AUTH_FAILURE_LIMIT]! + AUTH_FAILURE_WINDOW_MS;
    return Math.max(1, Math.ceil((freeAt - this.#clock()) / 1000));
  }

  /** Records a failed authentication from `address`. */
  fail(address: string): void {
    const recent = this.#recent(address);
    recent.push(this.#clock());
    this.#failures.delete(address);
    this.#failures.set(address, recent);
    if (this.#failures.size > MAX_TRACKED_ADDRESSES) {
      const oldest = this.#failures.keys().next().value;
      if (oldest !== undefined) this.#failures.delete(oldest);
    }
  }

  #recent(address: string): number[] {
    const now = this.#clock();
    const recent = (this.#failures.get(address) ?? []).filter((at) =>
      now - at < AUTH_FAILURE_WINDOW_MS
    );
    if (recent.length === 0) this.#failures.delete(address);
    return recent;
  }
}

/** Browsers' schemes for extensions: a web page cannot send an `Origin` with one. */
const EXTENSION_SCHEMES = new Set([
  "chrome-extension:",
  "moz-extension:",
  "safari-web-extension:",
  "ms-browser-extension:",
]);

/**
 * Whether `origin` (an `Origin` header's value) is a browser extension's: installed by
 * the user, and no web page can send such an `Origin`.
 */
export function isExtensionOrigin(origin: string): boolean {
  const colon = origin.indexOf(":");
  return colon > 0 && EXTENSION_SCHEMES.has(origin.slice(0, colon + 1).toLowerCase());
}

/** Host and port of `host` (e.g. `relay.lan:8787`) under `scheme`'s default port. */
function hostAndPort(scheme: string, host: string): string | undefined {
  try {
    const url = new URL(`${scheme}//${host.trim()}`);
    return `${url.hostname}:${url.port || (scheme === "https:" ? "443" : "80")}`;
  } catch {
    return undefined;
  }
}

/**
 * The `Origin` of a request made by a web page that is not the relay's own (docs/api/basics.md,
 * "Requests from web pages"), or `undefined` when the request has no `Origin` or comes from
 * an origin the relay accepts:
 * - a page at the address the request was sent to: the `Origin`'s host and port equal those
 *   of the request URL (from `Host`), of the first `X-Forwarded-Host` or of `Forwarded:
 *   host=` (what a reverse proxy passes on), a missing port counting as the default of the
 *   `Origin`'s scheme; the scheme itself is not compared (a proxy may end TLS);
 * - a browser extension (`chrome-extension://…`, `moz-extension://…`): installed by the
 *   user, and no web page can send such an `Origin`;
 * - one of `allowed` (`--allow-origin`).
 *
 * A web page's request without a preflight (a `text/plain` POST) always carries its
 * `Origin`; the headers a proxy adds cannot be set by such a page.
 *
 * @param headers The request headers.
 * @param url The request URL as the server built it (its host is the `Host` header).
 * @param allowed Origins accepted besides the relay's own, as `URL.origin` gives them.
 */
export function foreignOrigin(
  headers: Headers,
  url: string,
  allowed: readonly string[] = [],
): string | undefined {
  const origin = headers.get("origin");
  if (origin === null) return undefined;
  let parsed: URL;
  try {
    parsed = new URL(origin);
  } catch {
    return origin; // "null" (a sandboxed page, a file) or garbage
  }
  if (EXTENSION_SCHEMES.has(parsed.protocol)) return undefined;
  if (allowed.includes(parsed.origin)) return undefined;
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") return origin;
  const own = hostAndPort(parsed.protocol, parsed.host);
  const hosts = [
    URL.canParse(url) ? new URL(url).host : undefined,
    headers.get("x-forwarded-host")?.split(",")[0],
    /(?:^|[;,\s])host="?([^";,\s]+)/i.exec(headers.get("forwarded") ?? "")?.[1],
  ];
  for (const host of hosts) {
    if (host !== undefined && hostAndPort(parsed.protocol, host) === own) return undefined;
  }
  return origin;
}

/** Options of {@linkcode createAuthorize}. */
export interface AuthorizeOptions {
  /** The shared secret; compared in constant time. Has every scope. */
  readonly apiKey: string;
  /** Named keys with scopes; without it only `apiKey` is accepted. */
  readonly keyRing?: KeyRing | undefined;
  /** Counts failed authentications per client address, one per app. */
  readonly failures: AuthFailureLimiter;
  /** Origins whose pages may call the API besides the relay's own ({@linkcode foreignOrigin}). */
  readonly allowedOrigins?: readonly string[] | undefined;
  /** The app id routes marked `appId` take in `X-App-ID`; without it they take keys only. */
  readonly appId?: string | undefined;
  /**
   * The private podcast's feed key, which routes marked `podcastFeed` take as they take a
   * key (and no other route does); without it they take keys only.
   */
  readonly podcastFeedKey?: string | undefined;
  /**
   * The feeds' keys by the path of their feed (`feed_keys.ts`): each is taken as a key with
   * the `read` scope by its feed's route, and by no other.
   */
  readonly feedKeys?: ReadonlyMap<string, string> | undefined;
}

/** What a route asks of a request's credentials. */
export interface Access {
  /** The scope a named key needs (the main key has every scope). */
  readonly scope: Scope;
  /** Whether the app id in `X-App-ID` is taken instead of such a key. */
  readonly appId?: boolean | undefined;
  /** Whether the podcast's feed key is taken as such a key (the private podcast's reads). */
  readonly podcastFeed?: boolean | undefined;
}

/** The check {@linkcode createAuthorize} makes; see there. */
export type Authorize = (
  request: Request,
  url: URL | string,
  address: string | undefined,
  access: Access,
  path: string,
) => string;

/** The key id of a request let through by its app id. */
export const APP_ID_KEY_ID = "app-id";

/** The key id of a request let through by the podcast's feed key. */
export const PODCAST_FEED_KEY_ID = "podcast-feed";

/** The {@linkcode KEY_ID} of a request let through by its feed's key (`feed_keys.ts`). */
export const FEED_KEY_ID = "feed";

/**
 * The challenge every 401 carries, as RFC 9110 requires of one ("401 Unauthorized"): its
 * scheme names the header the key goes in. No browser knows it, so none opens a password
 * dialog; the problem document says what to send.
 */
export const KEY_CHALLENGE = 'X-Auth-Key realm="relay"';

/** The 401 for a missing or wrong key (and app id, where one is taken). */
function unauthorized(given: string | undefined, access: Access): HttpError {
  const appId = access.appId ? " (or the relay's app id in the X-App-ID header)" : "";
  const challenge = { "www-authenticate": KEY_CHALLENGE };
  if (given === undefined) {
    return new HttpError(
      401,
      `Missing API key${appId}: send it in the X-Auth-Key header or the key query parameter`,
      challenge,
    );
  }
  return new HttpError(
    401,
    "Wrong API key: send the relay's main key (its api-key file, or RELAY_API_KEY) or a " +
      `named key${appId}`,
    challenge,
  );
}

/**
 * Refuses a key taken from the {@linkcode ACCESS_COOKIE} cookie where a browser could
 * have sent it for another site's page (a cross-site request forgery): a state-changing
 * request needs an `Origin`, which {@linkcode foreignOrigin} has already found to be the
 * relay's own; a safe one may only read.
 *
 * @throws {HttpError} 403 when the cookie may not authorise this request.
 */
function checkCookieUse(request: Request, access: Access, path: string): void {
  if (SAFE_METHODS.has(request.method)) {
    if (access.scope === "read") return;
    throw new HttpError(
      403,
      `The ${ACCESS_COOKIE} cookie opens reading only: ${path} needs its key in the ` +
        "X-Auth-Key header or the key query parameter",
    );
  }
  if (request.headers.has("origin")) return;
  throw new HttpError(
    403,
    `Cannot take the key of the ${ACCESS_COOKIE} cookie for a ${request.method} without an ` +
      "Origin header: only the relay's own pages may use it to change something",
    {},
    "cross-site",
  );
}

/**
 * Makes `authorize(request, url, address, access, path)`: the one check, made after the
 * method's, that lets a request through only with the main key, a named key that has
 * `access.scope`, or, where `access.appId`, the relay's app id, or, where
 * `access.podcastFeed`, the podcast's feed key, or, on a feed's own route, that feed's key
 * (anywhere else either is an unknown key). Every
 * route that needs a key goes through it, the built-in services' too. It runs
 * synchronously, inside each endpoint's one handler and before a cached read is answered.
 *
 * A request from another web page's origin ({@linkcode foreignOrigin}) is refused first and
 * not counted as a failed authentication, so that a page a household member visits cannot
 * put the member's address over the failure limit. The key is the `X-Auth-Key` header, else
 * the `key` parameter, else the {@linkcode ACCESS_COOKIE} cookie, which a browser sends on
 * its own and which therefore opens only reads and requests with the relay's own `Origin`.
 * A valid key is always accepted, whatever failures came before from its address: the limit
 * only answers 429 instead of 401 to an address that keeps sending wrong keys (docs/api/basics.md,
 * "Authentication").
 *
 * @example
 * ```ts
 * const authorize = createAuthorize({
 *   apiKey: "secret",
 *   failures: new AuthFailureLimiter(() => Date.now()),
 * });
 * const request = new Request("http://relay.local/clear", {
 *   method: "POST",
 *   headers: { "X-Auth-Key": "secret" },
 * });
 * const keyId = authorize(request, new URL(request.url), "192.0.2.7", { scope: "admin" }, "/clear");
 * ```
 * @returns The check; it returns the key id ({@linkcode MAIN_KEY_ID}, …) of the key presented, and throws
 *   {@linkcode HttpError} 403 for a foreign `Origin` or a cookie used where it may not be,
 *   429 with `Retry-After` for a missing or wrong key from an address over the failure
 *   limit, 401 for a missing or wrong key (counted as a failure), and 403 for a named key
 *   without the scope.
 */
export function createAuthorize(options: AuthorizeOptions): Authorize {
  const { apiKey, keyRing, failures, allowedOrigins = [], appId, podcastFeedKey, feedKeys } =
    options;
  return (request, url, address, access, path) => {
    const headers = request.headers;
    const foreign = foreignOrigin(headers, request.url, allowedOrigins);
    if (foreign !== undefined) {
      throw new HttpError(
        403,
        `Cannot accept a request from a web page at ${truncate(JSON.stringify(foreign), 80)}: ` +
          "the relay answers its own pages and browser extensions only (--allow-origin adds others)",
        {},
        "cross-site",
      );
    }
    if (access.appId && appId !== undefined) {
      const givenAppId = headers.get(APP_ID_HEADER);
      if (givenAppId !== null && givenAppId !== "" && keysMatch(givenAppId, appId)) {
        return APP_ID_KEY_ID;
      }
    }
    let given = presentedKey(headers, url);
    if (given === undefined) {
      given = cookieKey(headers);
      if (given !== undefined) checkCookieUse(request, access, path);
    }
    if (given !== undefined && keysMatch(given, apiKey)) return MAIN_KEY_ID;
    if (
      access.podcastFeed && podcastFeedKey !== undefined && given !== undefined &&
      keysMatch(given, podcastFeedKey)
    ) return PODCAST_FEED_KEY_ID;
    const pathFeedKey = feedKeys?.get(path);
    if (pathFeedKey !== undefined && given !== undefined && keysMatch(given, pathFeedKey)) {
      return FEED_KEY_ID;
    }
    const named = given === undefined ? undefined : keyRing?.find(given);
    if (named !== undefined) {
      if (!named.scopes.includes(access.scope)) {
        throw new HttpError(
          403,
          `The key "${named.name}" may not use ${path}: that needs the "${access.scope}" ` +
            `scope, and it has ${named.scopes.join(", ")}`,
        );
      }
      return `named:${named.name}`;
    }
    const wait = address === undefined ? 0 : failures.retryAfter(address);
    if (wait > 0) {
      throw new HttpError(
        429,
        `Too many failed authentications from ${address}: try again in ${wait} s`,
        { "retry-after": String(wait) },
      );
    }
    if (address !== undefined) failures.fail(address);
    throw unauthorized(given, access);
  };
}

/**
 * Which key a request presented, as {@linkcode createAuthorize} answers it and a handler
 * gets it (`keyId`), for per-key limits: this for the main key, `named:<name>` for a named
 * key, {@linkcode APP_ID_KEY_ID} or {@linkcode PODCAST_FEED_KEY_ID}.
 */
export const MAIN_KEY_ID = "main";

/**
 * The shared-secret check of spec §5 and contract C4, the scopes of named keys (issue 7)
 * and the limit on failed authentications (issue 5), as one middleware,
 * {@linkcode createRequireKey}, that the app puts in front of every route that needs a
 * key.
 *
 * @module
 */

import { createHash, timingSafeEqual } from "node:crypto";
import type { Context, MiddlewareHandler } from "hono";
import { routePath } from "hono/route";
import { HttpError } from "../errors.ts";
import type { KeyRing, Scope } from "../access/named_keys.ts";

/** The request header that carries the API key (spec §5). */
export const KEY_HEADER = "x-auth-key";

/** The query parameter that carries the API key when the header is absent (spec §5). */
export const KEY_PARAM = "key";

/**
 * The key a request presents (C4): the `X-Auth-Key` header when present, even if empty;
 * otherwise the `key` query parameter; otherwise `undefined`.
 *
 * @param headers The request headers.
 * @param params The request's query parameters.
 */
export function presentedKey(headers: Headers, params: URLSearchParams): string | undefined {
  return headers.get(KEY_HEADER) ?? params.get(KEY_PARAM) ?? undefined;
}

/**
 * Compares two keys in constant time without leaking their lengths: both sides are
 * hashed with SHA-256 and the digests compared with `timingSafeEqual` (C4; platform notes,
 * "Secrets").
 *
 * @returns `true` when the keys are equal.
 */
export function keysMatch(given: string, expected: string): boolean {
  const a = createHash("sha256").update(given, "utf8").digest();
  if (expectedDigest?.key !== expected) {
    expectedDigest = {
      key: expected,
      digest: createHash("sha256").update(expected, "utf8").digest(),
    };
  }
  return timingSafeEqual(a, expectedDigest.digest);
}

// The configured key's digest, computed once rather than on every request.
let expectedDigest: { key: string; digest: Uint8Array } | undefined;

/**
 * The request target (path and query) of a request URL for logs, with every value of the
 * `key` query parameter replaced by `REDACTED` (C4). Works on the raw string, so a request
 * whose URL does not parse (a bad `Host` header) is logged without its key too.
 *
 * @param rawUrl The request URL as received, e.g. `http://relay/peek?key=s3cret`.
 * @returns Path and query, e.g. `/peek?key=REDACTED&queue=qa`.
 */
export function redactedTarget(rawUrl: string): string {
  const scheme = rawUrl.indexOf("://");
  const slash = rawUrl.indexOf("/", scheme < 0 ? 0 : scheme + 3);
  const target = slash < 0 ? "/" : rawUrl.slice(slash);
  const question = target.indexOf("?");
  if (question < 0) return target;
  const query = target.slice(question + 1).replace(
    /(^|&)key=[^&]*/g,
    `$1${KEY_PARAM}=REDACTED`,
  );
  return `${target.slice(0, question)}?${query}`;
}

/** Failed authentications an address may make within {@linkcode AUTH_FAILURE_WINDOW_MS}. */
const AUTH_FAILURE_LIMIT = 10;

/** The window over which failed authentications are counted, ms (issue 5). */
const AUTH_FAILURE_WINDOW_MS = 60_000;

/** Addresses remembered at most; the ones with the oldest failures are forgotten first. */
const MAX_TRACKED_ADDRESSES = 10_000;

/** Keys shorter than this draw a warning at start (issue 5). */
export const WEAK_KEY_LENGTH = 16;

/**
 * Counts failed authentications per client address (issue 5). After
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

/**
 * The client's IP address as the server saw it (`Deno.ServeHandlerInfo.remoteAddr`, passed
 * as Hono's `env`), or `undefined` for an in-process request without one (never rate
 * limited). A reverse proxy's `X-Forwarded-For` is not trusted: behind a proxy all clients
 * share its address.
 *
 * @param c The request's Hono context.
 */
export function clientAddress(c: Context): string | undefined {
  const env = c.env as { remoteAddr?: { hostname?: string } } | undefined;
  return env?.remoteAddr?.hostname;
}

/** Options of {@linkcode createRequireKey}. */
export interface RequireKeyOptions {
  /** The shared secret of spec §5; compared in constant time (C4). Has every scope. */
  readonly apiKey: string;
  /** Named keys with scopes (issue 7); without it only `apiKey` is accepted. */
  readonly keyRing?: KeyRing | undefined;
  /** Counts failed authentications per client address, one per app. */
  readonly failures: AuthFailureLimiter;
}

/**
 * Makes `requireKey(scope)`: a middleware that lets a request through only with the main
 * key or a named key that has `scope`, checked in C3's order after the method.
 *
 * @example
 * ```ts
 * const requireKey = createRequireKey({ apiKey, failures: new AuthFailureLimiter(clock) });
 * app.post("/clear", requireKey("admin"), handler);
 * ```
 * @returns The factory; its middleware throws {@linkcode HttpError} 429 with `Retry-After`
 *   for an address over the failure limit (whatever key it sends), 401 for a missing or
 *   wrong key (counted as a failure), and 403 for a named key without `scope`.
 */
export function createRequireKey(
  options: RequireKeyOptions,
): (scope: Scope) => MiddlewareHandler {
  const { apiKey, keyRing, failures } = options;
  return (scope) => async (c, next) => {
    const address = clientAddress(c);
    const wait = address === undefined ? 0 : failures.retryAfter(address);
    if (wait > 0) {
      throw new HttpError(
        429,
        `Too many failed authentications from ${address}: try again in ${wait} s`,
        { "retry-after": String(wait) },
      );
    }
    const given = presentedKey(c.req.raw.headers, new URL(c.req.url).searchParams);
    if (given === undefined) {
      if (address !== undefined) failures.fail(address);
      throw new HttpError(
        401,
        "Missing API key: send it in the X-Auth-Key header or the key query parameter",
      );
    }
    if (!keysMatch(given, apiKey)) {
      const named = keyRing?.find(given);
      if (named === undefined) {
        if (address !== undefined) failures.fail(address);
        throw new HttpError(401, "Wrong API key");
      }
      if (!named.scopes.includes(scope)) {
        throw new HttpError(
          403,
          `The key "${named.name}" may not use ${routePath(c)}: that needs the "${scope}" ` +
            `scope, and it has ${named.scopes.join(", ")}`,
        );
      }
    }
    await next();
  };
}

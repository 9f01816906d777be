/**
 * The shared-secret check of spec §5 and contract C4.
 *
 * @module
 */

import { createHash, timingSafeEqual } from "node:crypto";

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
  const b = createHash("sha256").update(expected, "utf8").digest();
  return timingSafeEqual(a, b);
}

/**
 * Rewrites a request path for logs with the `key` query parameter's value replaced by
 * `REDACTED` (C4).
 *
 * @param url The request URL.
 * @returns Path and query, e.g. `/peek?key=REDACTED&queue=qa`.
 */
export function redactedPath(url: URL): string {
  if (!url.searchParams.has(KEY_PARAM)) return url.pathname + url.search;
  const params = new URLSearchParams(url.search);
  params.set(KEY_PARAM, "REDACTED");
  return `${url.pathname}?${params}`;
}

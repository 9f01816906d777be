/**
 * The `rel="self"` link of a feed read with a key in `?key=`: it keeps access, so that a feed
 * reader that follows it (many keep it as the subscription) is not refused, and it never
 * holds the main key, which would travel with the link to every service the reader syncs
 * with. docs/api/queues.md, "GET /results/feed.xml".
 *
 * @module
 */

import { FEED_KEY_ID, KEY_HEADER, KEY_PARAM, MAIN_KEY_ID } from "./auth.ts";
import type { HandlerContext } from "./route.ts";

/**
 * The key a feed's self link carries: none when the request's key did not come in `?key=`
 * (a reader that sends a header or a cookie sends it again); the feed's own key when it was
 * the main key, or the feed's key itself; the named key as given (it is the reader's own,
 * already in the address it holds, and revoking it cuts the link too).
 *
 * @param c The request's context, with the key the key check found (`keyId`).
 * @param url The request's URL.
 * @param feedKey The feed's key (`feed_keys.ts`), when it has one.
 * @returns The key for the link's `?key=`, or `undefined` for a link without one.
 */
export function selfLinkKey(
  c: HandlerContext,
  url: URL,
  feedKey: string | undefined,
): string | undefined {
  if (c.req.raw.headers.has(KEY_HEADER)) return undefined;
  const given = url.searchParams.get(KEY_PARAM);
  if (given === null || given === "") return undefined;
  const keyId = c.keyId;
  if (keyId?.startsWith("named:")) return given;
  return keyId === MAIN_KEY_ID || keyId === FEED_KEY_ID ? feedKey : undefined;
}

/**
 * `xml` (an Atom or RSS document) with its `rel="self"` link given `?key=`.
 *
 * @param xml The feed as the feed library wrote it (`<link rel="self" href="…"/>`, or
 *   `<atom:link href="…" rel="self" …/>` in RSS).
 * @param key The key ({@linkcode selfLinkKey}); `undefined` leaves `xml` as it is.
 */
export function withKeyedSelf(xml: string, key: string | undefined): string {
  if (key === undefined) return xml;
  const query = `?key=${encodeURIComponent(key)}`;
  return xml.replace(
    /(<(?:atom:)?link\b[^>]*?\bhref=")([^"?]*)("[^>]*>)/g,
    (link: string, start: string, href: string, end: string) =>
      /\brel="self"/.test(link) ? `${start}${href}${query}${end}` : link,
  );
}

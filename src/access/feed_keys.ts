/**
 * Feed keys: the credential a feed's own address carries (its `rel="self"` link) when the feed
 * was read with a key in `?key=`. A feed reader that follows the self link (many do, and keep
 * it as the subscription) must keep its access, but the link travels wherever the reader syncs
 * its subscriptions: it must never hold the main key. A feed key opens that one feed and
 * nothing else (docs/api/queues.md, "GET /results/feed.xml").
 *
 * It is derived from the main key rather than kept: the same on every start, nothing new to
 * store or back up, and replacing the main key replaces every feed key with it.
 *
 * @module
 */

import { createHmac } from "node:crypto";

/**
 * What the relay signs under the main key, followed by the feed's path. Fixed: changing it
 * would cut off every feed reader subscribed through a self link.
 */
const FEED_KEY_LABEL = "content-relay feed key v1 ";

/**
 * The feed key of the feed at `path` on a relay whose main key is `mainKey`: the
 * HMAC-SHA256 of a fixed label and the path under the main key, in base64url (43
 * characters, the shape of a generated key). It does not give the main key back.
 *
 * @param mainKey The relay's main key.
 * @param path The feed's path, e.g. `/results/feed.xml`.
 * @returns e.g. `k3F…` (43 characters of `A-Za-z0-9_-`).
 */
export function feedKey(mainKey: string, path: string): string {
  return createHmac("sha256", mainKey).update(`${FEED_KEY_LABEL}${path}`, "utf8")
    .digest("base64url");
}

/** The feeds whose self link carries a feed key when they are read with `?key=`. */
export const KEYED_FEEDS: readonly string[] = ["/results/feed.xml", "/blog/feed.xml"];

/**
 * The key of every feed of {@linkcode KEYED_FEEDS}, by its path ({@linkcode feedKey}).
 *
 * @param mainKey The relay's main key.
 */
export function feedKeysOf(mainKey: string): ReadonlyMap<string, string> {
  return new Map(KEYED_FEEDS.map((path) => [path, feedKey(mainKey, path)]));
}

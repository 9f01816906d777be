/**
 * The private podcast's feed key: the credential a podcast subscription carries
 * (`…/podcast/feed.xml?key=…`) when `--private-podcast` is on. A podcast app sends no
 * header, and the feed's address travels to the app and to whatever service it syncs
 * subscriptions with, so the address must not hold a key that opens anything else: this
 * one opens only the podcast's pages, feed and files (docs/publishing-builtin.md).
 *
 * It is derived from the app id rather than kept: the same on every start, with nothing new
 * to store, back up or restore, and it changes when the app id does.
 *
 * @module
 */

import { createHmac } from "node:crypto";

/**
 * What the relay signs under the app id to make the feed key. Fixed: changing it would
 * change every relay's feed key and cut off every podcast app subscribed to one.
 */
const FEED_KEY_LABEL = "content-relay private podcast feed key v1";

/**
 * The feed key of a relay whose app id is `appId`: the HMAC-SHA256 of a fixed label under
 * the app id, in base64url (43 characters, the shape of a generated key). The same app id
 * always gives the same feed key; the feed key does not give the app id back.
 *
 * @param appId The relay's app id (`RELAY_APP_ID` or the `app-id` file).
 * @returns The feed key, e.g. `Xq3…` (43 characters of `A-Za-z0-9_-`).
 */
export function podcastFeedKey(appId: string): string {
  return createHmac("sha256", appId).update(FEED_KEY_LABEL, "utf8").digest("base64url");
}

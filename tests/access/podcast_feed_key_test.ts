import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { resolveAppId } from "../../src/access/app_id.ts";
import { podcastFeedKey } from "../../src/access/podcast_feed_key.ts";
import { withTempDir } from "../_helpers.ts";

Deno.test("podcastFeedKey() is the HMAC-SHA256 of its label under the app id, and never changes", async () => {
  const appId = "app-id-0123456789abcdef";
  // Checked against WebCrypto, not the code under test's library.
  const hmac = await crypto.subtle.importKey(
    "raw",
    new TextEncoder().encode(appId),
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"],
  );
  const label = new TextEncoder().encode("content-relay private podcast feed key v1");
  const expected = Buffer.from(await crypto.subtle.sign("HMAC", hmac, label)).toString("base64url");
  assert.equal(podcastFeedKey(appId), expected);
  // Pinned: a change here would cut off every podcast app subscribed to a private podcast.
  assert.equal(podcastFeedKey(appId), "DVM7SLhXTnE3JGGTVD4fGd1AAtYGppyYMfBQXNGsMHk");
  assert.notEqual(podcastFeedKey(`${appId}x`), podcastFeedKey(appId));
});

Deno.test("podcastFeedKey() of the generated app id is the same at every start, and new with a new app id", async () => {
  await withTempDir(async (dir) => {
    const first = await resolveAppId(undefined, dir);
    assert.equal(first.source, "generated");
    const again = await resolveAppId(undefined, dir);
    assert.equal(again.source, "file");
    assert.equal(podcastFeedKey(again.appId), podcastFeedKey(first.appId));
    await Deno.remove(`${dir}/app-id`);
    const replaced = await resolveAppId(undefined, dir);
    assert.notEqual(podcastFeedKey(replaced.appId), podcastFeedKey(first.appId));
    assert.match(podcastFeedKey(replaced.appId), /^[A-Za-z0-9_-]{43}$/);
  });
});

import assert from "node:assert/strict";
import {
  AuthFailureLimiter,
  createAuthorize,
  PODCAST_FEED_KEY_ID,
  redactedTarget,
  targetRedactor,
} from "../../src/server/auth.ts";
import { HttpError } from "../../src/errors.ts";

// Neither key holds "key": the main and named keys are found as keys, not as a parameter name.
const MAIN = "main-secret-0123456789";
const NAMED = "N".repeat(20) + "a1_-".repeat(5) + "xyz";
const SECRETS = { mainKey: MAIN, isNamedKey: (text: string) => text === NAMED };

Deno.test("redactedTarget() redacts every parameter whose decoded name holds `key`, in any case", () => {
  const cases: [string, string][] = [
    ["http://relay/peek?key=abc&queue=qa", "/peek?key=REDACTED&queue=qa"],
    ["http://relay/peek?queue=qa&KEY=abc", "/peek?queue=qa&KEY=REDACTED"],
    ["http://relay/peek?k%65y=abc", "/peek?k%65y=REDACTED"],
    ["http://relay/peek?K%45Y=abc;queue=qa", "/peek?K%45Y=REDACTED;queue=qa"],
    ["http://relay/peek?api_key=abc", "/peek?api_key=REDACTED"],
    ["http://relay/peek?my+Key=abc", "/peek?my+Key=REDACTED"],
    // The Kelvin sign is lower-cased to "k".
    ["http://relay/peek?\u212Aey=abc", "/peek?\u212Aey=REDACTED"],
  ];
  for (const [url, target] of cases) assert.equal(redactedTarget(url, SECRETS), target, url);
});

Deno.test("redactedTarget() leaves a query without a key as it is, and finds the keys anywhere", () => {
  assert.equal(NAMED.length, 43);
  assert.equal(redactedTarget("http://relay/peek?queue=qa", SECRETS), "/peek?queue=qa");
  assert.equal(
    redactedTarget("http://relay/results?since=12&wait=30", SECRETS),
    "/results?since=12&wait=30",
  );
  assert.equal(redactedTarget(`http://relay/peek?queue=${MAIN}`, SECRETS), "/peek?queue=REDACTED");
  assert.equal(
    redactedTarget(`http://relay/peek?queue=${encodeURIComponent(MAIN)}`, SECRETS),
    "/peek?queue=REDACTED",
  );
  assert.equal(redactedTarget(`http://relay/${MAIN}/x?queue=qa`, SECRETS), "/REDACTED/x?queue=qa");
  assert.equal(redactedTarget(`http://relay/peek?q=${NAMED}`, SECRETS), "/peek?q=REDACTED");
  assert.equal(redactedTarget(`http://relay/${NAMED}?queue=qa`, SECRETS), "/REDACTED?queue=qa");
});

Deno.test("redactedTarget() finds the podcast's feed key anywhere, under any parameter name", () => {
  const feedKey = "F".repeat(20) + "b2_-".repeat(5) + "xyz";
  const secrets = { ...SECRETS, podcastFeedKey: feedKey };
  const cases: [string, string][] = [
    [`http://relay/podcast/feed.xml?token=${feedKey}`, "/podcast/feed.xml?token=REDACTED"],
    [`http://relay/podcast/${feedKey}.mp3`, "/podcast/REDACTED"],
    [
      `http://relay/peek?queue=qa&q=%${feedKey.charCodeAt(0).toString(16)}${feedKey.slice(1)}`,
      "/peek?queue=qa&q=REDACTED",
    ],
  ];
  for (const [url, target] of cases) assert.equal(redactedTarget(url, secrets), target, url);
  // Without it among the secrets, a feed key in a parameter not named `key` would show.
  assert.equal(redactedTarget(cases[0]![0], SECRETS), `/podcast/feed.xml?token=${feedKey}`);
});

Deno.test("createAuthorize() takes the podcast's feed key on routes marked podcastFeed only, else as an unknown key", () => {
  const feedKey = "feed-key-0123456789abcdef";
  const failures = new AuthFailureLimiter(() => 0);
  const authorize = createAuthorize({ apiKey: MAIN, failures, podcastFeedKey: feedKey });
  const check = (key: string, access: { scope: "read"; podcastFeed?: boolean }) => {
    const request = new Request(`http://relay/x?key=${key}`);
    return authorize(request, new URL(request.url), "192.0.2.7", access, "/x");
  };
  assert.equal(check(feedKey, { scope: "read", podcastFeed: true }), PODCAST_FEED_KEY_ID);
  assert.equal(check(MAIN, { scope: "read", podcastFeed: true }), "main");
  const refusal = (key: string) => {
    try {
      check(key, { scope: "read" });
    } catch (error) {
      assert.ok(error instanceof HttpError);
      return `${error.status} ${error.message}`;
    }
    assert.fail("let through");
  };
  assert.equal(refusal(feedKey), refusal("feed-key-0123456789abcdeX"));
  assert.match(refusal(feedKey), /^401 /);
  // A feed key sent to another route counts against its address as a wrong key does.
  for (let i = 0; i < 8; i++) refusal(feedKey);
  assert.ok(failures.retryAfter("192.0.2.7") > 0);
  // …and the feed key still opens the podcast: a valid key is never refused.
  assert.equal(check(feedKey, { scope: "read", podcastFeed: true }), PODCAST_FEED_KEY_ID);
});

Deno.test("targetRedactor() answers as redactedTarget() again and again, and finds a key named later", () => {
  const named = new Set<string>();
  const redact = targetRedactor({ mainKey: MAIN, isNamedKey: (text) => named.has(text) });
  for (let i = 0; i < 2; i++) {
    assert.equal(redact("http://relay/peek?key=abc"), "/peek?key=REDACTED");
    assert.equal(redact(`http://relay/peek?queue=${MAIN}`), "/peek?queue=REDACTED");
    assert.equal(redact(`http://relay/peek?q=${NAMED}`), `/peek?q=${NAMED}`);
  }
  named.add(NAMED);
  assert.equal(redact(`http://relay/peek?q=${NAMED}`), "/peek?q=REDACTED");
  assert.equal(redact(`http://relay/peek?q=${NAMED}`), "/peek?q=REDACTED");
});

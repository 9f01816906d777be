/**
 * The private podcast's feed key, on the real relay app over loopback: the addresses a
 * podcast app is given (the feed's, its QR code's, the enclosures') carry the feed key and
 * never the caller's key; the feed key reads the podcast and is refused everywhere else as
 * an unknown key is; the access log never shows it; a public podcast's addresses carry no
 * key; and the key stays the same across restarts until the app id is replaced.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { Buffer } from "node:buffer";
import { feedXml } from "../_xml.ts";
import QRCode from "qrcode";
import { podcastFeedKey } from "../../src/access/podcast_feed_key.ts";
import { Logger } from "../../src/server/log.ts";
import { assertProblem, KEY, startRelayProcess, withTempDir } from "../_helpers.ts";
import { walkMp3 } from "./_mp3.ts";
import {
  APP_ID,
  MAIN_KEY,
  postJson,
  READER_KEY,
  type Running,
  serveServices,
} from "./_services.ts";

const xml = feedXml;

/** The text read aloud in every test's episode. */
const TEXT = "Only for the family. A second sentence, to be spoken too.";

/** Publishes one episode and waits until it is spoken. */
async function withEpisode(relay: Running): Promise<void> {
  const res = await postJson(`${relay.url}/downstream/api/publish`, {
    title: "Private",
    content: TEXT,
    targets: ["nas"],
    transform: "read",
  });
  assert.equal(res.status, 200);
  await res.body?.cancel();
  await relay.services.podcast.idle(60_000);
}

/** `/podcast/episodes` read with `key` in the header. */
async function episodes(
  relay: { url: string },
  key: string,
): Promise<{ feed_url: string; episodes: { audio_url?: string }[] }> {
  const res = await fetch(`${relay.url}/podcast/episodes`, { headers: { "x-auth-key": key } });
  assert.equal(res.status, 200);
  return await res.json();
}

/** The `key` parameter of an absolute address, or `null`. */
function keyOf(address: string): string | null {
  return new URL(address).searchParams.get("key");
}

/** The QR code the relay draws for `address` (the same options as the route's). */
function qrOf(address: string): Promise<string> {
  return QRCode.toString(address, { type: "svg", margin: 2, errorCorrectionLevel: "M" });
}

/** A key of the feed key's shape that the relay does not know. */
function unknownKey(): string {
  return Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("base64url");
}

Deno.test("private podcast: the feed's address, its QR code and its enclosures carry the feed key, never the caller's", async () => {
  await using relay = await serveServices({ privatePodcast: true });
  await withEpisode(relay);
  const feedKey = keyOf((await episodes(relay, MAIN_KEY)).feed_url);
  assert.ok(feedKey !== null);
  assert.match(feedKey, /^[A-Za-z0-9_-]{43}$/);
  for (const caller of [MAIN_KEY, READER_KEY]) {
    const list = await episodes(relay, caller);
    assert.equal(list.feed_url, `${relay.url}/podcast/feed.xml?key=${feedKey}`);
    assert.notEqual(keyOf(list.feed_url), caller);
    assert.equal(list.episodes.length, 1);
    assert.equal(keyOf(list.episodes[0]!.audio_url!), feedKey);

    // The QR code, asked for as the web app's <img> asks (?key=) and with the header.
    for (
      const res of [
        await fetch(`${relay.url}/podcast/qr.svg?key=${caller}`),
        await fetch(`${relay.url}/podcast/qr.svg`, { headers: { "x-auth-key": caller } }),
      ]
    ) {
      assert.equal(res.status, 200);
      const svg = await res.text();
      assert.equal(svg, await qrOf(list.feed_url));
      assert.notEqual(svg, await qrOf(`${relay.url}/podcast/feed.xml?key=${caller}`));
    }

    const feed = await (await fetch(`${relay.url}/podcast/feed.xml?key=${caller}`)).text();
    assert.ok(!feed.includes(caller), "the feed holds the caller's key");
    const channel = xml.parse(feed).rss.channel;
    assert.equal(keyOf(channel.item.enclosure["@url"]), feedKey);
    assert.equal(keyOf(channel.item["podcast:transcript"]["@url"]), feedKey);
    assert.equal(keyOf(channel["atom:link"]["@href"]), feedKey);

    const page = await (await fetch(`${relay.url}/podcast/?key=${caller}`)).text();
    assert.ok(!page.includes(caller), "the page holds the caller's key");
    assert.ok(page.includes(`href="${list.feed_url}"`), page);
    assert.ok(page.includes(`src="${relay.url}/podcast/qr.svg?key=${feedKey}"`), page);
  }
  // Derived from the app id, not from any key the relay was given.
  assert.notEqual(feedKey, APP_ID);
  assert.equal(feedKey, podcastFeedKey(APP_ID));
});

Deno.test("private podcast: the feed key reads the page, the feed, the QR code and an episode's audio and transcript", async () => {
  await using relay = await serveServices({ privatePodcast: true });
  await withEpisode(relay);
  const feedKey = keyOf((await episodes(relay, MAIN_KEY)).feed_url)!;
  for (const path of ["/podcast/", "/podcast/feed.xml", "/podcast/episodes", "/podcast/qr.svg"]) {
    await assertProblem(await fetch(`${relay.url}${path}`), 401);
    const res = await fetch(`${relay.url}${path}?key=${feedKey}`);
    assert.equal(res.status, 200, path);
    await res.body?.cancel();
  }
  const byHeader = await fetch(`${relay.url}/podcast/feed.xml`, {
    headers: { "x-auth-key": feedKey },
  });
  assert.equal(byHeader.status, 200);
  const item = xml.parse(await byHeader.text()).rss.channel.item;

  // What a podcast app does with the feed: fetch the enclosure as it stands.
  const audioUrl = item.enclosure["@url"];
  await assertProblem(await fetch(audioUrl.replace(/\?key=.*$/, "")), 401);
  const audio = await fetch(audioUrl);
  assert.equal(audio.status, 200);
  assert.equal(audio.headers.get("content-type"), "audio/mpeg");
  // Kept by the app that asked, never by a shared cache that could answer it to others.
  assert.equal(audio.headers.get("cache-control"), "private, max-age=86400");
  const mp3 = new Uint8Array(await audio.arrayBuffer());
  assert.ok(walkMp3(mp3).seconds > 0.5);
  const part = await fetch(audioUrl, { headers: { range: "bytes=10-109" } });
  assert.equal(part.status, 206);
  assert.deepEqual(new Uint8Array(await part.arrayBuffer()), mp3.subarray(10, 110));
  const head = await fetch(audioUrl, { method: "HEAD" });
  assert.equal(head.status, 200);
  assert.equal(head.headers.get("content-length"), String(mp3.length));

  const transcript = await fetch(item["podcast:transcript"]["@url"]);
  assert.equal(transcript.status, 200);
  assert.ok((await transcript.text()).includes("Only for the family."));
});

Deno.test("private podcast: the feed key is refused everywhere else with the 401 an unknown key gets", async () => {
  await using relay = await serveServices({ privatePodcast: true, privateBlog: true });
  const feedKey = keyOf((await episodes(relay, MAIN_KEY)).feed_url)!;
  const stranger = unknownKey();

  // Over the network, as a podcast app or a service that synced the address would send it.
  const requests: [string, RequestInit][] = [
    ["/peek?queue=qa", {}],
    ["/results", {}],
    ["/notes/", {}],
    ["/blog/", {}],
    ["/blog/feed.xml", {}],
    ["/publish", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ title: "t", content: "c", targets: ["blog"] }),
    }],
  ];
  const unknownDetail = await assertProblem(
    await fetch(`${relay.url}/peek?queue=qa&key=${stranger}`),
    401,
  );
  for (const [path, init] of requests) {
    const url = `${relay.url}${path}${path.includes("?") ? "&" : "?"}key=${feedKey}`;
    assert.equal(await assertProblem(await fetch(url, init), 401), unknownDetail, path);
  }
  // Nothing was published with it.
  const posts = await (await fetch(`${relay.url}/blog/posts?key=${MAIN_KEY}`)).json();
  assert.deepEqual(posts.posts, []);

  // Every other route and method, in-process (no address, so no failure limit), answers the
  // feed key exactly as it answers a key it does not know.
  const paths = [...new Set(relay.app.routes.map((route) => route.path))]
    .filter((path) => !path.startsWith("/podcast"))
    .map((path) => path.replace(/:\w+/g, "x").replace(/\*$/, "index.html"));
  assert.ok(paths.includes("/peek") && paths.includes("/downstream/api/publish"), paths.join());
  let refused = 0;
  for (const path of paths) {
    for (const method of ["GET", "POST"]) {
      // A refusal's whole problem document; an open route's status only (/health has a time).
      const answer = async (key: string) => {
        const res = await relay.app.request(path, { method, headers: { "x-auth-key": key } });
        const text = await res.text();
        return res.status >= 400 ? `${res.status} ${text}` : String(res.status);
      };
      const withFeedKey = await answer(feedKey);
      assert.equal(withFeedKey, await answer(stranger), `${method} ${path}`);
      if (withFeedKey.startsWith("401 ")) refused++;
    }
  }
  // The API's endpoints, the notes, the private blog, /downstream: most routes need a key.
  assert.ok(refused >= 20, String(refused));
  // And the podcast's own routes take it.
  for (const path of ["/podcast/", "/podcast/feed.xml", "/podcast/qr.svg"]) {
    const res = await relay.app.request(path, { headers: { "x-auth-key": feedKey } });
    assert.equal(res.status, 200, path);
    await res.body?.cancel();
  }
});

Deno.test("private podcast: the access log never shows the feed key", async () => {
  const lines: string[] = [];
  await using relay = await serveServices({
    privatePodcast: true,
    logger: new Logger({ write: (line) => lines.push(line) }),
  });
  const feedKey = keyOf((await episodes(relay, MAIN_KEY)).feed_url)!;
  const targets = [
    `/podcast/feed.xml?key=${feedKey}`,
    `/podcast/feed.xml?k%65y=${feedKey}`,
    `/podcast/feed.xml?token=${feedKey}`,
    `/podcast/${feedKey}.mp3`,
    `/peek?queue=${encodeURIComponent(feedKey)}`,
    `/${feedKey}/x`,
  ];
  for (const target of targets) await (await fetch(`${relay.url}${target}`)).body?.cancel();
  const access = lines.filter((line) => / (GET) \//.test(line) && !line.includes("episodes"));
  assert.equal(access.length, targets.length, lines.join("\n"));
  for (const line of access) {
    assert.ok(!line.includes(feedKey), line);
    assert.ok(line.includes("REDACTED"), line);
  }
});

Deno.test("public podcast: its addresses carry no key, and the feed key opens nothing", async () => {
  await using relay = await serveServices();
  await withEpisode(relay);
  const list = await episodes(relay, MAIN_KEY);
  assert.equal(list.feed_url, `${relay.url}/podcast/feed.xml`);
  assert.equal(list.episodes[0]!.audio_url!.includes("?"), false);
  const audio = await fetch(list.episodes[0]!.audio_url!);
  assert.equal(audio.status, 200);
  assert.equal(audio.headers.get("cache-control"), "public, max-age=86400");
  await audio.body?.cancel();
  const qr = await fetch(`${relay.url}/podcast/qr.svg?key=${MAIN_KEY}`);
  assert.equal(await qr.text(), await qrOf(`${relay.url}/podcast/feed.xml`));
  const feed = await (await fetch(`${relay.url}/podcast/feed.xml`)).text();
  assert.ok(!feed.includes("key="), feed);
  const page = await (await fetch(`${relay.url}/podcast/`)).text();
  assert.ok(!page.includes("key="), page);
  assert.ok(page.includes(`src="${relay.url}/podcast/qr.svg"`), page);
  // Never shown while the podcast is public, and no key anywhere else either.
  await assertProblem(
    await fetch(`${relay.url}/peek?queue=qa&key=${podcastFeedKey(APP_ID)}`),
    401,
  );
});

Deno.test("private podcast: the feed key stays the same across restarts, and changes with the app id", async () => {
  await withTempDir(async (dir) => {
    const options = { args: ["--private-podcast", "yes"], env: { RELAY_API_KEY: KEY } };
    let feedKey: string;
    {
      await using relay = await startRelayProcess(dir, options);
      feedKey = keyOf((await episodes(relay, KEY)).feed_url)!;
      assert.notEqual(feedKey, KEY);
    }
    {
      await using relay = await startRelayProcess(dir, options);
      assert.equal(keyOf((await episodes(relay, KEY)).feed_url), feedKey);
      const feed = await fetch(`${relay.url}/podcast/feed.xml?key=${feedKey}`);
      assert.equal(feed.status, 200);
      await feed.body?.cancel();
      await assertProblem(await fetch(`${relay.url}/peek?queue=qa&key=${feedKey}`), 401);
    }
    // Revoking it: a new app id (the relay makes one when its file is gone).
    await Deno.remove(join(dir, "app-id"));
    {
      await using relay = await startRelayProcess(dir, options);
      const renewed = keyOf((await episodes(relay, KEY)).feed_url)!;
      assert.notEqual(renewed, feedKey);
      await assertProblem(await fetch(`${relay.url}/podcast/feed.xml?key=${feedKey}`), 401);
      const feed = await fetch(`${relay.url}/podcast/feed.xml?key=${renewed}`);
      assert.equal(feed.status, 200);
      await feed.body?.cancel();
    }
  });
});

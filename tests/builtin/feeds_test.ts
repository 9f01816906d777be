import assert from "node:assert/strict";
import { XMLParser, XMLValidator } from "fast-xml-parser";
import {
  podcastFeed,
  podcastGuid,
  podcastRss,
  withEntryLanguages,
} from "../../src/builtin/feeds.ts";
import { type Episode, Podcast } from "../../src/builtin/podcast.ts";
import { loadConfig } from "../../src/config/config.ts";
import { withTempDir } from "../_helpers.ts";
import { postJson, serveServices } from "./_services.ts";
import { walkMp3 } from "./_mp3.ts";

const xml = new XMLParser({ ignoreAttributes: false, attributeNamePrefix: "@" });
/** The same parser reading numeric character references (`&#x3C;`) too, as XML does. */
const xmlWithReferences = new XMLParser({
  ignoreAttributes: false,
  attributeNamePrefix: "@",
  htmlEntities: true,
});

/**
 * The Xing/Info tag of an MP3's first frame, read from the Xing header layout (independent
 * of the relay's code): "Xing" or "Info" after the header and side information, flags, then
 * the frame count, byte count and seek table when flagged.
 */
function infoTag(mp3: Uint8Array): { frames: number; bytes: number; toc: number[] } | undefined {
  const version = (mp3[1]! >> 3) & 3;
  const mono = (mp3[3]! >> 6) === 3;
  const at = 4 + (version === 3 ? (mono ? 17 : 32) : (mono ? 9 : 17));
  const name = new TextDecoder().decode(mp3.subarray(at, at + 4));
  if (name !== "Info" && name !== "Xing") return undefined;
  const view = new DataView(mp3.buffer, mp3.byteOffset);
  const flags = view.getUint32(at + 4);
  assert.equal(flags & 7, 7, "frames, bytes and seek table");
  return {
    frames: view.getUint32(at + 8),
    bytes: view.getUint32(at + 12),
    toc: [...mp3.subarray(at + 16, at + 116)],
  };
}

Deno.test("blog feed: Atom with the feed's author and each tag as a category term", async () => {
  await using relay = await serveServices();
  await postJson(`${relay.url}/downstream/api/publish`, {
    title: "Tagged",
    content: "c",
    tags: "sqlite, durability",
    targets: ["blog"],
  });
  const feed = xml.parse(await (await fetch(`${relay.url}/blog/feed.xml`)).text()).feed;
  // RFC 4287: a feed has an author, here or in every entry.
  assert.equal(feed.author.name, "Content Relay");
  const categories = [feed.entry.category].flat();
  assert.deepEqual(categories.map((c: Record<string, string>) => c["@term"]), [
    "sqlite",
    "durability",
  ]);
});

Deno.test("blog feed: each entry says its post's language (xml:lang), none for a text too short to tell", async () => {
  await using relay = await serveServices();
  const publish = (title: string, content: string) =>
    postJson(`${relay.url}/downstream/api/publish`, { title, content, targets: ["blog"] });
  await publish("读书笔记", "这是一篇关于数据库持久性的文章，讨论了预写日志和同步写入。");
  // Words that look like an entry's start tag stay words: escaped, inside CDATA.
  await publish(
    "Why WAL needs fsync",
    "A write-ahead log is only durable once the disk has been told to keep it. <entry>",
  );
  await publish("Hi", "x");
  const text = await (await fetch(`${relay.url}/blog/feed.xml`)).text();
  assert.equal(XMLValidator.validate(text), true);
  const entries = xml.parse(text).feed.entry as Record<string, unknown>[];
  assert.deepEqual(
    entries.map((entry) => [entry.id, entry["@xml:lang"]]),
    [
      [entries[0]!.id, undefined],
      [entries[1]!.id, "en"],
      [entries[2]!.id, "zh"],
    ],
  );
  assert.equal(text.match(/<entry[ >]/g)?.length, 3);
  assert.match(text, /keep it\. &lt;entry&gt;<\/p>\n\]\]><\/content>/);
});

Deno.test("feed's entry languages: only the start tags outside CDATA, the feed as it was when they do not match", () => {
  const atom = "<feed><entry><content><![CDATA[<entry>]]></content></entry><entry></entry></feed>";
  assert.equal(
    withEntryLanguages(atom, ["zh", "und"]),
    '<feed><entry xml:lang="zh"><content><![CDATA[<entry>]]></content></entry><entry></entry></feed>',
  );
  assert.equal(withEntryLanguages(atom, ["zh"]), atom);
  assert.equal(withEntryLanguages(atom, ["zh", "en", "de"]), atom);
});

Deno.test("podcast feed: Apple's and Podcasting 2.0's tags, rendered descriptions, the first episode's language, each episode's on its page and transcript", async () => {
  await using relay = await serveServices({ podcastFeed: { email: "owner@example.org" } });
  const read = (title: string, content: string) =>
    postJson(`${relay.url}/downstream/api/publish`, {
      title,
      content,
      targets: ["nas"],
      transform: "read",
    });
  // The first episode is read in Mandarin, the two after it in English.
  await read("读一读", "这是第一句话。这是第二句话。");
  await relay.services.podcast.idle(60_000);
  await read("Second", "This is *the* first sentence. A <b>second</b> one & a third.");
  await relay.services.podcast.idle(60_000);
  await read("Third", "Short and plain.");
  await relay.services.podcast.idle(60_000);

  const text = await (await fetch(`${relay.url}/podcast/feed.xml`)).text();
  assert.ok(text.includes('xmlns:podcast="https://podcastindex.org/namespace/1.0"'));
  assert.ok(text.includes('xmlns:itunes="http://www.itunes.com/dtds/podcast-1.0.dtd"'));
  const channel = xml.parse(text).rss.channel;
  assert.equal(channel.language, "zh-cn");
  assert.equal(channel["itunes:owner"]["itunes:email"], "owner@example.org");
  assert.equal(channel["itunes:owner"]["itunes:name"], "Content Relay");
  assert.equal(channel["itunes:category"]["@text"], "Technology");
  assert.equal(channel["podcast:guid"], podcastGuid(`${relay.url}/podcast/feed.xml`));

  // The artwork: a square PNG of 3000 px in RGB, as Apple requires.
  const artwork = channel["itunes:image"]["@href"];
  assert.equal(channel.image.url, artwork);
  const png = new Uint8Array(await (await fetch(artwork)).arrayBuffer());
  const view = new DataView(png.buffer);
  assert.deepEqual([...png.subarray(1, 4)], [0x50, 0x4e, 0x47]); // "PNG"
  assert.equal(view.getUint32(16), 3000);
  assert.equal(view.getUint32(20), 3000);
  assert.equal(png[25], 2, "colour type 2: RGB, no alpha");

  const items = [channel.item].flat();
  assert.deepEqual(items.map((i: { title: string }) => i.title), ["Third", "Second", "读一读"]);
  const second = items[1];
  // HTML a podcast app shows: Markdown rendered, a literal <b> still text.
  assert.ok(second.description.includes("<em>the</em>"), second.description);
  assert.ok(second.description.includes("&lt;b&gt;second&lt;/b&gt;"), second.description);
  assert.match(String(second["itunes:duration"]), /^\d+:\d\d$/);
  // The transcript is the words as spoken: no markup, no HTML.
  const transcript = second["podcast:transcript"];
  assert.equal(transcript["@type"], "text/plain");
  assert.equal(transcript["@language"], "en");
  const served = await fetch(transcript["@url"]);
  assert.equal(served.headers.get("content-type"), "text/plain; charset=utf-8");
  assert.equal(
    await served.text(),
    "This is the first sentence. A second one & a third.\n",
  );
  assert.equal(items[2]["podcast:transcript"]["@language"], "zh-cn");
  // Each transcript says its language as HTTP does, and each episode on the podcast's page.
  assert.equal(served.headers.get("content-language"), "en");
  const chinese = await fetch(items[2]["podcast:transcript"]["@url"]);
  assert.equal(chinese.headers.get("content-language"), "zh-cn");
  await chinese.body?.cancel();
  const page = await (await fetch(`${relay.url}/podcast/`)).text();
  assert.match(page, /<html lang="en">/); // the page's own words
  const entries = [...page.matchAll(/<li lang="([^"]*)"><span class="title">([^<]*)</g)];
  assert.deepEqual(entries.map((m) => [m[2], m[1]]), [
    ["Third", "en"],
    ["Second", "en"],
    ["读一读", "zh-cn"],
  ]);

  // The MP3 opens with an Info (Xing) frame that gives its length: players need not guess.
  const mp3 = new Uint8Array(await (await fetch(second.enclosure["@url"])).arrayBuffer());
  const walk = walkMp3(mp3);
  const info = infoTag(mp3);
  assert.ok(info !== undefined, "an Info frame first");
  assert.equal(info.frames, walk.frames - 1);
  assert.equal(info.bytes, mp3.length);
  assert.equal(info.toc.length, 100);

  // The language is a setting of the feed; without an address there is no itunes:owner,
  // which Apple would refuse without one.
  const set = xml.parse(podcastRss(await relay.services.podcast.list(), { origin: relay.url }, {
    settings: { language: "en-gb" },
  })).rss.channel;
  assert.equal(set.language, "en-gb");
  assert.equal(set["itunes:owner"], undefined);
});

Deno.test("podcastGuid() is the UUID v5 of the feed address without scheme or trailing slash", () => {
  // The Podcasting 2.0 namespace's own example; Python's uuid.uuid5 gives the same.
  assert.equal(
    podcastGuid("https://mp3s.nashownotes.com/pc20rss.xml/"),
    "917393e3-1b1e-5cef-ace4-edaa54e1f810",
  );
});

Deno.test("--podcast-language and --podcast-email: a language tag and an address, or none", () => {
  const none = () => undefined;
  const defaults = loadConfig({}, none);
  assert.equal(defaults.podcastLanguage, undefined);
  assert.equal(defaults.podcastEmail, undefined);
  const set = loadConfig(
    { "podcast-language": "zh-CN" },
    (name) => name === "RELAY_PODCAST_EMAIL" ? "owner@example.org" : undefined,
  );
  assert.equal(set.podcastLanguage, "zh-cn");
  assert.equal(set.podcastEmail, "owner@example.org");
  assert.throws(
    () => loadConfig({ "podcast-language": "Mandarin Chinese" }, none),
    /--podcast-language "Mandarin Chinese": must be a language tag/,
  );
  assert.throws(() => loadConfig({ "podcast-email": "owner" }, none), /--podcast-email "owner"/);
});

/** A ready episode of 3 s with `title` and `text`. */
function readyEpisode(id: string, title: string, text = "Some text that was read aloud."): Episode {
  return {
    id,
    title,
    text,
    created_at: 1_700_000_000_000,
    state: "ready",
    chunks_total: 1,
    chunks_done: 1,
    bytes: 1000,
    duration_s: 3,
  };
}

Deno.test("podcast feed: item titles are plain text, without HTML or Markdown marks", () => {
  const episode = (id: string, title: string) => readyEpisode(id, title);
  const rss = podcastRss([
    episode("a", "**Why** <b>WAL</b> _needs_ `fsync`"),
    episode("b", "# [Links](https://example.com) & <i>more</i>"),
    episode("c", "Plain: 1 < 2 & 3 > 2"),
    episode("d", "Read <listen> aloud"),
  ], { origin: "https://relay.example.org" });
  const items = [xmlWithReferences.parse(rss).rss.channel.item].flat();
  assert.deepEqual(items.map((item: { title: string }) => item.title), [
    "Why WAL needs fsync",
    "Links & more",
    "Plain: 1 < 2 & 3 > 2",
    "Read <listen> aloud", // not HTML: text
  ]);
  assert.doesNotMatch(rss, /<title><!\[CDATA\[[^\]]*(<\/?[bi]>|[*`_])/);
  // Plain text as the RSS profile asks: `&` and `<` as hexadecimal references, no CDATA.
  assert.ok(rss.includes("<title>Plain: 1 &#x3C; 2 &#x26; 3 &#x3E; 2</title>"), rss);
  assert.ok(rss.includes("<title>Read &#x3C;listen&#x3E; aloud</title>"), rss);
});

Deno.test("podcast feed: a long episode's description ends between blocks, never inside a link or an emphasis", () => {
  const episode = (id: string, text: string) => readyEpisode(id, id, text);
  const words = (n: number) => Array.from({ length: n }, (_, i) => `word${i}`).join(" ");
  const rss = podcastRss([
    // Two paragraphs fit, the third would not: cut before it.
    episode(
      "blocks",
      `${words(20)}\n\n**${words(20)}**\n\n${words(60)} [the second](https://x.example)`,
    ),
    // One paragraph longer than the limit, a link across the cut: its text, no marks.
    episode("long", `${words(55)} See [the second part](https://x.example/2) *soon* ${words(30)}`),
  ], { origin: "https://relay.example.org" });
  const items = [xml.parse(rss).rss.channel.item].flat() as {
    title: string;
    description: string;
  }[];
  const blocks = items.find((item) => item.title === "blocks")!.description;
  assert.match(blocks, /<strong>word0 [^<]*word19<\/strong>/);
  assert.ok(!blocks.includes("the second"), blocks);
  assert.ok(blocks.includes("…"), blocks);
  const long = items.find((item) => item.title === "long")!.description;
  assert.ok(!/[[\]*]|\]\(/.test(long), `no Markdown marks left: ${long}`);
  assert.ok(long.includes("the second part") || !long.includes("See"), long);
  assert.ok(long.endsWith("…</p>\n") || long.endsWith("…</p>"), long);
});

Deno.test("podcast feed: built once per change of the episodes and kept for every reader between", async () => {
  await withTempDir(async (dataDir) => {
    // The worker is never started: nothing is spoken, so the engine is never called.
    const engine = { name: "silent", synthesize: () => Promise.reject(new Error("not here")) };
    const podcast = new Podcast({ dataDir, engine, clock: Date.now, log: () => {} });
    const urls = { origin: "http://relay.test" };
    const first = await podcastFeed(podcast, urls);
    assert.equal(await podcastFeed(podcast, urls), first, "the same bytes, not built again");
    const elsewhere = await podcastFeed(podcast, { origin: "http://other.test" });
    assert.notEqual(elsewhere, first);
    assert.ok(new TextDecoder().decode(elsewhere).includes("http://other.test/podcast/"));
    await podcast.enqueue("Queued", "Some text.");
    const after = await podcastFeed(podcast, urls);
    assert.notEqual(after, first, "a queued episode is a change");
    assert.equal(await podcastFeed(podcast, urls), after);
  });
});

import assert from "node:assert/strict";
import { join } from "node:path";
import { feedXml } from "../_xml.ts";
import { assertProblem } from "../_helpers.ts";
import { walkMp3 } from "./_mp3.ts";
import { APP_ID, eventually, MAIN_KEY, postJson, READER_KEY, serveServices } from "./_services.ts";

const xml = feedXml;

/** A directory's and a file's permission bits. */
async function mode(path: string): Promise<number> {
  return (await Deno.stat(path)).mode! & 0o777;
}

async function fileNames(dir: string): Promise<string[]> {
  const names: string[] = [];
  try {
    for await (const entry of Deno.readDir(dir)) names.push(entry.name);
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
  return names.sort();
}

Deno.test("notes: import writes a Markdown file with front matter, listed and read with a key", async () => {
  await using relay = await serveServices();
  const res = await postJson(`${relay.url}/downstream/api/notes/import`, {
    title: '周末: "quoted"\n---',
    content: "# Hello\n\n正文 text",
    content_format: 1,
    tags: "家, work ,家",
  });
  assert.equal(res.status, 200);
  const body = await res.json();
  assert.equal(body.code, 0);
  assert.match(body.doc_id, /^\d{8}-\d{6}-[a-z0-9]{8}$/);

  const path = join(relay.dataDir, "notes", `${body.doc_id}.md`);
  const file = await Deno.readTextFile(path);
  assert.ok(file.startsWith('---\ntitle: "周末: \\"quoted\\"\\n---"\ntags: ["家", "work"]\n'));
  assert.match(file, /\ncreated: \d{4}-\d\d-\d\dT[\d:.]+Z\n/);
  assert.ok(file.includes(`\ndoc_id: ${body.doc_id}\n---\n\n# Hello\n\n正文 text`));
  assert.equal(await mode(path), 0o600);
  assert.equal(await mode(join(relay.dataDir, "notes")), 0o700);

  await assertProblem(await fetch(`${relay.url}/notes/`), 401);
  await assertProblem(await fetch(`${relay.url}/notes/?key=wrong`), 401);
  const list = await fetch(`${relay.url}/notes/`, { headers: { "x-auth-key": READER_KEY } });
  assert.equal(list.status, 200);
  const { notes } = await list.json();
  assert.equal(notes.length, 1);
  assert.deepEqual(notes[0].tags, ["家", "work"]);
  assert.equal(notes[0].title, '周末: "quoted"\n---');

  const one = await fetch(`${relay.url}/notes/${body.doc_id}?key=${READER_KEY}`);
  assert.equal(one.headers.get("content-type"), "text/markdown; charset=utf-8");
  assert.equal(await one.text(), file);
  await assertProblem(await fetch(`${relay.url}/notes/..%2Fapi-key?key=${MAIN_KEY}`), 404);
  await assertProblem(
    await fetch(`${relay.url}/notes/20260101-000000-aaaaaaaa?key=${MAIN_KEY}`),
    404,
  );
});

Deno.test("notes and blog: bad input gets a problem and stores nothing", async () => {
  await using relay = await serveServices();
  const notes = `${relay.url}/downstream/api/notes/import`;
  const publish = `${relay.url}/downstream/api/publish`;
  const bad: Array<[string, unknown, number]> = [
    [notes, { content: "x", content_format: 1 }, 400],
    [notes, { title: " ", content: "x", content_format: 1 }, 400],
    [notes, { title: "t", content: "x", content_format: 2 }, 400],
    [notes, { title: "t", content: 5 }, 400],
    [notes, ["title"], 400],
    [notes, { title: "t".repeat(501), content: "x" }, 400],
    [notes, { title: "t\ud800", content: "x" }, 400],
    [publish, { title: "t", content: "c" }, 400],
    [publish, { title: "t", content: "c", targets: [] }, 400],
    [publish, { title: "t", content: "c", targets: ["notes"] }, 400],
    [publish, { title: "t", content: "c", targets: ["blog"], transform: "read" }, 400],
    [publish, { title: "t", content: "c", targets: "blog" }, 400],
    [publish, { title: 1, content: "c", targets: ["blog"] }, 400],
  ];
  for (const [url, body, status] of bad) {
    await assertProblem(await postJson(url, body), status);
  }
  await assertProblem(
    await fetch(notes, {
      method: "POST",
      headers: { "content-type": "application/json", "x-app-id": APP_ID },
      body: "{",
    }),
    400,
  );
  await assertProblem(
    await fetch(notes, {
      method: "POST",
      headers: { "content-type": "text/plain", "x-app-id": APP_ID },
      body: "{}",
    }),
    415,
  );
  await assertProblem(
    await fetch(notes, {
      method: "POST",
      headers: { "content-type": "application/json", "x-app-id": APP_ID },
      body: JSON.stringify({ title: "t", content: "x".repeat(800 * 1024) }),
    }),
    413,
  );
  await assertProblem(await fetch(notes), 405);
  assert.deepEqual(await fileNames(join(relay.dataDir, "notes")), []);
  assert.deepEqual(await fileNames(join(relay.dataDir, "blog")), []);
  assert.deepEqual(await fileNames(join(relay.dataDir, "podcast")), []);
});

Deno.test("blog: a post is rendered, listed newest first, in the Atom feed, and deleted only with the cookie", async () => {
  await using relay = await serveServices({ publicUrl: "https://relay.example.org/" });
  const publish = (title: string, extra: Record<string, unknown> = {}) =>
    postJson(`${relay.url}/downstream/api/publish`, {
      title,
      content: "plain summary",
      targets: ["blog"],
      ...extra,
    });
  const first = await (await publish("First", { content_md: "# Heading\n\n**bold** text" })).json();
  assert.equal(first.blog.status, "success");
  const id = first.blog.post_id;
  assert.equal(first.blog.redirect_url, `https://relay.example.org/blog/${id}`);
  const second = await (await publish("Second", { tags: "a,b" })).json();

  const page = await fetch(`${relay.url}/blog/${id}`);
  assert.equal(page.status, 200);
  assert.equal(page.headers.get("content-type"), "text/html; charset=utf-8");
  assert.match(page.headers.get("content-security-policy") ?? "", /default-src 'none'/);
  const html = await page.text();
  assert.ok(html.includes("<title>First</title>"));
  assert.ok(html.includes("<h1>Heading</h1>"));
  assert.ok(html.includes("<strong>bold</strong>"));
  assert.ok(html.includes('name="viewport"'));
  assert.ok(html.includes("prefers-color-scheme: dark"));
  const plain = await (await fetch(`${relay.url}/blog/${second.blog.post_id}`)).text();
  assert.ok(plain.includes("<p>plain summary</p>"));
  assert.ok(plain.includes('<span class="tag">a</span>'));

  const index = await (await fetch(`${relay.url}/blog/`)).text();
  assert.ok(index.indexOf(">Second<") < index.indexOf(">First<"), "newest first");
  const listed = await (await fetch(`${relay.url}/blog/posts`)).json();
  assert.deepEqual(listed.posts.map((p: { title: string }) => p.title), ["Second", "First"]);
  assert.equal(listed.posts[1].url, `https://relay.example.org/blog/${id}`);
  assert.equal(listed.feed_url, "https://relay.example.org/blog/feed.xml");
  assert.ok(index.includes(`href="https://relay.example.org/blog/${id}"`));

  const feedRes = await fetch(`${relay.url}/blog/feed.xml`);
  assert.equal(feedRes.headers.get("content-type"), "application/atom+xml; charset=utf-8");
  const feed = xml.parse(await feedRes.text()).feed;
  const entries = [feed.entry].flat();
  assert.equal(entries.length, 2);
  assert.equal(entries[0].title["#text"] ?? entries[0].title, "Second");
  assert.equal(entries[1].link["@href"], `https://relay.example.org/blog/${id}`);

  // Delete (as from the relay's own page): without the cookie, with a wrong one: 401; with
  // a read-only key: 403; nothing deleted.
  const del = (cookie?: string) =>
    fetch(`${relay.url}/downstream/delete/${id}`, {
      method: "POST",
      redirect: "manual",
      headers: { origin: relay.url, ...(cookie === undefined ? {} : { cookie }) },
    });
  await assertProblem(await del(), 401);
  await assertProblem(await del("relay_access=wrong"), 401);
  await assertProblem(await del(`relay_access=${READER_KEY}`), 403);
  await assertProblem(await del(`CF_Authorization=${MAIN_KEY}`), 401);
  assert.equal((await fetch(`${relay.url}/blog/${id}`)).status, 200);

  const deleted = await del(`other=1; relay_access=${MAIN_KEY}`);
  assert.equal(deleted.status, 303);
  assert.equal(deleted.headers.get("location"), "https://relay.example.org/blog/");
  await assertProblem(await fetch(`${relay.url}/blog/${id}`), 404);
  assert.ok(!(await (await fetch(`${relay.url}/blog/`)).text()).includes(">First<"));
  const after = [xml.parse(await (await fetch(`${relay.url}/blog/feed.xml`)).text()).feed.entry]
    .flat();
  assert.equal(after.length, 1);
  await assertProblem(await del(`relay_access=${MAIN_KEY}`), 404);
});

Deno.test("blog: stored content never injects script into the pages or the feed", async () => {
  await using relay = await serveServices();
  const attacks = {
    title: '"><script>alert(1)</script><img src=x onerror=alert(2)>',
    content: "x",
    content_md: [
      "<script>alert(3)</script>",
      '<img src=x onerror="alert(4)">',
      "[click](javascript:alert(5))",
      "[click2](JAVASCRIPT:alert(6))",
      "[c3](  javascript&#58;alert(7))",
      "![img](javascript:alert(8))",
      '[t](http://x.org "a\\" onmouseover=\\"alert(9)")',
      "<a href='javascript:alert(10)'>a</a>",
      "[d](data:text/html;base64,PHNjcmlwdD4=)",
      "[v](vbscript:msgbox)",
    ].join("\n\n"),
    tags: '<script>t</script>,"onload=alert(11)',
    targets: ["blog"],
  };
  const res = await (await postJson(`${relay.url}/downstream/api/publish`, attacks)).json();
  const pages = [
    await (await fetch(res.blog.redirect_url)).text(),
    await (await fetch(`${relay.url}/blog/`)).text(),
  ];
  for (const html of pages) {
    assert.ok(!/<script/i.test(html), "no script element");
    // Every real tag of the page: no event handler, no script link (text that merely
    // shows such markup is escaped and holds no tag).
    const tags = html.match(/<[a-z][^>]*>/gi) ?? [];
    assert.ok(tags.some((tag) => tag.startsWith("<a href")), "the links are there");
    for (const tag of tags) {
      // Attribute values are quoted; what is left outside quotes are the names.
      const names = tag.replace(/"[^"]*"/g, '""');
      assert.ok(!/\son[a-z]+\s*=/i.test(names), `event handler in ${tag}`);
      assert.ok(!/'/.test(names), `unquoted value in ${tag}`);
      assert.ok(!/(href|src)\s*=\s*["']?\s*(javascript|vbscript|data):/i.test(tag), tag);
    }
  }
  assert.ok(pages[0]!.includes("&lt;script&gt;alert(3)&lt;/script&gt;"), "shown as text");
  const feed = await (await fetch(`${relay.url}/blog/feed.xml`)).text();
  const entry = xml.parse(feed).feed.entry;
  const content = String(entry.content["#text"] ?? entry.content);
  assert.ok(!/<script/i.test(content));
  assert.ok(!/href="javascript:/i.test(content));
});

Deno.test("blog: --private-blog needs a key with the read scope", async () => {
  await using relay = await serveServices({ privateBlog: true });
  const res = await (await postJson(`${relay.url}/downstream/api/publish`, {
    title: "T",
    content: "c",
    targets: ["blog"],
  })).json();
  const url = new URL(res.blog.redirect_url);
  for (const path of [url.pathname, "/blog/", "/blog/feed.xml", "/blog/posts"]) {
    await assertProblem(await fetch(`${relay.url}${path}`), 401);
    assert.equal((await fetch(`${relay.url}${path}?key=${READER_KEY}`)).status, 200);
    const viaCookie = await fetch(`${relay.url}${path}`, {
      headers: { cookie: `relay_access=${READER_KEY}` },
    });
    assert.equal(viaCookie.status, 200);
    await viaCookie.body?.cancel();
  }
});

Deno.test("podcast: X-App-ID is checked, the episode is queued at once, spoken in the background, in the feed with a valid MP3 served in ranges", async () => {
  await using relay = await serveServices({ publicUrl: "http://phone-reachable.example:8787" });
  const publish = `${relay.url}/downstream/api/publish`;
  const body = {
    title: "读一读 & <listen>",
    content: "This is the first sentence. 这是第二句话。And a third one, to be sure!",
    targets: ["nas"],
    transform: "read",
  };
  await assertProblem(await postJson(publish, body, {}), 401);
  await assertProblem(await postJson(publish, body, { "x-app-id": "wrong" }), 401);
  // A key that may only read does not replace the app id (the main key, which may do
  // everything, does: POST /publish could queue the same episode).
  await assertProblem(await postJson(publish, body, { "x-auth-key": READER_KEY }), 403);
  assert.deepEqual(await fileNames(join(relay.dataDir, "podcast")), []);
  await assertProblem(
    await postJson(publish, { ...body, transform: undefined }, { "x-app-id": APP_ID }),
    400,
  );

  const res = await postJson(publish, body, { "x-app-id": APP_ID });
  assert.equal(res.status, 200);
  const answer = await res.json();
  assert.equal(answer.status, "success");
  assert.equal(typeof answer.message, "string");

  const episode = await eventually(async () => {
    const list = await (await fetch(`${relay.url}/podcast/episodes`)).json();
    const found = list.episodes[0];
    assert.notEqual(found.state, "failed", found.error);
    return found.state === "ready" ? found : undefined;
  });
  assert.ok(episode.duration_s > 2);

  const feedRes = await fetch(`${relay.url}/podcast/feed.xml`);
  assert.equal(feedRes.headers.get("content-type"), "application/rss+xml; charset=utf-8");
  const rss = xml.parse(await feedRes.text()).rss;
  assert.equal(rss["@version"], "2.0");
  assert.equal(rss.channel.language, "en");
  const item = rss.channel.item;
  assert.ok(!Array.isArray(item), "one item");
  assert.equal(item.title, "读一读 & <listen>");
  assert.ok(String(item.description).includes("这是第二句话"));
  assert.ok(!Number.isNaN(Date.parse(item.pubDate)));
  assert.equal(item.guid["#text"], `relay-episode-${episode.id}`);
  const enclosure = item.enclosure;
  assert.equal(enclosure["@type"], "audio/mpeg");
  assert.equal(
    enclosure["@url"],
    `http://phone-reachable.example:8787/podcast/${episode.id}.mp3`,
  );
  assert.match(String(item["itunes:duration"]), /^\d+:\d\d$/);

  const audioUrl = `${relay.url}${new URL(enclosure["@url"]).pathname}`;
  const whole = await fetch(audioUrl);
  assert.equal(whole.status, 200);
  assert.equal(whole.headers.get("accept-ranges"), "bytes");
  assert.equal(whole.headers.get("content-type"), "audio/mpeg");
  const mp3 = new Uint8Array(await whole.arrayBuffer());
  assert.equal(mp3.length, Number(enclosure["@length"]));
  const walk = walkMp3(mp3);
  assert.ok(walk.seconds > 2, String(walk.seconds));

  const part = await fetch(audioUrl, { headers: { range: "bytes=100-1099" } });
  assert.equal(part.status, 206);
  assert.equal(part.headers.get("content-range"), `bytes 100-1099/${mp3.length}`);
  assert.deepEqual(new Uint8Array(await part.arrayBuffer()), mp3.subarray(100, 1100));
  const tail = await fetch(audioUrl, { headers: { range: "bytes=-10" } });
  assert.deepEqual(new Uint8Array(await tail.arrayBuffer()), mp3.subarray(mp3.length - 10));
  await assertProblem(
    await fetch(audioUrl, { headers: { range: `bytes=${mp3.length}-` } }),
    416,
  );
  const head = await fetch(audioUrl, { method: "HEAD" });
  assert.equal(head.headers.get("content-length"), String(mp3.length));

  const page = await (await fetch(`${relay.url}/podcast/`)).text();
  assert.ok(page.includes("http://phone-reachable.example:8787/podcast/feed.xml"));
  const qr = await fetch(`${relay.url}/podcast/qr.svg`);
  assert.equal(qr.headers.get("content-type"), "image/svg+xml");
  const svg = xml.parse(await qr.text()).svg;
  assert.ok(svg["@viewBox"], "an SVG image");
  assert.ok(page.includes("ready"));
  await assertProblem(await fetch(`${relay.url}/podcast/nothing.mp3`), 404);
  await assertProblem(await fetch(`${relay.url}/podcast/..%2F..%2Fapi-key`), 404);
  await assertProblem(await fetch(`${relay.url}/podcast/../api-key`), 404);
});

Deno.test("podcast: a job cut off in the middle resumes after restart and makes one valid MP3", async () => {
  const dataDir = await Deno.makeTempDir({ prefix: "relay-publish-" });
  const sentences = Array.from(
    { length: 40 },
    (_, i) => `Sentence number ${i} is here to make a long article for reading.`,
  ).join(" ");
  {
    await using relay = await serveServices({ dataDir });
    await postJson(`${relay.url}/downstream/api/publish`, {
      title: "Long",
      content: sentences,
      targets: ["nas"],
      transform: "read",
    }, { "x-app-id": APP_ID });
    // Stop once at least one chunk is done and before the last.
    await eventually(async () => {
      const [episode] = await relay.services.podcast.list();
      return episode && episode.chunks_done >= 1 ? episode : undefined;
    });
    await relay.close();
  }
  const [record] = (await fileNames(join(dataDir, "podcast"))).filter((n) => n.endsWith(".json"));
  const recordPath = join(dataDir, "podcast", record!);
  const stopped = JSON.parse(await Deno.readTextFile(recordPath));
  assert.equal(stopped.state, "synthesising");
  assert.ok(stopped.chunks_done < stopped.chunks_total, "stopped in the middle");
  // As a crash would leave it: half a segment written after the recorded bytes.
  const partPath = join(dataDir, "podcast", `${stopped.id}.mp3.part`);
  assert.equal((await Deno.stat(partPath)).size, stopped.bytes);
  await Deno.writeFile(partPath, new Uint8Array([0xff, 0xf3, 0x00, 0x01, 0x02]), { append: true });

  await using again = await serveServices({ dataDir });
  const done = await eventually(async () => {
    const episode = await again.services.podcast.get(stopped.id);
    assert.notEqual(episode?.state, "failed");
    return episode?.state === "ready" ? episode : undefined;
  });
  assert.equal(done.chunks_done, done.chunks_total);
  const mp3 = await Deno.readFile(join(dataDir, "podcast", `${stopped.id}.mp3`));
  assert.equal(mp3.length, done.bytes);
  const walk = walkMp3(mp3); // throws on the garbage if it had been kept
  assert.ok(Math.abs(walk.seconds - done.duration_s) < 0.1 * done.chunks_total + 0.2);
  assert.equal(await mode(join(dataDir, "podcast", `${stopped.id}.mp3`)), 0o600);
});

Deno.test("podcast: retention keeps the newest episodes; a text with nothing to say fails with a reason", async () => {
  await using relay = await serveServices({ retention: { keep: 1, maxDiskBytes: 1e9 } });
  const queue = (title: string, content: string) =>
    postJson(`${relay.url}/downstream/api/publish`, {
      title,
      content,
      targets: ["nas"],
      transform: "read",
    }, { "x-app-id": APP_ID }).then((r) => r.json());
  await queue("One", "The first episode.");
  await relay.services.podcast.idle(60_000);
  await queue("Two", "The second episode.");
  await queue("Nothing", "... !!! ---");
  await relay.services.podcast.idle(60_000);
  await queue("Nothing again", "???");
  await relay.services.podcast.idle(60_000);
  // Ready and failed episodes are kept apart: a failure never pushes out audio.
  const episodes = await relay.services.podcast.list();
  assert.deepEqual(episodes.map((e) => [e.title, e.state]), [
    ["Nothing again", "failed"],
    ["Two", "ready"],
  ]);
  assert.match(episodes[0]!.error ?? "", /nothing to read aloud/);
  const stats = await relay.services.stats();
  assert.equal(stats.podcast.evicted, 2);
  assert.deepEqual(stats.podcast.episodes, { queued: 0, synthesising: 0, ready: 1, failed: 1 });
  const files = await fileNames(join(relay.dataDir, "podcast"));
  assert.deepEqual(files.filter((n) => n.endsWith(".mp3")), [`${episodes[1]!.id}.mp3`]);
  const page = await (await fetch(`${relay.url}/podcast/`)).text();
  assert.ok(page.includes("failed: the text has nothing to read aloud"));
});

Deno.test("everything published survives a restart", async () => {
  const dataDir = await Deno.makeTempDir({ prefix: "relay-publish-" });
  let postUrl: string;
  let docId: string;
  {
    await using relay = await serveServices({ dataDir, publicUrl: "http://relay.test" });
    docId = (await (await postJson(`${relay.url}/downstream/api/notes/import`, {
      title: "N",
      content: "n",
      content_format: 1,
    })).json()).doc_id;
    postUrl = (await (await postJson(`${relay.url}/downstream/api/publish`, {
      title: "P",
      content: "p",
      targets: ["blog"],
    })).json()).blog.redirect_url;
    await postJson(`${relay.url}/downstream/api/publish`, {
      title: "E",
      content: "Hello there.",
      targets: ["nas"],
      transform: "read",
    }, { "x-app-id": APP_ID });
    await relay.services.podcast.idle(60_000);
  }
  await using relay = await serveServices({ dataDir, publicUrl: "http://relay.test" });
  assert.equal((await fetch(`${relay.url}${new URL(postUrl).pathname}`)).status, 200);
  assert.equal((await fetch(`${relay.url}/notes/${docId}?key=${MAIN_KEY}`)).status, 200);
  const rss = xml.parse(await (await fetch(`${relay.url}/podcast/feed.xml`)).text()).rss;
  assert.equal(rss.channel.item.title, "E");
  const audio = await fetch(`${relay.url}${new URL(rss.channel.item.enclosure["@url"]).pathname}`);
  assert.ok(walkMp3(new Uint8Array(await audio.arrayBuffer())).seconds > 0.5);
});

Deno.test("podcast: a client that drops a ranged download leaves the relay serving", async () => {
  await using relay = await serveServices();
  await postJson(`${relay.url}/downstream/api/publish`, {
    title: "Drop",
    content: "A sentence to speak. And another one to make it longer.",
    targets: ["nas"],
    transform: "read",
  }, { "x-app-id": APP_ID });
  await relay.services.podcast.idle(60_000);
  const [episode] = await relay.services.podcast.list();
  const url = `${relay.url}/podcast/${episode!.id}.mp3`;
  for (let i = 0; i < 3; i++) {
    const res = await relay.app.request(url, { headers: { range: "bytes=0-" } });
    assert.equal(res.status, 206);
    await res.body?.cancel();
    const partial = await fetch(url, { headers: { range: "bytes=10-" } });
    const reader = partial.body!.getReader();
    await reader.read();
    await reader.cancel();
  }
  assert.equal((await fetch(url)).status, 200);
});

Deno.test("notes and blog: writing needs the app id or a key with the publish scope", async () => {
  await using relay = await serveServices();
  const notes = `${relay.url}/downstream/api/notes/import`;
  const blog = `${relay.url}/downstream/api/publish`;
  const note = { title: "t", content: "c" };
  const post = { title: "t", content: "c", targets: ["blog"] };
  for (const [url, body] of [[notes, note], [blog, post]] as const) {
    await assertProblem(await postJson(url, body, {}), 401);
    await assertProblem(await postJson(url, body, { "x-app-id": "wrong" }), 401);
    await assertProblem(await postJson(url, body, { "x-auth-key": READER_KEY }), 403);
    await assertProblem(await postJson(url, body, { cookie: `relay_access=${READER_KEY}` }), 403);
  }
  assert.deepEqual(await fileNames(join(relay.dataDir, "notes")), []);
  assert.deepEqual(await fileNames(join(relay.dataDir, "blog")), []);
  for (const [url, body] of [[notes, note], [blog, post]] as const) {
    assert.equal((await postJson(url, body, { "x-auth-key": MAIN_KEY })).status, 200);
    assert.equal((await postJson(url, body, { "x-app-id": APP_ID })).status, 200);
  }
  assert.equal((await fileNames(join(relay.dataDir, "notes"))).length, 2);
  // Each post is its record and its rendered body.
  const posts = await fileNames(join(relay.dataDir, "blog"));
  assert.equal(posts.filter((name) => name.endsWith(".json")).length, 2);
  assert.equal(posts.filter((name) => name.endsWith(".html")).length, 2);
});

Deno.test("failed keys are limited per address like the relay's own, and a valid key or app id is never refused", async () => {
  await using relay = await serveServices();
  for (let i = 0; i < 10; i++) {
    await assertProblem(await fetch(`${relay.url}/notes/?key=guess-${i}`), 401);
  }
  const limited = await fetch(`${relay.url}/notes/?key=guess`);
  await assertProblem(limited, 429);
  assert.ok(Number(limited.headers.get("retry-after")) >= 1);
  // The same budget covers a missing app id and the delete.
  await assertProblem(
    await postJson(`${relay.url}/downstream/api/notes/import`, { title: "t", content: "c" }, {}),
    429,
  );
  await assertProblem(
    await fetch(`${relay.url}/downstream/delete/20260101-000000-aaaaaaaa`, { method: "POST" }),
    429,
  );
  const valid = await fetch(`${relay.url}/notes/?key=${MAIN_KEY}`);
  assert.equal(valid.status, 200);
  await valid.body?.cancel();
  const note = await postJson(`${relay.url}/downstream/api/notes/import`, {
    title: "t",
    content: "c",
  });
  assert.equal(note.status, 200);
  await note.body?.cancel();
});

Deno.test("feeds stay well-formed XML whatever a title or text holds", async () => {
  await using relay = await serveServices();
  const nasty = "a ]]> b & <c> \u0001\u0002 \ufffe end";
  await postJson(`${relay.url}/downstream/api/publish`, {
    title: nasty,
    content: nasty,
    content_md: `code \`]]>\` and ]]> text ${nasty}`,
    tags: `]]>,${nasty}`,
    targets: ["blog"],
  });
  await postJson(`${relay.url}/downstream/api/publish`, {
    title: nasty,
    content: `Say this. ${nasty}`,
    targets: ["nas"],
    transform: "read",
  });
  await relay.services.podcast.idle(60_000);
  // No character XML 1.0 forbids (the parser does not check that), and the feed parses.
  for (const path of ["/blog/feed.xml", "/podcast/feed.xml"]) {
    const text = await (await fetch(`${relay.url}${path}`)).text();
    // deno-lint-ignore no-control-regex
    assert.ok(!/[\u0000-\u0008\u000b\u000c\u000e-\u001f\ufffe\uffff]/.test(text), path);
    const parsed = xml.parse(text);
    const title = path.startsWith("/blog")
      ? String(parsed.feed.entry.title["#text"] ?? parsed.feed.entry.title)
      : String(parsed.rss.channel.item.title);
    assert.ok(title.startsWith("a ]]"), title);
    assert.ok(title.endsWith(" end"), title);
  }
  // Atom's title is of type html and escaped: a reader shows "<c>", never makes it a tag.
  const atom = await (await fetch(`${relay.url}/blog/feed.xml`)).text();
  assert.ok(atom.includes("&#60;c&#62;"));
  assert.ok(!atom.includes("<c>"));
});

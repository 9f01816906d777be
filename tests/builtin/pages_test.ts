import assert from "node:assert/strict";
import { MAIN_KEY, postJson, READER_KEY, serveServices } from "./_services.ts";

Deno.test("blog pages: one heading, a description, the relay's icon", async () => {
  await using relay = await serveServices();
  const publish = async (body: Record<string, unknown>) =>
    (await (await postJson(`${relay.url}/downstream/api/publish`, {
      targets: ["blog"],
      ...body,
    })).json()).blog.redirect_url;
  const titled = await publish({
    title: "Why WAL needs fsync",
    content: "A short plain summary, with <b>markup</b> & more.",
    content_md: "# Why WAL needs fsync\n\nA *short* summary.",
  });
  const plain = await publish({ title: "Plain", content: "Only a summary." });
  const series = await publish({
    title: "Reading notes: Why <logs> & matter",
    content: "c",
    content_md: "#   Why <logs> &amp; matter\n\nText.",
  });
  const other = await publish({
    title: "Weekend",
    content: "c",
    content_md: "# A different heading\n\nText.",
  });
  for (const url of [titled, plain, series, `${relay.url}/blog/`, `${relay.url}/podcast/`]) {
    const html = await (await fetch(url)).text();
    assert.equal(html.match(/<h1[\s>]/g)?.length, 1, `one heading in ${url}`);
    assert.match(html, /<meta name="description" content="[^"]+">/, url);
    assert.ok(
      html.includes(`<link rel="icon" type="image/svg+xml" href="${relay.url}/app/icon.svg">`),
    );
  }
  const page = await (await fetch(titled)).text();
  assert.ok(page.includes("<h1>Why WAL needs fsync</h1>"));
  assert.ok(page.includes("<em>short</em>"));
  assert.ok(
    (await (await fetch(series)).text()).includes(
      "<h1>Reading notes: Why &#60;logs&#62; &#38; matter</h1>",
    ),
  );
  // A heading that says something else is the body's own.
  const both = await (await fetch(other)).text();
  assert.ok(both.includes("<h1>Weekend</h1>") && both.includes("<h1>A different heading</h1>"));
  assert.ok(
    page.includes(
      '<meta name="description" content="A short plain summary, with &#60;b&#62;markup&#60;/b&#62; &#38; more.">',
    ),
  );
  assert.ok((await (await fetch(plain)).text()).includes("<h1>Plain</h1>"));
});

Deno.test("robots.txt lets crawlers read the public blog and podcast only", async () => {
  {
    await using relay = await serveServices();
    const res = await fetch(`${relay.url}/robots.txt`);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("content-type"), "text/plain; charset=utf-8");
    const text = await res.text();
    assert.match(text, /^User-agent: \*$/m);
    assert.match(text, /^Allow: \/blog\/$/m);
    assert.match(text, /^Allow: \/podcast\/$/m);
    assert.match(text, /^Disallow: \/$/m);
  }
  await using closed = await serveServices({ privateBlog: true, privatePodcast: true });
  const text = await (await fetch(`${closed.url}/robots.txt`)).text();
  assert.doesNotMatch(text, /^Allow:/m);
  assert.match(text, /^Disallow: \/$/m);
});

Deno.test("the web app's page has no image without a source", async () => {
  const html = await Deno.readTextFile(new URL("../../webapp/index.html", import.meta.url));
  const images = html.match(/<img\b[^>]*>/g) ?? [];
  assert.ok(images.length > 0);
  for (const img of images) assert.match(img, /\ssrc="[^"]+"/, img);
});

Deno.test("blog pages and their entries in the index say the language each post is written in", async () => {
  await using relay = await serveServices();
  const publish = async (title: string, content: string) =>
    (await (await postJson(`${relay.url}/downstream/api/publish`, {
      targets: ["blog"],
      title,
      content,
    })).json()).blog.redirect_url;
  const chinese = await publish(
    "读书笔记",
    "这是一篇关于数据库持久性的文章，讨论了预写日志和同步写入。",
  );
  const english = await publish(
    "Why WAL needs fsync",
    "A write-ahead log is only durable once the disk has been told to keep it.",
  );
  const german = await publish(
    "Warum das Protokoll zählt",
    "Ein Protokoll ist erst dann sicher, wenn die Festplatte es wirklich geschrieben hat.",
  );
  const langOf = (html: string) => /<html lang="([^"]*)">/.exec(html)?.[1];
  assert.equal(langOf(await (await fetch(chinese)).text()), "zh");
  assert.equal(langOf(await (await fetch(english)).text()), "en");
  assert.equal(langOf(await (await fetch(german)).text()), "de");
  const index = await (await fetch(`${relay.url}/blog/`)).text();
  assert.equal(langOf(index), "en"); // the index's own words
  const entries = [...index.matchAll(/<li lang="([^"]*)"><a class="title"[^>]*>([^<]*)</g)]
    .map((match) => [match[2], match[1]]);
  assert.deepEqual(entries, [
    ["Warum das Protokoll zählt", "de"],
    ["Why WAL needs fsync", "en"],
    ["读书笔记", "zh"],
  ]);
  assert.doesNotMatch(index, /lang="und"/);
});

Deno.test("a private blog's feed read with ?key= links to itself with a key that keeps access, never the main key", async () => {
  await using relay = await serveServices({ privateBlog: true });
  await relay.services.blog.publish({ title: "A post", content: "Body", tags: [] });
  const selfOf = async (url: string) => {
    const res = await fetch(url);
    assert.equal(res.status, 200, url);
    const text = await res.text();
    assert.ok(!text.includes(MAIN_KEY), "no main key in the feed");
    const href = /<link rel="self" href="([^"]*)"/.exec(text)?.[1] ?? "";
    return new URL(href.replaceAll("&amp;", "&"));
  };
  const self = await selfOf(`${relay.url}/blog/feed.xml?key=${MAIN_KEY}`);
  const feedKey = self.searchParams.get("key") ?? "";
  assert.match(feedKey, /^[\w-]{43}$/);
  assert.equal((await selfOf(self.href)).searchParams.get("key"), feedKey);
  // It opens the blog's feed only.
  for (const path of ["/blog/", "/results/feed.xml", "/notes/", "/peek"]) {
    const res = await fetch(`${relay.url}${path}?key=${feedKey}`);
    await res.body?.cancel();
    assert.equal(res.status, 401, path);
  }
  const named = await selfOf(`${relay.url}/blog/feed.xml?key=${READER_KEY}`);
  assert.equal(named.searchParams.get("key"), READER_KEY);
  // A public blog's feed needs no key and its link carries none.
  await using open = await serveServices();
  await open.services.blog.publish({ title: "A post", content: "Body", tags: [] });
  const text = await (await fetch(`${open.url}/blog/feed.xml?key=${MAIN_KEY}`)).text();
  assert.match(text, /<link rel="self" href="[^"?]*"/);
});

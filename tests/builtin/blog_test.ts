import assert from "node:assert/strict";
import { join } from "node:path";
import { feedXml } from "../_xml.ts";
import { RENDERER_VERSION } from "../../src/builtin/render_thread.ts";
import { postJson, serveServices } from "./_services.ts";

const xml = feedXml;

/** A Markdown table of about `bytes` bytes, like a long article's data appendix. */
function bigTable(bytes: number, seed: number): string {
  const rows = ["| n | name | value | note |", "| - | - | - | - |"];
  for (let i = 0, length = 0; length < bytes; i++) {
    rows.push(`| ${i} | row ${seed}-${i} | ${(i * 7919) % 10007} | *cell* \`${i}\` |`);
    length += rows.at(-1)!.length + 1;
  }
  return rows.join("\n");
}

async function publishPost(url: string, title: string, contentMd: string): Promise<string> {
  const res = await postJson(`${url}/downstream/api/publish`, {
    title,
    content: `Summary of ${title}.`,
    content_md: contentMd,
    targets: ["blog"],
  });
  assert.equal(res.status, 200);
  return (await res.json()).blog.post_id;
}

Deno.test("blog: a post is rendered once, when published; its page and the capped feed serve that rendering", async () => {
  await using relay = await serveServices();
  const ids: string[] = [];
  for (let i = 0; i < 10; i++) {
    ids.push(await publishPost(relay.url, `Table ${i}`, bigTable(100_000, i)));
  }
  assert.equal(relay.services.blog.renders, 10);

  // The rendering is a file beside the post; the page serves that file as it is.
  const stored = join(relay.dataDir, "blog", `${ids[0]}.v${RENDERER_VERSION}.html`);
  assert.ok((await Deno.readTextFile(stored)).includes("<table>"));
  await Deno.writeTextFile(stored, "<p>the stored rendering</p>\n");
  const page = await fetch(`${relay.url}/blog/${ids[0]}`);
  assert.equal(page.status, 200);
  assert.ok((await page.text()).includes("<p>the stored rendering</p>"));

  // Eight readers of the feed at once: one feed, the same bytes, no render.
  const feeds = await Promise.all(
    Array.from({ length: 8 }, () => fetch(`${relay.url}/blog/feed.xml`).then((r) => r.text())),
  );
  assert.equal(new Set(feeds).size, 1);
  assert.equal(relay.services.blog.renders, 10);
  const feed = feeds[0]!;
  // Ten posts of ~600 KB of HTML each would make a feed of megabytes.
  assert.ok(new TextEncoder().encode(feed).length < 700 * 1024, `${feed.length} bytes`);
  const entries = [xml.parse(feed).feed.entry].flat();
  assert.equal(entries.length, 10);
  const full = entries.filter((e) => e.content !== undefined);
  assert.ok(full.length >= 1 && full.length <= 5, `${full.length} entries with content`);
  // The newest carry their body, the older ones a summary and their link.
  assert.ok(entries[0].content !== undefined);
  for (const entry of entries.filter((e) => e.content === undefined)) {
    assert.match(String(entry.summary["#text"] ?? entry.summary), /^Summary of Table \d\.$/);
    assert.match(entry.link["@href"], /\/blog\/\d{8}-/);
  }

  // A new post changes the feed.
  await publishPost(relay.url, "Newest", "*short*");
  const after = xml.parse(await (await fetch(`${relay.url}/blog/feed.xml`)).text()).feed;
  assert.equal([after.entry].flat()[0].title["#text"] ?? [after.entry].flat()[0].title, "Newest");
});

Deno.test("blog: after a restart posts are served without rendering; a missing or older rendering is made once", async () => {
  const dataDir = await Deno.makeTempDir({ prefix: "relay-blog-" });
  let id: string;
  {
    await using relay = await serveServices({ dataDir });
    id = await publishPost(relay.url, "Kept", "# Kept\n\nSome **bold** text.");
  }
  const stored = join(dataDir, "blog", `${id}.v${RENDERER_VERSION}.html`);
  await using relay = await serveServices({ dataDir });
  assert.ok((await (await fetch(`${relay.url}/blog/${id}`)).text()).includes("<strong>bold"));
  await fetch(`${relay.url}/blog/feed.xml`).then((r) => r.text());
  assert.equal(relay.services.blog.renders, 0);

  // As after an upgrade of the renderer: the current version's file is not there yet.
  await Deno.rename(stored, join(dataDir, "blog", `${id}.v0.html`));
  const pages = await Promise.all(
    Array.from({ length: 5 }, () => fetch(`${relay.url}/blog/${id}`).then((r) => r.text())),
  );
  assert.ok(pages.every((page) => page.includes("<strong>bold</strong>")));
  assert.equal(relay.services.blog.renders, 1);
  assert.ok((await Deno.readTextFile(stored)).includes("<strong>bold</strong>"));

  // Deleting the post deletes its rendering too.
  await relay.services.blog.delete(id);
  await assert.rejects(Deno.stat(stored), Deno.errors.NotFound);
});

Deno.test("blog and podcast: absolute URLs come from --public-url or the listening address, never the Host header", async () => {
  await using relay = await serveServices();
  const published = await (await postJson(`${relay.url}/downstream/api/publish`, {
    title: "Hosted",
    content: "Say this.",
    tags: "a",
    targets: ["blog", "nas"],
    transform: "read",
  })).json();
  assert.equal(published.blog.redirect_url, `${relay.url}/blog/${published.blog.post_id}`);
  await relay.services.podcast.idle(60_000);
  // What a request with "Host: evil.example" looks like to the app.
  const evil = (path: string) => relay.app.request(`http://evil.example${path}`);
  for (
    const path of [
      "/blog/feed.xml",
      "/blog/",
      `/blog/${published.blog.post_id}`,
      "/blog/posts",
      "/podcast/",
      "/podcast/feed.xml",
      "/podcast/episodes",
    ]
  ) {
    const res = await evil(path);
    assert.equal(res.status, 200, path);
    const text = await res.text();
    assert.ok(!text.includes("evil.example"), `${path} names the request's host`);
    assert.ok(text.includes(relay.url), `${path} names the listening address`);
  }
  const again = await (await relay.app.request("http://evil.example/downstream/api/publish", {
    method: "POST",
    headers: { "content-type": "application/json", "x-app-id": "app-id-0123456789abcdef" },
    body: JSON.stringify({ title: "T", content: "c", targets: ["blog"] }),
  })).json();
  assert.ok(again.blog.redirect_url.startsWith(`${relay.url}/blog/`));

  await using configured = await serveServices({ publicUrl: "https://relay.example.org/r/" });
  await postJson(`${configured.url}/downstream/api/publish`, {
    title: "T",
    content: "c",
    targets: ["blog"],
  });
  const feed = await (await configured.app.request("http://evil.example/blog/feed.xml"))
    .text();
  assert.ok(feed.includes('href="https://relay.example.org/r/blog/feed.xml"'));
  assert.ok(!feed.includes("evil.example"));
});

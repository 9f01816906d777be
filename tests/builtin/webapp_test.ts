/**
 * Browser test of the built-in services as a person sees them: Debian's Chromium driven by
 * playwright-core against a real relay process. The web app's Library screen lists the
 * podcast episode (with the feed's address as text and a QR code), the blog post and the
 * note; the blog post's page reads well on a phone. For a private podcast, the screen's feed
 * address, QR code and player carry the podcast's feed key, never the app's own key. Screenshots
 * go to `docs/screenshots/` with `RELAY_SCREENSHOTS=1`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { type Browser, chromium } from "playwright-core";
import { KEY, type RelayProcess, startRelayProcess } from "../_helpers.ts";
import { CHROMIUM, CHROMIUM_ARGS, PHONE, screenshot } from "../_chromium.ts";
import { PROGRAMS, testGroup } from "../_optional.ts";

const test = testGroup("the Library screen in Chromium", PROGRAMS.chromium);

declare const document: {
  documentElement: { scrollWidth: number; scrollTop: number };
  activeElement: { blur(): void } | null;
  querySelector(selector: string): { naturalWidth?: number } | null;
};

async function libraryScreen(browser: Browser, relay: RelayProcess): Promise<void> {
  const res = await fetch(`${relay.url}/publish`, {
    method: "POST",
    headers: { "x-auth-key": KEY, "content-type": "application/json" },
    body: JSON.stringify({
      title: "周末读书笔记: Why write-ahead logs matter",
      content: "A short summary of the article.",
      content_md: "# Why write-ahead logs matter\n\nA database writes **every change** to a " +
        "log first, then to its tables. 这样即使断电，数据也不会丢失。\n\n" +
        "- durability\n- crash recovery\n\n> The log is the database.\n\n" +
        "```sql\nPRAGMA journal_mode = WAL;\n```\n\nRead more at https://sqlite.org/wal.html",
      tags: "sqlite,durability,读书",
      targets: ["notes", "blog", "nas"],
      transform: "read",
    }),
  });
  const outcome = await res.json();
  assert.equal(outcome.status, "ok", JSON.stringify(outcome));

  const context = await browser.newContext({
    viewport: PHONE,
    deviceScaleFactor: 1,
    locale: "en-GB",
    timezoneId: "UTC",
  });
  try {
    context.setDefaultTimeout(60_000);
    const page = await context.newPage();
    const errors: string[] = [];
    page.on("pageerror", (error) => errors.push(error.message));

    await page.goto(`${relay.url}/app/#key=${encodeURIComponent(KEY)}`);
    await page.locator("#notice").filter({ hasText: "Key saved" }).waitFor();
    await page.goto(`${relay.url}/app/#library`);
    await page.locator("#screen-library").waitFor({ state: "visible" });
    // The episode is made in the background; the screen refreshes itself until it is ready.
    await page.locator("#podcast-list .episode-state[data-state=ready]").waitFor();
    assert.equal(
      await page.textContent("#podcast-feed"),
      `${relay.url}/podcast/feed.xml`,
    );
    await page.waitForFunction(() =>
      (document.querySelector("#podcast-qr")?.naturalWidth ?? 0) > 0
    );
    assert.equal(await page.locator("#podcast-list audio").count(), 1);
    assert.match(await page.textContent("#blog-list") ?? "", /Why write-ahead logs matter/);
    assert.match(await page.textContent("#notes-list") ?? "", /durability/);
    await page.locator("#notes-list summary").click();
    await page.locator("#notes-list pre").filter({ hasText: "doc_id:" }).waitFor();
    assert.ok(
      await page.evaluate(() => document.documentElement.scrollWidth) <= PHONE.width,
      "no sideways scrolling",
    );
    await screenshot(page, "library");

    await page.goto(outcome.results.blog.url);
    assert.equal(await page.textContent("h1"), "周末读书笔记: Why write-ahead logs matter");
    assert.equal(await page.locator("article strong").textContent(), "every change");
    assert.ok(await page.evaluate(() => document.documentElement.scrollWidth) <= PHONE.width);
    await screenshot(page, "blog-post");

    await page.goto(`${relay.url}/podcast/`);
    await page.locator("audio").waitFor();
    await screenshot(page, "podcast");
    assert.deepEqual(errors, [], "the pages threw");
  } finally {
    await context.close();
  }
}

async function privatePodcast(browser: Browser): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "relay-webapp-" });
  await using relay = await startRelayProcess(dir, {
    args: ["--private-podcast", "yes"],
    env: { RELAY_API_KEY: KEY },
  });
  const res = await fetch(`${relay.url}/publish`, {
    method: "POST",
    headers: { "x-auth-key": KEY, "content-type": "application/json" },
    body: JSON.stringify({
      title: "Private",
      content: "Only for the family.",
      targets: ["nas"],
      transform: "read",
    }),
  });
  assert.equal(res.status, 200, await res.text());
  const listed = await fetch(`${relay.url}/podcast/episodes`, { headers: { "x-auth-key": KEY } });
  const feedUrl: string = (await listed.json()).feed_url;
  const feedKey = new URL(feedUrl).searchParams.get("key");
  assert.ok(feedKey !== null && feedKey !== KEY, feedUrl);

  const context = await browser.newContext({ viewport: PHONE });
  try {
    context.setDefaultTimeout(60_000);
    const page = await context.newPage();
    await page.goto(`${relay.url}/app/#key=${encodeURIComponent(KEY)}`);
    await page.locator("#notice").filter({ hasText: "Key saved" }).waitFor();
    await page.goto(`${relay.url}/app/#library`);
    await page.locator("#podcast-list .episode-state[data-state=ready]").waitFor();
    assert.equal(await page.textContent("#podcast-feed"), feedUrl);
    const qr = await page.getAttribute("#podcast-qr", "src") ?? "";
    assert.equal(qr, `${relay.url}/podcast/qr.svg?key=${feedKey}`);
    // The image loads with the feed key alone: the <img> sends no header and no other key.
    await page.waitForFunction(() =>
      (document.querySelector("#podcast-qr")?.naturalWidth ?? 0) > 0
    );
    const audio = await page.getAttribute("#podcast-list audio", "src") ?? "";
    assert.equal(new URL(audio).searchParams.get("key"), feedKey);
  } finally {
    await context.close();
  }
}

async function searchBox(browser: Browser, relay: RelayProcess): Promise<void> {
  const res = await fetch(`${relay.url}/publish`, {
    method: "POST",
    headers: { "x-auth-key": KEY, "content-type": "application/json" },
    body: JSON.stringify({
      title: "阳台种菜",
      content: "番茄需要阳光，每天至少六小时。<b>bold</b> is text here.",
      targets: ["blog"],
    }),
  });
  const outcome = await res.json();
  assert.equal(outcome.status, "ok", JSON.stringify(outcome));
  const postId = new URL(outcome.results.blog.url).pathname.split("/").pop()!;

  const context = await browser.newContext({ viewport: PHONE });
  try {
    context.setDefaultTimeout(60_000);
    const page = await context.newPage();
    const errors: string[] = [];
    page.on("pageerror", (error) => errors.push(error.message));
    await page.goto(`${relay.url}/app/#key=${encodeURIComponent(KEY)}`);
    await page.locator("#notice").filter({ hasText: "Key saved" }).waitFor();
    await page.goto(`${relay.url}/app/#library`);
    await page.locator("#screen-library").waitFor({ state: "visible" });

    // An empty query asks nothing.
    await page.click("#search-submit");
    assert.equal(await page.locator("#search-list li").count(), 0);
    assert.equal(await page.textContent("#search-status"), "");

    await page.fill("#search-input", "番茄");
    await page.click("#search-submit");
    // The index may be built in the background at first: the retry button asks again.
    await page.waitForFunction(
      () => {
        const list = document.querySelector("#search-list li");
        if (list) return true;
        const retry = document.querySelector("#search-retry") as unknown as {
          hidden: boolean;
          click(): void;
        };
        if (!retry.hidden) retry.click();
        return false;
      },
      undefined,
      { polling: 500 },
    );
    assert.equal(await page.locator("#search-list li").count(), 1);
    assert.equal(await page.textContent("#search-list mark"), "番茄");
    assert.equal(await page.textContent("#search-list .card-title"), "阳台种菜");
    assert.equal(
      await page.locator("#search-list .card-title a").evaluate((a) =>
        (a as unknown as { href: string }).href
      ),
      outcome.results.blog.url,
    );
    assert.equal(await page.locator("#search-list .badge").textContent(), "Blog post");
    assert.equal(await page.locator("#search-list b").count(), 0, "saved text is not markup");

    const deleted = await fetch(`${relay.url}/downstream/delete/${postId}`, {
      method: "POST",
      headers: { "x-auth-key": KEY },
      redirect: "manual",
    });
    await deleted.body?.cancel();
    assert.equal(deleted.status, 303);
    await page.click("#search-submit");
    await page.locator("#search-status").filter({ hasText: "Nothing found." }).waitFor();
    assert.equal(await page.locator("#search-list li").count(), 0);
    assert.deepEqual(errors, [], "the page threw");
  } finally {
    await context.close();
  }
}

// One browser for the file and a fresh context (its own storage) for each screen: a Chromium
// start costs seconds of CPU. The public podcast's screen and the search box share one relay,
// since neither's posts match what the other looks for; the private podcast needs its own.
test("the Library screen in Chromium", async (t) => {
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
  try {
    const dir = await Deno.makeTempDir({ prefix: "relay-webapp-" });
    await using relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
    await t.step(
      "the Library screen shows the podcast, the blog and the notes; the blog post reads well on a phone",
      () => libraryScreen(browser, relay),
    );
    await t.step(
      "the Library's search box finds a two-character Chinese word, marks it, escapes the rest, and forgets a deleted post",
      () => searchBox(browser, relay),
    );
    await t.step(
      "the Library screen of a private podcast shows and loads the feed key's addresses, never the app's key",
      () => privatePodcast(browser),
    );
  } finally {
    await browser.close();
  }
});

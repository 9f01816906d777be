/**
 * Browser tests of the phone web app: Debian's Chromium driven by playwright-core
 * against a real relay process on 127.0.0.1 (a secure context, so the service worker runs).
 * Each test has its own relay, database and browser profile. Screenshots of each screen, at
 * phone size, go to `docs/screenshots/` when `RELAY_SCREENSHOTS=1`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { type BrowserContext, chromium, type Page } from "playwright-core";
import { addKey } from "../../src/access/named_keys.ts";
import { WEBAPP_FILES } from "../../src/server/webapp.ts";
import { startDownstream } from "../downstream.ts";
import {
  assertProblem,
  eventually,
  getStats,
  KEY,
  makeApp,
  relayCall,
  type RelayProcess,
  ROOT,
  startRelayProcess,
  withTempDir,
} from "../_helpers.ts";
import { CHROMIUM, CHROMIUM_ARGS, PHONE, screenshot } from "../_chromium.ts";
import { PROGRAMS, testGroup } from "../_optional.ts";

/** The tests that drive the app in Chromium; the others need no browser. */
const browserTest = testGroup("web app in Chromium", PROGRAMS.chromium);

/** Upper bound for anything the page waits for; a fast machine never gets near it. */
const WAIT_MS = 20_000;

// The functions given to page.evaluate run in the page. Deno's types have no DOM, and a
// `lib="dom"` reference would change the types of every file `deno task check` reads, so
// this module declares the little of the DOM those functions use.
interface PageElement {
  id: string;
  textContent: string | null;
  innerText: string;
  outerHTML: string;
  dataset: Record<string, string | undefined>;
  labels?: { length: number } | null;
  offsetParent: unknown;
  getAttribute(name: string): string | null;
  getBoundingClientRect(): { height: number };
  blur(): void;
}
declare const document: {
  querySelector(selector: string): PageElement | null;
  querySelectorAll(selector: string): Iterable<PageElement>;
  activeElement: PageElement | null;
  documentElement: { scrollWidth: number; scrollTop: number };
};
declare const navigator: {
  serviceWorker?: {
    controller: unknown;
    getRegistration(): Promise<{ scope: string } | undefined>;
  };
};

/** What a test gets: its relay, a page in a fresh browser profile, and the relay's API. */
interface Session {
  dir: string;
  relay: RelayProcess;
  context: BrowserContext;
  page: Page;
  call: (path: string, init?: RequestInit) => Promise<Response>;
}

/**
 * Runs `job` with a relay (key {@linkcode KEY}) in a temp directory and a fresh Chromium
 * profile at phone size; fails if the page throws an uncaught error.
 */
async function withApp(
  options: { env?: Record<string, string>; args?: string[] },
  job: (session: Session) => Promise<void>,
): Promise<void> {
  await withTempDir(async (dir) => {
    await using relay = await startRelayProcess(dir, {
      env: { RELAY_API_KEY: KEY, ...options.env },
    });
    const context = await chromium.launchPersistentContext(`${dir}/profile`, {
      executablePath: CHROMIUM,
      args: [...CHROMIUM_ARGS, ...options.args ?? []],
      viewport: PHONE,
      deviceScaleFactor: 1,
      locale: "en-GB",
      timezoneId: "UTC",
    });
    try {
      context.setDefaultTimeout(WAIT_MS);
      const page = context.pages()[0] ?? await context.newPage();
      const errors: string[] = [];
      page.on("pageerror", (error) => errors.push(error.message));
      await job({ dir, relay, context, page, call: relayCall(relay.url) });
      assert.deepEqual(errors, [], "the page threw");
    } finally {
      await context.close();
    }
  });
}

/** Opens the app with the key given by a pairing link, on `screen`. */
async function openApp(page: Page, relay: RelayProcess, screen = "submit"): Promise<void> {
  await page.goto(`${relay.url}/app/#key=${encodeURIComponent(KEY)}`);
  await textOf(page, "#notice", /^Key saved from the pairing link/);
  await page.goto(`${relay.url}/app/#${screen}`);
  await page.reload();
  await page.locator(`#screen-${screen}`).waitFor({ state: "visible" });
}

/** Waits until the element's text matches `pattern`, then returns the text. */
async function textOf(page: Page, selector: string, pattern: RegExp): Promise<string> {
  try {
    await page.waitForFunction(
      ([selector, source, flags]) =>
        new RegExp(source, flags).test(document.querySelector(selector)?.textContent ?? ""),
      [selector, pattern.source, pattern.flags] as const,
    );
  } catch (error) {
    const text = await page.textContent(selector).catch(() => null);
    throw new Error(`${selector} never matched ${pattern}; it says ${JSON.stringify(text)}`, {
      cause: error,
    });
  }
  return (await page.textContent(selector)) ?? "";
}

/** The relay's queues, as `{queue: [content, …]}`. */
async function queued(call: Session["call"]): Promise<Record<string, string[]>> {
  const res = await call("/peek");
  if (res.status === 204) return {};
  assert.equal(res.status, 200);
  const body = await res.json() as { queues: Record<string, { content: string }[]> };
  return Object.fromEntries(
    Object.entries(body.queues)
      .filter(([, items]) => items.length > 0)
      .map(([name, items]) => [name, items.map((i) => i.content)]),
  );
}

async function post(call: Session["call"], path: string, body: string): Promise<string> {
  const res = await call(path, { method: "POST", body });
  const text = await res.text();
  assert.equal(res.status, 200, text);
  return text;
}

browserTest(
  "web app: the Key screen checks a key before keeping it; a pairing link stores it and leaves the address bar",
  async () => {
    await withApp({}, async ({ relay, page }) => {
      await page.goto(`${relay.url}/app/`);
      // Without a key every screen asks for one.
      await page.locator("#screen-settings").waitFor({ state: "visible" });
      assert.equal(await page.locator("#settings-intro").isVisible(), true);
      await page.getByRole("link", { name: "Queues" }).click();
      assert.equal(await page.locator("#screen-settings").isVisible(), true);

      await page.getByLabel("API key").fill("not-the-key-0000");
      await page.getByRole("button", { name: "Save" }).click();
      assert.equal(
        await textOf(page, "#key-status", /not saved/),
        "Wrong API key: send the relay's main key (its api-key file, or RELAY_API_KEY) or a named key. The key was not saved.",
      );
      assert.equal(await page.evaluate(() => localStorage.getItem("relay.key")), null);

      await page.getByLabel("API key").fill(KEY);
      await page.getByRole("button", { name: "Save" }).click();
      assert.equal(
        await textOf(page, "#key-status", /^Key saved/),
        "Key saved. The relay accepted it.",
      );
      assert.equal(await page.evaluate(() => localStorage.getItem("relay.key")), KEY);
      // The screen the user wanted (#queues) opens once the key is there.
      await page.locator("#screen-queues").waitFor({ state: "visible" });
      await page.getByRole("link", { name: "Key" }).click();
      assert.match(await page.textContent("#key-state") ?? "", /ending in …cdef/);
      await screenshot(page, "settings");

      await page.getByRole("button", { name: "Forget key" }).click();
      assert.equal(
        await textOf(page, "#key-status", /forgotten/),
        "Key forgotten on this device, with any submissions still waiting to be sent.",
      );
      assert.equal(await page.evaluate(() => localStorage.getItem("relay.key")), null);

      await page.goto(`${relay.url}/app/#key=${encodeURIComponent(KEY)}`);
      assert.equal(
        await textOf(page, "#notice", /pairing link/),
        "Key saved from the pairing link. The relay accepted it.",
      );
      assert.equal(page.url(), `${relay.url}/app/#submit`);
      assert.equal(await page.evaluate(() => localStorage.getItem("relay.key")), KEY);
      assert.equal(await page.locator("#screen-submit").isVisible(), true);
    });
  },
);

browserTest(
  "web app: Submit shows the relay's answer, Ctrl+Enter submits, and the items reach the relay",
  async () => {
    await withApp({}, async ({ relay, page, call }) => {
      await openApp(page, relay);
      const content = page.getByLabel("Link or text");
      await content.fill("Remember to water the plants");
      await page.getByRole("button", { name: "Submit", exact: true }).click();
      assert.equal(await textOf(page, "#submit-status", /^OK/), "OK (general)");
      assert.equal(await content.inputValue(), "");

      await content.fill("https://stackoverflow.com/questions/11227809");
      await content.press("Control+Enter");
      assert.equal(await textOf(page, "#submit-status", /qa/), "OK (qa)");

      await page.getByLabel("Queue", { exact: true }).selectOption("article");
      await content.fill("https://example.com/long-read");
      await content.press("Control+Enter");
      assert.equal(await textOf(page, "#submit-status", /article/), "OK (article)");
      await content.fill("https://example.com/long-read");
      await content.press("Control+Enter");
      assert.equal(await textOf(page, "#submit-status", /duplicate/), "OK (duplicate)");

      assert.deepEqual(await queued(call), {
        qa: ["https://stackoverflow.com/questions/11227809"],
        article: ["https://example.com/long-read"],
        general: ["Remember to water the plants"],
      });
      await page.getByLabel("Queue", { exact: true }).selectOption("");
      await content.fill("https://superuser.com/questions/1794/bash-history-across-terminals");
      await content.press("Control+Enter");
      assert.equal(await textOf(page, "#submit-status", /qa/), "OK (qa)");
      await content.fill("Ask the plumber about the boiler service on Friday");
      await screenshot(page, "submit");
    });
  },
);

browserTest(
  "web app: Queues lists each queue's items with leased marks and says when all are empty",
  async () => {
    await withApp({}, async ({ relay, page, call }) => {
      await openApp(page, relay, "queues");
      assert.equal(await textOf(page, "#queues-status", /empty/), "All queues are empty");

      await post(call, "/submit", "https://stackoverflow.com/questions/927358/how-do-i-undo-git");
      await post(call, "/submit", "https://unix.stackexchange.com/questions/30925");
      await post(call, "/submit", "Summarise: Designing Data-Intensive Applications, chapter 7");
      await post(call, "/submit", "Remember to water the plants");
      const res = await call("/submit", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ url: "https://lwn.net/Articles/990000/", queue: "article" }),
      });
      assert.equal(await res.text(), "OK (article)");
      const leased = await call("/pull?queue=general&lease=600&limit=1");
      assert.equal(leased.status, 200);
      await leased.body?.cancel();

      await page.getByRole("button", { name: "Refresh" }).click();
      assert.match(await textOf(page, "#queues-status", /^5 items/), /^5 items waiting, as of /);
      const headings = await page.locator("#queues-list h2").allTextContents();
      assert.deepEqual(headings, ["qa 2 items", "article 1 item", "general 2 items"]);
      const general = page.locator("#queues-list section").nth(2).locator("li");
      assert.equal(
        await general.nth(0).locator(".content").textContent(),
        "Summarise: Designing Data-Intensive Applications, chapter 7",
      );
      assert.match(await general.nth(0).locator(".badge").textContent() ?? "", /^leased until /);
      assert.equal(await general.nth(1).locator(".badge").count(), 0);
      await screenshot(page, "queues");
    });
  },
);

browserTest(
  "web app: a shared link waits for the key, is sent with automatic routing, and again answers OK (duplicate)",
  async () => {
    await withApp({}, async ({ relay, page, call }) => {
      const link =
        "https://stackoverflow.com/questions/927358/how-do-i-undo-the-most-recent-commits";
      const share = `${relay.url}/app/share?` + new URLSearchParams({
        title: "How do I undo the most recent local commits in Git?",
        text: "",
        url: link,
      });
      const send = page.getByRole("button", { name: "Send", exact: true });
      // Without a key: the share waits for it, then is there to be sent.
      await page.goto(share);
      assert.equal(await textOf(page, "#share-answer", /key/), "Waiting for the key");
      assert.equal(page.url(), `${relay.url}/app/#share`);
      assert.equal(await send.isVisible(), false);
      await page.getByRole("link", { name: "Enter the key" }).click();
      await page.getByLabel("API key").fill(KEY);
      await page.getByRole("button", { name: "Save" }).click();
      await page.locator("#screen-share").waitFor({ state: "visible" });
      assert.equal(await page.getByLabel("Link", { exact: true }).inputValue(), link);
      await screenshot(page, "share");
      await send.click();
      assert.equal(await textOf(page, "#share-answer", /^OK/), "OK (qa)");
      assert.deepEqual(await queued(call), { qa: [link] });
      assert.equal(await page.getByRole("link", { name: "Back to the app" }).isVisible(), true);

      await page.goto(share);
      await send.click();
      assert.equal(await textOf(page, "#share-answer", /^OK/), "OK (duplicate)");
      // A reload shows the answer again but does not share again.
      await page.reload();
      assert.equal(await textOf(page, "#share-answer", /^OK/), "OK (duplicate)");
      assert.equal(await send.isVisible(), false);
      assert.equal((await getStats(call)).queues.qa.duplicate, 1);

      // Android puts the link inside text too: it is sent once, alone.
      await page.goto(
        `${relay.url}/app/share?` + new URLSearchParams({
          title: "",
          text: "Worth a read https://example.com/wal-and-fsync",
          url: "https://example.com/wal-and-fsync",
        }),
      );
      assert.equal(await page.textContent("#share-extra-text"), "Worth a read");
      await send.click();
      assert.equal(await textOf(page, "#share-answer", /^OK/), "OK (general)");
      assert.deepEqual((await queued(call)).general, ["https://example.com/wal-and-fsync"]);

      // Nothing at all: said so, with nothing to send.
      await page.goto(`${relay.url}/app/share?title=&text=%20&url=`);
      assert.equal(
        await textOf(page, "#share-answer", /^Nothing/),
        "Nothing was shared: no title, text or link arrived.",
      );
      assert.equal(await page.locator("#share-form").isVisible(), false);
    });
  },
);

browserTest(
  "web app share target: a shared link is sent alone, so sharing it again is a duplicate; the title and text are only an optional note",
  async () => {
    await withApp({}, async ({ relay, page, call }) => {
      await openApp(page, relay);
      const link = "https://stackoverflow.com/q/1";
      const content = page.getByLabel("Link", { exact: true });
      const send = page.getByRole("button", { name: "Send", exact: true });
      const addNote = page.getByRole("button", { name: "Add a note" });

      await page.goto(
        `${relay.url}/app/share?title=Some%20title&text=Look%20at%20this&url=https%3A%2F%2Fstackoverflow.com%2Fq%2F1`,
      );
      assert.equal(page.url(), `${relay.url}/app/#share`);
      // Nothing goes out before Send; the title and text are shown, not in the content.
      assert.equal(await content.inputValue(), link);
      assert.equal(await page.textContent("#share-extra-text"), "Some title\nLook at this");
      assert.equal(await addNote.getAttribute("aria-expanded"), "false");
      assert.equal(await page.locator("#share-note").isVisible(), false);
      assert.deepEqual(await queued(call), {});
      await send.click();
      assert.equal(await textOf(page, "#share-answer", /^OK/), "OK (qa)");
      assert.deepEqual(await queued(call), { qa: [link] });
      assert.equal(await page.textContent("#share-sent-content"), link);
      assert.equal(await page.locator("#share-form").isVisible(), false);

      // The same link with another title: the relay's exact-content check recognises it.
      await page.goto(
        `${relay.url}/app/share?` + new URLSearchParams({
          title: "A different title",
          text: "",
          url: link,
        }),
      );
      assert.equal(await content.inputValue(), link);
      await send.click();
      assert.equal(await textOf(page, "#share-answer", /^OK/), "OK (duplicate)");
      assert.deepEqual(await queued(call), { qa: [link] });

      // Android puts the link inside text and sends no url: the link alone is the content.
      await page.goto(
        `${relay.url}/app/share?` + new URLSearchParams({
          text: "Worth a read: https://example.com/wal-and-fsync.",
        }),
      );
      assert.equal(await content.inputValue(), "https://example.com/wal-and-fsync");
      assert.equal(await page.textContent("#share-extra-text"), "Worth a read:");
      await send.click();
      assert.equal(await textOf(page, "#share-answer", /^OK/), "OK (general)");
      assert.deepEqual((await queued(call)).general, ["https://example.com/wal-and-fsync"]);

      // The note goes only when the user adds it, after the link, as edited.
      await page.goto(
        `${relay.url}/app/share?` + new URLSearchParams({
          title: "Durable writes",
          text: "https://example.com/fsync-gate",
        }),
      );
      assert.equal(await content.inputValue(), "https://example.com/fsync-gate");
      await addNote.click();
      assert.equal(
        await page.getByRole("button", { name: "Remove the note" }).getAttribute(
          "aria-expanded",
        ),
        "true",
      );
      const note = page.getByLabel("Note, sent after the link");
      assert.equal(await note.inputValue(), "Durable writes");
      assert.equal(await page.evaluate(() => document.activeElement?.id), "share-note");
      await note.fill("Durable writes: read the part on fsyncgate");
      // A reload keeps the edits, and still sends nothing.
      await page.reload();
      assert.equal(await note.inputValue(), "Durable writes: read the part on fsyncgate");
      await send.click();
      assert.equal(await textOf(page, "#share-answer", /^OK/), "OK (general)");
      assert.deepEqual((await queued(call)).general, [
        "https://example.com/wal-and-fsync",
        "https://example.com/fsync-gate\nDurable writes: read the part on fsyncgate",
      ]);
      // Sent once: a reload shows the answer, not the form.
      await page.reload();
      assert.equal(await textOf(page, "#share-answer", /^OK/), "OK (general)");
      assert.equal(await page.locator("#share-form").isVisible(), false);

      // Without a link (or with several), the title and text are the content, as they were.
      await page.goto(
        `${relay.url}/app/share?` + new URLSearchParams({
          title: "Shopping",
          text: "Milk, eggs, https://a.example/x and https://b.example/y",
        }),
      );
      assert.equal(
        await page.getByLabel("Text", { exact: true }).inputValue(),
        "Shopping\nMilk, eggs, https://a.example/x and https://b.example/y",
      );
      assert.equal(await addNote.isVisible(), false);
      await send.click();
      assert.equal(await textOf(page, "#share-answer", /^OK/), "OK (general)");
      assert.equal((await queued(call)).general?.length, 3);
    });
  },
);

browserTest(
  "web app: Results update live after a push, keep line breaks and resume after a reload",
  async () => {
    await withApp({}, async ({ relay, page, call }) => {
      await post(
        call,
        "/push",
        "# Summary: why SQLite WAL needs fsync\n\nA commit is durable once…",
      );
      await openApp(page, relay, "results");
      await textOf(page, "#results-state", /^live$/);
      const items = page.locator("#results-list > li");
      await items.first().waitFor();
      assert.equal(await items.count(), 1);

      await post(
        call,
        "/push",
        "Q: how do I show <script> on a page?\nA: escape it: &lt;script&gt;",
      );
      await eventually(async () => await items.count() === 2, "the pushed result on the page");
      // Newest first, as text: the markup arrives as characters, the line break stays.
      const newest = items.first().locator(".content");
      assert.equal(
        await newest.evaluate((e) => (e as unknown as PageElement).innerText),
        "Q: how do I show <script> on a page?\nA: escape it: &lt;script&gt;",
      );
      assert.equal(await page.locator("#results-list script").count(), 0);

      await page.reload();
      await textOf(page, "#results-state", /^live$/);
      await post(call, "/push", "Reading list for the weekend:\n- WAL\n- fsync\n- group commit");
      await eventually(async () => await items.count() === 3, "the third result");
      // Resumed after the last seen result: nothing arrives twice.
      const texts = await page.locator("#results-list .content").evaluateAll((all) =>
        all.map((e) => (e as unknown as PageElement).innerText)
      );
      assert.deepEqual(texts.map((t) => t.split("\n")[0]), [
        "Reading list for the weekend:",
        "Q: how do I show <script> on a page?",
        "Summary: why SQLite WAL needs fsync",
      ]);
      assert.match(
        await page.evaluate(() => localStorage.getItem("relay.results.since")) ?? "",
        /^\d+$/,
      );
      await screenshot(page, "results");
    });
  },
);

browserTest(
  "web app: Results render their Markdown with no markup of their own, and Publish sends one to the blog and the podcast",
  async () => {
    await using downstream = startDownstream();
    await withApp({
      env: { RELAY_PUBLISH_URL: downstream.url, RELAY_APP_ID: downstream.appId },
    }, async ({ relay, page, call }) => {
      const markdown = [
        "# Sowing calendar",
        "",
        "Source: https://garden.example/sowing",
        "",
        "| Vegetable | Indoors |",
        "| --- | --- |",
        "| Tomato | March |",
        "",
        "- Water at the **root**",
        "- Never on the leaves",
        "",
        '<script>document.title = "owned"</script> <img src=x onerror="document.title=1">',
        "[a bad link](javascript:alert(1)) ![a tomato](https://garden.example/t.jpg)",
        "[shouting](JAVASCRIPT:alert(1)) <javascript:alert(1)> [data](data:text/html,<b>x</b>)",
        "![bad image](javascript:alert(1)) [*fine* <i>text</i>](https://garden.example/a)",
      ].join("\n");
      await post(call, "/push", markdown);
      await openApp(page, relay, "results");
      const card = page.locator("#results-list > li").first();
      await card.waitFor();
      assert.equal(await card.locator("h3").textContent(), "Sowing calendar");
      assert.deepEqual(await card.locator("td").allTextContents(), ["Tomato", "March"]);
      assert.deepEqual(await card.locator("li").allTextContents(), [
        "Water at the root",
        "Never on the leaves",
      ]);
      assert.equal(await card.locator("strong").textContent(), "root");
      // What looked like markup is text: no element came of it, and no link to javascript:.
      assert.equal(await card.locator("script, img, [onerror]").count(), 0);
      const text = await card.locator(".content").textContent() ?? "";
      assert.match(text, /<script>document\.title/);
      // A refused link keeps its text and loses its address.
      assert.match(
        text,
        /a bad link Image: a tomato\s*shouting javascript:alert\(1\) data\s*Image: bad image fine <i>text<\/i>/,
      );
      assert.doesNotMatch(text, /\]\(/);
      assert.equal(await card.locator("a[href^='javascript' i], a[href^='data' i]").count(), 0);
      // Every link goes to the web, opens outside the app and tells the site nothing.
      const links = await card.locator(".content a").evaluateAll((all) =>
        all.map((e) => (e as unknown as PageElement).outerHTML)
      );
      assert.equal(links.length, 3, links.join("\n"));
      for (const link of links) {
        assert.match(
          link,
          /^<a href="https:\/\/garden\.example\/[^"]*" rel="noreferrer noopener" target="_blank">/,
        );
      }
      assert.equal(await card.locator(".content i").count(), 0);
      assert.equal(
        await card.getByRole("link", { name: "Image: a tomato" }).getAttribute("href"),
        "https://garden.example/t.jpg",
      );
      assert.notEqual(await page.title(), "owned");
      await screenshot(page, "results-markdown");

      await card.getByRole("button", { name: "Publish to blog and podcast" }).click();
      assert.equal(
        await textOf(page, "#results-list > li .status", /Podcast/),
        "Blog: published, Podcast: published",
      );
      const podcast = downstream.requests.find((r) => r.service === "podcast")?.body as
        | Record<string, unknown>
        | undefined;
      assert.equal(podcast?.title, "Sowing calendar");
      assert.equal(podcast?.content_md, markdown);
      assert.equal(podcast?.transform, "read");
      // The podcast reads the article's text: no title again, no Source line, no marks.
      assert.match(
        String(podcast?.content),
        /^Vegetable Indoors\n\nTomato March\n\nWater at the root/,
      );
      assert.doesNotMatch(String(podcast?.content), /Source|garden\.example\/sowing/);
      assert.doesNotMatch(String(podcast?.content), /\||\*\*|^#/m);
      assert.deepEqual(downstream.requests.map((r) => r.service).sort(), ["blog", "podcast"]);

      // A link that could not be read has nothing to publish.
      await post(call, "/push", "Could not read https://garden.example/gone: HTTP 404");
      const failure = page.locator("#results-list > li", { hasText: "Could not read" });
      await failure.waitFor();
      assert.equal(await failure.locator("button.publish-result").count(), 0);
      assert.equal(await page.locator("#results-list > li button.publish-result").count(), 1);
    });
  },
);

browserTest(
  "web app: Publish sends to the chosen targets, shows each outcome, lists a failed publish and retries it",
  async () => {
    await using downstream = startDownstream();
    await withApp({
      env: { RELAY_PUBLISH_URL: downstream.url, RELAY_APP_ID: downstream.appId },
    }, async ({ relay, page }) => {
      await openApp(page, relay, "publish");
      await page.getByLabel("Title").fill("Why WAL needs fsync");
      const markdown = "# Why WAL needs fsync\n\nA *short* summary of what a commit promises.";
      await page.getByLabel("Content (Markdown)").fill(markdown);
      await page.getByLabel("Tags").fill("sqlite, durability");
      await page.getByLabel("Blog").check();
      await page.getByLabel("Podcast (read aloud)").check();
      await page.getByRole("button", { name: "Publish" }).click();
      assert.equal(
        await textOf(page, "#publish-status", /Published/),
        "Published to Notes, Blog and Podcast.",
      );
      const outcomes = await page.locator("#publish-results li").allTextContents();
      assert.equal(outcomes.length, 3);
      assert.match(outcomes[0]!, /^Notes: published \(doc-\d+\)$/);
      assert.match(outcomes[1]!, /^Blog: published at http:\/\/127\.0\.0\.1:\d+\/posts\/\d+$/);
      assert.match(outcomes[2]!, /^Podcast: published \(queued for reading/);
      const podcast = downstream.requests.find((r) => r.service === "podcast");
      assert.deepEqual(podcast?.body, {
        title: "Why WAL needs fsync",
        content: markdown,
        content_md: markdown,
        targets: ["nas"],
        transform: "read",
      });
      const notes = downstream.requests.find((r) => r.service === "notes");
      assert.equal((notes?.body as { tags?: string }).tags, "sqlite,durability");
      assert.deepEqual(downstream.requests.map((r) => r.service).sort(), [
        "blog",
        "notes",
        "podcast",
      ]);
      await screenshot(page, "publish");

      downstream.modes.blog = "fail";
      await page.getByLabel("Podcast (read aloud)").uncheck();
      await page.getByRole("button", { name: "Publish" }).click();
      assert.equal(
        await textOf(page, "#publish-status", /some/),
        "Published to some targets only.",
      );
      assert.deepEqual(
        await page.locator("#publish-results li").evaluateAll((lis) =>
          lis.map((li) => (li as unknown as PageElement).dataset.status)
        ),
        ["success", "error"],
      );

      // The relay keeps the publish whose blog failed: the screen lists it, and Retry sends it
      // again to the blog only, once the blog is back.
      const failed = page.locator("#failed-list > li");
      await failed.first().waitFor();
      assert.equal(await failed.count(), 1);
      assert.match(await failed.first().textContent() ?? "", /^Why WAL needs fsync.*Blog: /s);
      const blogCalls = () => downstream.requests.filter((r) => r.service === "blog").length;
      const notesCalls = downstream.requests.filter((r) => r.service === "notes").length;
      const before = blogCalls();
      downstream.modes.blog = "ok";
      await page.getByRole("button", { name: "Retry “Why WAL needs fsync”" }).click();
      assert.equal(
        await textOf(page, "#failed-status", /targets/),
        "Published to the targets that had failed.",
      );
      await page.locator("#failed-list > li").first().waitFor({ state: "detached" });
      assert.equal(blogCalls(), before + 1);
      assert.equal(downstream.requests.filter((r) => r.service === "notes").length, notesCalls);
    });
  },
);

browserTest(
  "web app: the offline outbox keeps a submission while the relay is down and sends it when it is back",
  async () => {
    await withApp({}, async ({ dir, relay, page }) => {
      await openApp(page, relay);
      await page.waitForFunction(() => Boolean(navigator.serviceWorker?.controller));
      const port = Number(new URL(relay.url).port);
      await relay.stop();

      await page.getByLabel("Link or text").fill("Written on the train, relay unreachable");
      await page.getByRole("button", { name: "Submit", exact: true }).click();
      assert.equal(
        await textOf(page, "#submit-status", /^Saved/),
        "Saved: will be sent when the relay is back",
      );
      assert.equal(
        await textOf(page, "#outbox-count", /waiting/),
        "1 item is waiting in the outbox for the relay.",
      );
      // The app shell opens from the cache while the relay is down, the share page too.
      await page.reload();
      await page.locator("#screen-submit").waitFor({ state: "visible" });
      await textOf(page, "#outbox-count", /^1 item/);
      await page.goto(`${relay.url}/app/share?text=${encodeURIComponent("Shared while offline")}`);
      await page.getByRole("button", { name: "Send", exact: true }).click();
      assert.equal(
        await textOf(page, "#share-answer", /^Saved/),
        "Saved: will be sent when the relay is back",
      );
      await page.getByRole("link", { name: "Back to the app" }).click();
      await textOf(page, "#outbox-count", /^2 items/);

      await using back = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY }, port });
      await page.evaluate(() => globalThis.dispatchEvent(new Event("online")));
      const call = relayCall(back.url);
      await eventually(
        async () => (await queued(call)).general?.length === 2,
        "the outbox items in the relay",
      );
      // In the order they were written.
      assert.deepEqual(await queued(call), {
        general: ["Written on the train, relay unreachable", "Shared while offline"],
      });
      assert.equal(
        await textOf(page, "#notice", /^Sent/),
        "Sent 2 saved items from the outbox: OK (general), OK (general)",
      );
      await page.locator("#outbox").waitFor({ state: "hidden" });

      // Forgetting the key drops what waits with it: nothing is sent with a forgotten key.
      await back.stop();
      await page.getByLabel("Link or text").fill("Not to be sent after the key is forgotten");
      await page.getByRole("button", { name: "Submit", exact: true }).click();
      await textOf(page, "#outbox-count", /^1 item/);
      await page.getByRole("link", { name: "Key" }).click();
      await page.getByRole("button", { name: "Forget key" }).click();
      await page.getByRole("link", { name: "Submit" }).click();
      await page.locator("#outbox").waitFor({ state: "hidden" });
    });
  },
);

browserTest(
  "web app: every control is labelled, the nav works by keyboard, and nothing scrolls sideways at 360 px or on a desktop",
  async () => {
    await withApp({}, async ({ relay, page }) => {
      await openApp(page, relay);
      // The share form with its note open, for a long link with a long title.
      const share = "share?" + new URLSearchParams({
        title: "A title long enough to wrap on a phone: ".repeat(3),
        url: `https://example.com/${"a-very-long-path-segment-".repeat(8)}`,
      });
      for (const screen of ["submit", "queues", "results", "publish", "settings", "share"]) {
        await page.goto(`${relay.url}/app/${screen === "share" ? share : `#${screen}`}`);
        await page.locator(`#screen-${screen}`).waitFor({ state: "visible" });
        if (screen === "share") {
          await page.getByRole("button", { name: "Add a note" }).click();
          await page.getByLabel("Note, sent after the link").waitFor();
        }
        const report = await page.evaluate(() => {
          const unlabelled = [...document.querySelectorAll("input, select, textarea")]
            .filter((c) => (c.labels?.length ?? 0) === 0 && !c.getAttribute("aria-label"))
            .map((c) => c.id || c.outerHTML);
          const small = [...document.querySelectorAll("button, nav a, .button")]
            .filter((c) => c.offsetParent !== null)
            .filter((c) => c.getBoundingClientRect().height < 44)
            .map((c) => c.textContent);
          return { unlabelled, small, width: document.documentElement.scrollWidth };
        });
        assert.deepEqual(report.unlabelled, [], `${screen}: controls without a label`);
        assert.deepEqual(report.small, [], `${screen}: touch targets under 44 px`);
        assert.ok(report.width <= PHONE.width, `${screen}: ${report.width} px wide`);
      }

      await page.goto(`${relay.url}/app/#submit`);
      await page.locator("#screen-submit").waitFor({ state: "visible" });
      let focused = "";
      for (let i = 0; i < 10 && focused !== "Queues"; i++) {
        await page.keyboard.press("Tab");
        focused = await page.evaluate(() => document.activeElement?.textContent ?? "");
      }
      assert.equal(focused, "Queues");
      await page.keyboard.press("Enter");
      await page.locator("#screen-queues").waitFor({ state: "visible" });
      assert.equal(new URL(page.url()).hash, "#queues");
      assert.equal(
        await page.getByRole("link", { name: "Queues" }).getAttribute("aria-current"),
        "page",
      );
      assert.equal(await page.evaluate(() => document.activeElement?.id), "queues-title");

      // On a desktop window too: no sideways scrolling, and the screens keep a readable width.
      await page.setViewportSize({ width: 1280, height: 800 });
      for (const screen of ["submit", "results", "publish"]) {
        await page.goto(`${relay.url}/app/#${screen}`);
        await page.locator(`#screen-${screen}`).waitFor({ state: "visible" });
        const width = await page.evaluate(() => document.documentElement.scrollWidth);
        assert.ok(width <= 1280, `${screen} on a desktop: ${width} px wide`);
        const box = await page.locator(`#screen-${screen}`).boundingBox();
        assert.ok(box !== null && box.width <= 900, `${screen}: ${box?.width} px of text width`);
      }
      await page.setViewportSize(PHONE);

      // A relay without external services publishes to its built-in ones; with the one target
      // ticked (Notes, by default), the screen names that one.
      await page.goto(`${relay.url}/app/#publish`);
      await page.getByLabel("Title").fill("t");
      await page.getByLabel("Content (Markdown)").fill("c");
      await page.getByRole("button", { name: "Publish" }).click();
      assert.equal(
        await textOf(page, "#publish-status", /^Published to Notes\.$/),
        "Published to Notes.",
      );
    });
  },
);

browserTest(
  "web app: Chromium finds the app installable, with its share target and a service worker for /app/",
  async () => {
    await withApp({}, async ({ relay, context, page }) => {
      await page.goto(`${relay.url}/app/`);
      await page.waitForFunction(() => Boolean(navigator.serviceWorker?.controller));
      assert.equal(
        await page.evaluate(async () => (await navigator.serviceWorker?.getRegistration())?.scope),
        `${relay.url}/app/`,
      );
      const cdp = await context.newCDPSession(page);
      assert.deepEqual(await cdp.send("Page.getInstallabilityErrors"), {
        installabilityErrors: [],
      });
      const manifest = await cdp.send("Page.getAppManifest");
      assert.equal(manifest.url, `${relay.url}/app/manifest.webmanifest`);
      assert.deepEqual(manifest.errors, []);
      const res = await fetch(manifest.url);
      assert.equal(res.headers.get("content-type"), "application/manifest+json; charset=utf-8");
      const body = await res.json();
      assert.equal(body.start_url, "/app/");
      assert.equal(body.scope, "/app/");
      assert.deepEqual(body.share_target.params, { title: "title", text: "text", url: "url" });
      assert.equal(body.share_target.action, "/app/share");
      for (const icon of body.icons as { src: string; type: string }[]) {
        const file = await fetch(new URL(icon.src, manifest.url));
        assert.equal(file.status, 200, icon.src);
        assert.equal(file.headers.get("content-type"), icon.type);
        await file.body?.cancel();
      }
    });
  },
);

browserTest(
  "web app: on plain http (not localhost) the app works as an ordinary page",
  async () => {
    // A LAN name for 127.0.0.1: not a secure context, so no service worker.
    await withApp({ args: ["--host-resolver-rules=MAP relay.lan 127.0.0.1"] }, async (session) => {
      const { relay, page, call } = session;
      const lan = relay.url.replace("127.0.0.1", "relay.lan");
      await page.goto(`${lan}/app/#key=${encodeURIComponent(KEY)}`);
      await textOf(page, "#notice", /^Key saved from the pairing link/);
      assert.equal(await page.evaluate(() => navigator.serviceWorker === undefined), true);
      await page.getByLabel("Link or text").fill("Sent over plain http");
      await page.getByRole("button", { name: "Submit", exact: true }).click();
      assert.equal(await textOf(page, "#submit-status", /^OK/), "OK (general)");
      assert.deepEqual(await queued(call), { general: ["Sent over plain http"] });
      await page.getByRole("link", { name: "Key" }).click();
      // isVisible() looks once: wait for the Key screen first, as the other tests do (without
      // the wait, this failed once in three CI runs).
      await page.locator("#screen-settings").waitFor({ state: "visible" });
      assert.equal(await page.locator("#insecure-note").isVisible(), true);
    });
  },
);

browserTest(
  "web app: a key without some scope is kept, and each screen shows the relay's 403 detail",
  async () => {
    await withApp({}, async ({ dir, relay, page, call }) => {
      // A key that may only submit, added while the relay runs, as `relay keys add` does.
      const phoneKey = addKey(`${dir}/keys.json`, "phone", ["submit"], Date.now());
      const detail =
        'The key "phone" may not use /peek: that needs the "read" scope, and it has submit';
      await page.goto(`${relay.url}/app/#settings`);
      await page.getByLabel("API key").fill(phoneKey);
      await page.getByRole("button", { name: "Save" }).click();
      assert.equal(
        await textOf(page, "#key-status", /^Key saved/),
        `Key saved. It is limited: ${detail}`,
      );

      await page.getByRole("link", { name: "Queues" }).click();
      assert.equal(await textOf(page, "#queues-status", /scope/), detail);
      await page.getByRole("link", { name: "Results" }).click();
      assert.match(
        await textOf(page, "#results-status", /scope/),
        /^The key "phone" may not use \/results(\/stream)?: that needs the "read" scope/,
      );
      assert.equal(await page.textContent("#results-state"), "stopped");

      await page.getByRole("link", { name: "Submit" }).click();
      await page.getByLabel("Link or text").fill("Still allowed to submit");
      await page.getByRole("button", { name: "Submit", exact: true }).click();
      assert.equal(await textOf(page, "#submit-status", /^OK/), "OK (general)");
      assert.deepEqual(await queued(call), { general: ["Still allowed to submit"] });
    });
  },
);

Deno.test("web app: every file is served with its type and CSP, embedded by both compile tasks, and cached by the service worker", async () => {
  await using t = await makeApp();
  for (const [name, type] of Object.entries(WEBAPP_FILES)) {
    const res = await t.app.request(`/app/${name}`);
    assert.equal(res.status, 200, name);
    assert.equal(res.headers.get("content-type"), type);
    assert.match(res.headers.get("content-security-policy") ?? "", /default-src 'self'/);
    assert.deepEqual(
      new Uint8Array(await res.arrayBuffer()),
      await Deno.readFile(`${ROOT}webapp/${name}`),
    );
    const head = await t.app.request(`/app/${name}`, { method: "HEAD" });
    assert.equal(head.status, 200);
    assert.equal(await head.text(), "");
  }
  const page = await t.app.request("/app/share?text=hello");
  assert.equal(await page.text(), await Deno.readTextFile(`${ROOT}webapp/index.html`));
  const bare = await t.app.request("/app?x=1");
  assert.equal(bare.status, 308);
  assert.equal(bare.headers.get("location"), "/app/?x=1");
  await assertProblem(await t.app.request("/app/%2e%2e/api-key"), 404);
  await assertProblem(await t.app.request("/app/%2e%2e%2fapi-key"), 404);
  await assertProblem(await t.app.request("/app/secret.txt"), 404);
  await assertProblem(await t.app.request("/app/", { method: "POST" }), 405);

  const tasks = (await import("../../deno.json", { with: { type: "json" } })).default.tasks;
  for (const task of [tasks.compile, tasks["compile:arm64"]]) {
    for (const name of Object.keys(WEBAPP_FILES)) {
      assert.ok(task.includes(`--include webapp/${name} `), `compile includes ${name}`);
    }
  }
  const worker = await Deno.readTextFile(`${ROOT}webapp/sw.js`);
  const shell = /const SHELL_FILES = \[([^\]]*)\]/.exec(worker)?.[1] ?? "";
  const cached = [...shell.matchAll(/"([^"]+)"/g)].map((m) => m[1]);
  assert.deepEqual(
    cached.sort(),
    Object.keys(WEBAPP_FILES).filter((name) => name !== "sw.js").sort(),
  );
});

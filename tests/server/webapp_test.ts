/**
 * Browser tests of the phone web app: Debian's Chromium driven by playwright-core
 * against a real relay process on 127.0.0.1 (a secure context, so the service worker runs).
 * Each test has its own relay, database and browser context (in one Chromium for the file).
 * Screenshots of each screen, at phone size, go to `docs/screenshots/` when
 * `RELAY_SCREENSHOTS=1`.
 *
 * This file: the Key, Submit and Queues screens, shared links, and the files the relay serves;
 * webapp_results_test.ts and webapp_pwa_test.ts hold the rest.
 *
 * @module
 */

import assert from "node:assert/strict";
import { WEBAPP_FILES } from "../../src/server/webapp.ts";
import { assertProblem, getStats, KEY, makeApp, ROOT } from "../_helpers.ts";
import { screenshot } from "../_chromium.ts";
import {
  browserTest,
  openApp,
  type PageDocument,
  post,
  queued,
  textOf,
  withApp,
} from "./_webapp.ts";

declare const document: PageDocument;

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

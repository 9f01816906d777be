/** Browser tests of the phone web app: the Results screen and publishing (see webapp_test.ts). */

import assert from "node:assert/strict";
import { startDownstream } from "../downstream.ts";
import { eventually } from "../_helpers.ts";
import { screenshot } from "../_chromium.ts";
import {
  browserTest,
  openApp,
  type PageDocument,
  type PageElement,
  post,
  textOf,
  withApp,
} from "./_webapp.ts";

declare const document: PageDocument;

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
      // The result's # is one level below the screen's <h1>: no heading level is skipped.
      assert.equal(await card.locator("h2").textContent(), "Sowing calendar");
      assert.equal(await card.locator("h3").count(), 0);
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

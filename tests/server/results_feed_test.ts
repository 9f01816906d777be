/**
 * `GET /results/feed.xml`: the results feed as Atom for feed readers, read with a read-scoped
 * key in the URL, each result's Markdown rendered with raw HTML shown as text.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { XMLParser } from "fast-xml-parser";
import { addKey, KeyRing } from "../../src/access/named_keys.ts";
import { failureResult, writeArticleResult } from "../../src/article_result.ts";
import { assertProblem, KEY, makeApp, withTempDir } from "../_helpers.ts";

const ARTICLE = `# Sowing calendar

Ana Gomez · Garden Weekly

Source: https://garden.example/sowing

| Vegetable | Indoors |
| --- | --- |
| Tomato | March |

<script>alert("x")</script> and [a bad link](javascript:alert(1)).
`;

Deno.test("GET /results/feed.xml", async (t) => {
  await withTempDir(async (dir) => {
    const path = join(dir, "keys.json");
    const reader = addKey(path, "feed-reader", ["read"], Date.now());
    const pusher = addKey(path, "pusher", ["push"], Date.now());
    await using relay = await makeApp({ keyRing: new KeyRing(path, Date.now, () => {}) });
    const push = async (content: string) =>
      assert.equal((await relay.call("/push", { method: "POST", body: content })).status, 200);

    await t.step("an empty feed is a valid Atom feed without entries", async () => {
      const res = await relay.app.request(`/results/feed.xml?key=${reader}`);
      assert.equal(res.status, 200);
      assert.equal(res.headers.get("content-type"), "application/atom+xml; charset=utf-8");
      const feed = new XMLParser().parse(await res.text()).feed;
      assert.equal(feed.title, "Relay results");
      // RFC 4287: a feed without an author in each entry names one of its own.
      assert.equal(feed.author?.name, "Content Relay");
      assert.equal(feed.entry, undefined);
    });

    await t.step("each result is an entry with its whole content, newest first", async () => {
      await push("Could not read https://garden.example/gone: HTTP 404");
      await push(ARTICLE);
      const res = await relay.app.request(`/results/feed.xml?key=${reader}`);
      assert.equal(res.status, 200);
      const text = await res.text();
      const parser = new XMLParser({ ignoreAttributes: false });
      const entries = parser.parse(text).feed.entry;
      assert.equal(entries.length, 2);
      assert.equal(entries[0].title["#text"], "Sowing calendar");
      assert.equal(entries[0].link["@_href"], "https://garden.example/sowing");
      const html = entries[0].content["#text"] as string;
      assert.match(html, /<table>/);
      assert.match(html, /<td>Tomato<\/td>/);
      assert.match(html, /&lt;script&gt;alert/, "raw HTML shown as text");
      assert.doesNotMatch(html, /<script|href="javascript:/);
      assert.equal(
        entries[1].title["#text"],
        "Could not read https://garden.example/gone: HTTP 404",
      );
      for (const entry of entries) {
        assert.ok(!JSON.stringify(entry).includes(reader), "the key is not in the entries");
      }
    });

    await t.step(
      "read with ?key=, the self link keeps access, never with the main key",
      async () => {
        const selfOf = async (res: Response) => {
          assert.equal(res.status, 200);
          const feed = new XMLParser({ ignoreAttributes: false }).parse(await res.text()).feed;
          const self = [feed.link].flat().find((link) => link["@_rel"] === "self");
          return new URL(self["@_href"]);
        };
        // A named key with the read scope: the reader's own key, already in its address.
        const named = await selfOf(await relay.app.request(`/results/feed.xml?key=${reader}`));
        assert.equal(named.searchParams.get("key"), reader);
        // The main key: the feed's own key instead, which opens this feed and nothing else.
        const main = await selfOf(await relay.app.request(`/results/feed.xml?key=${KEY}`));
        const feedKey = main.searchParams.get("key") ?? "";
        assert.match(feedKey, /^[\w-]{43}$/);
        assert.notEqual(feedKey, KEY);
        const followed = await relay.app.request(`${main.pathname}${main.search}`);
        assert.equal(followed.status, 200);
        assert.equal((await selfOf(followed)).searchParams.get("key"), feedKey);
        for (const path of ["/results", "/peek", "/stats", "/results/stream"]) {
          await assertProblem(await relay.app.request(`${path}?key=${feedKey}`), 401);
        }
        // A key sent in the header is sent again by the reader: the link holds none.
        const header = await selfOf(
          await relay.app.request("/results/feed.xml", { headers: { "x-auth-key": KEY } }),
        );
        assert.equal(header.search, "");
      },
    );

    await t.step("an entry takes its title and link from the article result's fields", async () => {
      await push(writeArticleResult({
        title: "Thinning seedlings",
        byline: "By Ana Gomez",
        siteName: "Garden Weekly",
        url: "https://garden.example/thinning?a=1&b=2",
        summary: "Thin early.",
        markdown: "# A heading of the body\n\nPull the weakest.",
      }));
      await push(failureResult("https://garden.example/gone", "HTTP 404"));
      const res = await relay.app.request(`/results/feed.xml?key=${reader}`);
      const entries = new XMLParser({ ignoreAttributes: false }).parse(await res.text()).feed.entry;
      assert.equal(entries[1].title["#text"], "Thinning seedlings");
      assert.equal(entries[1].link["@_href"], "https://garden.example/thinning?a=1&b=2");
      assert.equal(entries[0].link["@_href"], "https://garden.example/gone");
    });

    await t.step("a key without the read scope is refused, as is no key", async () => {
      await assertProblem(await relay.app.request(`/results/feed.xml?key=${pusher}`), 403);
      await assertProblem(await relay.app.request("/results/feed.xml"), 401);
    });
  });
});

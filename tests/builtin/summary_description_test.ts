/**
 * The reader's summary reaches publishing: a post whose Markdown is an article result with a
 * summary is described by it (its page's meta description, its feed entry), and an episode
 * read from such a result carries it as its description and `itunes:summary`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { writeArticleResult } from "../../src/article_result.ts";
import type { Post } from "../../src/builtin/blog.ts";
import { blogAtom, podcastRss } from "../../src/builtin/feeds.ts";
import { postPage } from "../../src/builtin/html.ts";
import type { Episode } from "../../src/builtin/podcast.ts";
import { MAIN_KEY, postJson, serveServices } from "./_services.ts";

const SUMMARY = "Tomatoes need sun & water. Stake them early.";
const RESULT = writeArticleResult({
  title: "Growing tomatoes",
  url: "https://example.com/tomatoes",
  summary: SUMMARY,
  markdown: "A long article about tomatoes, their roots and their leaves.",
});
const urls = { origin: "https://relay.example.org" };

Deno.test("a post of an article with a summary is described by the summary", () => {
  const post: Post = {
    post_id: "m5x2k1-abcd",
    title: "Growing tomatoes",
    content: "A long article about tomatoes",
    content_md: RESULT,
    tags: [],
    created_at: 0,
  };
  assert.match(
    postPage(post, "<p>body</p>", urls),
    /<meta name="description" content="Tomatoes need sun &(amp|#38); water\. Stake them early\.">/,
  );
  assert.match(
    blogAtom([{ post }], urls),
    /<summary type="html"><!\[CDATA\[Tomatoes need sun &#38; water\. Stake them early\.\]\]>/,
  );
  // Without a summary, the plain content still describes it.
  const plain = { ...post, content_md: "# Just text" };
  assert.match(postPage(plain, "<p>body</p>", urls), /content="A long article about tomatoes"/);
});

Deno.test("an episode of an article with a summary has it as description and itunes:summary", () => {
  const episode: Episode = {
    id: "m5x2k1-efgh",
    title: "Growing tomatoes",
    text: RESULT,
    created_at: 0,
    state: "ready",
    chunks_total: 1,
    chunks_done: 1,
    bytes: 1000,
    duration_s: 10,
  };
  const rss = podcastRss([episode], urls);
  assert.match(
    rss,
    /<itunes:summary>Tomatoes need sun &amp; water\. Stake them early\.<\/itunes:summary>/,
  );
  const plain = podcastRss([{ ...episode, text: "Just some text to read." }], urls);
  assert.doesNotMatch(plain, /itunes:summary/);
});

Deno.test("a post published from an article result keeps its summary as its description, end to end", async () => {
  await using relay = await serveServices();
  const publish = async (body: Record<string, unknown>) => {
    const res = await postJson(`${relay.url}/publish`, { targets: ["blog"], ...body }, {
      "x-auth-key": MAIN_KEY,
    });
    const answer = await res.json();
    assert.equal(res.status, 200, JSON.stringify(answer));
    return await (await fetch(answer.results.blog.url ?? answer.results.blog.redirect_url)).text();
  };
  // As the reader publishes: the article's plain text, and its result with the summary.
  const read = await publish({
    title: "Growing tomatoes",
    content: "A long article about tomatoes, their roots and their leaves.",
    content_md: RESULT,
  });
  assert.match(read, /<meta name="description" content="Tomatoes need sun &(amp|#38); water\./);
  // As `relay publish --markdown-file` sends a result without a summary: no header lines.
  const bare = writeArticleResult({
    title: "Growing tomatoes",
    url: "https://example.com/tomatoes",
    markdown: "Roots want water, leaves want sun.",
  });
  const sent = await publish({ title: "Growing tomatoes", content: bare, content_md: bare });
  assert.match(sent, /<meta name="description" content="Roots want water, leaves want sun\.">/);
  // As the reader retries a publish the relay found too large: the result alone as content.
  const alone = await publish({ title: "Growing tomatoes", content: RESULT });
  assert.match(alone, /<meta name="description" content="Tomatoes need sun &(amp|#38); water\./);
  assert.doesNotMatch(alone, /Source: /);
});

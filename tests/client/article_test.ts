/**
 * The article of a page as Markdown (src/client/article.ts), over linkedom as the extractor
 * daemon uses it: the article's headings, lists, links, code and tables are kept, the page's
 * navigation, header, footer and comments are left out, and the title is printed once.
 *
 * @module
 */

import assert from "node:assert/strict";
import { parseHTML } from "linkedom";
import { articleResult, extractArticle, type PageDocument } from "../../src/client/article.ts";

const PAGE = `<!doctype html><html><head><title>Tending tomatoes</title>
<meta property="og:site_name" content="Garden Weekly"></head><body>
<nav><a href="/">Home</a> <a href="/about">About us</a></nav>
<header>Garden Weekly masthead</header>
<article><h1>Tending tomatoes</h1><p class="byline">By Ana Gomez</p>
<p>Tomatoes want sun, water and patience. This paragraph is long enough to count as the article's
content for Readability, which needs a few hundred characters of text before it believes a block is
the article and not a sidebar or a teaser.</p>
<h2>Watering</h2><ul><li>Water at the root</li><li>Morning is best</li></ul>
<table><thead><tr><th>Variety</th><th>Days</th></tr></thead>
<tbody><tr><td>Roma</td><td>75</td></tr></tbody></table>
<p>See <a href="/guides/soil">our soil guide</a>. <img src="/img/t.jpg" alt="a tomato"></p>
<pre><code>water --daily</code></pre></article>
<footer>Copyright masthead footer</footer></body></html>`;

function article(html: string, url = "https://garden.example/tomatoes") {
  const { document } = parseHTML(html) as unknown as { document: PageDocument };
  return extractArticle(document, url);
}

Deno.test("article: the main article as Markdown, without the page around it", () => {
  const found = article(PAGE);
  assert.ok(found);
  const text = articleResult(found);
  assert.match(
    text,
    /^# Tending tomatoes\n\nBy Ana Gomez\n\nSource: Garden Weekly, <https:\/\/garden\.example\/tomatoes>\n\n/,
  );
  assert.match(text, /^## Watering$/m);
  assert.match(text, /^-\s+Water at the root$/m);
  assert.match(text, /^\| Variety \| Days \|$/m);
  assert.match(text, /^\| Roma \| 75 \|$/m);
  assert.match(text, /\[our soil guide\]\(https:\/\/garden\.example\/guides\/soil\)/);
  assert.match(text, /!\[a tomato\]\(https:\/\/garden\.example\/img\/t\.jpg\)/);
  assert.match(text, /```\nwater --daily\n```/);
  assert.equal(text.match(/Tending tomatoes/g)?.length, 1, "the title once");
  assert.doesNotMatch(text, /About us|masthead|Copyright/);
});

Deno.test("article: a page with no article gives null, not an empty result", () => {
  assert.equal(
    article("<html><head><title>Login</title></head><body><form></form></body></html>"),
    null,
  );
});

Deno.test("article: a <title> with the site's name around the heading gives the heading as title", () => {
  const found = article(
    PAGE.replace(
      "<title>Tending tomatoes</title>",
      "<title>Tending tomatoes | Garden Weekly</title>",
    ),
  );
  assert.equal(found?.title, "Tending tomatoes");
  assert.equal(articleResult(found!).match(/Tending tomatoes/g)?.length, 1, "the title once");
});

Deno.test("article: images are links to their address; an inlined data: image keeps only its text", () => {
  const inlined = `<img src="data:image/png;base64,${"A".repeat(10_000)}" alt="a [big] chart">`;
  const found = article(PAGE.replace("<pre>", `<p>${inlined}</p><pre>`));
  const text = articleResult(found!);
  assert.match(text, /!\[a tomato\]\(https:\/\/garden\.example\/img\/t\.jpg\)/);
  assert.match(text, /^a \\\[big\\\] chart$/m);
  assert.doesNotMatch(text, /base64|AAAA/);
});

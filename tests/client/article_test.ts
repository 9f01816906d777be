/**
 * The article of a page as Markdown (src/client/article.ts), over linkedom as the extractor
 * daemon uses it: the article's headings, lists, links, code and tables are kept, the page's
 * navigation, header, footer and comments are left out, and the title is printed once.
 *
 * @module
 */

import assert from "node:assert/strict";
import { parseHTML } from "linkedom";
import {
  articleResult,
  blockText,
  extractArticle,
  type PageDocument,
} from "../../src/client/article.ts";

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
  assert.match(text, /!\[\]\(https:\/\/garden\.example\/img\/t\.jpg\)/);
  assert.doesNotMatch(text, /a tomato/, "an image's alt text is not the article's text");
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

Deno.test("article: images are links to their address without alt text; an inlined data: image is left out", () => {
  const inlined = `<img src="data:image/png;base64,${"A".repeat(10_000)}" alt="a [big] chart">`;
  const found = article(PAGE.replace("<pre>", `<p>${inlined}</p><pre>`));
  const text = articleResult(found!);
  assert.match(text, /!\[\]\(https:\/\/garden\.example\/img\/t\.jpg\)/);
  assert.doesNotMatch(text, /big|chart/);
  assert.doesNotMatch(text, /base64|AAAA/);
});

/** A long paragraph, so that Readability takes the block around it for the article. */
const PROSE =
  `<p>Tomatoes want sun, water and patience. This paragraph is long enough to count as the
article's content for Readability, which needs a few hundred characters of text before it believes
a block is the article and not a sidebar or a teaser; so it goes on a little longer here, about
stakes, mulch and the first fruit of the summer.</p>`;

Deno.test("article: when the page's only <h1> is the site's name, the title comes from the page's metadata", () => {
  const page = (head: string) =>
    `<!doctype html><html><head>${head}</head><body>
<header><h1 class="site-title"><a href="/">Garden Weekly</a></h1></header>
<article><h2>Mulch in May</h2>${PROSE}${PROSE}</article></body></html>`;
  const og = article(page(
    `<title>Why mulch matters | Garden Weekly</title>
<meta property="og:title" content="Why mulch matters">`,
  ));
  assert.equal(og?.title, "Why mulch matters");
  const jsonLd = article(page(
    `<title>Garden Weekly</title><script type="application/ld+json">
{"@context":"https://schema.org","@type":"NewsArticle","headline":"Mulch, the quiet helper"}
</script>`,
  ));
  assert.equal(jsonLd?.title, "Mulch, the quiet helper");
  const titleOnly = article(page("<title>Why mulch matters - Garden Weekly</title>"));
  assert.equal(titleOnly?.title, "Why mulch matters");
});

Deno.test("article: a table without a header row is a GFM table with its first row as header", () => {
  const found = article(PAGE.replace(
    "<pre>",
    `<table><tr><td>Pos.</td><td>Variety</td></tr><tr><td>1</td><td>Roma<br>(plum)</td></tr>
<tr><td>2</td><td>Cherry</td></tr></table><pre>`,
  ));
  const text = found!.markdown;
  assert.match(text, /^\| Pos\. \| Variety \|$/m);
  assert.match(text, /^\| --- \| --- \|$/m);
  assert.match(text, /^\| 1 \| Roma \(plum\) \|$/m);
  assert.doesNotMatch(text, /<\/?t[drh]|<table/);
});

Deno.test("article: a table whose cells hold paragraphs and lists is written as its cells' blocks, never HTML", () => {
  const found = article(PAGE.replace(
    "<pre>",
    `<table><tr><td><p>Sow indoors in March, under glass.</p><ul><li>Warmth</li></ul></td>
<td><p>Plant out after the last frost.</p></td></tr></table><pre>`,
  ));
  const text = found!.markdown;
  assert.match(text, /^Sow indoors in March, under glass\.$/m);
  assert.match(text, /^-\s+Warmth$/m);
  assert.match(text, /^Plant out after the last frost\.$/m);
  assert.doesNotMatch(text, /<\/?t[drh]|<table|\|.*Sow/);
});

Deno.test("article: a cookie banner, a keyboard-shortcut help box and figure captions are not the article", () => {
  const banner = `<div id="cookie-notice">This website uses cookies to improve your experience.
We'll assume you're ok with this, but you can opt-out if you wish. Accept Read More</div>`;
  const shortcuts = `<div class="keyboard-shortcuts"><p>Press j for the next story, k for the
previous one, and ? for this help.</p></div>`;
  const figure =
    `<figure><img src="/img/bed.jpg"><figcaption>A raised bed. Photo: Agency</figcaption></figure>`;
  const found = article(
    PAGE.replace("<body>", `<body>${banner}${shortcuts}`).replace("<pre>", `${figure}<pre>`),
  );
  const text = found!.markdown;
  assert.match(text, /Tomatoes want sun/);
  assert.match(text, /!\[\]\(https:\/\/garden\.example\/img\/bed\.jpg\)/, "the picture stays");
  assert.doesNotMatch(text, /cookies|Press j|Photo: Agency/);
  // Alone on a page with a short article, the banner is not taken for it.
  const short = article(
    `<html><head><title>Note</title></head><body>${banner}<article>${PROSE}</article></body></html>`,
  );
  assert.doesNotMatch(short!.markdown, /cookies/);
});

Deno.test("article: its plain text keeps paragraphs and headings apart, without footnote marks", () => {
  const found = article(`<!doctype html><html><head><title>Gun laws</title></head><body>
<article><h1>Gun laws</h1>
<p>The speech persuaded precisely zero. This paragraph is long enough to count as the article's
content for Readability, which needs a few hundred characters of text before it believes a block
is the article and not a sidebar or a teaser.</p><h2>Five things we learned</h2><p>It was first
sold as Navigator.<sup><a href="#cite-4">[4]</a></sup> The project was then
named Mozilla.</p><h2>History<span>[edit]</span></h2><ul><li>One item</li><li>Two items</li></ul>
<table><thead><tr><th>Variety</th><th>Days</th></tr></thead>
<tbody><tr><td>Roma</td><td>75</td></tr></tbody></table></article></body></html>`);
  assert.ok(found);
  assert.equal(
    found.text,
    "The speech persuaded precisely zero. This paragraph is long enough to count as the " +
      "article's content for Readability, which needs a few hundred characters of text before " +
      "it believes a block is the article and not a sidebar or a teaser.\n\n" +
      "Five things we learned\n\n" +
      "It was first sold as Navigator. The project was then named Mozilla.\n\n" +
      "History\n\nOne item\n\nTwo items\n\nVariety Days\n\nRoma 75",
  );
});

Deno.test("article: a line break is a space, two part paragraphs; [edit] only ends a heading", () => {
  const found = article(`<!doctype html><html><head><title>Minutes</title></head><body>
<article><h1>Minutes</h1><p>The committee met on Tuesday<br>and agreed on the budget for the
coming year, after a long discussion that is written here at length so that Readability takes
this block for the article and not for a teaser or a sidebar of links.</p>
<p>First paragraph of a page that writes paragraphs with line breaks.<br><br>Second one.</p>
<p>Use <code>[edit]</code> to change it.</p><center>Centered text</center>next</article>
</body></html>`);
  assert.ok(found);
  const paragraphs = found.text!.split("\n\n");
  assert.match(paragraphs[0]!, /^The committee met on Tuesday and agreed on the budget/);
  assert.equal(paragraphs[1], "First paragraph of a page that writes paragraphs with line breaks.");
  assert.equal(paragraphs[2], "Second one.");
  assert.equal(paragraphs[3], "Use [edit] to change it.");
  // Older block elements part text too (Readability keeps them on some pages).
  const { document } = parseHTML(
    "<div><center>Centered text</center>next<form>In a form</form></div>",
  ) as unknown as { document: { querySelector(s: string): unknown } };
  assert.equal(
    blockText(document.querySelector("div") as Parameters<typeof blockText>[0]),
    "Centered text\n\nnext\n\nIn a form",
  );
});

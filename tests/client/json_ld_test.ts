/**
 * The page's JSON-LD article: read from the page's text (scripts included), used when
 * Readability's text is cut short, and its authors as the byline when the markup names none.
 *
 * @module
 */

import assert from "node:assert/strict";
import { linkedArticle, withLinkedArticle } from "../../src/client/json_ld.ts";
import { readLink } from "../../src/client/extract.ts";
import { servePages, TEASER_BODY } from "./_pages.ts";

const ld = (data: unknown, type = "application/ld+json") =>
  `<script type="${type}">${JSON.stringify(data)}</script>`;

Deno.test("linkedArticle() finds the longest articleBody of an article node, anywhere in the JSON-LD", () => {
  const html = "<html><head>" +
    ld({ "@type": "WebPage", mainEntity: { "@type": "BlogPosting", articleBody: "short one" } }) +
    "<script type=application/ld+json>{not json</script>" +
    ld({
      "@graph": [{
        "@type": ["ReportageNewsArticle"],
        articleBody: "the longer body of all",
        author: [{ name: " Ana Gomez " }, "https://example.org/ana", { name: "Li Wei" }],
      }],
    }) +
    // Not an article, and not JSON-LD: neither counts.
    ld({ "@type": "Recipe", articleBody: "a recipe's text, longer than any body here" }) +
    ld({ "@type": "Article", articleBody: "a script's text, longer than any body here" }, "x") +
    "</head><body><p>x</p></body></html>";
  assert.deepEqual(linkedArticle(html), {
    body: "the longer body of all",
    author: "Ana Gomez, Li Wei",
  });
  assert.deepEqual(linkedArticle("<p>no scripts</p>"), {});
  // An unclosed block ends the page; many bare tags are passed over in one pass.
  assert.deepEqual(linkedArticle('<script type="application/ld+json">{"a":'), {});
  assert.deepEqual(linkedArticle("<script".repeat(100_000)), {});
});

Deno.test("withLinkedArticle() takes the JSON-LD body only when Readability's text is cut short", () => {
  const article = {
    title: "T",
    url: "https://example.org/",
    markdown: "One two three.",
    text: "One two three.",
  };
  const body = "First paragraph of the article, longer.\n\n# Not a heading\n*Not emphasis* either.";
  const taken = withLinkedArticle(article, { body, author: "Ana Gomez" });
  assert.equal(taken.text, body.replace(/\s+/g, " "));
  assert.equal(
    taken.markdown,
    "First paragraph of the article, longer.\n\n\\# Not a heading\n\n\\*Not emphasis\\* either.",
  );
  assert.equal(taken.byline, "Ana Gomez");
  assert.equal(article.markdown, "One two three.", "the article given is not changed");
  // Readability's text with most of the body's words is kept; a byline in the markup too.
  const kept = withLinkedArticle({ ...article, byline: "Li Wei" }, { body: "One two three four." });
  assert.equal(kept.markdown, "One two three.");
  assert.equal(kept.byline, "Li Wei");
  // A body holding HTML is not used.
  const html = withLinkedArticle(article, { body: "<p>" + "word ".repeat(50) + "</p>" });
  assert.equal(html.markdown, "One two three.");
});

Deno.test("readLink() gives the whole article of a page whose markup shows a teaser and whose JSON-LD holds it all", async () => {
  await using pages = servePages();
  const { result, article } = await readLink(`${pages.url}/teaser`, {
    timeoutMs: 10_000,
    maxBytes: 1 << 20,
    acceptLanguage: "en",
    policy: { allow: [{ host: "127.0.0.1", port: undefined }], relay: [] },
  });
  assert.equal(article.title, "Growing potatoes");
  assert.equal(article.byline, "Ana Gomez");
  assert.match(result, /^Ana Gomez$/m);
  for (const paragraph of TEASER_BODY.split("\n")) {
    assert.ok(result.includes(paragraph.replace(/\*/g, "\\*")), paragraph);
  }
  assert.doesNotMatch(result, /Subscribe/);
});

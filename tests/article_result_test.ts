/**
 * The reader's result text: what writeArticleResult() writes, readArticleResult() reads back,
 * field for field, including results written before the summary section existed.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  type ArticleResult,
  failureResult,
  readArticleResult,
  readFailureResult,
  writeArticleResult,
} from "../src/article_result.ts";

const FULL: ArticleResult = {
  title: "Tending tomatoes",
  byline: "By Jane Doe",
  siteName: "Garden Weekly",
  url: "https://garden.example/tomatoes",
  summary: "Tomatoes want sun. Water them at the root.",
  summaryNote: "offline summary: the model did not answer",
  markdown: "Tomatoes want sun, water and patience.\n\n## Picking\n\nPick them when red.",
};

Deno.test("writeArticleResult() writes the title, byline, source, summary and body in order", () => {
  const text = writeArticleResult(FULL);
  assert.equal(
    text,
    "# Tending tomatoes\n\nBy Jane Doe\n\nSource: Garden Weekly, <https://garden.example/tomatoes>\n\n" +
      "## Summary\n\nTomatoes want sun. Water them at the root.\n\n" +
      "_offline summary: the model did not answer_\n\n---\n\n" +
      "Tomatoes want sun, water and patience.\n\n## Picking\n\nPick them when red.\n",
  );
});

Deno.test("readArticleResult() reads back every field writeArticleResult() wrote", async (t) => {
  await t.step("with every field", () => {
    assert.deepEqual(readArticleResult(writeArticleResult(FULL)), FULL);
  });
  await t.step("with the title, source and body only", () => {
    const bare: ArticleResult = { title: "T", url: "http://a.example/x", markdown: "Body." };
    assert.deepEqual(readArticleResult(writeArticleResult(bare)), bare);
  });
  await t.step("with a summary and no note", () => {
    const { summaryNote: _, ...rest } = FULL;
    assert.deepEqual(readArticleResult(writeArticleResult(rest)), rest);
  });
  await t.step("a body that opens with its own '## Summary' heading stays the body", () => {
    const own: ArticleResult = {
      title: "T",
      url: "https://a.example/",
      markdown: "## Summary\n\nThe article's own summary section.",
    };
    assert.deepEqual(readArticleResult(writeArticleResult(own)), own);
  });
});

Deno.test("readArticleResult() reads a result written before the summary existed", () => {
  const old = "# Old title\n\nJane Doe · Garden Weekly\n\nSource: https://garden.example/old\n\n" +
    "Body text.\n";
  assert.deepEqual(readArticleResult(old), {
    title: "Old title",
    byline: "Jane Doe",
    siteName: "Garden Weekly",
    url: "https://garden.example/old",
    markdown: "Body text.",
  });
});

Deno.test("readArticleResult() refuses texts that are not article results", () => {
  for (
    const text of [
      "Remember to water the plants",
      "# A heading\n\nJust a note, no source.",
      "Could not read https://a.example/: HTTP 404",
      "# T\n\nSource: javascript:alert(1)\n\nBody",
      "",
    ]
  ) {
    assert.equal(readArticleResult(text), undefined, text);
  }
});

Deno.test("failureResult() and readFailureResult() agree, on one line", () => {
  const text = failureResult("https://a.example/x", "HTTP 404\nNot Found");
  assert.equal(text, "Could not read https://a.example/x: HTTP 404 Not Found");
  assert.deepEqual(readFailureResult(text), {
    url: "https://a.example/x",
    reason: "HTTP 404 Not Found",
  });
  assert.equal(readFailureResult("# Tending tomatoes"), undefined);
});

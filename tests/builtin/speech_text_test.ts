/**
 * The text read aloud, property-based with fast-check: for Markdown built from prose and
 * markup, every word of the prose is read, in order, and nothing of what is not prose (link
 * targets, reference definitions, fenced code, HTML tags, web addresses, images); for adversarial
 * inputs (runs of `[`, nested emphasis, lines without a space) every chunk stays within the
 * limit and no word is lost. How long these take is measured by `bench/tts.ts`, not here.
 *
 * @module
 */

import assert from "node:assert/strict";
import fc from "fast-check";
import { speechChunks, speechText, splitForSpeech } from "../../src/builtin/speech_text.ts";
import { writeArticleResult } from "../../src/article_result.ts";

/** A word of prose: read aloud. */
const word = fc.stringMatching(/^[a-z]{2,9}$/).map((w) => `w${w}`);
/** A word that must never be read: it stands in link targets, code, tags. */
const hidden = fc.stringMatching(/^[a-z]{2,9}$/).map((w) => `HIDDEN${w}`);

/** One piece of a paragraph: its prose words, and the Markdown that holds them. */
interface Piece {
  words: string[];
  markdown: string;
}

const piece: fc.Arbitrary<Piece> = fc.oneof(
  word.map((w) => ({ words: [w], markdown: w })),
  fc.tuple(word, fc.constantFrom("*", "**", "_", "__", "***", "~~")).map(([w, mark]) => ({
    words: [w],
    markdown: `${mark}${w}${mark}`,
  })),
  fc.tuple(word, word).map(([a, b]) => ({ words: [a, b], markdown: `*${a} **${b}***` })),
  fc.tuple(word, hidden).map(([w, h]) => ({
    words: [w],
    markdown: `[${w}](https://${h}.example/${h})`,
  })),
  // An image is left out, its description too.
  hidden.map((h) => ({ words: [], markdown: `![${h}](/${h}.png "${h}")` })),
  fc.tuple(word, hidden).map(([w, h]) => ({
    words: [w],
    markdown: `<span class="${h}">${w}</span>`,
  })),
  fc.tuple(word).map(([w]) => ({ words: [w], markdown: `\`${w}\`` })),
  hidden.map((h) => ({ words: [], markdown: `https://${h}.example/a?b=${h}` })),
  hidden.map((h) => ({ words: [], markdown: `<https://${h}.example>` })),
);

/** A block: a paragraph, heading, list item or quote of pieces, or hidden code. */
const block: fc.Arbitrary<Piece> = fc.oneof(
  fc.tuple(
    fc.constantFrom("", "# ", "### ", "- ", "1. ", "> "),
    fc.array(piece, { minLength: 1, maxLength: 12 }),
  )
    .map(([prefix, pieces]) => ({
      words: pieces.flatMap((p) => p.words),
      markdown: prefix + pieces.map((p) => p.markdown).join(" ") + ".",
    })),
  fc.tuple(fc.constantFrom("```", "~~~"), hidden).map(([fence, h]) => ({
    words: [],
    markdown: `${fence}js\nconst ${h} = "${h}";\n${fence}`,
  })),
  fc.tuple(word, hidden).map(([w, h]) => ({
    words: [w],
    markdown: `[${w}][${h}]\n\n[${h}]: https://${h}.example/`,
  })),
);

const document = fc.array(block, { minLength: 1, maxLength: 15 }).map((blocks) => ({
  words: blocks.flatMap((b) => b.words),
  markdown: blocks.map((b) => b.markdown).join("\n\n"),
}));

Deno.test("splitForSpeech reads every word of the prose in order, and nothing of the markup", () => {
  fc.assert(
    fc.property(document, fc.integer({ min: 40, max: 600 }), ({ words, markdown }, maxChars) => {
      const chunks = splitForSpeech(markdown, maxChars);
      for (const chunk of chunks) assert.ok(chunk.length <= maxChars, chunk);
      const read = chunks.join(" ");
      assert.ok(!read.includes("HIDDEN"), read);
      assert.ok(!/[*_`~<>\[\]]/.test(read), read);
      assert.deepEqual(read.match(/w[a-z]+/g) ?? [], words);
    }),
    { numRuns: 300 },
  );
});

/** Adversarial inputs: what made the regular expressions take time in the square of the length. */
const adversarial = fc.oneof(
  fc.integer({ min: 1, max: 5000 }).map((n) => "[".repeat(n)),
  fc.integer({ min: 1, max: 2500 }).map((n) => "![".repeat(n)),
  fc.integer({ min: 1, max: 2500 }).map((n) => "[a](".repeat(n)),
  fc.integer({ min: 1, max: 1200 }).map((n) => "*_".repeat(n) + "word" + "_*".repeat(n)),
  fc.integer({ min: 1, max: 1200 }).map((n) => "<".repeat(n) + "a".repeat(n)),
  fc.integer({ min: 1, max: 1200 }).map((n) => "`".repeat(n) + " x " + "`".repeat(n + 1)),
  fc.array(fc.constantFrom("[", "]", "(", ")", "*", "_", "!", "`", "<", ">", " ", "a", "\n"), {
    maxLength: 3000,
  }).map((cs) => cs.join("")),
);

Deno.test("splitForSpeech keeps every chunk within the limit on adversarial input", () => {
  fc.assert(
    fc.property(adversarial, fc.integer({ min: 20, max: 600 }), (text, maxChars) => {
      for (const chunk of splitForSpeech(text, maxChars)) {
        assert.ok(chunk.length > 0 && chunk.length <= maxChars, chunk);
      }
    }),
    { numRuns: 200 },
  );
});

Deno.test("splitForSpeech loses no character of a line without spaces or sentence ends", () => {
  fc.assert(
    fc.property(
      fc.stringMatching(/^[a-z0-9]{1,4000}$/),
      fc.constantFrom("字", "a", ""),
      fc.integer({ min: 20, max: 600 }),
      (line, han, maxChars) => {
        const text = han.repeat(line.length % 700) + line;
        const chunks = splitForSpeech(text, maxChars);
        for (const chunk of chunks) assert.ok(chunk.length <= maxChars);
        assert.equal(chunks.join(""), speechText(text).trim());
      },
    ),
    { numRuns: 100 },
  );
});

Deno.test("speechText reads a page as a person would: tables by row with headers, no code, links' words only, no images, no footnote markers", () => {
  const page = [
    "# Growing tomatoes",
    "Tomatoes want sun[^1]. See [the guide](https://guide.example/t) or https://bare.example/x.",
    "![A photo of a tomato plant](plant.jpg)",
    "| Variety | Days to harvest |\n|---|---|\n| Roma | 75 |\n| Cherry | 60 |",
    "```js\nconst water = 'daily';\n```",
    "    indented code too",
    "Water at the root<sup>2</sup>.",
    "[^1]: A footnote that is not read.",
  ].join("\n\n");
  assert.equal(
    speechText(page),
    [
      "Growing tomatoes.",
      "Tomatoes want sun. See the guide or.",
      "Variety: Roma; days to harvest: 75.",
      "Variety: Cherry; days to harvest: 60.",
      "Code omitted.",
      "Water at the root.",
    ].join("\n"),
  );
});

Deno.test("an article result is read as its title, a pause, its source once, then its body; never its address or summary", () => {
  const result = writeArticleResult({
    title: "Tending tomatoes",
    byline: "By Jane Doe",
    siteName: "Garden Weekly",
    url: "https://garden.example/tomatoes",
    summary: "A summary that is the episode's description, not read.",
    markdown: "Tomatoes want sun.\n\n## Picking\n\nPick them red.",
  });
  const chunks = speechChunks(result);
  assert.deepEqual(chunks, [
    {
      text: "Tending tomatoes. From Garden Weekly, by Jane Doe. Tomatoes want sun.",
      lang: "en",
      chapter: "Tending tomatoes",
    },
    { text: "Picking. Pick them red.", lang: "en", chapter: "Picking" },
  ]);
  // Without a site or an author, only what is known; never the address.
  const bare = speechText(
    writeArticleResult({ title: "Untitled", url: "https://x.example/a", markdown: "Body." }),
  );
  assert.equal(bare, "Untitled.\nBody.");
  // Plain Markdown that only starts like one is read as it is.
  assert.equal(speechText("# Notes\n\nSource: my memory."), "Notes.\nSource: my memory.");
});

Deno.test("a Chinese title ends in 。 and never runs into the first sentence; a mixed article is cut by language", () => {
  const result = writeArticleResult({
    title: "番茄种植指南",
    siteName: "园艺周刊",
    url: "https://garden.example/zh",
    markdown:
      "番茄需要阳光、水和耐心。\n\n## 日本の品種\n\nトマトは日当たりの良い場所で育てます。\n\n" +
      "Some varieties come from Italy.\n\n```\ncode\n```",
  });
  assert.deepEqual(speechChunks(result), [
    {
      text: "番茄种植指南。来自园艺周刊。番茄需要阳光、水和耐心。",
      lang: "zh",
      chapter: "番茄种植指南",
    },
    {
      text: "日本の品種。トマトは日当たりの良い場所で育てます。",
      lang: "ja",
      chapter: "日本の品種",
    },
    { text: "Some varieties come from Italy.", lang: "en" },
    { text: "代码从略。", lang: "zh" },
  ]);
});

Deno.test("an article of thousands of headings lists 200 chapters at most, each title 120 characters at most", () => {
  const text = Array.from({ length: 1000 }, (_, i) => `## Part ${i} ${"x".repeat(200)}`).join(
    "\n\n",
  );
  const chapters = speechChunks(text).filter((chunk) => chunk.chapter !== undefined);
  assert.equal(chapters.length, 200);
  for (const chunk of chapters) assert.ok(chunk.chapter!.length <= 120);
  assert.ok(speechText(text).includes("Part 999"), "later headings are still read");
});

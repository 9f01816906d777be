/**
 * The text read aloud, property-based with fast-check: for Markdown built from prose and
 * markup, every word of the prose is read, in order, and nothing of what is not prose (link
 * targets, reference definitions, fenced code, HTML tags, web addresses); for adversarial
 * inputs (runs of `[`, nested emphasis, lines without a space) every chunk stays within the
 * limit and no word is lost. How long these take is measured by `bench/tts.ts`, not here.
 *
 * @module
 */

import assert from "node:assert/strict";
import fc from "fast-check";
import { speechText, splitForSpeech } from "../../src/builtin/speech_text.ts";

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
  fc.tuple(word, hidden).map(([w, h]) => ({ words: [w], markdown: `![${w}](/${h}.png "${w}")` })),
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

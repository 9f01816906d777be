/**
 * Snippets of search hits (src/search/text.ts): matches are marked as the index matches them.
 */

import assert from "node:assert/strict";
import { snippet } from "../../src/search/text.ts";

Deno.test("a short term is marked as a whole word only; longer terms and Chinese anywhere", () => {
  const text = "Industry used the US frustration; the us of it. Water watering.";
  assert.equal(
    snippet(text, ["us"]),
    "Industry used the «US» frustration; the «us» of it. Water watering.",
  );
  assert.equal(snippet("a cat, a category", ["a"]), "«a» cat, «a» category");
  assert.equal(
    snippet(text, ["water"]),
    "Industry used the US frustration; the us of it. «Water» «water»ing.",
  );
  assert.equal(snippet("宇航员在太空中工作。", ["空中"]), "宇航员在太«空中»工作。");
  // A combining mark (the nukta of ड़) is part of the word before the term.
  assert.equal(snippet("वह लड़का का घर", ["का"]), "वह लड़का «का» घर");
});

import assert from "node:assert/strict";
import { utf8Length } from "../../src/server/responses.ts";

Deno.test("utf8Length() counts bytes as TextEncoder writes them, unpaired surrogates included", () => {
  const samples = [
    "",
    "OK (general)",
    "héllo",
    "中文字幕",
    "emoji 😀 and ✓",
    "lone \ud800 high",
    "lone \udc00 low",
    "end \ud83d",
    "\ud83d\ud83d\ude00",
    "ß".repeat(700),
  ];
  for (const text of samples) {
    assert.equal(utf8Length(text), new TextEncoder().encode(text).byteLength, JSON.stringify(text));
  }
});

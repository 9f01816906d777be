/**
 * Decoding fetched pages (src/client/charset.ts): an XML declaration names the encoding of a page
 * that has no `<meta>` and no charset in its header.
 *
 * @module
 */

import assert from "node:assert/strict";
import { decodeHtml } from "../../src/client/charset.ts";

/** `text` in windows-1251 (Cyrillic letters of U+0410..U+044F are bytes 0xC0..0xFF). */
function cp1251(text: string): Uint8Array {
  return Uint8Array.from(
    [...text],
    (c) =>
      c.charCodeAt(0) >= 0x410 && c.charCodeAt(0) <= 0x44f
        ? c.charCodeAt(0) - 0x350
        : c.charCodeAt(0),
  );
}

Deno.test("decodeHtml honours <?xml encoding=…?> on a mostly-English page with a Russian paragraph", () => {
  const russian = "Привет, мир: это абзац по-русски.";
  const page = `<?xml version="1.0" encoding="windows-1251"?>
<html xmlns="http://www.w3.org/1999/xhtml"><head><title>Notes</title></head><body>
<p>${"Most of this page is written in English, about gardens and the weather. ".repeat(20)}</p>
<p>${russian}</p></body></html>`;
  const { text, charset } = decodeHtml(cp1251(page), null);
  assert.equal(charset, "windows-1251");
  assert.ok(text.includes(russian));
  // The header still wins over the declaration, as it does over a <meta>.
  assert.equal(decodeHtml(cp1251(page), "text/html; charset=utf-8").charset, "utf-8");
});

/**
 * Decoding a fetched HTML page to text, in the order the WHATWG HTML standard gives for
 * finding a page's encoding ("determining the character encoding"): a byte order mark, then
 * the `charset` of the `Content-Type` header, then a `<meta>` in the first 1024 bytes, then a
 * guess. Before the guess it also honours an XML declaration (`<?xml version="1.0"
 * encoding="windows-1251"?>`), which XHTML pages and feeds carry in place of a `<meta>`: HTML's
 * rules ignore it, but a mostly-English page guessed by statistics comes out as mojibake where
 * its declaration was right. The guess takes UTF-8 when the bytes are valid UTF-8, else asks `chardet`, which tells
 * GB18030, Big5, Shift_JIS, EUC-KR and the single-byte encodings apart by their statistics.
 * Deno's `TextDecoder` knows every WHATWG label (`gb2312` and `gbk` name the GBK decoder), so
 * pages in Chinese, Japanese and Korean encodings come out as correct text.
 *
 * @module
 */

import chardet from "chardet";

/** How far the `<meta>` prescan looks, bytes (WHATWG HTML: the first 1024 bytes). */
const PRESCAN_BYTES = 1024;

/** How much of a page `chardet` reads, bytes: enough text for its statistics, quickly. */
const DETECT_BYTES = 64 * 1024;

/** The encoding a page without any sign of one is read in (WHATWG's usual fallback). */
const FALLBACK = "windows-1252";

/**
 * Decodes an HTML page's bytes.
 *
 * @param bytes The body as received.
 * @param contentType The response's `Content-Type` header, or `null`.
 * @returns The text (bytes that do not decode become U+FFFD) and the encoding used, as
 *   `TextDecoder` names it (`utf-8`, `gbk`, `big5`, `shift_jis`, …).
 */
export function decodeHtml(
  bytes: Uint8Array,
  contentType: string | null,
): { text: string; charset: string } {
  const found = fromBom(bytes) ?? known(headerCharset(contentType)) ??
    known(metaCharset(bytes)) ?? known(xmlEncoding(bytes)) ?? guess(bytes);
  const decoder = new TextDecoder(found);
  return { text: decoder.decode(bytes), charset: decoder.encoding };
}

function fromBom(bytes: Uint8Array): string | undefined {
  if (bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) return "utf-8";
  if (bytes[0] === 0xfe && bytes[1] === 0xff) return "utf-16be";
  if (bytes[0] === 0xff && bytes[1] === 0xfe) return "utf-16le";
  return undefined;
}

/** A label `TextDecoder` knows, as given; `undefined` for none or an unknown one. */
function known(label: string | undefined): string | undefined {
  if (!label) return undefined;
  try {
    const encoding = new TextDecoder(label).encoding;
    // A page cannot really be UTF-16 if its <meta> was readable as ASCII (WHATWG says UTF-8).
    return encoding.startsWith("utf-16") ? "utf-8" : encoding;
  } catch {
    return undefined;
  }
}

function headerCharset(contentType: string | null): string | undefined {
  return /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(contentType ?? "")?.[1];
}

/**
 * The charset a `<meta charset>` or `<meta http-equiv="Content-Type" content="…; charset=…">`
 * in the first 1024 bytes names. The bytes are read as Latin-1: the tags are ASCII in every
 * encoding a page can declare this way.
 */
function metaCharset(bytes: Uint8Array): string | undefined {
  const head = new TextDecoder("latin1").decode(bytes.subarray(0, PRESCAN_BYTES));
  for (const tag of head.matchAll(/<meta\s[^>]*>/gi)) {
    const label = /charset\s*=\s*["']?\s*([\w.:-]+)/i.exec(tag[0])?.[1];
    if (label) return label;
  }
  return undefined;
}

/** The `encoding` of an XML declaration at the very start of the bytes, if any. */
function xmlEncoding(bytes: Uint8Array): string | undefined {
  const head = new TextDecoder("latin1").decode(bytes.subarray(0, 200));
  return /^\s*<\?xml\s[^>]*?encoding\s*=\s*["']([\w.:-]+)["']/i.exec(head)?.[1];
}

/** Valid UTF-8 is UTF-8; anything else is `chardet`'s best guess, else windows-1252. */
function guess(bytes: Uint8Array): string {
  const sample = bytes.subarray(0, DETECT_BYTES);
  try {
    // `stream: true`: a character cut at the sample's end is not an error.
    new TextDecoder("utf-8", { fatal: true }).decode(sample, { stream: true });
    return "utf-8";
  } catch {
    // not UTF-8: detect below
  }
  return known(chardet.detect(sample) ?? undefined) ?? FALLBACK;
}

/**
 * Text made safe for the markup the relay writes: its pages (HTML) and its feeds (XML). One
 * place, so that every page and feed escapes the same characters the same way.
 *
 * @module
 */

/**
 * Escapes text for HTML (and XML) element content and for attribute values in double or
 * single quotes: `&`, `<`, `>`, `"` and `'` become numeric character references, which HTML
 * and XML both read, so the same text serves a page, an Atom title of type `html` and RSS.
 *
 * @example
 * ```ts
 * escapeHtml(`<a href="x">`); // "&#60;a href=&#34;x&#34;&#62;"
 * ```
 */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/**
 * Drops the characters XML 1.0 forbids anywhere, even escaped or in CDATA (its `Char`
 * production): control characters other than tab and line breaks, U+FFFE, U+FFFF and lone
 * surrogates. A feed holding one is refused whole by a strict reader. It escapes nothing:
 * the feed library or {@linkcode escapeHtml} does that.
 */
export function xmlChars(text: string): string {
  return text
    // deno-lint-ignore no-control-regex
    .replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\ufffe\uffff]/g, "")
    .replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, "");
}

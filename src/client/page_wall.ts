/**
 * Pages the daemon's reader cannot read but a browser can: a JavaScript shell (an empty app root
 * that scripts fill), a sign-in form, a consent wall. The reader runs no script and holds no
 * cookie, so such a page gives no article or a near-empty one; the user's browser extension reads
 * the page as the user sees it. Also the reader's measure of a near-empty article, which is never
 * pushed as an article (so never published to the blog or the podcast).
 *
 * @module
 */

/**
 * Fewer words than this in an article make it near-empty: not an article. Measured: the
 * shortest article of 181 real news pages with a human's article text has 66 words (the median
 * 545); a JavaScript shell's "enable JavaScript" line or a cookie banner has 9 to 30. Only
 * Readability's synthetic feature tests (1 to 36 words) have less among its 130 test pages.
 */
export const NEAR_EMPTY_WORDS = 50;

/** Why a page that needs a browser was not read, as the result says it. */
export const NEEDS_BROWSER =
  "the page needs a browser (JavaScript or sign-in); send it with the browser extension";

/**
 * Words of `text`: runs of letters and digits; in Chinese and Japanese, which put no spaces
 * between words, each character counts as one.
 */
export function wordCount(text: string): number {
  const spaced = text.replace(/[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}]/gu, " $& ");
  return spaced.match(/[\p{L}\p{N}_]+/gu)?.length ?? 0;
}

/** How much of a page the signs are looked for in, characters: a shell is small. */
const LOOKED_AT = 512 * 1024;

/** Signs that a page is built by its scripts, or asks to sign in or to consent first. */
const SIGNS = [
  // An app's root element with nothing in it: React, Vue, Next, Nuxt, Angular shells.
  /<(?:div|main)\s[^<>]{0,200}?\bid=["']?(?:root|app|__next|__nuxt|main-app)\b[^<>]{0,200}>\s*<\/(?:div|main)>/i,
  /<app-root\b/i,
  // "You need to enable JavaScript", "Please turn on JavaScript", in a <noscript> or not.
  /\b(?:enable|turn on|activate|requires?|needs?)\s+(?:your\s+)?javascript\b/i,
  /\bjavascript\s+(?:is\s+)?(?:required|disabled|must be enabled)\b/i,
  // A password field: a sign-in form.
  /<input\s[^<>]{0,300}?\btype=["']?password\b/i,
  // A consent or cookie wall that stands in front of the page.
  /\b(?:before you continue|consent to (?:the use of )?cookies|accept (?:all )?cookies to continue)\b/i,
];

/**
 * Whether a page's HTML (as fetched, scripts and all) shows that it needs a browser: an empty
 * JavaScript app root, a request to enable JavaScript, a password field, or a consent wall.
 * Asked only of pages that gave no article or a near-empty one.
 */
export function needsBrowser(html: string): boolean {
  // Bounded repeats in the signs and a bounded page keep the search linear on any input.
  const head = html.slice(0, LOOKED_AT);
  return SIGNS.some((sign) => sign.test(head));
}

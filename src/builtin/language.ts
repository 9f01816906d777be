/**
 * The language a text is written in, as the `lang` attribute of a page wants it (a BCP 47
 * tag, `en`, `zh`, `de`), detected from the text itself with the npm package `franc-min`
 * (trigram profiles of the 82 languages with the most speakers). The relay is told no
 * language when something is published, and a page that says `und` leaves a screen reader
 * to guess its voice and a browser its hyphenation, fonts and translation offer.
 *
 * @module
 */

import { franc } from "franc-min";
import { iso6393To1 } from "iso-639-3";

/**
 * Languages `franc-min` names by an individual code whose macrolanguage has the tag pages
 * use: Mandarin (`cmn`) is written `zh`, as browsers and screen readers expect it.
 */
const MACROLANGUAGE: Readonly<Record<string, string>> = {
  cmn: "zh",
  arb: "ar",
  pes: "fa",
  zlm: "ms",
  uzn: "uz",
  azj: "az",
  ekk: "et",
  lvs: "lv",
  swh: "sw",
  npi: "ne",
  khk: "mn",
  ydd: "yi",
  plt: "mg",
  gaz: "om",
  quy: "qu",
};

/** Characters of a text looked at: enough for a sure guess, cheap on a page of many posts. */
const SAMPLE_CHARS = 600;

/**
 * The language of `text` as a BCP 47 tag: the two-letter ISO 639-1 code where the language
 * has one (`en`, `de`, `zh` for Mandarin), else its three-letter ISO 639-3 code (valid in
 * BCP 47 too); `und` when the text is too short to tell (under 10 letters) or matches no
 * profile. Only the first {@linkcode SAMPLE_CHARS} characters are looked at.
 *
 * @param text Plain text (or Markdown: its marks do not sway the guess).
 * @returns The tag, e.g. `zh` for a post in Chinese.
 */
export function languageOf(text: string): string {
  const code = franc(text.slice(0, SAMPLE_CHARS));
  if (code === "und") return "und";
  return MACROLANGUAGE[code] ?? iso6393To1[code] ?? code;
}

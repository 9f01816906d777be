/**
 * Regular expressions that the API document shows as JSON Schema `pattern`s, written so that
 * every regex dialect reads them alike. A JSON Schema tool in another language (Schemathesis
 * and hypothesis-jsonschema in Python, for one) reads `\d` and `\s` as Unicode classes, so a
 * `\d` pattern let it send `qa:1෬` (a Sinhala digit) as an item id that the relay, reading
 * `\d` as ASCII digits, refused. These spell their characters out instead.
 *
 * @module
 */

/**
 * A character that is not white space as JavaScript's `\s` and `String.prototype.trim`
 * count it (ECMA-262's WhiteSpace and LineTerminator): a text that matches holds more than
 * white space.
 */
export const NOT_BLANK: RegExp =
  /[^\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]/;

/**
 * The reader's shape check (src/client/page_shape.ts) on adversarial pages made by fast-check:
 * unclosed tags, long runs of name characters, long attribute runs, deep nesting, stray `<`.
 * Its work is counted in characters looked at (never timed): at most one per character of the
 * page, whatever the page; and on small pages it counts what the regular expression it replaced
 * counted.
 *
 * @module
 */

import assert from "node:assert/strict";
import fc from "fast-check";
import { capForDom, MAX_DEPTH, MAX_DOM_CHARS, shapeOf } from "../../src/client/page_shape.ts";

/** Pieces that hostile pages are made of, repeated to long runs. */
const piece = fc.oneof(
  fc.constantFrom("<", "</", ">", "/>", "<p>", "</p>", "<div>", "</div>", "<svg>", "</svg>"),
  fc.constantFrom("<br>", "<li>", "<path/>", "<!--", "-->", " x=1", '"', "=", "\n", "é"),
  fc.tuple(fc.constantFrom("a", "x:y-", "1", " ", "/"), fc.integer({ min: 1, max: 2_000 }))
    .map(([run, n]) => run.repeat(n)),
);

/** A page of up to a few hundred pieces. */
const page = fc.array(piece, { maxLength: 300 }).map((pieces) => pieces.join(""));

Deno.test("shapeOf() looks at each character of any page at most once", () => {
  fc.assert(
    fc.property(page, (html) => {
      const { steps } = shapeOf(html);
      assert.ok(steps <= html.length, `${steps} steps for ${html.length} characters`);
    }),
    { numRuns: 300 },
  );
});

Deno.test("shapeOf() stays linear on the pages that made the old scan quadratic", () => {
  for (const size of [1 << 10, 1 << 14, 1 << 18]) {
    const pages = [
      "<" + "a".repeat(size), // one unclosed tag with a long name
      "</" + "a".repeat(size),
      "<a " + "x=1 ".repeat(size / 4), // a long attribute run, never closed
      "<a".repeat(size / 2),
      "<".repeat(size),
      "<div>".repeat(size / 5), // deep nesting
    ];
    for (const html of pages) {
      const { steps } = shapeOf(html);
      assert.ok(steps <= html.length, `${html.slice(0, 5)}…: ${steps} for ${html.length}`);
    }
  }
  assert.equal(shapeOf("<div>".repeat(MAX_DEPTH + 1)).depth, MAX_DEPTH + 1);
});

/** The regular expression the scan replaced: right, but quadratic on long unclosed tags. */
const OLD_TAG = /<(\/)?([a-zA-Z][\w:-]*)[^<>]*?(\/)?>/g;

Deno.test("shapeOf() finds the tags the old regular expression found, on small pages", () => {
  const small = fc.array(piece.map((p) => p.slice(0, 20)), { maxLength: 60 })
    .map((pieces) => pieces.join(""));
  fc.assert(
    fc.property(small, (html) => {
      const found: string[] = [];
      for (const [, end, name, slash] of html.matchAll(OLD_TAG)) {
        found.push(`${end ? "/" : ""}${name!.toLowerCase()}${slash ? "/" : ""}`);
      }
      const starts = found.filter((tag) => !tag.startsWith("/")).length;
      assert.equal(shapeOf(html).elements, starts, html);
    }),
    { numRuns: 500 },
  );
});

Deno.test("capForDom() cuts a page's text at the start of a tag, and only a long one", () => {
  const short = "<p>" + "a".repeat(1000) + "</p>";
  assert.deepEqual(capForDom(short), { html: short, cut: false });
  const long = "<p>" + "word ".repeat(100) + "</p>\n";
  const page = long.repeat(Math.ceil((MAX_DOM_CHARS * 2) / long.length));
  const { html, cut } = capForDom(page);
  assert.equal(cut, true);
  assert.ok(html.length <= MAX_DOM_CHARS, `${html.length} characters`);
  assert.ok(html.endsWith("</p>\n"), "no tag cut in half");
});

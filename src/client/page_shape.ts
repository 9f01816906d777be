/**
 * The shape check of the reader of `relay work --extract`: a page's elements and nesting,
 * counted from its tags in one linear pass before it is parsed, so that a page too large or too
 * deep to read is refused before it costs a DOM (src/client/extract.ts runs it).
 *
 * @module
 */

import { PageError } from "./fetch_page.ts";

/**
 * Most elements of a page the reader reads, once its scripts are gone. The reader's memory
 * grows with the elements: measured with bench/reader_memory.ts, now that Readability works
 * on the parsed page itself (no copy), the whole process peaked at 239 MiB with 32,000 short
 * elements and 262 MiB with 40,000 (175 and 212 with the reader unit's smaller V8 young
 * generation; docs/benchmarks.md, "Reading a link"). 32,000 keeps any page under 256 MiB
 * either way and takes long documentation pages; a long news page has 2,000 to 5,000. A page
 * with more is reported as too large: reading it again would not help.
 */
export const MAX_ELEMENTS = 32_000;

/**
 * Deepest nesting of elements the reader reads. Readability walks up from each element, and
 * linkedom nests what a browser would close (an unclosed `<p>` holds the next): on our machine
 * 1,000 nested elements took 1.2 s, 5,000 took 44 s and 14,000 overflowed the stack. Real pages
 * nest a few dozen deep.
 */
export const MAX_DEPTH = 500;

/** Elements that never hold others and have no end tag (WHATWG HTML, "void elements"). */
const VOID = new Set(
  "area base br col embed hr img input link meta param source track wbr".split(" "),
);

/** Elements whose start tag closes an open one of the same name (`<li>a<li>b`). */
const SIBLINGS = new Set("p li dt dd tr td th option".split(" "));

/** The shape of a page's tags, as {@linkcode shapeOf} counts it. */
export interface PageShape {
  /** Start tags seen (elements). */
  elements: number;
  /** The deepest nesting of elements. */
  depth: number;
  /**
   * Characters the scan looked at: at most a small multiple of the page's length whatever the
   * page holds, which is what keeps a hostile page from stalling the reader.
   */
  steps: number;
}

/** Whether the character code may continue a tag's name (`[\w:-]`). */
function isNameCode(code: number): boolean {
  return (code >= 97 && code <= 122) || (code >= 65 && code <= 90) ||
    (code >= 48 && code <= 57) || code === 95 || code === 58 || code === 45;
}

/** Whether the character code may start a tag's name (`[a-zA-Z]`). */
function isLetterCode(code: number): boolean {
  return (code >= 97 && code <= 122) || (code >= 65 && code <= 90);
}

/**
 * Visits each start and end tag of `html` in one pass forward. A regular expression over
 * tags backtracks: `<` followed by a long run of name characters and no `>` cost time growing
 * with the square of the run (128 KiB took 5 s). Here every character is looked at a bounded
 * number of times: a tag that never closes ends at the next `<`, where the scan goes on.
 *
 * @returns The characters looked at (the steps of {@linkcode PageShape}).
 */
function scanTags(
  html: string,
  visit: (name: string, end: boolean, selfClosing: boolean) => void,
): number {
  let steps = 0;
  // The next "<" from `from`; the characters skipped count as steps too.
  const next = (from: number) => {
    const found = html.indexOf("<", from);
    steps += (found === -1 ? html.length : found) - from;
    return found;
  };
  let at = next(0);
  while (at !== -1) {
    let i = at + 1;
    const end = html.charCodeAt(i) === 47; // "/"
    if (end) i++;
    if (!isLetterCode(html.charCodeAt(i))) {
      steps += 1;
      at = next(at + 1);
      continue;
    }
    const nameEnd = nameEndOf(html, i);
    // The rest of the tag: up to ">" or, for a tag never closed, the next "<".
    let j = nameEnd;
    while (j < html.length && html.charCodeAt(j) !== 62 && html.charCodeAt(j) !== 60) j++;
    steps += j - at;
    if (j < html.length && html.charCodeAt(j) === 62) {
      const selfClosing = j - 1 >= nameEnd && html.charCodeAt(j - 1) === 47;
      visit(html.slice(i, nameEnd).toLowerCase(), end, selfClosing);
      steps += 1;
      at = next(j + 1);
    } else {
      at = j < html.length ? j : -1;
    }
  }
  return steps;
}

/** Where the tag name starting at `i` ends. */
function nameEndOf(html: string, i: number): number {
  while (i < html.length && isNameCode(html.charCodeAt(i))) i++;
  return i;
}

/**
 * Counts the elements of a page and how deep they nest, from its tags, as a parser would
 * nest them: an end tag closes what was left open inside it, `<p>a<p>b` closes the first
 * paragraph, void elements hold nothing, and a `/>` closes only inside SVG and MathML.
 */
export function shapeOf(html: string): PageShape {
  let elements = 0;
  let depth = 0;
  const stack: string[] = [];
  const open = new Map<string, number>(); // how many of each name the stack holds
  const pop = () => {
    const name = stack.pop()!;
    open.set(name, open.get(name)! - 1);
    return name;
  };
  const steps = scanTags(html, (name, end, selfClosing) => {
    if (end) {
      // An end tag closes its element and whatever was left open inside it.
      if (open.get(name)) { while (pop() !== name); }
      return;
    }
    elements++;
    // "<div/>" opens a div in HTML (the slash means nothing there): only void elements and
    // the elements of SVG and MathML, where the parser honours it, close themselves.
    const foreign = (open.get("svg") ?? 0) + (open.get("math") ?? 0) > 0;
    if (VOID.has(name) || (selfClosing && foreign)) return;
    // "<p>a<p>b": the parser closes the first paragraph, as a browser does.
    if (SIBLINGS.has(name) && stack.at(-1) === name) pop();
    stack.push(name);
    open.set(name, (open.get(name) ?? 0) + 1);
    depth = Math.max(depth, stack.length);
  });
  return { elements, depth, steps };
}

/**
 * Refuses a page too large or too deep to read, from its tags, before it is parsed: parsing
 * such a page is itself the cost to avoid.
 *
 * @throws {PageError} not retryable: more than {@linkcode MAX_ELEMENTS} elements, or nesting
 *   deeper than {@linkcode MAX_DEPTH}.
 */
export function checkShape(html: string): void {
  const { elements, depth } = shapeOf(html);
  if (elements > MAX_ELEMENTS) {
    throw new PageError(
      `the page is too large to read: ${elements} elements, the most is ${MAX_ELEMENTS}`,
      false,
    );
  }
  if (depth > MAX_DEPTH) {
    throw new PageError(
      `the page is nested too deep to read: ${depth} levels, the most is ${MAX_DEPTH}`,
      false,
    );
  }
}

/**
 * Most characters of a page (once its scripts, styles and comments are gone) made into a DOM.
 * The reader's memory grows with the text it parses, about 90 bytes for each: measured with
 * bench/reader_memory.ts, a 5 MiB page of article text peaked at 394 MiB of the process
 * uncut, 282 MiB cut at 2 MiB and 243 MiB at 1.5 MiB; a small page at 100 MiB
 * (docs/benchmarks.md, "Reading a link"). A real article is a few hundred KiB.
 */
export const MAX_DOM_CHARS = 1536 * 1024;

/**
 * `html` cut to {@linkcode MAX_DOM_CHARS} characters, at the start of a tag so that no tag is
 * cut in half; `cut` says whether it was.
 */
export function capForDom(html: string): { html: string; cut: boolean } {
  if (html.length <= MAX_DOM_CHARS) return { html, cut: false };
  const tag = html.lastIndexOf("<", MAX_DOM_CHARS);
  return { html: html.slice(0, tag > 0 ? tag : MAX_DOM_CHARS), cut: true };
}

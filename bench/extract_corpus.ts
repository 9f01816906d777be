/**
 * `deno task bench:extract --corpus DIR`: how good the reader's articles are on real pages with
 * expected outputs, beside Readability.js with its defaults over the same DOM.
 *
 * Three layouts of `DIR` are known, told apart by what the folder holds:
 * - `ground-truth.json` + `html/<id>.html.gz`: pages with a human's article text
 *   (`articleBody`) per id, as public article-extraction benchmarks ship them;
 * - `<name>/source.html` + `expected.html` + `expected-metadata.json`: Readability.js's own test
 *   pages, its extraction and its metadata (agreement with it, not quality itself);
 * - `manifest.json` listing files and their true encodings: each file is decoded as the reader
 *   decodes a page served with no charset, and compared with its true text.
 *
 * Each page goes through the reader's own steps without the fetch: charset, scripts out, shape
 * check, linkedom, extraction, the result text. The reader's text is scored three ways: the
 * result as the reader pushes it (Markdown, with its title and source lines), the same as a
 * person sees it (the Markdown rendered, its syntax gone) and the article's plain text. The
 * score is F1 of 4-gram shingles over `\w+` tokens: per page the shared, extra and missing
 * shingles as shares of all, then precision and recall averaged over pages and F1 of the two
 * averages. Pages per minute and the peak RSS (`VmHWM`) are the reader's, measured before
 * Readability.js alone runs.
 *
 * @module
 */

import { parseHTML } from "linkedom";
import { Readability } from "@mozilla/readability";
import MarkdownIt from "markdown-it";
import { articleResult, extractArticle, type PageDocument } from "../src/client/article.ts";
import { decodeHtml } from "../src/client/charset.ts";
import { linkedArticle, withLinkedArticle } from "../src/client/json_ld.ts";
import { checkShape, withoutScripts } from "../src/client/extract.ts";
import { NEAR_EMPTY_WORDS, wordCount } from "../src/client/page_wall.ts";

/** One page of a corpus: its bytes, address and what a good reader makes of it. */
interface Page {
  name: string;
  bytes: Uint8Array;
  url: string;
  /** The expected article text. */
  expected: string;
  /** The expected title, when the corpus gives one. */
  title?: string;
}

/** Shared, extra and missing shingles of one page, as shares of all three (sum 1). */
type Counts = [tp: number, fp: number, fn: number];

/** A word: letters, numbers and `_`, as Python's `\w` with Unicode. */
const WORD = /[\p{L}\p{N}_]+/gu;

/** The 4-gram shingles of `text` with their counts (one shingle for fewer than 4 words). */
function shingles(text: string): Map<string, number> {
  const words = text.match(WORD) ?? [];
  const counts = new Map<string, number>();
  for (let i = 0; i < Math.max(1, words.length - 3); i++) {
    const shingle = words.slice(i, i + 4).join(" ");
    if (shingle) counts.set(shingle, (counts.get(shingle) ?? 0) + 1);
  }
  return counts;
}

/** How `predicted` matches `expected`, shingle by shingle. */
export function match(expected: string, predicted: string): Counts {
  const truth = shingles(expected);
  const found = shingles(predicted);
  let tp = 0, fp = 0, fn = 0;
  for (const key of new Set([...truth.keys(), ...found.keys()])) {
    const t = truth.get(key) ?? 0, p = found.get(key) ?? 0;
    tp += Math.min(t, p);
    fp += Math.max(0, p - t);
    fn += Math.max(0, t - p);
  }
  const sum = tp + fp + fn;
  return sum > 0 ? [tp / sum, fp / sum, fn / sum] : [0, 0, 0];
}

/** Precision, recall and F1 over pages, as the benchmark computes them. */
export function score(pages: Counts[]): { f1: number; precision: number; recall: number } {
  const ratio = (tp: number, fp: number, fn: number, other: number) =>
    fp === 0 && fn === 0 ? 1 : tp === 0 && other === 0 ? 0 : tp / (tp + other);
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
  const precision = mean(
    pages.filter(([tp, fp]) => tp + fp > 0).map(([tp, fp, fn]) => ratio(tp, fp, fn, fp)),
  );
  const recall = mean(
    pages.filter(([tp, , fn]) => tp + fn > 0).map(([tp, fp, fn]) => ratio(tp, fp, fn, fn)),
  );
  const f1 = precision + recall > 0 ? 2 * precision * recall / (precision + recall) : 0;
  return { f1, precision, recall };
}

const markdownIt = new MarkdownIt();

/** What the bench touches of a linkedom document (the relay is checked without DOM types). */
interface Doc {
  body: { textContent: string | null };
  querySelectorAll(selectors: string): ArrayLike<{ after(node: unknown): void }>;
  createTextNode(text: string): unknown;
}

function parse(html: string): Doc {
  return (parseHTML(html) as unknown as { document: Doc }).document;
}

/** Markdown as a person sees it rendered: its text, no syntax, no addresses. */
function shown(markdown: string): string {
  const document = parse(`<!doctype html><html><body>${markdownIt.render(markdown)}</body></html>`);
  for (const block of Array.from(document.querySelectorAll("p, li, h1, h2, h3, h4, tr, br"))) {
    block.after(document.createTextNode("\n"));
  }
  for (const cell of Array.from(document.querySelectorAll("td, th"))) {
    cell.after(document.createTextNode(" "));
  }
  return document.body.textContent ?? "";
}

async function gunzip(bytes: Uint8Array): Promise<Uint8Array> {
  const stream = new Blob([bytes as BufferSource]).stream().pipeThrough(
    new DecompressionStream("gzip"),
  );
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

/** Pages of a benchmark with `ground-truth.json` and `html/<id>.html.gz`. */
async function groundTruthPages(dir: string): Promise<Page[]> {
  const truth = JSON.parse(await Deno.readTextFile(`${dir}/ground-truth.json`)) as Record<
    string,
    { articleBody?: string; url?: string; headline?: string }
  >;
  const pages: Page[] = [];
  for (const [id, entry] of Object.entries(truth)) {
    const bytes = await gunzip(await Deno.readFile(`${dir}/html/${id}.html.gz`));
    const page: Page = {
      name: id.slice(0, 12),
      bytes,
      url: entry.url ?? `https://example.com/${id}`,
      expected: entry.articleBody ?? "",
    };
    if (entry.headline) page.title = entry.headline;
    pages.push(page);
  }
  return pages;
}

/** Readability.js's test pages: `<name>/source.html`, `expected.html`, metadata. */
async function readabilityPages(dir: string): Promise<Page[]> {
  const pages: Page[] = [];
  const names = [...Deno.readDirSync(dir)].filter((e) => e.isDirectory).map((e) => e.name).sort();
  for (const name of names) {
    const at = `${dir}/${name}`;
    let expectedHtml: string, metadata: { title?: string };
    try {
      expectedHtml = await Deno.readTextFile(`${at}/expected.html`);
      metadata = JSON.parse(await Deno.readTextFile(`${at}/expected-metadata.json`));
    } catch {
      continue;
    }
    const document = parse(`<!doctype html><html><body>${expectedHtml}</body></html>`);
    const page: Page = {
      name,
      bytes: await Deno.readFile(`${at}/source.html`),
      url: "http://fakehost/test/page.html",
      expected: document.body.textContent ?? "",
    };
    if (metadata.title) page.title = metadata.title;
    pages.push(page);
  }
  return pages;
}

/** `VmHWM` of this process, MiB. */
function peakMiB(): number {
  const status = Deno.readTextFileSync("/proc/self/status");
  return Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1]) / 1024;
}

const sameTitle = (a: string, b: string) =>
  a.replace(/\s+/g, " ").trim().toLowerCase() === b.replace(/\s+/g, " ").trim().toLowerCase();

/** The reader's steps on one page, as `relay work --extract` takes them after the fetch. */
function read(page: Page) {
  const { text: html } = decodeHtml(page.bytes, null);
  const kept = withoutScripts(html);
  checkShape(kept);
  const { document } = parseHTML(kept) as unknown as { document: PageDocument };
  const found = extractArticle(document, page.url);
  const article = found && withLinkedArticle(found, linkedArticle(html));
  // As the reader does: a near-empty article is not pushed.
  if (!article || wordCount(article.text ?? article.markdown) < NEAR_EMPTY_WORDS) return null;
  return { article, result: articleResult(article) };
}

/** Readability.js with its defaults over the same DOM: its text and title. */
function readabilityAlone(page: Page): { text: string; title: string } {
  const { text: html } = decodeHtml(page.bytes, null);
  const found = new Readability(parse(withoutScripts(html)) as never).parse();
  return { text: found?.textContent ?? "", title: found?.title ?? "" };
}

/** Runs the reader and Readability.js over `pages` and prints their scores. */
function compare(pages: Page[], show: boolean, runAlone: boolean): void {
  const result: Counts[] = [], seen: Counts[] = [], body: Counts[] = [];
  const plain: Counts[] = [], alone: Counts[] = [];
  let titles = 0, titled = 0, failed = 0, aloneTitles = 0;
  const start = performance.now();
  const lines: string[] = [];
  for (const page of pages) {
    let read_: ReturnType<typeof read> = null;
    try {
      read_ = read(page);
    } catch (error) {
      lines.push(`${page.name}: refused: ${(error as Error).message}`);
    }
    if (!read_) failed++;
    result.push(match(page.expected, read_?.result ?? ""));
    seen.push(match(page.expected, shown(read_?.result ?? "")));
    body.push(match(page.expected, shown(read_?.article.markdown ?? "")));
    plain.push(match(page.expected, read_?.article.text ?? ""));
    if (page.title !== undefined) {
      titled++;
      if (read_ && sameTitle(read_.article.title, page.title)) titles++;
    }
  }
  const minutes = (performance.now() - start) / 60_000;
  const peak = peakMiB();
  for (const page of runAlone ? pages : []) {
    const found = readabilityAlone(page);
    alone.push(match(page.expected, found.text));
    if (page.title !== undefined && sameTitle(found.title, page.title)) aloneTitles++;
  }
  if (show) {
    pages.forEach((page, i) => {
      const f = (c: Counts) => score([c]).f1.toFixed(3);
      lines.push(
        `${page.name}: body ${f(body[i]!)} text ${f(plain[i]!)} alone ${f(alone[i] ?? [0, 0, 0])}`,
      );
    });
    console.log(lines.join("\n"));
  }
  const row = (name: string, counts: Counts[]) => {
    const s = score(counts);
    return `| ${name} | ${s.f1.toFixed(3)} | ${s.precision.toFixed(3)} | ${s.recall.toFixed(3)} |`;
  };
  console.log(`${pages.length} pages, ${failed} without an article from the reader`);
  console.log("| text scored | F1 | precision | recall |\n| --- | --: | --: | --: |");
  console.log(row("reader: result as pushed (Markdown)", result));
  console.log(row("reader: result as shown (Markdown rendered)", seen));
  console.log(row("reader: article Markdown rendered, no title or source lines", body));
  console.log(row("reader: article plain text", plain));
  if (runAlone) console.log(row("Readability.js alone (defaults, same DOM)", alone));
  if (titled > 0) {
    const others = runAlone ? `, Readability.js alone ${aloneTitles}/${titled}` : "";
    console.log(`title agreement: reader ${titles}/${titled}${others}`);
  }
  console.log(
    `reader: ${(pages.length / minutes).toFixed(0)} pages/min, peak RSS ${peak.toFixed(0)} MiB`,
  );
}

/** Decodes each file of a `manifest.json` corpus as a page served with no charset. */
async function charsets(dir: string): Promise<void> {
  const manifest = JSON.parse(await Deno.readTextFile(`${dir}/manifest.json`)) as {
    files: { file: string; whatwg_label: string; declared_in: string | null }[];
  };
  let right = 0, undeclared = 0, undeclaredRight = 0;
  for (const entry of manifest.files) {
    const bytes = await Deno.readFile(`${dir}/${entry.file}`);
    const truth = new TextDecoder(entry.whatwg_label).decode(bytes);
    const { text, charset } = decodeHtml(bytes, null);
    const ok = text === truth;
    if (ok) right++;
    if (!entry.declared_in) {
      undeclared++;
      if (ok) undeclaredRight++;
    }
    if (!ok) console.log(`${entry.file}: read as ${charset}, true ${entry.whatwg_label}`);
  }
  console.log(
    `${right}/${manifest.files.length} files decode to their true text ` +
      `(${undeclaredRight}/${undeclared} with no declaration at all)`,
  );
}

/**
 * Measures the corpus in `dir` and prints the figures.
 *
 * @param dir A corpus folder in one of the layouts above.
 * @param options `limit`: at most this many pages; `show`: one line per page; `alone`: run
 *   Readability.js alone beside the reader.
 * @returns `false` when `dir` is absent or in no known layout (a message is printed).
 */
export async function runCorpus(
  dir: string,
  options: { limit: number; show: boolean; alone: boolean },
): Promise<boolean> {
  const has = (path: string) => {
    try {
      Deno.statSync(`${dir}/${path}`);
      return true;
    } catch {
      return false;
    }
  };
  if (!has(".")) {
    console.log(`bench:extract: no corpus at ${dir}: nothing measured`);
    return false;
  }
  if (has("manifest.json")) {
    await charsets(dir);
    return true;
  }
  const pages = has("ground-truth.json")
    ? await groundTruthPages(dir)
    : await readabilityPages(dir);
  if (pages.length === 0) {
    console.log(`bench:extract: ${dir} holds no pages in a known layout: nothing measured`);
    return false;
  }
  compare(pages.slice(0, options.limit), options.show, options.alone);
  return true;
}

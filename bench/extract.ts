/**
 * `deno task bench:extract`: what reading one link costs the reader of `relay work --extract`,
 * in time and memory.
 *
 * Builds a page of the size asked (default 200 KB), of one of two kinds: `news`, an article of
 * about 30 KB of markup among navigation, a sidebar of links, a table, a footer and inline
 * scripts that make up the rest (as a news site's page is); or `dense`, the whole size article
 * (about 1,000 headed paragraphs), the worst case for the extractor. It serves the page on
 * 127.0.0.1 and reads it with the reader's own `readLink` (src/client/extract.ts): fetch,
 * charset, linkedom, Readability, Turndown. Prints the first read (with the libraries' loading),
 * then the median and the slowest of the next runs, and the extraction alone (no fetch), in
 * ms; and the process's resident memory before the first read, after it and at its peak
 * (`VmHWM`), in MB. Run it in a process of its own: the peak is the process's.
 *
 * Options: `--kb <n>` page size in KB (default 200), `--page news|dense` (default news),
 * `--runs <n>` (default 20).
 *
 * With `--corpus DIR` it measures the quality of the reader's articles on a folder of real
 * pages instead (bench/extract_corpus.ts); `--limit <n>` reads only the first pages, `--show`
 * prints a line per page.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { parseOrExit, type Usage, usageError, wholeNumber } from "./_common.ts";

const USAGE: Usage = {
  program: "bench:extract",
  text: `usage: deno task bench:extract [options]
  --kb <n>      page size in KB (default 200)
  --page <p>    news or dense (default news)
  --runs <n>    reads after the first (default 20)
  --corpus DIR  instead: article quality on real pages with expected outputs
  --limit <n>   with --corpus: the first n pages only
  --show        with --corpus: one line per page
  --reader-only with --corpus: skip Readability.js alone
  --help        this text`,
};

const { values } = parseOrExit(USAGE, () =>
  parseArgs({
    options: {
      kb: { type: "string", default: "200" },
      page: { type: "string", default: "news" },
      runs: { type: "string", default: "20" },
      corpus: { type: "string" },
      limit: { type: "string", default: "100000" },
      show: { type: "boolean", default: false },
      "reader-only": { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
  }));
if (values.help) {
  console.log(USAGE.text);
  Deno.exit(0);
}
if (values.corpus !== undefined) {
  const { runCorpus } = await import("./extract_corpus.ts");
  const limit = wholeNumber(USAGE, "limit", values.limit, 1);
  Deno.exit(
    await runCorpus(values.corpus, {
        limit,
        show: values.show,
        alone: !values["reader-only"],
      })
      ? 0
      : 1,
  );
}
const kb = wholeNumber(USAGE, "kb", values.kb, 1);
const runs = wholeNumber(USAGE, "runs", values.runs, 1);
if (values.page !== "news" && values.page !== "dense") {
  usageError(USAGE, `--page must be news or dense, got "${values.page}"`);
}
/** Article markup of a news page, bytes; scripts fill the rest. */
const NEWS_ARTICLE_BYTES = 30_000;

/** A page of about `bytes` bytes: its article `articleBytes` long, scripts the rest. */
function page(bytes: number, articleBytes: number): string {
  const nav = Array.from(
    { length: 40 },
    (_, i) => `<li><a href="/section/${i}">Section ${i}</a></li>`,
  )
    .join("");
  const sidebar = Array.from(
    { length: 30 },
    (_, i) => `<li><a href="/story/${i}">Another story worth a click, number ${i}</a></li>`,
  ).join("");
  const script = `<script>window.dataLayer=[${'"x",'.repeat(500)}];</script>`;
  const table = "<table><tr><th>Year</th><th>Harvest (kg)</th></tr>" +
    Array.from({ length: 20 }, (_, i) => `<tr><td>${2000 + i}</td><td>${40 + i}</td></tr>`)
      .join("") +
    "</table>";
  const head = `<!doctype html><html><head><meta charset="utf-8"><title>A long read | Weekly</title>
${script}</head><body><header><nav><ul>${nav}</ul></nav></header><main><article>
<h1>A long read</h1><p class="byline">By A. Writer</p>`;
  const tail = `${table}</article><aside><ul>${sidebar}</ul></aside></main>
<footer>${script}<p>Copyright</p></footer></body></html>`;
  const paragraph = (i: number) =>
    `<h2>Part ${i}</h2><p>Tomatoes want sun, water and patience; this is paragraph ${i} of a ` +
    `long article, with <a href="/link/${i}">a link</a>, <em>emphasis</em> and <code>code` +
    `</code>, written long enough that Readability takes the article for what it is.</p>\n`;
  const parts: string[] = [];
  let size = head.length + tail.length;
  for (let i = 0; size < Math.min(bytes, articleBytes + head.length + tail.length); i++) {
    const p = paragraph(i);
    parts.push(p);
    size += p.length;
  }
  const filler = `<script>window.__STATE__=${JSON.stringify({ story: "x".repeat(200) })};` +
    "</script>\n";
  while (size < bytes) {
    parts.push(filler);
    size += filler.length;
  }
  return head + parts.join("") + tail;
}

/** `VmRSS` and `VmHWM` of this process, MB. */
function memory(): { rss: number; peak: number } {
  const status = Deno.readTextFileSync("/proc/self/status");
  const kbOf = (name: string) => Number(new RegExp(`${name}:\\s+(\\d+) kB`).exec(status)?.[1]);
  return { rss: kbOf("VmRSS") / 1024, peak: kbOf("VmHWM") / 1024 };
}

const html = page(kb * 1000, values.page === "news" ? NEWS_ARTICLE_BYTES : Infinity);
const server = Deno.serve(
  { hostname: "127.0.0.1", port: 0, onListen: () => {} },
  () => new Response(html, { headers: { "content-type": "text/html; charset=utf-8" } }),
);
const url = `http://127.0.0.1:${server.addr.port}/article`;
const options = {
  timeoutMs: 20_000,
  maxBytes: 5 * 1024 * 1024,
  acceptLanguage: "en",
  // The page is served on 127.0.0.1, which the reader refuses unless allowed.
  policy: { allow: "all" as const, relay: [] },
};

const before = memory();
let start = performance.now();
const { readLink } = await import("../src/client/extract.ts");
const { result } = await readLink(url, options).catch((error) => {
  console.log(`the reader refused the page: ${error.message}`);
  Deno.exit(0);
});
const first = performance.now() - start;
const afterFirst = memory();

const times: number[] = [];
for (let i = 0; i < runs; i++) {
  start = performance.now();
  await readLink(url, options);
  times.push(performance.now() - start);
}
const { parseHTML } = await import("linkedom");
const { extractArticle } = await import("../src/client/article.ts");
const { withoutScripts } = await import("../src/client/extract.ts");
const extractOnly: number[] = [];
for (let i = 0; i < runs; i++) {
  start = performance.now();
  const { document } = parseHTML(withoutScripts(html)) as unknown as { document: never };
  extractArticle(document, url);
  extractOnly.push(performance.now() - start);
}
await server.shutdown();
const end = memory();

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const ms = (x: number) => `${x.toFixed(1)} ms`;
const mb = (x: number) => `${x.toFixed(0)} MB`;
console.log(
  `page: ${values.page}, ${
    (html.length / 1000).toFixed(0)
  } KB, result: ${result.length} characters`,
);
console.log(`first read (libraries loaded): ${ms(first)}`);
console.log(
  `next ${runs} reads: median ${ms(median(times))}, slowest ${ms(Math.max(...times))}; ` +
    `extraction alone (linkedom, Readability, Turndown): median ${ms(median(extractOnly))}`,
);
console.log(
  `memory: ${mb(before.rss)} before, ${mb(afterFirst.rss)} after the first read, ` +
    `${mb(end.rss)} at the end, peak ${mb(end.peak)}`,
);

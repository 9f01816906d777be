/**
 * `deno task bench:search`: the search index and the summaries, measured on this machine
 * (docs/benchmarks.md, "Search and summaries"):
 *
 * - the rebuild time of an index of 10,000 documents, half of them Chinese, and its size per
 *   document;
 * - search latency over it (p50, p99) for English words, Chinese words of two and three
 *   characters, through the index's thread as `GET /search` asks it;
 * - the offline summary's cost per page against the reader's extraction of the same page, on
 *   the Readability test pages (`--pages DIR`, a folder of `<name>/source.html`).
 *
 * @module
 */

import { parseArgs } from "node:util";
import { join } from "node:path";
import { SearchIndex } from "../src/search/search_index.ts";
import { parseQuery, type SearchDocument } from "../src/search/text.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    docs: { type: "string", default: "10000" },
    queries: { type: "string", default: "1000" },
    pages: { type: "string", default: "/work/shared/corpora/readability-test-pages" },
  },
});
const DOCS = Number(values.docs);

// A seeded generator, so that runs compare.
let seed = 42;
const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
const pick = <T>(xs: readonly T[]) => xs[Math.floor(random() * xs.length)]!;

const ENGLISH = ("tomato water garden patience sun leaf root basil pepper soil compost fence " +
  "morning evening rain seed harvest bean pea kitchen recipe bread oven window street train " +
  "library music river mountain winter summer autumn spring letter paper story history").split(" ");
const CHINESE =
  ("番茄 阳光 耐心 浇水 根部 叶子 花园 种子 收获 厨房 面包 窗户 街道 火车 图书馆 音乐 " +
    "河流 山脉 冬天 夏天 秋天 春天 信件 故事 历史 土壤 篱笆 早上 晚上 下雨").split(" ");

function doc(i: number): SearchDocument {
  const chinese = i % 2 === 1;
  const words = Array.from(
    { length: chinese ? 300 : 250 },
    () => pick(chinese ? CHINESE : ENGLISH),
  );
  const text = chinese
    ? words.map((w, k) => (k % 12 === 11 ? `${w}。` : w)).join("")
    : words.map((w, k) => (k % 15 === 14 ? `${w}.` : w)).join(" ");
  return {
    kind: "note",
    key: String(i),
    title: words.slice(0, 4).join(" "),
    url: `/notes/${i}`,
    t: i,
    text,
  };
}

const dir = await Deno.makeTempDir({ prefix: "relay-bench-search-" });
const path = join(dir, "search.sqlite");
const started = performance.now();
const index = SearchIndex.open({
  path,
  sources: {
    fingerprint: () => Promise.resolve("bench"),
    async *documents() {
      for (let i = 0; i < DOCS; i++) yield doc(i);
    },
  },
  log: () => {},
});
await index.settled();
const rebuildMs = performance.now() - started;
let bytes = 0;
for (const suffix of ["", "-wal"]) {
  bytes += (await Deno.stat(path + suffix).catch(() => ({ size: 0 }))).size;
}

const queries = Array.from({ length: Number(values.queries) }, (_, i) => {
  if (i % 3 === 0) return pick(ENGLISH);
  if (i % 3 === 1) return pick(CHINESE); // mostly two characters
  return pick(CHINESE) + pick(CHINESE).slice(0, 1); // three or more, inside unspaced text
});
const times: number[] = [];
for (const text of queries) {
  const query = parseQuery(text)!;
  const start = performance.now();
  await index.search({ query, limit: 20 });
  times.push(performance.now() - start);
}
times.sort((a, b) => a - b);
const at = (p: number) => times[Math.min(times.length - 1, Math.floor(times.length * p))]!;
await index.close();
await Deno.remove(dir, { recursive: true });
console.log(
  `search: ${DOCS} documents (half Chinese): rebuilt in ${(rebuildMs / 1000).toFixed(1)} s, ` +
    `${(bytes / DOCS / 1024).toFixed(1)} KiB per document; ${times.length} queries: ` +
    `p50 ${at(0.5).toFixed(1)} ms, p99 ${at(0.99).toFixed(1)} ms`,
);

// The offline summary against the extraction of the same page.
const { parseHTML } = await import("linkedom");
const { extractArticle } = await import("../src/client/article.ts");
const { withoutScripts } = await import("../src/client/extract.ts");
const { extractiveSummary } = await import("../src/client/summary.ts");
let extractMs = 0;
let summaryMs = 0;
let pages = 0;
for await (const entry of Deno.readDir(values.pages)) {
  const html = await Deno.readTextFile(join(values.pages, entry.name, "source.html")).catch(() =>
    ""
  );
  if (html === "") continue;
  let start = performance.now();
  const { document } = parseHTML(withoutScripts(html)) as unknown as { document: never };
  const article = extractArticle(document, "https://example.com/");
  extractMs += performance.now() - start;
  if (article === null) continue;
  start = performance.now();
  extractiveSummary(article.text ?? article.markdown);
  summaryMs += performance.now() - start;
  pages++;
}
console.log(
  `summaries: ${pages} pages: extraction ${
    (extractMs / pages).toFixed(1)
  } ms a page, the offline ` +
    `summary ${(summaryMs / pages).toFixed(1)} ms more (+${
      (100 * summaryMs / extractMs).toFixed(1)
    } %)`,
);

/**
 * What the browser extension's extraction costs in the browser: Debian's Chromium with the
 * extension loaded opens a generated article page of about 200 KB (paragraphs, lists, tables,
 * code, links, page chrome) from a loopback server, and the extension's content script reads it
 * there, as the Q&A reader does, `--runs` times (default 10). Each run is timed inside the page
 * (`performance.now()` around the extractor: Readability on a copy of the document, then
 * Turndown) and the page's JavaScript heap is read before and after (Chromium's
 * `performance.memory`, precise with `--enable-precise-memory-info`; the heap is shared by the
 * page and the content script, so the figure is what the extraction left allocated, not its
 * peak). Prints each run and the medians.
 *
 * ```sh
 * deno run -A --config tests/deno.json bench/extension_extract.ts [--runs 10]
 * ```
 *
 * @module
 */

import { parseArgs } from "node:util";
import { chromium } from "playwright-core";
import { buildExtension } from "../extension/build.ts";

const TARGET_BYTES = 200 * 1024;

// Deno's types have neither the DOM nor the extension API.
// deno-lint-ignore no-explicit-any
declare const chrome: any;

/** A generated article of about `bytes` bytes of HTML. */
function articlePage(bytes: number): string {
  const section = (i: number) =>
    `<h2>Section ${i}</h2>
<p>Paragraph ${i} of a long article about storage: a write-ahead log is durable only once it has
reached the disk, and <a href="/ref/${i}">reference ${i}</a> says why fsync costs what it does.</p>
<ul><li>First point of section ${i}</li><li>Second point, with <code>fsync()</code></li></ul>
<table><thead><tr><th>Disk</th><th>fsync (ms)</th></tr></thead>
<tbody><tr><td>SSD ${i}</td><td>0.05</td></tr><tr><td>SD card ${i}</td><td>12</td></tr></tbody></table>
<pre><code>commit(${i}); // one fsync for many requests</code></pre>`;
  const head = `<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>A long read about storage</title></head><body>
<nav>${Array.from({ length: 40 }, (_, i) => `<a href="/n${i}">Nav ${i}</a>`).join(" ")}</nav>
<main><article><h1>A long read about storage</h1>`;
  const tail = `</article></main><footer>Subscribe to our newsletter</footer></body></html>`;
  let body = "";
  for (let i = 1; head.length + body.length + tail.length < bytes; i++) body += section(i);
  return head + body + tail;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { runs: { type: "string", default: "10" } } });
  const runs = Number(values.runs);
  const html = articlePage(TARGET_BYTES);
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    () => new Response(html, { headers: { "content-type": "text/html; charset=utf-8" } }),
  );
  const dir = await Deno.makeTempDir({ prefix: "relay-bench-extension-" });
  try {
    await buildExtension(`${dir}/extension`, "chromium", { grantHosts: ["http://127.0.0.1/*"] });
    const context = await chromium.launchPersistentContext(`${dir}/profile`, {
      executablePath: "/usr/bin/chromium",
      headless: false,
      args: [
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--enable-precise-memory-info",
        `--disable-extensions-except=${dir}/extension`,
        `--load-extension=${dir}/extension`,
      ],
    });
    try {
      const worker = context.serviceWorkers()[0] ?? await context.waitForEvent("serviceworker");
      const url = `http://127.0.0.1:${server.addr.port}/`;
      const page = await context.newPage();
      await page.goto(url);
      console.log(`page: ${html.length} bytes of HTML; ${runs} runs`);
      const times: number[] = [];
      const heaps: number[] = [];
      for (let run = 1; run <= runs; run++) {
        const figures = await worker.evaluate(async (url: string) => {
          const [tab] = await chrome.tabs.query({ url });
          const target = { tabId: tab.id };
          await chrome.scripting.executeScript({ target, files: ["content.js"] });
          const [{ result }] = await chrome.scripting.executeScript({
            target,
            func: () => {
              // deno-lint-ignore no-explicit-any
              const scope = globalThis as any;
              const before = scope.performance.memory.usedJSHeapSize;
              const start = scope.performance.now();
              const reading = scope.relayReadPage();
              const ms = scope.performance.now() - start;
              const after = scope.performance.memory.usedJSHeapSize;
              return { ms, heap: after - before, ok: reading.ok, length: reading.result?.length };
            },
          });
          return result;
        }, url);
        if (!figures.ok) throw new Error("the extractor found no article");
        times.push(figures.ms);
        heaps.push(figures.heap / 2 ** 20);
        console.log(
          `run ${run}: ${figures.ms.toFixed(1)} ms, heap +${
            (figures.heap / 2 ** 20).toFixed(1)
          } MB` +
            `, ${figures.length} characters of Markdown`,
        );
      }
      console.log(
        `median: ${median(times).toFixed(1)} ms, heap +${median(heaps).toFixed(1)} MB ` +
          `(first run ${times[0]!.toFixed(1)} ms)`,
      );
    } finally {
      await context.close();
    }
  } finally {
    await server.shutdown();
    await Deno.remove(dir, { recursive: true });
  }
}

if (import.meta.main) await main();

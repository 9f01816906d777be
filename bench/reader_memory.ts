/**
 * `deno run -A bench/reader_memory.ts [--corpus DIR] [--limit N]`: the reader's peak memory.
 * Each page is read by a fresh process (a loopback server, then `readInThread`, the reader's
 * own path: a thread of its own with the fetch, parse, extraction and Markdown), and the
 * process's peak resident memory (`VmHWM` of /proc/self/status) is printed: for a 5 MiB page
 * of article text at the most elements read, for one of Node's size, and for each page of a
 * corpus folder (`DIR/<name>/source.html`). Linux only; figures, not a test.
 *
 * @module
 */

import { parseArgs } from "node:util";

const self = new URL(import.meta.url).pathname;

/** Run inside the child: serve `file` (or a made page), read it, print VmHWM in KiB. */
async function child(file: string) {
  const { readInThread, closeReadThread } = await import("../src/client/read_thread.ts");
  const { MAX_ELEMENTS } = await import("../src/client/page_shape.ts");
  const paragraph = "<p>" + "Water at the root in the morning, never on the leaves. ".repeat(6) +
    "</p>\n";
  const short = "<p>Water at the <b>root</b>.</p>\n";
  const page = (p: string, n: number) =>
    `<html><title>Big</title><body><article><h1>Big</h1>${p.repeat(n)}</article></body></html>`;
  const made = file === ":5MiB"
    ? page(paragraph, Math.min(MAX_ELEMENTS - 10, Math.floor((5 << 20) / paragraph.length)))
    : file === ":dense"
    ? page(short, Math.floor((MAX_ELEMENTS - 10) / 2))
    : undefined;
  const body = made ?? await Deno.readFile(file);
  await using server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    () => new Response(body, { headers: { "content-type": "text/html" } }),
  );
  const answer = await readInThread(`http://127.0.0.1:${server.addr.port}/`, {
    timeoutMs: 300_000,
    maxBytes: 5 << 20,
    acceptLanguage: "en",
    policy: { allow: "all", relay: [] },
  });
  closeReadThread();
  const hwm = /VmHWM:\s+(\d+)/.exec(Deno.readTextFileSync("/proc/self/status"))![1];
  const size = typeof body === "string" ? body.length : body.length;
  console.log(JSON.stringify({ ok: answer.ok, why: answer.ok ? "" : answer.message, hwm, size }));
}

/** Reads one page in a fresh process; its figures. */
async function measure(file: string) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--config", "deno.json", self, "--child", file],
    stderr: "inherit",
  }).output();
  return JSON.parse(new TextDecoder().decode(out.stdout).trim().split("\n").at(-1)!);
}

const args = parseArgs({
  options: { child: { type: "string" }, corpus: { type: "string" }, limit: { type: "string" } },
});
if (args.values.child !== undefined) {
  await child(args.values.child);
} else {
  const files = [":5MiB", ":dense"];
  if (args.values.corpus) {
    for (
      const entry of [...Deno.readDirSync(args.values.corpus)].sort((a, b) =>
        a.name < b.name ? -1 : 1
      )
    ) {
      files.push(`${args.values.corpus}/${entry.name}/source.html`);
    }
  }
  const peaks: number[] = [];
  for (const file of files.slice(0, Number(args.values.limit ?? files.length))) {
    const r = await measure(file);
    const mib = Number(r.hwm) / 1024;
    if (!file.startsWith(":")) peaks.push(mib);
    console.log(
      `${mib.toFixed(0).padStart(5)} MiB peak  ${String(r.size).padStart(8)} B  ` +
        `${r.ok ? "read" : `not read: ${r.why}`}  ${file}`,
    );
  }
  if (peaks.length > 0) {
    peaks.sort((a, b) => a - b);
    const at = (q: number) => peaks[Math.min(peaks.length - 1, Math.floor(q * peaks.length))]!;
    console.log(
      `corpus: ${peaks.length} pages, peak RSS median ${at(0.5).toFixed(0)} MiB, ` +
        `90th percentile ${at(0.9).toFixed(0)} MiB, most ${peaks.at(-1)!.toFixed(0)} MiB`,
    );
  }
}

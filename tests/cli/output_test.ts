/**
 * The output of `relay pull`, `relay peek` and `relay results` is unambiguous for any
 * content (docs/cli/commands.md, "Output formats"): one escaped line per item by default, the
 * relay's JSON exactly with `--json`, raw content and a NUL byte per item with `-0`; and
 * items already pulled are never lost to a format that cannot show them.
 */
import assert from "node:assert/strict";
import { runCli, runRelay, startRelayProcess, withTempDir } from "../_helpers.ts";

const KEY = "output-test-key-0123456789";

/** Content that breaks naive line output: line ends, tabs, backslashes, controls, Unicode. */
const TRICKY = [
  "first line\nsecond line\n\nfourth after a blank",
  "a\ttab, a back\\slash and \\n written out",
  "naïve café — 日本語 🎉 and emoji 👩‍👩‍👧",
  "crlf\r\nand a bell \u0007, escape \u001b[31m, del \u007f and next-line \u0085",
];

/** The escaped forms the default output must print, one line each. */
const ESCAPED = [
  "first line\\nsecond line\\n\\nfourth after a blank",
  "a\\ttab, a back\\\\slash and \\\\n written out",
  "naïve café — 日本語 🎉 and emoji 👩‍👩‍👧",
  "crlf\\r\\nand a bell \\x07, escape \\x1b[31m, del \\x7f and next-line \\x85",
];

/** Reads back one escaped line: the inverse of the default output's escaping. */
function unescapeLine(line: string): string {
  const named: Record<string, string> = { n: "\n", r: "\r", t: "\t", "\\": "\\" };
  return line.replace(
    /\\(?:x([0-9a-f]{2})|u([0-9a-f]{4})|(.))/g,
    (_, hex2, hex4, ch) =>
      hex2 || hex4 ? String.fromCharCode(parseInt(hex2 ?? hex4, 16)) : named[ch] ?? `\\${ch}`,
  );
}

Deno.test("relay pull, peek and results print each item on one escaped line, the relay's JSON with --json, and raw NUL-separated items with -0", async () => {
  await withTempDir(async (dir) => {
    await using relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
    const env = { RELAY_URL: relay.url, RELAY_API_KEY: KEY };
    const call = (path: string, body?: string) =>
      fetch(`${relay.url}${path}`, {
        method: body === undefined ? "GET" : "POST",
        headers: { "x-auth-key": KEY },
        ...(body === undefined ? {} : { body }),
      });
    const submitAll = async () => {
      for (const item of TRICKY) {
        assert.equal(
          await (await call("/submit?queue=general&dedupe=false", item)).text(),
          "OK (general)",
        );
      }
    };
    const run = (args: string[]) => runCli(args, { env });

    // Queued: peek three ways; --json is byte for byte what the relay answers.
    await submitAll();
    const peekBody = await (await call("/peek")).text();
    const peekJson = await run(["peek", "--json"]);
    assert.equal(peekJson.stdout, `${peekBody}\n`);
    const peekLines = (await run(["peek"])).stdout.split("\n");
    assert.equal(peekLines.pop(), "");
    assert.equal(peekLines.length, TRICKY.length);
    peekLines.forEach((line, i) => {
      const [queue, created, content, ...rest] = line.split("\t");
      assert.equal(queue, "general");
      assert.match(created!, /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/);
      assert.equal(content, ESCAPED[i]);
      assert.deepEqual(rest, []);
      assert.equal(unescapeLine(content!), TRICKY[i]);
    });
    // Through a real process once, so the bytes are those a pipe carries.
    const peekNul = await runRelay(["peek", "-0"], { env });
    assert.equal(peekNul.stdout, TRICKY.map((item) => `${item}\0`).join(""));

    // Pulled by default: one line per item, each read back exactly.
    const pulled = await run(["pull"]);
    assert.equal(pulled.code, 0, pulled.stderr);
    assert.equal(pulled.stdout, ESCAPED.map((line) => `${line}\n`).join(""));
    assert.deepEqual(pulled.stdout.trimEnd().split("\n").map(unescapeLine), TRICKY);

    // Pulled as JSON: the relay's body, exactly.
    await submitAll();
    const asJson = await run(["pull", "--json"]);
    assert.equal(asJson.stdout, `${JSON.stringify(TRICKY)}\n`);

    // Pulled with -0: raw content, each followed by a NUL byte.
    await submitAll();
    const raw = await run(["pull", "--null"]);
    assert.equal(raw.stdout, TRICKY.map((item) => `${item}\0`).join(""));

    // Results: the same three ways.
    for (const item of TRICKY) assert.equal((await call("/push", item)).status, 200);
    const resultsBody = await (await call("/results")).text();
    assert.equal((await run(["results", "--json"])).stdout, `${resultsBody}\n`);
    const results = await run(["results"]);
    const lines = results.stdout.trimEnd().split("\n");
    assert.equal(lines.length, TRICKY.length);
    assert.deepEqual(lines.map((line) => line.split("\t")[1]), ESCAPED);
    assert.ok(lines.every((line) => /^\d{4}-\d\d-\d\dT[\d:.]+Z\t/.test(line)));
    assert.match(results.stderr, /^relay: cursor \d+\n$/);
    assert.equal(
      (await run(["results", "-0"])).stdout,
      TRICKY.map((item) => `${item}\0`).join(""),
    );
  });
});

Deno.test("relay pull -0 never loses a pulled item holding a NUL byte: it prints the relay's JSON on stderr and exits 1", async () => {
  await withTempDir(async (dir) => {
    await using relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
    const env = { RELAY_URL: relay.url, RELAY_API_KEY: KEY };
    const items = ["before", "nul\u0000inside", "after"];
    for (const item of items) {
      const res = await fetch(`${relay.url}/submit?queue=qa`, {
        method: "POST",
        headers: { "x-auth-key": KEY },
        body: item,
      });
      assert.equal(res.status, 200, await res.text());
    }
    const out = await runCli(["pull", "-0"], { env });
    assert.equal(out.code, 1);
    assert.equal(out.stdout, "");
    const [intro, json, last] = out.stderr.trimEnd().split("\n");
    assert.equal(intro, "relay: the pulled items, as the relay sent them:");
    assert.deepEqual(JSON.parse(json!), items);
    assert.match(last!, /^relay: an item holds a NUL byte, which -0 cannot print .*--json$/);
    // The same item by default is one line, the NUL escaped.
    await fetch(`${relay.url}/submit?queue=qa&dedupe=false`, {
      method: "POST",
      headers: { "x-auth-key": KEY },
      body: "nul\u0000inside",
    }).then((res) => res.body?.cancel());
    assert.equal((await runCli(["pull"], { env })).stdout, "nul\\x00inside\n");
  });
});

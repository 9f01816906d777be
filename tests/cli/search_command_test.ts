/**
 * `relay search` against a real relay process: a Chinese result is found by a two-character
 * word, printed as one line per hit; after a restart the index is used as it is (no rebuild)
 * and still finds it.
 *
 * @module
 */

import assert from "node:assert/strict";
import { KEY, relayCall, runCli, startRelayProcess, withTempDir } from "../_helpers.ts";

const ENV = { RELAY_API_KEY: KEY };

async function searchUntilFound(url: string, words: string[]): Promise<string> {
  for (let i = 0; i < 300; i++) {
    const out = await runCli(["search", ...words, "--url", url], { env: ENV });
    if (out.code === 0 && out.stdout.trim() !== "") return out.stdout;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`never found ${words.join(" ")}`);
}

Deno.test("relay search finds a result by a Chinese word, and finds it again after a restart without a rebuild", async () => {
  await withTempDir(async (dir) => {
    let relay = await startRelayProcess(dir, { env: ENV });
    try {
      const res = await relayCall(relay.url)("/push", {
        method: "POST",
        body: "番茄需要阳光、水和耐心。",
      });
      assert.equal(res.status, 200);
      await res.body?.cancel();
      const line = (await searchUntilFound(relay.url, ["番茄"])).trim();
      const [time, kind, title, , snippet] = line.split("\t");
      assert.match(time!, /^\d{4}-\d\d-\d\dT/);
      assert.equal(kind, "result");
      assert.equal(title, "番茄需要阳光、水和耐心。");
      assert.equal(snippet, "«番茄»需要阳光、水和耐心。");
      const json = await runCli([
        "search",
        "阳光",
        "--json",
        "--kind",
        "result",
        "--url",
        relay.url,
      ], { env: ENV });
      assert.equal(json.code, 0, json.stderr);
      assert.equal((JSON.parse(json.stdout) as { items: unknown[] }).items.length, 1);
      const bad = await runCli(["search", "x", "--kind", "book", "--url", relay.url], {
        env: ENV,
      });
      assert.notEqual(bad.code, 0);
      assert.match(bad.stderr, /--kind/);
    } finally {
      assert.equal((await relay.stop()).code, 0);
    }
    relay = await startRelayProcess(dir, { env: ENV });
    try {
      assert.match(await searchUntilFound(relay.url, ["耐心"]), /«耐心»/);
      assert.ok(
        !relay.stdout.some((line) => line.includes("search index rebuilt")),
        relay.stdout.join("\n"),
      );
    } finally {
      await relay.stop();
    }
  });
});

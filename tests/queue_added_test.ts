import assert from "node:assert/strict";
import { cp, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { ROOT, runRelay, startRelayProcess, withTempDir } from "./_helpers.ts";

const KEY = "queue-added-test-key-0123456789";

/**
 * A copy of the repository's program (main.ts, src/, deno.json, deno.lock, webapp/, and the
 * tests' entry script) in `dir`, with `edit` applied to the text of `src/queue_names.ts`.
 */
async function scratchCopy(dir: string, edit: (source: string) => string): Promise<string> {
  for (const name of ["main.ts", "deno.json", "deno.lock", "src", "webapp", "tests/_relay.ts"]) {
    await cp(join(ROOT, name), join(dir, name), { recursive: true });
  }
  const file = join(dir, "src", "queue_names.ts");
  const before = await readFile(file, "utf8");
  const after = edit(before);
  assert.notEqual(after, before, "the edit changed QUEUE_NAMES");
  await writeFile(file, after);
  return `${dir}/`;
}

Deno.test("a queue added to QUEUE_NAMES alone is routed, documented, exported and imported", async () => {
  await withTempDir(async (dir) => {
    const root = await scratchCopy(
      join(dir, "repo"),
      (source) =>
        source.replace(
          'QUEUE_NAMES = ["qa", "article", "general"] as const',
          'QUEUE_NAMES = ["qa", "article", "general", "later"] as const',
        ),
    );
    const env = { RELAY_API_KEY: KEY };
    const call = (base: string, path: string, init: RequestInit = {}) =>
      fetch(`${base}${path}`, { ...init, headers: { "x-auth-key": KEY } });
    {
      await using relay = await startRelayProcess(join(dir, "old"), { env, root });
      const submitted = await call(relay.url, "/submit?queue=later", {
        method: "POST",
        body: "read this later",
      });
      assert.equal(await submitted.text(), "OK (later)");
      const openapi = await (await call(relay.url, "/openapi.json")).text();
      assert.match(openapi, /"later"/, "the OpenAPI document lists the new queue");
      await relay.stop();
    }
    const file = join(dir, "backup.json");
    const exported = await runRelay(["export", "--db", `${dir}/old/relay.kv`, "--out", file], {
      root,
    });
    assert.equal(exported.code, 0, exported.stderr);
    assert.deepEqual(
      JSON.parse(await Deno.readTextFile(file)).queues.later.map(
        (item: { content: string }) => item.content,
      ),
      ["read this later"],
    );
    const imported = await runRelay(["import", file, "--db", `${dir}/new/relay.kv`], { root });
    assert.equal(imported.code, 0, imported.stderr);
    await using relay = await startRelayProcess(join(dir, "new"), { env, root });
    const peek = await (await call(relay.url, "/peek?queue=later")).json();
    assert.deepEqual(
      peek.queues.later.map((item: { content: string }) => item.content),
      ["read this later"],
    );
    assert.deepEqual(await (await call(relay.url, "/pull?queue=later")).json(), [
      "read this later",
    ]);
    await relay.stop();
  });
});

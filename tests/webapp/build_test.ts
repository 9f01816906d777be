/**
 * The web app's build: `webapp/markdown.js` is one ES module with markdown-it inside, which
 * `deno task webapp` makes when it is missing and leaves alone when it is up to date.
 *
 * @module
 */

import assert from "node:assert/strict";
import { buildWebapp, ensureWebapp } from "../../webapp/build.ts";
import { ROOT, withTempDir } from "../_helpers.ts";

Deno.test("buildWebapp() writes one ES module with markdown-it that exports the renderer", async () => {
  await withTempDir(async (dir) => {
    const out = `${dir}/markdown.js`;
    await buildWebapp(out);
    const bundle = await Deno.readTextFile(out);
    // The browser loads it by itself: no import left to resolve.
    assert.ok(!/^\s*import\b/m.test(bundle));
    assert.match(bundle, /export\{[^}]*\bas plainText\b[^}]*\bas renderMarkdown\b[^}]*\}/);
    assert.match(bundle, /markdown-it \d+\.\d+\.\d+/);
    assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name), ["markdown.js"]);
  });
});

Deno.test("ensureWebapp() leaves an up-to-date webapp/markdown.js alone, and git ignores it", async () => {
  await ensureWebapp();
  const before = await Deno.stat(`${ROOT}webapp/markdown.js`);
  assert.equal(await ensureWebapp(), false);
  assert.equal(
    (await Deno.stat(`${ROOT}webapp/markdown.js`)).mtime?.getTime(),
    before.mtime?.getTime(),
  );
  const ignored = await new Deno.Command("git", {
    args: ["check-ignore", "-q", "webapp/markdown.js"],
    cwd: ROOT,
  }).output();
  assert.equal(ignored.code, 0, "webapp/markdown.js is built, not committed");
});

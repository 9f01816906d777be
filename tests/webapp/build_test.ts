/**
 * The web app's build: `webapp/markdown.js` is one ES module with markdown-it inside, committed
 * as `deno task webapp` makes it from its sources, so that a fresh clone started with a plain
 * `deno run … main.ts serve` (no task, no build) serves a working app.
 *
 * @module
 */

import assert from "node:assert/strict";
import { buildWebapp } from "../../webapp/build.ts";
import { KEY, ROOT, startRelayProcess, withTempDir } from "../_helpers.ts";

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

Deno.test("the committed webapp/markdown.js is what deno task webapp builds from its sources", async () => {
  const tracked = await new Deno.Command("git", {
    args: ["ls-files", "--error-unmatch", "webapp/markdown.js"],
    cwd: ROOT,
    stdout: "null",
    stderr: "null",
  }).output();
  assert.ok(tracked.success, "webapp/markdown.js is committed, not ignored");
  await withTempDir(async (dir) => {
    await buildWebapp(`${dir}/markdown.js`);
    const fresh = await Deno.readTextFile(`${dir}/markdown.js`);
    const committed = await Deno.readTextFile(`${ROOT}webapp/markdown.js`);
    // An equality of 100 KB strings would print both: say what to do instead.
    assert.ok(
      fresh === committed,
      "webapp/markdown.js differs from a fresh build of markdown.ts: run `deno task webapp` " +
        "and commit the result",
    );
  });
});

Deno.test("a fresh clone started with a plain deno run, no task, serves the app and its bundle", async () => {
  await withTempDir(async (dir) => {
    // What is committed, not this working tree: a clone is what a newcomer or a unit file runs.
    const clone = await new Deno.Command("git", {
      args: ["clone", "--quiet", ROOT, `${dir}/clone`],
      stdout: "null",
      stderr: "piped",
    }).output();
    assert.ok(clone.success, new TextDecoder().decode(clone.stderr));
    await Deno.mkdir(`${dir}/data`);
    await using relay = await startRelayProcess(`${dir}/data`, {
      env: { RELAY_API_KEY: KEY },
      root: `${dir}/clone/`,
      entry: { script: "main.ts", args: [] }, // as users run it
    });
    const page = await fetch(`${relay.url}/app/`);
    assert.equal(page.status, 200);
    assert.match(await page.text(), /<script type="module" src="app\.js"><\/script>/);
    const bundle = await fetch(`${relay.url}/app/markdown.js`);
    assert.equal(bundle.status, 200);
    assert.equal(bundle.headers.get("content-type"), "text/javascript; charset=utf-8");
    assert.match(await bundle.text(), /as renderMarkdown\b/);
  });
});

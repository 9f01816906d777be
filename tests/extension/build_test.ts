/**
 * The extension's build: each browser's manifest asks for the least it needs (no site at
 * install, every site it reads only when the user allows it), Firefox's runs the background
 * as an event page under a fixed add-on id, and the zips hold the files at their root.
 *
 * @module
 */

import assert from "node:assert/strict";
import denoConfig from "../../deno.json" with { type: "json" };
import { buildExtension, manifestFor, zipExtension } from "../../extension/build.ts";
import { withTempDir } from "../_helpers.ts";
import { pathOf, PROGRAMS, testGroup } from "../_optional.ts";

/** The files of the unpacked extension, the same for both browsers. */
const FILES = [
  "background.js",
  "content.js",
  "extension.css",
  "hosts.js",
  "icon.png",
  "manifest.json",
  "options.html",
  "options.js",
  "popup.html",
  "popup.js",
  "tabs.js",
];

Deno.test("manifestFor() asks for no site at install and for every page only at run time", async () => {
  for (const browser of ["chromium", "firefox"] as const) {
    const manifest = await manifestFor(browser);
    assert.equal(manifest.manifest_version, 3);
    assert.equal(manifest.version, denoConfig.version);
    assert.deepEqual(manifest.permissions, [
      "storage",
      "contextMenus",
      "activeTab",
      "scripting",
      "alarms",
    ]);
    assert.equal(manifest.host_permissions, undefined, browser);
    assert.deepEqual(manifest.optional_host_permissions, ["http://*/*", "https://*/*"]);
    assert.equal(manifest.content_scripts, undefined, "injected only into the pages it reads");
  }
  const granted = await manifestFor("chromium", { grantHosts: ["http://127.0.0.1/*"] });
  assert.deepEqual(granted.host_permissions, ["http://127.0.0.1/*"]);
});

Deno.test("manifestFor() gives Chromium a service worker and Firefox an event page with an id", async () => {
  const chromium = await manifestFor("chromium");
  assert.deepEqual(chromium.background, { service_worker: "background.js" });
  assert.equal(chromium.browser_specific_settings, undefined);
  const firefox = await manifestFor("firefox");
  assert.deepEqual(firefox.background, { scripts: ["hosts.js", "tabs.js", "background.js"] });
  assert.equal(firefox.minimum_chrome_version, undefined);
  const gecko = (firefox.browser_specific_settings as { gecko: Record<string, unknown> }).gecko;
  assert.match(String(gecko.id), /^[\w.-]+@[\w.-]+$/);
  assert.match(String(gecko.strict_min_version), /^\d+\.\d+$/);
});

Deno.test("buildExtension() writes each browser's extension", async () => {
  await withTempDir(async (dir) => {
    for (const browser of ["chromium", "firefox"] as const) {
      const out = `${dir}/${browser}`;
      await buildExtension(out, browser);
      const names = [...Deno.readDirSync(out)].map((entry) => entry.name).sort();
      assert.deepEqual(names, FILES);
      const manifest = JSON.parse(await Deno.readTextFile(`${out}/manifest.json`));
      assert.deepEqual(manifest, await manifestFor(browser));
      // The content script is one classic script with the extractor inside, no imports.
      const content = await Deno.readTextFile(`${out}/content.js`);
      assert.ok(!/^\s*(import|export)\b/m.test(content));
      assert.match(content, /\.relayReadPage = readPage;/);
      assert.match(content, /Readability/);
    }
  });
});

const zipTest = testGroup("the extension's zips", PROGRAMS.zip, PROGRAMS.unzip);

zipTest("zipExtension() packs an extension's files at the zip's root", async () => {
  await withTempDir(async (dir) => {
    const out = `${dir}/chromium`;
    await buildExtension(out, "chromium");
    const zip = `${dir}/chromium.zip`;
    await zipExtension(out, zip);
    const list = await new Deno.Command(pathOf(PROGRAMS.unzip), { args: ["-Z1", zip] }).output();
    assert.deepEqual(new TextDecoder().decode(list.stdout).trim().split("\n").sort(), FILES);
  });
});

Deno.test("deno task extension is the build of extension/build.ts", () => {
  const task: string = (denoConfig.tasks as Record<string, string>).extension ?? "";
  assert.match(task, /^deno run .* extension\/build\.ts$/);
  assert.ok(!task.includes("--allow-net") && !task.includes(" -A "), task);
});

/**
 * Builds the browser extension: `deno task extension` writes the unpacked extension for each
 * browser to `dist/extension/<browser>/` and the zip the browsers' stores take to
 * `dist/relay-extension-<browser>-<version>.zip`. The tests build it the same way, into a
 * temporary folder.
 *
 * One source serves both browsers. Chromium runs the background as a service worker; Firefox
 * runs it as an event page (`background.scripts`) and needs an add-on id. The content script
 * (content.ts, with Readability and Turndown) is bundled by `deno bundle --platform browser`;
 * the rest is copied as it is. Sources: Chrome's and MDN's manifest.json references.
 *
 * @module
 */

import { fileURLToPath as fromFileUrl } from "node:url";
import denoConfig from "../deno.json" with { type: "json" };

/** The browsers the extension is built for. */
export type Browser = "chromium" | "firefox";

/** Every browser, in build order. */
export const BROWSERS: readonly Browser[] = ["chromium", "firefox"];

/** The extension's source folder. */
const SOURCE = fromFileUrl(new URL("./", import.meta.url));
/** Files copied as they are, from the source folder (and the icon from the web app). */
const COPIED = [
  "background.js",
  "hosts.js",
  "tabs.js",
  "options.html",
  "options.js",
  "popup.html",
  "popup.js",
];
const STYLES = "extension.css";
const ICON = fromFileUrl(new URL("../webapp/icon-192.png", import.meta.url));
/** Firefox's add-on id: stable, so that an update replaces the installed add-on. */
const GECKO_ID = "content-relay@relay.extension";
/** First Firefox with everything the extension uses (MV3 scripting, optional host access). */
const FIREFOX_MIN = "128.0";

/** How a build may differ from the one the stores get. */
export interface BuildOptions {
  /**
   * Host match patterns granted at install (`host_permissions`) instead of asked for at run
   * time. For tests only: a headless browser cannot click the browser's permission prompt.
   * Empty by default.
   */
  grantHosts?: readonly string[];
}

/**
 * The manifest for `browser`, from extension/manifest.json; its version is the relay's.
 *
 * @param browser Which browser's manifest.
 * @param options See {@linkcode BuildOptions}.
 * @returns The manifest as a JSON object.
 */
export async function manifestFor(
  browser: Browser,
  options: BuildOptions = {},
): Promise<Record<string, unknown>> {
  const manifest = JSON.parse(await Deno.readTextFile(`${SOURCE}manifest.json`));
  manifest.version = denoConfig.version;
  if (options.grantHosts?.length) manifest.host_permissions = [...options.grantHosts];
  if (browser === "firefox") {
    delete manifest.minimum_chrome_version;
    manifest.background = { scripts: ["hosts.js", "tabs.js", "background.js"] };
    manifest.browser_specific_settings = {
      gecko: {
        id: GECKO_ID,
        strict_min_version: FIREFOX_MIN,
        // What leaves the browser: the addresses sent and the articles read, to the user's
        // own relay.
        data_collection_permissions: { required: ["browsingActivity", "websiteContent"] },
      },
    };
  }
  return manifest;
}

/**
 * Builds the unpacked extension for `browser` into `outDir` (created; files in it replaced).
 *
 * @param outDir The folder to write, e.g. `dist/extension/chromium`.
 * @param browser Which browser it is for.
 * @param options See {@linkcode BuildOptions}.
 * @throws {Error} When bundling the content script fails (with deno bundle's output).
 */
export async function buildExtension(
  outDir: string,
  browser: Browser,
  options: BuildOptions = {},
): Promise<void> {
  await Deno.mkdir(outDir, { recursive: true });
  const out = outDir.endsWith("/") ? outDir : `${outDir}/`;
  const bundle = await new Deno.Command(Deno.execPath(), {
    args: [
      "bundle",
      "--quiet",
      "--platform",
      "browser",
      "--config",
      fromFileUrl(new URL("../deno.json", import.meta.url)),
      "-o",
      `${out}content.js`,
      `${SOURCE}content.ts`,
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (!bundle.success) {
    const why = new TextDecoder().decode(bundle.stderr).trim();
    throw new Error(`Cannot build the extension: deno bundle failed: ${why}`);
  }
  for (const name of [...COPIED, STYLES]) await Deno.copyFile(`${SOURCE}${name}`, out + name);
  await Deno.copyFile(ICON, `${out}icon.png`);
  const manifest = await manifestFor(browser, options);
  await Deno.writeTextFile(`${out}manifest.json`, JSON.stringify(manifest, null, 2) + "\n");
}

/**
 * Zips the unpacked extension in `dir` into `zipPath`, files at the archive's root, as the
 * stores want it. Uses Info-ZIP's `zip`.
 *
 * @throws {Error} When `zip` is missing or fails.
 */
export async function zipExtension(dir: string, zipPath: string): Promise<void> {
  await Deno.remove(zipPath).catch(() => {});
  let result: Deno.CommandOutput;
  try {
    // -X leaves out file attributes and -D folder entries, so the same files make the same zip.
    result = await new Deno.Command("zip", {
      args: ["-q", "-r", "-X", "-D", zipPath, "."],
      cwd: dir,
      stdout: "piped",
      stderr: "piped",
    }).output();
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
    throw new Error("Cannot zip the extension: zip is missing (apt-get install zip)");
  }
  if (!result.success) {
    throw new Error(`Cannot zip the extension: ${new TextDecoder().decode(result.stderr).trim()}`);
  }
}

/** `deno task extension`: both browsers' extensions and zips, under dist/. */
async function main(): Promise<void> {
  const dist = fromFileUrl(new URL("../dist/", import.meta.url));
  for (const browser of BROWSERS) {
    const dir = `${dist}extension/${browser}`;
    await Deno.remove(dir, { recursive: true }).catch(() => {});
    await buildExtension(dir, browser);
    const zip = `${dist}relay-extension-${browser}-${denoConfig.version}.zip`;
    await zipExtension(dir, zip);
    console.log(`${zip} (${(await Deno.stat(zip)).size} bytes), unpacked in ${dir}/`);
  }
}

if (import.meta.main) {
  try {
    await main();
  } catch (error) {
    console.error(error instanceof Error ? error.message : String(error));
    Deno.exit(1);
  }
}

/**
 * Builds the web app's one generated file: `webapp/markdown.js`, the ES module that renders a
 * result's Markdown in the browser, bundled from markdown.ts with markdown-it by `deno bundle
 * --platform browser`. The file is committed, so that a relay started any way (the tasks, a
 * plain `deno run`, a unit file, the single binary) serves a working app with no build step to
 * forget; `deno task webapp` runs this after a change to markdown.ts or to markdown-it's locked
 * version, and a test fails while the committed file differs from a fresh build.
 *
 * @module
 */

import { fileURLToPath as fromFileUrl } from "node:url";

/** The bundle's entry, its output, and the configuration (with its lock) it is built under. */
const ENTRY = fromFileUrl(new URL("./markdown.ts", import.meta.url));
const OUTPUT = fromFileUrl(new URL("./markdown.js", import.meta.url));
const CONFIG = fromFileUrl(new URL("../deno.json", import.meta.url));

/**
 * Bundles markdown.ts and markdown-it into one ES module at `output`. The file appears whole
 * or not at all (written beside it, then renamed), so builds running side by side, as test
 * files in parallel do, never serve half a file.
 *
 * @param output Where to write, by default `webapp/markdown.js`.
 * @throws {Error} When `deno bundle` fails (with its output).
 */
export async function buildWebapp(output: string = OUTPUT): Promise<void> {
  const temporary = `${output}.${crypto.randomUUID()}.tmp`;
  try {
    const bundle = await new Deno.Command(Deno.execPath(), {
      args: [
        "bundle",
        "--quiet",
        // A phone loads it, often over a slow line: about 100 KB rather than 200 KB.
        "--minify",
        "--platform",
        "browser",
        "--config",
        CONFIG,
        "-o",
        temporary,
        ENTRY,
      ],
      stdout: "piped",
      stderr: "piped",
    }).output();
    if (!bundle.success) {
      const why = new TextDecoder().decode(bundle.stderr).trim();
      throw new Error(`Cannot build the web app: deno bundle failed: ${why}`);
    }
    await Deno.rename(temporary, output);
  } finally {
    await Deno.remove(temporary).catch(() => {});
  }
}

if (import.meta.main) {
  try {
    await buildWebapp();
  } catch (error) {
    console.error(error instanceof Error ? error.message : String(error));
    Deno.exit(1);
  }
}

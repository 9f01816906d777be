/**
 * Builds the web app's one generated file: `webapp/markdown.js`, the ES module that renders a
 * result's Markdown in the browser, bundled from markdown.ts with markdown-it by `deno bundle
 * --platform browser`. It is not in git. `deno task webapp` runs this, and the tasks that
 * start, test, compile or package the relay run it first, so a fresh clone and the single
 * binary (which `--include`s the built file) both have it. It builds only when the file is
 * missing or older than its sources, so a start costs a few milliseconds once built.
 *
 * @module
 */

import { fileURLToPath as fromFileUrl } from "node:url";

/** The bundle's entry, its output, and what a change of makes the output stale. */
const ENTRY = fromFileUrl(new URL("./markdown.ts", import.meta.url));
const OUTPUT = fromFileUrl(new URL("./markdown.js", import.meta.url));
const CONFIG = fromFileUrl(new URL("../deno.json", import.meta.url));
const SOURCES = [
  ENTRY,
  CONFIG,
  fromFileUrl(new URL("../deno.lock", import.meta.url)),
  // The relay's modules the bundle carries (markdown.ts re-exports them).
  fromFileUrl(new URL("../src/article_result.ts", import.meta.url)),
  fromFileUrl(new URL("../src/queue_names.ts", import.meta.url)),
];

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

/**
 * Builds `webapp/markdown.js` unless it is newer than each of its sources.
 *
 * @returns Whether it built.
 * @throws {Error} When `deno bundle` fails.
 */
export async function ensureWebapp(): Promise<boolean> {
  const built = await Deno.stat(OUTPUT).then((s) => s.mtime?.getTime() ?? 0, () => 0);
  const sources = await Promise.all(SOURCES.map((p) => Deno.stat(p)));
  if (built > 0 && sources.every((s) => (s.mtime?.getTime() ?? Infinity) <= built)) return false;
  await buildWebapp();
  return true;
}

if (import.meta.main) {
  try {
    await ensureWebapp();
  } catch (error) {
    console.error(error instanceof Error ? error.message : String(error));
    Deno.exit(1);
  }
}

/**
 * What the relay loads when it starts: the libraries that only some requests need are
 * imported with `import()` at their first use, never reached through static imports from
 * `main.ts` (docs/benchmarks.md, "Idle memory"). Checked on the real module graph, as
 * `deno info --json` reports it.
 *
 * @module
 */

import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";

/** Libraries that must not load at start, with what needs them. */
const LOADED_WHEN_NEEDED: Record<string, string> = {
  "markdown-it": "the blog's and the podcast's pages",
  "feed": "the blog's and the podcast's feeds",
  "espeak-ng": "speech, with the first episode",
  "wasm-media-encoders": "MP3, with the first episode",
  "prom-client": "GET /metrics",
  "zod-openapi": "GET /openapi.json",
  "qrcode": "the pairing QR code",
  "@mozilla/readability": "relay work --extract, with its first link",
  "linkedom": "relay work --extract, with its first link",
  "turndown": "relay work --extract, with its first link",
  "turndown-plugin-gfm": "relay work --extract, with its first link",
  "chardet": "relay work --extract, with its first link",
};

/**
 * The relay's own modules that `relay serve` must not load at start: the code of the other
 * commands, of backups and of the publishing adapters, each loaded when first needed.
 */
const OWN_LOADED_WHEN_NEEDED: Record<string, string> = {
  "src/cli/commands.ts": "every command but serve",
  "src/client/client.ts": "the client commands",
  "src/client/work.ts": "relay work",
  "src/backup.ts": "relay export and import, and --backup-every",
  "src/publish/adapters.ts": "the first article for a target's adapter",
};

interface InfoModule {
  specifier: string;
  dependencies?: Array<{ code?: { specifier: string }; isDynamic?: boolean }>;
}

function packageName(specifier: string): string {
  const path = specifier.replace(/^npm:\/?/, "");
  const segments = path.split("/");
  const name = path.startsWith("@") ? `${segments[0]}/${segments[1]}` : segments[0]!;
  return name.replace(/(.)@.*$/, "$1");
}

Deno.test("the relay's static imports reach none of the code loaded when first needed", async () => {
  const main = fileURLToPath(new URL("../main.ts", import.meta.url));
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", main],
    stdout: "piped",
    stderr: "null",
  }).output();
  assert.ok(out.success, "deno info failed");
  const info = JSON.parse(new TextDecoder().decode(out.stdout)) as {
    roots: string[];
    modules: InfoModule[];
    redirects: Record<string, string>;
  };
  const bySpecifier = new Map(info.modules.map((m) => [m.specifier, m]));
  const resolve = (s: string) => info.redirects[s] ?? s;
  const reached = new Set<string>();
  const packages = new Map<string, string>(); // package → the module importing it
  const todo = info.roots.map(resolve);
  while (todo.length > 0) {
    const specifier = todo.pop()!;
    if (reached.has(specifier)) continue;
    reached.add(specifier);
    for (const dep of bySpecifier.get(specifier)?.dependencies ?? []) {
      if (dep.isDynamic || dep.code === undefined) continue;
      const target = resolve(dep.code.specifier);
      if (target.startsWith("npm:")) {
        packages.set(packageName(target), specifier);
      } else if (target.startsWith("file:")) {
        todo.push(target);
      }
    }
  }
  assert.ok(packages.has("hono"), "the graph was read (hono is imported statically)");
  const root = new URL("../", import.meta.url).href;
  assert.ok(reached.has(`${root}src/server/start.ts`), "the graph reaches the server");
  for (const [path, use] of Object.entries(OWN_LOADED_WHEN_NEEDED)) {
    assert.ok(bySpecifier.has(`${root}${path}`), `${path} is in the graph (imported dynamically)`);
    assert.ok(!reached.has(`${root}${path}`), `${path} (for ${use}) is imported statically`);
  }
  for (const [name, use] of Object.entries(LOADED_WHEN_NEEDED)) {
    assert.equal(
      packages.get(name),
      undefined,
      `${name} (for ${use}) is imported statically by ${packages.get(name)}`,
    );
  }
});

/**
 * What the relay loads when it starts: the libraries that only some requests need are
 * imported with `import()` at their first use, never reached through static imports from
 * what `relay serve` loads (docs/benchmarks.md, "Idle memory"); and a client command loads
 * none of the server's code. Checked on the real module graph, as `deno info --json`
 * reports it.
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
  "shell-quote": "the speech command, when one is set",
  "range-parser": "the first Range header",
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

/** The module graph of `main.ts`, dynamic imports included, as `deno info --json` gives it. */
interface Graph {
  /** The modules reached from `roots` (specifiers) through static imports only. */
  reach(roots: readonly string[]): { modules: Set<string>; packages: Map<string, string> };
  /** Whether the graph holds `specifier` at all (statically or through `import()`). */
  has(specifier: string): boolean;
}

/** The graph of `main.ts` as `deno info --json` reports it (a child process). */
async function moduleGraph(): Promise<Graph> {
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
  return {
    has: (specifier) => bySpecifier.has(specifier),
    reach(roots) {
      const modules = new Set<string>();
      const packages = new Map<string, string>(); // package → the module importing it
      const todo = roots.map(resolve);
      while (todo.length > 0) {
        const specifier = todo.pop()!;
        if (modules.has(specifier)) continue;
        modules.add(specifier);
        for (const dep of bySpecifier.get(specifier)?.dependencies ?? []) {
          if (dep.isDynamic || dep.code === undefined) continue;
          const target = resolve(dep.code.specifier);
          if (target.startsWith("npm:")) packages.set(packageName(target), specifier);
          else if (target.startsWith("file:")) todo.push(target);
        }
      }
      return { modules, packages };
    },
  };
}

const ROOT = new URL("../", import.meta.url).href;

Deno.test("relay serve's static imports reach none of the code loaded when first needed", async () => {
  const graph = await moduleGraph();
  // What `relay serve` loads before it listens: the command line, then the server and the
  // database opener that its `serve` imports.
  const start = ["main.ts", "src/server/start.ts", "src/store/database.ts"].map((p) => ROOT + p);
  for (const root of start) assert.ok(graph.has(root), `${root} is in the graph`);
  const { modules: reached, packages } = graph.reach(start);
  assert.ok(packages.has("hono"), "the graph was read (hono is imported statically)");
  for (const [path, use] of Object.entries(OWN_LOADED_WHEN_NEEDED)) {
    assert.ok(graph.has(`${ROOT}${path}`), `${path} is in the graph (imported dynamically)`);
    assert.ok(!reached.has(`${ROOT}${path}`), `${path} (for ${use}) is imported statically`);
  }
  for (const [name, use] of Object.entries(LOADED_WHEN_NEEDED)) {
    assert.equal(
      packages.get(name),
      undefined,
      `${name} (for ${use}) is imported statically by ${packages.get(name)}`,
    );
  }
});

/**
 * What a client command (`relay submit`, `relay pull`, …) must not load: the server, the
 * store, the built-in services and the code of the commands that need them, each loaded by
 * the command that runs it. Loading them cost a `relay submit` about 60 ms more (310 against
 * 250 ms from start to exit, measured alternately).
 */
const NOT_FOR_CLIENT_COMMANDS: Record<string, string> = {
  "src/server/start.ts": "relay serve",
  "src/store/store.ts": "relay serve, export and import",
  "src/backup.ts": "relay export and import",
  "src/builtin/archive.ts": "relay export and import",
  "src/client/work.ts": "relay work",
};

Deno.test("the command table and the client commands load none of the server, the store or the built-in services", async () => {
  const graph = await moduleGraph();
  // What a client command loads: the command line and the command table.
  const { modules: reached, packages } = graph.reach(
    ["main.ts", "src/cli/commands.ts"].map((p) => ROOT + p),
  );
  assert.ok(reached.has(`${ROOT}src/client/client.ts`), "the graph reaches the client");
  for (const [path, use] of Object.entries(NOT_FOR_CLIENT_COMMANDS)) {
    assert.ok(graph.has(`${ROOT}${path}`), `${path} is in the graph (imported dynamically)`);
    assert.ok(!reached.has(`${ROOT}${path}`), `${path} (for ${use}) is imported statically`);
  }
  assert.equal(packages.get("hono"), undefined, "Hono (for relay serve) is imported statically");
});

/**
 * The layout's rules (docs/design.md, "Parts and imports"), checked on the real source:
 * no import cycles, imports point down only, the client talks to a relay over HTTP only,
 * at most six floors of parts, no script over 600 lines (in src/, tests/, bench/, the extension,
 * the web app, .ci/ and main.ts) and no function over 80 lines of logic.
 *
 * @module
 */

import assert from "node:assert/strict";
import { dirname, join, relative, resolve } from "node:path";

const ROOT = resolve(import.meta.dirname ?? ".", "..");

/** Most lines a source file may have before it is split along its responsibilities. */
const MAX_LINES = 600;
/** Most floors of parts: main → cli → server → store/publish/builtin/access → shared → leaves. */
const MAX_FLOORS = 6;
/** Most lines of logic (not blank, not comment) a function may have before it is split. */
const MAX_FUNCTION_LINES = 80;

/** What each part must not import (parts are src/ folders, or top-level src/ files). */
const FORBIDDEN: Record<string, readonly string[]> = {
  client: ["server", "store", "publish", "builtin", "access", "cli"],
  store: ["server", "client", "cli", "publish", "builtin", "access"],
  publish: ["server", "client", "cli", "store", "builtin"],
  builtin: ["server", "client", "cli", "store", "publish", "access"],
  access: ["server", "client", "cli", "store", "publish", "builtin"],
  server: ["cli", "client"],
  search: ["server", "client", "cli", "store", "publish", "builtin", "access"],
};

async function sourceFiles(dir: string): Promise<string[]> {
  const found: string[] = [];
  for await (const entry of Deno.readDir(dir)) {
    const path = join(dir, entry.name);
    if (entry.isDirectory) found.push(...await sourceFiles(path));
    else if (entry.name.endsWith(".ts")) found.push(path);
  }
  return found.sort();
}

/** The project files a module imports, statically or with `import("…")`. */
function localImports(file: string, text: string): string[] {
  const specifiers = [
    ...text.matchAll(/^\s*(?:import|export)\s[^;]*?from\s+"(\.{1,2}\/[^"]+)"/gms),
    ...text.matchAll(/^\s*import\s+"(\.{1,2}\/[^"]+)"/gm),
    ...text.matchAll(/import\(\s*"(\.{1,2}\/[^"]+)"\s*\)/g),
  ].map((m) => m[1]!);
  return specifiers.filter((s) => s.endsWith(".ts")).map((s) => resolve(dirname(file), s));
}

/** The part a file belongs to: `main`, the folder under src/, or a top-level file's name. */
function partOf(file: string): string {
  const rel = relative(ROOT, file);
  if (rel === "main.ts") return "main";
  const parts = rel.split("/");
  if (parts[0] !== "src") return rel;
  return parts.length > 2 ? parts[1]! : parts[1]!.replace(/\.ts$/, "");
}

async function graph(): Promise<Map<string, string[]>> {
  const files = [join(ROOT, "main.ts"), ...await sourceFiles(join(ROOT, "src"))];
  const edges = new Map<string, string[]>();
  for (const file of files) edges.set(file, localImports(file, await Deno.readTextFile(file)));
  return edges;
}

/** Strongly connected components with more than one member, or a self-import (Tarjan). */
function cycles(edges: Map<string, readonly string[]>): string[][] {
  let index = 0;
  const order = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (node: string) => {
    order.set(node, index);
    low.set(node, index++);
    stack.push(node);
    onStack.add(node);
    for (const next of edges.get(node) ?? []) {
      if (!order.has(next)) {
        visit(next);
        low.set(node, Math.min(low.get(node)!, low.get(next)!));
      } else if (onStack.has(next)) low.set(node, Math.min(low.get(node)!, order.get(next)!));
    }
    if (low.get(node) === order.get(node)) {
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        component.push(member);
      } while (member !== node);
      if (component.length > 1 || (edges.get(node) ?? []).includes(node)) found.push(component);
    }
  };
  for (const node of edges.keys()) if (!order.has(node)) visit(node);
  return found;
}

function partEdges(edges: Map<string, string[]>): Map<string, string[]> {
  const parts = new Map<string, Set<string>>();
  for (const [file, imports] of edges) {
    const from = partOf(file);
    const set = parts.get(from) ?? new Set<string>();
    for (const target of imports) if (partOf(target) !== from) set.add(partOf(target));
    parts.set(from, set);
  }
  return new Map([...parts].map(([part, set]) => [part, [...set].sort()]));
}

function floors(parts: Map<string, readonly string[]>): Map<string, number> {
  const floor = new Map<string, number>();
  const of = (part: string): number => {
    const known = floor.get(part);
    if (known !== undefined) return known;
    const value = 1 + Math.max(0, ...(parts.get(part) ?? []).map(of));
    floor.set(part, value);
    return value;
  };
  for (const part of parts.keys()) of(part);
  return floor;
}

Deno.test("layout: no module imports itself through a cycle", async () => {
  const found = cycles(await graph());
  assert.deepEqual(found.map((c) => c.map((f) => relative(ROOT, f)).sort()), []);
});

Deno.test("layout: the parts import each other without a cycle, in at most six floors", async () => {
  const parts = partEdges(await graph());
  assert.deepEqual(cycles(parts), []);
  const floor = floors(parts);
  const top = Math.max(...floor.values());
  const picture = [...floor].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
    .map(([part, n]) => `${n} ${part} → ${(parts.get(part) ?? []).join(", ")}`);
  assert.ok(top <= MAX_FLOORS, `${top} floors:\n${picture.join("\n")}`);
});

Deno.test("layout: imports point down: the client reaches a relay over HTTP only", async () => {
  const wrong: string[] = [];
  for (const [file, imports] of await graph()) {
    const from = partOf(file);
    for (const target of imports) {
      const to = partOf(target);
      if (FORBIDDEN[from]?.includes(to)) {
        wrong.push(`${relative(ROOT, file)} → ${relative(ROOT, target)}`);
      }
      if (to === "cli" && from !== "main" && from !== "cli") {
        wrong.push(
          `${relative(ROOT, file)} → ${relative(ROOT, target)} (only main.ts imports cli/)`,
        );
      }
    }
  }
  assert.deepEqual(wrong, []);
});

/** The folders whose scripts the line limit covers: the relay, its tests, bench and clients. */
const SCRIPT_DIRS = ["src", "tests", "bench", "extension", "webapp", ".ci"];
/** What a script's name ends with: TypeScript, JavaScript, shell. */
const SCRIPT_ENDINGS = [".ts", ".js", ".sh"];
/**
 * Scripts left out of the line limit: the web app's markdown renderer is a bundle that
 * webapp/build.ts generates from the npm package and minifies; nobody edits or splits it.
 */
const NOT_LIMITED = new Set(["webapp/markdown.js"]);

/** Every script under `dir` (recursively), by its path. */
async function scripts(dir: string): Promise<string[]> {
  const found: string[] = [];
  for await (const entry of Deno.readDir(dir)) {
    const path = join(dir, entry.name);
    if (entry.isDirectory) found.push(...await scripts(path));
    else if (SCRIPT_ENDINGS.some((ending) => entry.name.endsWith(ending))) found.push(path);
  }
  return found;
}

Deno.test("layout: no source file is over 600 lines", async () => {
  const files = [join(ROOT, "main.ts")];
  for (const dir of SCRIPT_DIRS) files.push(...await scripts(join(ROOT, dir)));
  const limited = files.filter((file) => !NOT_LIMITED.has(relative(ROOT, file)));
  // The walk found the scripts of every folder, not none.
  assert.ok(limited.some((file) => relative(ROOT, file).startsWith("bench/")));
  const long: string[] = [];
  for (const file of limited.sort()) {
    const lines = (await Deno.readTextFile(file)).split("\n").length;
    if (lines > MAX_LINES) long.push(`${relative(ROOT, file)}: ${lines}`);
  }
  assert.deepEqual(long, []);
});

Deno.test("layout: no two source files share a name", async () => {
  const seen = new Map<string, string[]>();
  for (const file of await sourceFiles(join(ROOT, "src"))) {
    const name = file.slice(file.lastIndexOf("/") + 1);
    seen.set(name, [...seen.get(name) ?? [], relative(ROOT, file)]);
  }
  assert.deepEqual([...seen.values()].filter((paths) => paths.length > 1), []);
});

/** Lines of `text` that hold code: neither blank nor only a comment. */
function logicLines(text: string): number {
  return text.split("\n").filter((line) => {
    const trimmed = line.trim();
    return trimmed !== "" && !trimmed.startsWith("//") && !trimmed.startsWith("*") &&
      !trimmed.startsWith("/*");
  }).length;
}

/** A lint plugin, run on each file by Deno's own parser, reporting long functions. */
const functionLength = {
  name: "layout",
  rules: {
    "function-length": {
      create(context: { sourceCode: { text: string }; report(d: unknown): void }) {
        const check = (node: { range: [number, number] }) => {
          const lines = logicLines(context.sourceCode.text.slice(...node.range));
          if (lines > MAX_FUNCTION_LINES) context.report({ node, message: String(lines) });
        };
        return {
          FunctionDeclaration: check,
          FunctionExpression: check,
          ArrowFunctionExpression: check,
        };
      },
    },
  },
};

Deno.test("layout: no function is over 80 lines of logic", async () => {
  const long: string[] = [];
  for (const file of await sourceFiles(join(ROOT, "src"))) {
    const text = await Deno.readTextFile(file);
    // deno-lint-ignore no-explicit-any
    for (const found of Deno.lint.runPlugin(functionLength as any, file, text)) {
      const line = text.slice(0, found.range[0]).split("\n").length;
      long.push(`${relative(ROOT, file)}:${line}: ${found.message} lines`);
    }
  }
  assert.deepEqual(long, []);
});

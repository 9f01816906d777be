/**
 * Reads a V8 CPU profile (`deno run --cpu-prof-dir`, a `.cpuprofile` file) and lists where
 * the JavaScript thread's samples went: by function, self time and total time (the function
 * and everything it called), as shares of the samples taken while JavaScript ran (idle
 * samples left out). `deno task bench --profile <figure>` writes such a profile of the
 * relay under one load and prints this; docs/benchmarks.md quotes it.
 *
 * @module
 */

/** The part of a `.cpuprofile` this reads. */
interface CpuProfile {
  nodes: Array<{
    id: number;
    callFrame: { functionName: string; url: string; lineNumber: number };
    children?: number[];
  }>;
  samples: number[];
}

/** One function's share of the busy samples, 0–1. */
export interface Share {
  /** `name file:line`, e.g. `keysMatch auth.ts:40`; `(program)`, `(garbage collector)`. */
  readonly name: string;
  /** Samples in the function itself. */
  readonly self: number;
  /** Samples in the function or anything it called. */
  readonly total: number;
}

/**
 * The functions of a profile by self time, largest first.
 *
 * @param path The `.cpuprofile` file.
 * @returns The shares, and how many samples were busy and idle.
 * @throws when the file cannot be read or is not a CPU profile.
 */
export function summarize(path: string): { shares: Share[]; busy: number; idle: number } {
  const profile = JSON.parse(Deno.readTextFileSync(path)) as CpuProfile;
  const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
  const parents = new Map<number, number>();
  for (const node of profile.nodes) {
    for (const child of node.children ?? []) parents.set(child, node.id);
  }
  const nameOf = (id: number) => {
    const frame = nodes.get(id)!.callFrame;
    const file = frame.url.split("/").pop() ?? "";
    return file === ""
      ? frame.functionName || "(anonymous)"
      : `${frame.functionName || "(anonymous)"} ${file}:${frame.lineNumber + 1}`;
  };
  const self = new Map<string, number>();
  const total = new Map<string, number>();
  let busy = 0;
  let idle = 0;
  for (const id of profile.samples) {
    if (nodes.get(id)?.callFrame.functionName === "(idle)") {
      idle++;
      continue;
    }
    busy++;
    const name = nameOf(id);
    self.set(name, (self.get(name) ?? 0) + 1);
    const seen = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parents.get(at)) {
      const caller = nameOf(at);
      if (seen.has(caller)) continue;
      seen.add(caller);
      total.set(caller, (total.get(caller) ?? 0) + 1);
    }
  }
  const shares = [...total.keys()]
    .filter((name) => name !== "(root)")
    .map((name) => ({
      name,
      self: (self.get(name) ?? 0) / busy,
      total: total.get(name)! / busy,
    }))
    .sort((a, b) => b.self - a.self);
  return { shares, busy, idle };
}

/**
 * A Markdown table of the `top` functions by self time, with their total time.
 *
 * @param path The `.cpuprofile` file.
 * @param top How many rows.
 */
export function profileTable(path: string, top = 15): string {
  const { shares, busy, idle } = summarize(path);
  const percent = (x: number) => `${(100 * x).toFixed(1)} %`;
  return [
    `${busy} samples in JavaScript, ${idle} idle (the thread in the runtime or waiting)`,
    "",
    "| function | self | total |",
    "|---|---:|---:|",
    ...shares.slice(0, top).map((s) =>
      `| \`${s.name}\` | ${percent(s.self)} | ${percent(s.total)} |`
    ),
  ].join("\n");
}

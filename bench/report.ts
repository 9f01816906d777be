/**
 * The bench's figures, their targets against the floor, and the report: its tables, the
 * targets met or missed, and its copy in docs/benchmarks.md.
 *
 * @module
 */

import { type Load, ROOT, SCRIPTS } from "./loads.ts";

/** One round of one figure: the three servers' loads. */
export interface Round {
  relay: Load;
  reference: Load;
  floor: Load;
}

/** One figure: a relay load and the reference it is divided by. */
export interface Figure {
  name: string;
  /** The reference's path on the bare server (its body is copied from the relay first). */
  reference: string;
  relayPath: string;
  script: string;
  /**
   * Most main-thread CPU per request as a multiple of the floor's in the same round (the
   * median of the rounds' quotients); none for figures shown for scale.
   */
  cpuTarget?: number;
  /** Most p99 latency as a multiple of the floor's p99 (medians of the rounds). */
  p99Target?: number;
  /** A p99 latency that meets the target whatever the floor's, ms. */
  p99EnoughMs?: number;
}

export const FIGURES: Record<string, Figure> = {
  peek: {
    name: "GET /peek (10 items per queue) vs same body",
    reference: "/peek",
    relayPath: "/peek",
    script: SCRIPTS.get!,
    cpuTarget: 1.15,
  },
  results: {
    name: "GET /results?since=0 (10 results) vs same body",
    reference: "/results",
    relayPath: "/results?since=0",
    script: SCRIPTS.get!,
    cpuTarget: 1.15,
  },
  submit: {
    name: 'POST /submit (unique contents) vs "OK"',
    reference: "/",
    relayPath: "/",
    script: SCRIPTS.submit!,
    cpuTarget: 1.5,
    p99Target: 1.2,
    p99EnoughMs: 10,
  },
  push: {
    name: 'POST /push vs "OK"',
    reference: "/",
    relayPath: "/",
    script: SCRIPTS.push!,
    cpuTarget: 1.5,
  },
  health: {
    name: 'GET /health vs "OK"',
    reference: "/",
    relayPath: "/health",
    script: SCRIPTS.get!,
    cpuTarget: 1.15,
  },
  pull: {
    name: 'submit + GET /pull drain cycles vs "OK"',
    reference: "/",
    relayPath: "/",
    script: SCRIPTS.pull!,
  },
};

/** The `q`-quantile (0–1) of `values`, nearest rank. */
function quantile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? NaN;
}

function median(values: number[]): number {
  return quantile(values, 0.5);
}

/** What one run of the bench measured, for {@linkcode report}. */
export interface Results {
  /** wrk's connections, seconds per load, and interleaved rounds. */
  connections: number;
  duration: number;
  rounds: number;
  /** Seconds of the idle check; 0 when it was skipped. */
  idle: number;
  /** The figure profiled (`--profile`), and the profile's table; undefined and "" when none. */
  profileOf: string | undefined;
  profile: string;
  /** Each figure's rounds, by id, in the order measured. */
  measured: Map<string, Round[]>;
  /** The size of the body a figure copies to the references, bytes, by id. */
  sizes: Record<string, number>;
  /** RSS in MB: the relay's, the bare server's and the floor's 5 s after start. */
  idleRss: number;
  bareIdleRss: number;
  floorIdleRss: number;
  /** The relay's RSS after the loads and the delivery test, MB. */
  loadedRss: number;
  /** The relay's and the floor's RSS after the idle check, MB (NaN when skipped). */
  restedRss: number;
  floorRestedRss: number;
  /** Start of the relay's process to its first `GET /health` 200, ms. */
  firstHealth: number;
  /** Whether the floor answered with the relay's response headers (`--floor-headers`). */
  floorHeaders: boolean;
  /** Push-to-delivery latencies per reader, ms (empty under a profile). */
  delivery: { longPoll: number[]; stream: number[] };
  /** The relay's data files' size after the run, bytes. */
  dataBytes: number;
  /** Bytes the relay wrote to disk during the idle check (NaN when skipped). */
  idleWrites: number;
}

/**
 * The report of one run: the table of the figures against the floor and the reference, the
 * table of the single figures with their targets, the machine, and the targets missed.
 */
export function report(r: Results): string {
  const misses: string[] = [];
  const out: string[] = [];
  out.push(
    `| figure (${r.connections} connections, ${r.duration} s, median of ${r.rounds} rounds) | relay µs/req | floor µs/req | relay ÷ floor | rounds | relay p99 ms | floor p99 ms | × reference | floor × reference | reference µs/req | non-2xx | target |`,
  );
  out.push("|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---|");
  for (const [id, runs] of r.measured) out.push(figureRow(id, runs, r.sizes[id], misses));
  const figure = (name: string, value: string, target: string, ok: boolean) => {
    if (!ok) misses.push(`${name}: ${value} (target ${target})`);
    out.push(`| ${name} | ${value} | ${target} | ${ok ? "met" : "**missed**"} |`);
  };
  out.push("");
  out.push("| figure | value | target | |");
  out.push("|---|---:|---|---|");
  figure(
    "idle RSS, 5 s after start, over the floor's",
    `${(r.idleRss - r.floorIdleRss).toFixed(1)} MB (${r.idleRss.toFixed(1)} MB)`,
    "≤ +6 MB",
    r.idleRss - r.floorIdleRss <= 6,
  );
  figure("idle RSS of the bare server", `${r.bareIdleRss.toFixed(1)} MB`, "—", true);
  figure(
    "idle RSS of the floor (Deno.serve, KV, Hono, zod, a timer)",
    `${r.floorIdleRss.toFixed(1)} MB`,
    "—",
    true,
  );
  figure("RSS after the loads", `${r.loadedRss.toFixed(1)} MB`, "—", true);
  if (r.idle > 0) {
    // The target is against the floor after the same loads and idle time: what the stack
    // keeps by itself (its allocator holds freed pages) is not the relay's to give back.
    figure(
      `RSS after the loads and ${r.idle + 2} idle s, over the floor's`,
      `${(r.restedRss - r.floorRestedRss).toFixed(1)} MB (${r.restedRss.toFixed(1)} MB)`,
      "≤ +12 MB",
      r.restedRss - r.floorRestedRss <= 12,
    );
    figure(
      `the same, over the relay's idle RSS`,
      `${(r.restedRss - r.idleRss).toFixed(1)} MB`,
      "—",
      true,
    );
    figure(
      `the floor's RSS after the same loads and idle, over its idle`,
      `${(r.floorRestedRss - r.floorIdleRss).toFixed(1)} MB (${r.floorRestedRss.toFixed(1)} MB)`,
      "—",
      true,
    );
  }
  figure(
    "start to first /health 200",
    `${r.firstHealth.toFixed(0)} ms`,
    "≤ 300 ms",
    r.firstHealth <= 300,
  );
  for (const [reader, ms] of Object.entries(r.delivery)) {
    if (ms.length === 0) continue;
    const p50 = quantile(ms, 0.5);
    const p99 = quantile(ms, 0.99);
    figure(
      `push-to-delivery, ${reader === "stream" ? "stream reader" : "long-polling reader"}`,
      `p50 ${p50.toFixed(2)} ms, p99 ${p99.toFixed(2)} ms (${ms.length} pushes)`,
      "p99 ≤ 10 ms",
      p99 <= 10,
    );
  }
  figure("data files after the run", `${(r.dataBytes / 1024).toFixed(0)} KiB`, "—", true);
  if (r.idle > 0) {
    figure(
      `disk writes in ${r.idle} idle s`,
      `${r.idleWrites} bytes`,
      "0 bytes",
      r.idleWrites === 0,
    );
  }
  const cpus =
    Deno.readTextFileSync("/proc/cpuinfo").split("\n").filter((l) => l.startsWith("processor"))
      .length;
  const mem = Number(/MemTotal:\s+(\d+)/.exec(Deno.readTextFileSync("/proc/meminfo"))?.[1]) / 1024 /
    1024;
  out.push("");
  out.push(
    `machine: ${cpus} cores, ${mem.toFixed(0)} GiB; deno ${Deno.version.deno}; ${
      new Date().toISOString().slice(0, 10)
    }; wrk -t1 -c${r.connections} -d${r.duration}s, ${r.rounds} interleaved rounds${
      r.floorHeaders ? "; the floor with the relay's response headers" : ""
    }`,
  );
  out.push("");
  out.push(
    misses.length === 0 ? "every target met" : `short of target:\n\n- ${misses.join("\n- ")}`,
  );
  if (r.profileOf !== undefined) {
    out.push("", `profile of the relay under ${r.profileOf}:`, "", r.profile);
  }
  return out.join("\n");
}

/**
 * One row of the report's first table: the relay's main-thread CPU per request against the
 * floor's in the same rounds, and the figure's target when it has one. A missed target is
 * added to `misses`.
 */
function figureRow(id: string, runs: Round[], size: number | undefined, misses: string[]): string {
  const figure = FIGURES[id]!;
  const cpuQuotients = runs.map((r) => r.relay.cpuUs / r.floor.cpuUs);
  const cpuQuotient = median(cpuQuotients);
  const p99 = median(runs.map((r) => r.relay.p99));
  const floorP99 = median(runs.map((r) => r.floor.p99));
  const goals: string[] = [];
  let ok = true;
  if (figure.cpuTarget !== undefined) {
    goals.push(`µs ≤ ${figure.cpuTarget}× the floor's`);
    if (cpuQuotient > figure.cpuTarget) {
      ok = false;
      misses.push(
        `${figure.name}: ${cpuQuotient.toFixed(2)}× the floor's µs > ${figure.cpuTarget}×`,
      );
    }
  }
  if (figure.p99Target !== undefined) {
    const enough = figure.p99EnoughMs;
    goals.push(
      `p99 ≤ ${figure.p99Target}× the floor's${enough !== undefined ? ` or ≤ ${enough} ms` : ""}`,
    );
    if (p99 > figure.p99Target * floorP99 && !(enough !== undefined && p99 <= enough)) {
      ok = false;
      misses.push(
        `${figure.name}: p99 ${p99.toFixed(1)} ms > ${figure.p99Target}× the floor's ${
          floorP99.toFixed(1)
        } ms${enough !== undefined ? ` and > ${enough} ms` : ""}`,
      );
    }
  }
  const bytes = size === undefined ? "" : ` (${(size / 1024).toFixed(1)} KB)`;
  return [
    `| ${figure.name}${bytes}`,
    median(runs.map((r) => r.relay.cpuUs)).toFixed(1),
    median(runs.map((r) => r.floor.cpuUs)).toFixed(1),
    cpuQuotient.toFixed(2),
    cpuQuotients.map((q) => q.toFixed(2)).join(" "),
    p99.toFixed(2),
    floorP99.toFixed(2),
    median(runs.map((r) => r.relay.rps / r.reference.rps)).toFixed(2),
    median(runs.map((r) => r.floor.rps / r.reference.rps)).toFixed(2),
    median(runs.map((r) => r.reference.cpuUs)).toFixed(1),
    runs.map((r) => r.relay.statuses).join("/"),
    `${goals.join(", ")} ${goals.length === 0 ? "" : ok ? "met" : "**missed**"} |`,
  ].join(" | ");
}

const DOC = `${ROOT}docs/benchmarks.md`;
const DOC_START = "<!-- bench --doc: start of the latest run -->";
const DOC_END = "<!-- bench --doc: end of the latest run -->";

/**
 * Puts `report` into docs/benchmarks.md between {@linkcode DOC_START} and
 * {@linkcode DOC_END}, after a line naming the command, the date and the commit, then
 * formats the file with `deno fmt` (the report's tables are not aligned).
 *
 * @throws {Error} when the file lacks the markers, or `deno fmt` fails.
 */
export async function writeDoc(report: string): Promise<void> {
  const text = await Deno.readTextFile(DOC);
  const start = text.indexOf(DOC_START);
  const end = text.indexOf(DOC_END);
  if (start < 0 || end < start) {
    throw new Error(`${DOC} lacks the markers ${DOC_START} … ${DOC_END}`);
  }
  const git = await new Deno.Command("git", {
    args: ["describe", "--always", "--dirty"],
    cwd: ROOT,
    stdout: "piped",
    stderr: "null",
  }).output().catch(() => undefined);
  const commit = git?.success ? new TextDecoder().decode(git.stdout).trim() : "unknown";
  const command = ["deno task bench", ...Deno.args].join(" ");
  const written = [
    DOC_START,
    "",
    `Written by \`${command}\` on ${new Date().toISOString().slice(0, 10)}, at commit ${commit}.`,
    "",
    report,
    "",
    DOC_END,
  ].join("\n");
  await Deno.writeTextFile(DOC, text.slice(0, start) + written + text.slice(end + DOC_END.length));
  const fmt = await new Deno.Command(Deno.execPath(), { args: ["fmt", "--quiet", DOC], cwd: ROOT })
    .output();
  if (!fmt.success) throw new Error(`deno fmt ${DOC} failed`);
  console.error(`bench: wrote the report into ${DOC}`);
}

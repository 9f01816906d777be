/**
 * `deno task bench`: the relay against same-payload references, driven by `wrk` (Debian's
 * package; installed with apt-get when missing) at 64 connections (`wrk -t1`).
 *
 * Each figure is a ratio: the relay's requests/s over a bare `Deno.serve` (bench/bare.ts)
 * answering the same body (`GET /peek`, `GET /results?since=0`, copied from the relay just
 * before) or "OK" (for writes), measured in the same round. Rounds are interleaved: each
 * round loads the reference, the floor (below) and the relay one after another, in an order
 * that turns by one each round, and each figure is the median of the rounds' ratios,
 * because this machine is shared and noisy. Beside each ratio: the CPU
 * time of the relay's main thread (the JavaScript thread, which also runs Deno's HTTP
 * server) per request, in µs, from `/proc/<pid>/task/<pid>/stat` (utime + stime, in clock
 * ticks of 10 ms, over the whole load), the figure least disturbed by other processes.
 * Also: p99 latencies, idle RSS after start, push-to-delivery latency, idle writes.
 *
 * A third server, the floor (bench/floor.ts), runs in the same rounds: the least any relay
 * on this stack must do per request (read the key, log the request, commit a write to KV
 * before answering) and nothing else. The targets are set against it, on the main thread's
 * CPU per request in the same rounds (docs/benchmarks.md, "The targets"): the relay's µs
 * over the floor's, round by round, then the median. Its idle RSS is the memory of Deno,
 * KV, Hono and zod alone, with one timer pending as in every relay.
 *
 * Options: `--duration <s>` per load (default 5), `--rounds <n>` (default 3), `--idle <s>`
 * for the idle-write figure (default 60; 0 skips it), `--connections <n>` (default 64),
 * `--only <a,b>` (figures: peek, results, submit, push, health, pull), `--keep` (no
 * `/clear` between rounds: the duplicate records and the database grow round by round),
 * `--floor-headers` (the floor answers with the relay's response headers: what HTTP's
 * exactness costs on Deno's server, bench/floor.ts),
 * `--profile <figure>` (only that figure, with the relay under V8's CPU profiler; prints
 * where its JavaScript thread's time went, from bench/profile.ts), `--doc` (also writes the
 * report into docs/benchmarks.md, between the markers of its section "The latest run", and
 * formats that file with `deno fmt`), `--help`. A wrong option or number ends it with exit
 * code 2.
 *
 * This file holds the options, the rounds and the run; bench/loads.ts starts the servers and
 * drives the loads, bench/report.ts holds the figures, their targets and the report.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { parseOrExit, type Usage, usageError, wholeNumber } from "./_common.ts";
import {
  copyBody,
  deliveryLatency,
  dirSize,
  ensureWrk,
  type Load,
  rssMb,
  seed,
  type Server,
  startServer,
  writeBytes,
  wrk,
} from "./loads.ts";
import { profileTable, summarize } from "./profile.ts";
import { FIGURES, report, type Round, writeDoc } from "./report.ts";

const USAGE: Usage = {
  program: "bench",
  text: `usage: deno task bench [options]
  --rounds <n>        interleaved rounds (default 3)
  --duration <s>      seconds of each load (default 5)
  --connections <n>   wrk connections (default 64)
  --only <a,b>        figures: peek, results, submit, push, health, pull (default all)
  --idle <s>          seconds of the idle-write check; 0 skips it (default 60)
  --keep              no /clear between rounds
  --floor-headers     the floor answers with the relay's response headers
  --profile <figure>  that figure alone, with the relay under V8's CPU profiler
  --doc               also write the report into docs/benchmarks.md
  --help              this text`,
};

const { values } = parseOrExit(USAGE, () =>
  parseArgs({
    options: {
      duration: { type: "string", default: "5" },
      rounds: { type: "string", default: "3" },
      idle: { type: "string", default: "60" },
      connections: { type: "string", default: "64" },
      only: { type: "string", default: "peek,results,submit,push,health,pull" },
      keep: { type: "boolean", default: false },
      "floor-headers": { type: "boolean", default: false },
      profile: { type: "string" },
      doc: { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
  }));
if (values.help) {
  console.log(USAGE.text);
  Deno.exit(0);
}
const ROUNDS = wholeNumber(USAGE, "--rounds", values.rounds, 1);
const PROFILE = values.profile;
const ONLY = new Set(PROFILE === undefined ? values.only.split(",") : [PROFILE]);
const DURATION = wholeNumber(USAGE, "--duration", values.duration, 1);
const IDLE = wholeNumber(USAGE, "--idle", values.idle, 0);
const CONNECTIONS = wholeNumber(USAGE, "--connections", values.connections, 1);
const WRK = { connections: CONNECTIONS, duration: DURATION };

// The latest run in docs/benchmarks.md is measured against the floor as it is.
if (values.doc && values["floor-headers"]) {
  usageError(USAGE, "--doc writes the run against the floor as it is: leave out --floor-headers");
}

for (const id of ONLY) {
  if (!(id in FIGURES)) {
    usageError(USAGE, `no figure "${id}": use ${Object.keys(FIGURES).join(", ")}`);
  }
}

/**
 * Runs the bench; whatever happens, the servers it started are killed and its temporary
 * directories removed.
 */
async function main(): Promise<void> {
  await ensureWrk();
  const servers: Server[] = [];
  const dirs: string[] = [];
  try {
    await measure(servers, dirs);
  } finally {
    for (const server of servers) {
      try {
        server.child.kill("SIGKILL");
      } catch {
        // already exited
      }
    }
    for (const dir of dirs) await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

/**
 * Starts the three servers (recorded in `servers`, their temporary directories in `dirs`,
 * for {@linkcode main} to clean up), measures, and prints the report.
 */
async function measure(servers: Server[], dirs: string[]): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "relay-bench-" });
  dirs.push(dir);
  const bare = await startServer(
    ["run", "--allow-net=127.0.0.1", "bench/bare.ts"],
    /^listening (\d+)$/,
  );
  servers.push(bare);
  // The floor's database grows by every write of every round: kept apart from the relay's,
  // whose size is a figure.
  const floorDir = await Deno.makeTempDir({ prefix: "relay-bench-floor-" });
  dirs.push(floorDir);
  const floor = await startServer(
    [
      "run",
      "-A",
      "bench/floor.ts",
      `${floorDir}/floor.kv`,
      ...(values["floor-headers"] ? ["--headers"] : []),
    ],
    /^listening (\d+)$/,
  );
  servers.push(floor);
  const relay = await startServer(
    [
      "run",
      "-P=relay",
      "--quiet",
      ...(Deno.env.get("BENCH_V8_FLAGS") ? [`--v8-flags=${Deno.env.get("BENCH_V8_FLAGS")}`] : []),
      ...(PROFILE === undefined ? [] : [`--cpu-prof-dir=${dir}/profile`]),
      "main.ts",
      "serve",
      "--hostname",
      "127.0.0.1",
      "--port",
      "0",
      "--db",
      `${dir}/relay.kv`,
    ],
    /^relay listening on http:\/\/127\.0\.0\.1:(\d+)$/,
  );
  servers.push(relay);
  const base = `http://127.0.0.1:${relay.port}`;
  const bareBase = `http://127.0.0.1:${bare.port}`;
  const floorBase = `http://127.0.0.1:${floor.port}`;
  // Start to first /health 200 (the process was started, then polled every 2 ms).
  let firstHealth = NaN;
  for (;;) {
    try {
      const res = await fetch(`${base}/health`);
      await res.body?.cancel();
      if (res.status === 200) {
        firstHealth = performance.now() - relay.startedAt;
        break;
      }
    } catch {
      // not yet
    }
    await new Promise((r) => setTimeout(r, 2));
  }
  // Idle RSS 5 s after the first answer: start-up garbage is collected by then.
  await new Promise((r) => setTimeout(r, 5000));
  const idleRss = rssMb(relay.child.pid);
  const bareIdleRss = rssMb(bare.child.pid);
  const floorIdleRss = rssMb(floor.child.pid);

  const measured = new Map<string, Round[]>();
  const sizes: Record<string, number> = {};
  for (let round = 1; round <= ROUNDS; round++) {
    await seed(base, round, round === 1 || !values.keep);
    for (const [id, figure] of Object.entries(FIGURES)) {
      if (!ONLY.has(id)) continue;
      if (figure.reference !== "/") {
        sizes[id] = await copyBody(base, bareBase, figure.relayPath, figure.reference);
        await copyBody(base, floorBase, figure.relayPath, figure.reference);
      }
      // The order turns each round, so that none always follows another's disk work.
      const loads = [
        () => wrk(bareBase + figure.reference, figure.script, bare.child.pid, WRK),
        () => wrk(floorBase + figure.reference, figure.script, floor.child.pid, WRK),
        () => wrk(base + figure.relayPath, figure.script, relay.child.pid, WRK),
      ];
      const results: Load[] = [];
      for (let i = 0; i < loads.length; i++) {
        const which = (i + round - 1) % loads.length;
        results[which] = await loads[which]!();
      }
      const [reference, least, load] = results as [Load, Load, Load];
      if (reference.statuses !== "0" || least.statuses !== "0") {
        throw new Error(
          `round ${round} ${id}: the reference answered ${reference.statuses} and the floor ${least.statuses} requests with an error status`,
        );
      }
      if (!measured.has(id)) measured.set(id, []);
      measured.get(id)!.push({ relay: load, reference, floor: least });
      console.error(
        `round ${round} ${id}: ${Math.round(load.rps)}/s vs ${Math.round(reference.rps)}/s = ${
          (load.rps / reference.rps).toFixed(2)
        }×, ${load.cpuUs.toFixed(1)} µs/req (reference ${reference.cpuUs.toFixed(1)}), p99 ${
          load.p99.toFixed(1)
        } ms; floor ${(least.rps / reference.rps).toFixed(2)}×, ${
          least.cpuUs.toFixed(1)
        } µs/req, p99 ${least.p99.toFixed(1)} ms`,
      );
    }
  }
  // A profile is of the load alone (and the seeding), not of the delivery test.
  const delivery = PROFILE === undefined
    ? await deliveryLatency(base, 500)
    : { longPoll: [], stream: [] };
  const loadedRss = rssMb(relay.child.pid);

  // Idle: no requests at all for IDLE seconds; then the relay has given back memory (after
  // 30 quiet seconds: src/server/idle_memory.ts).
  let idleWrites = NaN;
  let restedRss = NaN;
  let floorRestedRss = NaN;
  if (IDLE > 0) {
    await new Promise((r) => setTimeout(r, 2000));
    const before = writeBytes(relay.child.pid);
    await new Promise((r) => setTimeout(r, IDLE * 1000));
    idleWrites = writeBytes(relay.child.pid) - before;
    restedRss = rssMb(relay.child.pid);
    floorRestedRss = rssMb(floor.child.pid);
  }

  relay.child.kill("SIGTERM");
  await relay.child.status;
  for (const server of [bare, floor]) {
    server.child.kill("SIGTERM");
    await server.child.status;
  }
  let profile = "";
  if (PROFILE !== undefined) {
    // One file per thread (the search index's and speech workers' too): the main thread's
    // is the one whose JavaScript ran the most under the load.
    let busiest = -1;
    for await (const entry of Deno.readDir(`${dir}/profile`)) {
      if (!entry.name.endsWith(".cpuprofile")) continue;
      const path = `${dir}/profile/${entry.name}`;
      const { busy } = summarize(path);
      if (busy > busiest) [busiest, profile] = [busy, profileTable(path)];
    }
  }
  const dataBytes = await dirSize(dir);

  const text = report({
    connections: CONNECTIONS,
    duration: DURATION,
    rounds: ROUNDS,
    idle: IDLE,
    profileOf: PROFILE,
    profile,
    measured,
    sizes,
    idleRss,
    bareIdleRss,
    floorIdleRss,
    loadedRss,
    restedRss,
    floorRestedRss,
    firstHealth,
    floorHeaders: values["floor-headers"],
    delivery,
    dataBytes,
    idleWrites,
  });
  console.log(text);
  if (values.doc) await writeDoc(text);
}

await main();

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
 * `--profile <figure>` (only that figure, with the relay under V8's CPU profiler; prints
 * where its JavaScript thread's time went, from bench/profile.ts), `--doc` (also writes the
 * report into docs/benchmarks.md, between the markers of its section "The latest run", and
 * formats that file with `deno fmt`), `--help`. A wrong option or number ends it with exit
 * code 2.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";
import { mainThreadCpuUs, parseOrExit, type Usage, usageError, wholeNumber } from "./_common.ts";
import { profileTable } from "./profile.ts";

const ROOT = fileURLToPath(new URL("../", import.meta.url));
const KEY = "bench-key-0123456789abcdef";

const USAGE: Usage = {
  program: "bench",
  text: `usage: deno task bench [options]
  --rounds <n>        interleaved rounds (default 3)
  --duration <s>      seconds of each load (default 5)
  --connections <n>   wrk connections (default 64)
  --only <a,b>        figures: peek, results, submit, push, health, pull (default all)
  --idle <s>          seconds of the idle-write check; 0 skips it (default 60)
  --keep              no /clear between rounds
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

/** One wrk run's figures. */
interface Load {
  /** Requests answered per second. */
  rps: number;
  /** CPU time of the server's main thread per request, µs. */
  cpuUs: number;
  /** Median latency, ms. */
  p50: number;
  /** 99th percentile of latency, ms. */
  p99: number;
  /** Answers with a status of 400 or more (wrk's "Non-2xx or 3xx"), as a decimal string. */
  statuses: string;
}

/** A server process under test and what it printed. */
interface Server {
  child: Deno.ChildProcess;
  port: number;
  startedAt: number;
  lines: string[];
}

async function ensureWrk(): Promise<void> {
  if (await succeeds("wrk", ["--version"])) return;
  console.error("bench: installing wrk from Debian's packages");
  const apt = async (...args: string[]) => {
    const out = await new Deno.Command("apt-get", {
      args,
      env: { DEBIAN_FRONTEND: "noninteractive" },
    }).output();
    return out.success;
  };
  if (!(await apt("install", "-y", "-qq", "wrk"))) {
    await apt("update", "-qq");
    if (!(await apt("install", "-y", "-qq", "wrk"))) throw new Error("cannot install wrk");
  }
}

async function succeeds(cmd: string, args: string[]): Promise<boolean> {
  try {
    return (await new Deno.Command(cmd, { args, stdout: "null", stderr: "null" }).output())
      .code <= 1;
  } catch {
    return false;
  }
}

/** Starts a Deno process and waits for the line that gives its port. */
async function startServer(args: string[], portLine: RegExp): Promise<Server> {
  const startedAt = performance.now();
  const child = new Deno.Command(Deno.execPath(), {
    args,
    cwd: ROOT,
    stdin: "null",
    stdout: "piped",
    stderr: "inherit",
    env: { RELAY_API_KEY: KEY },
  }).spawn();
  const lines: string[] = [];
  const port = Promise.withResolvers<number>();
  (async () => {
    let pending = "";
    let listening = false;
    const decoder = new TextDecoder();
    for await (const chunk of child.stdout) {
      // After the start lines, the access log is read and dropped undecoded, as cheaply as
      // a log collector would take it.
      if (listening) continue;
      pending += decoder.decode(chunk);
      let nl;
      while ((nl = pending.indexOf("\n")) >= 0) {
        const line = pending.slice(0, nl);
        pending = pending.slice(nl + 1);
        lines.push(line);
        const m = portLine.exec(line);
        if (m?.[1]) {
          listening = true;
          port.resolve(Number(m[1]));
        }
      }
    }
    port.reject(new Error(`server exited before listening:\n${lines.join("\n")}`));
  })();
  return { child, port: await port.promise, startedAt, lines };
}

function rssMb(pid: number): number {
  const status = Deno.readTextFileSync(`/proc/${pid}/status`);
  const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN);
  return kb / 1024;
}

function writeBytes(pid: number): number {
  const io = Deno.readTextFileSync(`/proc/${pid}/io`);
  return Number(/^write_bytes:\s+(\d+)/m.exec(io)?.[1] ?? NaN);
}

const LUA_REPORT = `
done = function(summary, latency, requests)
  io.write(string.format("RESULT %d %d %d %d\\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99)))
end
`;

/** A wrk script: `body` is Lua that sets up `request`; every thread numbers its own. */
function luaScript(body: string): string {
  return `
local counter = 0
local thread_id = 0
local threads = {}
setup = function(thread)
  thread:set("thread_id", #threads + 1)
  table.insert(threads, thread)
end
${body}
${LUA_REPORT}`;
}

const SCRIPTS: Record<string, string> = {
  get: luaScript(`
request = function()
  return wrk.format("GET", nil, { ["X-Auth-Key"] = "${KEY}" })
end`),
  submit: luaScript(`
request = function()
  counter = counter + 1
  return wrk.format("POST", "/submit?queue=general",
    { ["X-Auth-Key"] = "${KEY}", ["Content-Type"] = "text/plain" },
    "https://example.com/article/" .. thread_id .. "-" .. counter .. "-" .. math.random(1e9))
end`),
  push: luaScript(`
request = function()
  counter = counter + 1
  return wrk.format("POST", "/push",
    { ["X-Auth-Key"] = "${KEY}", ["Content-Type"] = "text/plain" },
    "# Summary " .. thread_id .. "-" .. counter .. "\\n\\nA processed result of a few lines.")
end`),
  // A drain cycle: each connection submits an item, then pulls the queue.
  pull: luaScript(`
request = function()
  counter = counter + 1
  if counter % 2 == 1 then
    return wrk.format("POST", "/submit?queue=article",
      { ["X-Auth-Key"] = "${KEY}", ["Content-Type"] = "text/plain" },
      "https://example.com/a/" .. thread_id .. "-" .. counter .. "-" .. math.random(1e9))
  end
  return wrk.format("GET", "/pull?queue=article", { ["X-Auth-Key"] = "${KEY}" })
end`),
};

async function wrk(url: string, script: string, pid: number): Promise<Load> {
  const file = await Deno.makeTempFile({ suffix: ".lua" });
  await Deno.writeTextFile(file, script);
  const cpuBefore = mainThreadCpuUs(pid);
  const out = await new Deno.Command("wrk", {
    args: ["-t1", `-c${CONNECTIONS}`, `-d${DURATION}s`, "-s", file, url],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const cpu = mainThreadCpuUs(pid) - cpuBefore;
  await Deno.remove(file);
  const text = new TextDecoder().decode(out.stdout);
  const m = /RESULT (\d+) (\d+) (\d+) (\d+)/.exec(text);
  if (!m) {
    throw new Error(`wrk printed no result:\n${text}\n${new TextDecoder().decode(out.stderr)}`);
  }
  const [requests, durationUs, p50, p99] = m.slice(1).map(Number) as [
    number,
    number,
    number,
    number,
  ];
  const statuses = /Non-2xx or 3xx responses: (\d+)/.exec(text)?.[1] ?? "0";
  return {
    rps: requests / (durationUs / 1e6),
    cpuUs: cpu / requests,
    p50: p50 / 1000,
    p99: p99 / 1000,
    statuses,
  };
}

async function call(base: string, path: string, init: RequestInit = {}): Promise<Response> {
  const res = await fetch(base + path, withKey(init));
  await res.body?.cancel();
  return res;
}

/** A request with the key, answered with its JSON body. */
async function callJson<T>(base: string, path: string, init: RequestInit = {}): Promise<T> {
  return await (await fetch(base + path, withKey(init))).json();
}

function withKey(init: RequestInit): RequestInit {
  const headers = new Headers(init.headers);
  headers.set("x-auth-key", KEY);
  return { ...init, headers };
}

/** The `q`-quantile (0–1) of `values`, nearest rank. */
function quantile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? NaN;
}

/**
 * Push-to-delivery latency: `count` pushes, one at a time; each is timed from
 * just before its `POST /push` until a long-polling `GET /results?wait=` reader and a
 * `GET /results/stream` reader (both in this process) have it.
 *
 * @returns Latencies in ms, per reader.
 */
async function deliveryLatency(
  base: string,
  count: number,
): Promise<{ longPoll: number[]; stream: number[] }> {
  const since = (await callJson<{ cursor: number }>(base, "/results")).cursor;
  const sentAt = new Map<string, number>();
  const arrived = { longPoll: new Map<string, number>(), stream: new Map<string, number>() };
  const stop = new AbortController();
  let waiting: (() => void) | undefined;
  const note = (reader: Map<string, number>, content: string) => {
    reader.set(content, performance.now());
    waiting?.();
  };
  const longPoller = (async () => {
    let cursor = since;
    while (!stop.signal.aborted) {
      const page = await callJson<{ cursor: number; items: Array<{ c: string }> }>(
        base,
        `/results?since=${cursor}&wait=30`,
        {
          signal: stop.signal,
        },
      ).catch(() => undefined);
      if (page === undefined) return;
      for (const item of page.items) note(arrived.longPoll, item.c);
      cursor = page.cursor;
    }
  })();
  const streamed = await fetch(`${base}/results/stream?since=${since}&key=${KEY}`, {
    signal: stop.signal,
  });
  const streamer = (async () => {
    let buffer = "";
    try {
      for await (const chunk of streamed.body!.pipeThrough(new TextDecoderStream())) {
        buffer += chunk;
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const data = /^data: (.*)$/m.exec(buffer.slice(0, end))?.[1];
          buffer = buffer.slice(end + 2);
          if (data !== undefined) note(arrived.stream, data);
        }
      }
    } catch {
      // stopped
    }
  })();
  await new Promise((r) => setTimeout(r, 200)); // both readers are waiting
  for (let i = 0; i < count; i++) {
    const content = `delivery ${i}`;
    const both = () => arrived.longPoll.has(content) && arrived.stream.has(content);
    const delivered = new Promise<void>((resolve) => {
      waiting = () => both() && resolve();
    });
    sentAt.set(content, performance.now());
    await call(base, "/push", { method: "POST", body: content });
    await Promise.race([delivered, new Promise((r) => setTimeout(r, 5000))]);
  }
  stop.abort();
  await Promise.all([longPoller, streamer]);
  const latencies = (reader: Map<string, number>) =>
    [...sentAt].map(([content, at]) => (reader.get(content) ?? Infinity) - at);
  return { longPoll: latencies(arrived.longPoll), stream: latencies(arrived.stream) };
}

async function dirSize(dir: string): Promise<number> {
  let size = 0;
  for await (const entry of Deno.readDir(dir)) {
    if (entry.isFile) size += (await Deno.stat(`${dir}/${entry.name}`)).size;
  }
  return size;
}

/** One round of one figure: the three servers' loads. */
interface Round {
  relay: Load;
  reference: Load;
  floor: Load;
}

/** One figure: a relay load and the reference it is divided by. */
interface Figure {
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
}

const FIGURES: Record<string, Figure> = {
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

for (const id of ONLY) {
  if (!(id in FIGURES)) {
    usageError(USAGE, `no figure "${id}": use ${Object.keys(FIGURES).join(", ")}`);
  }
}

function median(values: number[]): number {
  return quantile(values, 0.5);
}

/** Empties the relay and queues 10 items per queue and 10 results, unique to `round`. */
async function seed(base: string, round: number, clear: boolean): Promise<void> {
  if (clear) await call(base, "/clear", { method: "POST" });
  for (const q of ["qa", "article", "general"]) {
    for (let i = 0; i < 10; i++) {
      await call(base, `/submit?queue=${q}`, {
        method: "POST",
        body: `https://example.com/${q}/round-${round}/${i}`,
      });
    }
  }
  for (let i = 0; i < 10; i++) {
    await call(base, "/push", { method: "POST", body: `# Result ${i}\n\nA few lines of output.` });
  }
}

/** Copies the relay's answer to `relayPath` to the bare server's `reference` path. */
async function copyBody(base: string, bareBase: string, relayPath: string, reference: string) {
  const res = await fetch(base + relayPath, withKey({}));
  const body = await res.text();
  await (await fetch(bareBase + reference, { method: "PUT", body })).body?.cancel();
  return body.length;
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
    ["run", "-A", "bench/floor.ts", `${floorDir}/floor.kv`],
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
        () => wrk(bareBase + figure.reference, figure.script, bare.child.pid),
        () => wrk(floorBase + figure.reference, figure.script, floor.child.pid),
        () => wrk(base + figure.relayPath, figure.script, relay.child.pid),
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
    for await (const entry of Deno.readDir(`${dir}/profile`)) {
      if (entry.name.endsWith(".cpuprofile")) {
        profile = profileTable(`${dir}/profile/${entry.name}`);
      }
    }
  }
  const dataBytes = await dirSize(dir);

  const misses: string[] = [];
  const out: string[] = [];
  out.push(
    `| figure (${CONNECTIONS} connections, ${DURATION} s, median of ${ROUNDS} rounds) | relay µs/req | floor µs/req | relay ÷ floor | rounds | relay p99 ms | floor p99 ms | × reference | floor × reference | reference µs/req | non-2xx | target |`,
  );
  out.push("|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---|");
  for (const [id, runs] of measured) out.push(figureRow(id, runs, sizes[id], misses));
  const figure = (name: string, value: string, target: string, ok: boolean) => {
    if (!ok) misses.push(`${name}: ${value} (target ${target})`);
    out.push(`| ${name} | ${value} | ${target} | ${ok ? "met" : "**missed**"} |`);
  };
  out.push("");
  out.push("| figure | value | target | |");
  out.push("|---|---:|---|---|");
  figure(
    "idle RSS, 5 s after start, over the floor's",
    `${(idleRss - floorIdleRss).toFixed(1)} MB (${idleRss.toFixed(1)} MB)`,
    "≤ +6 MB",
    idleRss - floorIdleRss <= 6,
  );
  figure("idle RSS of the bare server", `${bareIdleRss.toFixed(1)} MB`, "—", true);
  figure(
    "idle RSS of the floor (Deno.serve, KV, Hono, zod, a timer)",
    `${floorIdleRss.toFixed(1)} MB`,
    "—",
    true,
  );
  figure("RSS after the loads", `${loadedRss.toFixed(1)} MB`, "—", true);
  if (IDLE > 0) {
    figure(
      `RSS after the loads and ${IDLE + 2} idle s, over idle`,
      `${(restedRss - idleRss).toFixed(1)} MB (${restedRss.toFixed(1)} MB)`,
      "≤ +12 MB",
      restedRss - idleRss <= 12,
    );
    // What the stack alone keeps after the same loads: the floor's own growth.
    figure(
      `the floor's RSS after the same loads and idle, over its idle`,
      `${(floorRestedRss - floorIdleRss).toFixed(1)} MB (${floorRestedRss.toFixed(1)} MB)`,
      "—",
      true,
    );
  }
  figure(
    "start to first /health 200",
    `${firstHealth.toFixed(0)} ms`,
    "≤ 300 ms",
    firstHealth <= 300,
  );
  for (const [reader, ms] of Object.entries(delivery)) {
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
  figure("data files after the run", `${(dataBytes / 1024).toFixed(0)} KiB`, "—", true);
  if (IDLE > 0) {
    figure(`disk writes in ${IDLE} idle s`, `${idleWrites} bytes`, "0 bytes", idleWrites === 0);
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
    }; wrk -t1 -c${CONNECTIONS} -d${DURATION}s, ${ROUNDS} interleaved rounds`,
  );
  out.push("");
  out.push(
    misses.length === 0 ? "every target met" : `short of target:\n\n- ${misses.join("\n- ")}`,
  );
  if (PROFILE !== undefined) out.push("", `profile of the relay under ${PROFILE}:`, "", profile);
  const report = out.join("\n");
  console.log(report);
  if (values.doc) await writeDoc(report);
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
    goals.push(`p99 ≤ ${figure.p99Target}× the floor's`);
    if (p99 > figure.p99Target * floorP99) {
      ok = false;
      misses.push(
        `${figure.name}: p99 ${p99.toFixed(1)} ms > ${figure.p99Target}× the floor's ${
          floorP99.toFixed(1)
        } ms`,
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
async function writeDoc(report: string): Promise<void> {
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

await main();

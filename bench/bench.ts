/**
 * `deno task bench`: the relay against a bare `Deno.serve` "OK" server (bench/bare.ts),
 * both on this machine in the same run, driven by `wrk` (Debian's package; installed with
 * apt-get when missing) at 64 connections. Prints a Markdown table of every figure against
 * its target (issues 5 and 6) and says which fall short. Not part of CI. Also measures
 * push-to-delivery latency to a long-polling reader and a stream reader (issue 6).
 *
 * Options: `--duration <s>` per load (default 10), `--idle <s>` for the idle-write figure
 * (default 60), `--connections <n>` (default 64).
 *
 * @module
 */

import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../", import.meta.url));
const KEY = "bench-key-0123456789abcdef";

const { values } = parseArgs({
  options: {
    duration: { type: "string", default: "10" },
    idle: { type: "string", default: "60" },
    connections: { type: "string", default: "64" },
  },
});
const DURATION = Number(values.duration);
const IDLE = Number(values.idle);
const CONNECTIONS = Number(values.connections);

/** One wrk run's figures. */
interface Load {
  rps: number;
  p50: number;
  p99: number;
  errors: number;
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
  local codes = ""
  io.write(string.format("RESULT %d %d %d %d %d\\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    summary.errors.status + summary.errors.connect + summary.errors.read +
    summary.errors.write + summary.errors.timeout))
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

async function wrk(url: string, script: string): Promise<Load> {
  const file = await Deno.makeTempFile({ suffix: ".lua" });
  await Deno.writeTextFile(file, script);
  const out = await new Deno.Command("wrk", {
    args: ["-t2", `-c${CONNECTIONS}`, `-d${DURATION}s`, "-s", file, url],
    stdout: "piped",
    stderr: "piped",
  }).output();
  await Deno.remove(file);
  const text = new TextDecoder().decode(out.stdout);
  const m = /RESULT (\d+) (\d+) (\d+) (\d+) (\d+)/.exec(text);
  if (!m) {
    throw new Error(`wrk printed no result:\n${text}\n${new TextDecoder().decode(out.stderr)}`);
  }
  const [requests, durationUs, p50, p99, errors] = m.slice(1).map(Number) as [
    number,
    number,
    number,
    number,
    number,
  ];
  const statuses = /Non-2xx or 3xx responses: (\d+)/.exec(text)?.[1] ?? "0";
  return { rps: requests / (durationUs / 1e6), p50: p50 / 1000, p99: p99 / 1000, errors, statuses };
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
 * Push-to-delivery latency (issue 6): `count` pushes, one at a time; each is timed from
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

async function main(): Promise<void> {
  await ensureWrk();
  const dir = await Deno.makeTempDir({ prefix: "relay-bench-" });
  const bare = await startServer(
    ["run", "--allow-net=127.0.0.1", "bench/bare.ts"],
    /^listening (\d+)$/,
  );
  const relay = await startServer(
    [
      "run",
      "-P=relay",
      "--quiet",
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
  const base = `http://127.0.0.1:${relay.port}`;
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
  await new Promise((r) => setTimeout(r, 1000));
  const idleRss = rssMb(relay.child.pid);
  const bareIdleRss = rssMb(bare.child.pid);

  const rows: Array<[string, Load]> = [];
  const bareLoad = await wrk(`http://127.0.0.1:${bare.port}/`, SCRIPTS.get!);
  rows.push(["bare Deno.serve", bareLoad]);
  rows.push(["GET /health", await wrk(`${base}/health`, SCRIPTS.get!)]);
  rows.push(["POST /submit (unique)", await wrk(base, SCRIPTS.submit!)]);
  rows.push(["POST /push", await wrk(base, SCRIPTS.push!)]);
  rows.push(["submit + GET /pull (drain cycles)", await wrk(base, SCRIPTS.pull!)]);
  const delivery = await deliveryLatency(base, 500);
  // Peek and results read queues and a feed that hold 10 items each.
  await call(base, "/clear", { method: "POST" });
  for (const q of ["qa", "article", "general"]) {
    for (let i = 0; i < 10; i++) {
      await call(base, `/submit?queue=${q}`, {
        method: "POST",
        body: `https://example.com/${q}/${i}`,
      });
    }
  }
  for (let i = 0; i < 10; i++) {
    await call(base, "/push", { method: "POST", body: `# Result ${i}\n\nA few lines of output.` });
  }
  rows.push(["GET /peek (30 items)", await wrk(`${base}/peek`, SCRIPTS.get!)]);
  rows.push(["GET /results (10 items)", await wrk(`${base}/results?since=0`, SCRIPTS.get!)]);
  const loadedRss = rssMb(relay.child.pid);

  // Idle: no requests at all for IDLE seconds.
  await new Promise((r) => setTimeout(r, 2000));
  const before = writeBytes(relay.child.pid);
  await new Promise((r) => setTimeout(r, IDLE * 1000));
  const idleWrites = writeBytes(relay.child.pid) - before;

  relay.child.kill("SIGTERM");
  await relay.child.status;
  bare.child.kill("SIGTERM");
  await bare.child.status;
  const dataBytes = await dirSize(dir);
  await Deno.remove(dir, { recursive: true });

  const targets: Record<string, number> = {
    "POST /submit (unique)": 0.25,
    "POST /push": 0.25,
    "GET /peek (30 items)": 0.5,
    "GET /results (10 items)": 0.5,
  };
  const misses: string[] = [];
  const out: string[] = [];
  out.push(
    `| load (${CONNECTIONS} connections, ${DURATION} s) | requests/s | × bare | p50 ms | p99 ms | non-2xx | target |`,
  );
  out.push("|---|---:|---:|---:|---:|---:|---|");
  for (const [name, load] of rows) {
    const ratio = load.rps / bareLoad.rps;
    const want = targets[name];
    const goals: string[] = [];
    if (want !== undefined) {
      goals.push(`≥ ${want} × bare`);
      if (ratio < want) misses.push(`${name}: ${ratio.toFixed(2)} × bare < ${want}`);
    }
    if (name !== "bare Deno.serve") {
      goals.push("p99 ≤ 25 ms");
      if (load.p99 > 25) misses.push(`${name}: p99 ${load.p99.toFixed(1)} ms > 25 ms`);
    }
    const met = goals.length === 0
      ? ""
      : misses.some((m) => m.startsWith(name))
      ? "**missed**"
      : "met";
    out.push(
      `| ${name} | ${Math.round(load.rps)} | ${ratio.toFixed(2)} | ${load.p50.toFixed(2)} | ${
        load.p99.toFixed(2)
      } | ${load.statuses} | ${goals.join(", ")} ${met} |`,
    );
  }
  const figure = (name: string, value: string, target: string, ok: boolean) => {
    if (!ok) misses.push(`${name}: ${value} (target ${target})`);
    out.push(`| ${name} | ${value} | ${target} | ${ok ? "met" : "**missed**"} |`);
  };
  out.push("");
  out.push("| figure | value | target | |");
  out.push("|---|---:|---|---|");
  figure("idle RSS", `${idleRss.toFixed(1)} MB`, "≤ 60 MB", idleRss <= 60);
  figure("idle RSS of the bare server", `${bareIdleRss.toFixed(1)} MB`, "—", true);
  figure("RSS after load", `${loadedRss.toFixed(1)} MB`, "—", true);
  figure(
    "start to first /health 200",
    `${firstHealth.toFixed(0)} ms`,
    "≤ 300 ms",
    firstHealth <= 300,
  );
  for (const [reader, ms] of Object.entries(delivery)) {
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
  figure(`disk writes in ${IDLE} idle s`, `${idleWrites} bytes`, "0 bytes", idleWrites === 0);
  console.log(out.join("\n"));
  console.log("");
  const cpus =
    Deno.readTextFileSync("/proc/cpuinfo").split("\n").filter((l) => l.startsWith("processor"))
      .length;
  const mem = Number(/MemTotal:\s+(\d+)/.exec(Deno.readTextFileSync("/proc/meminfo"))?.[1]) / 1024 /
    1024;
  console.log(
    `machine: ${cpus} cores, ${mem.toFixed(0)} GiB; deno ${Deno.version.deno}; ${
      new Date().toISOString().slice(0, 10)
    }; wrk -t2 -c${CONNECTIONS} -d${DURATION}s`,
  );
  console.log(
    misses.length === 0 ? "every target met" : `short of target:\n- ${misses.join("\n- ")}`,
  );
}

await main();

/**
 * The bench's servers and loads: starting a server process and reading its port, driving
 * `wrk` at it (installed from Debian's packages when missing), calls with the key, the
 * push-to-delivery timing, and the process figures read from /proc (RSS, bytes written).
 *
 * @module
 */

import { fileURLToPath } from "node:url";
import { mainThreadCpuUs } from "./_common.ts";

/** The repository's root, where the servers run. */
export const ROOT = fileURLToPath(new URL("../", import.meta.url));
/** The API key the relay under test is started with and every call sends. */
export const KEY = "bench-key-0123456789abcdef";

/** One wrk run's figures. */
export interface Load {
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
export interface Server {
  child: Deno.ChildProcess;
  port: number;
  startedAt: number;
  lines: string[];
}

/** Makes sure `wrk` is on PATH: installs Debian's package (apt-get) when it is missing.
 *
 * @throws {Error} when apt-get cannot install it. */
export async function ensureWrk(): Promise<void> {
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
export async function startServer(args: string[], portLine: RegExp): Promise<Server> {
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

/** The resident set of process `pid`, MB (VmRSS in /proc/<pid>/status). */
export function rssMb(pid: number): number {
  const status = Deno.readTextFileSync(`/proc/${pid}/status`);
  const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN);
  return kb / 1024;
}

/** Bytes process `pid` has caused to be written to disk (write_bytes in /proc/<pid>/io). */
export function writeBytes(pid: number): number {
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

/** The wrk scripts of the figures: GET with the key, unique submits, pushes, drain cycles. */
export const SCRIPTS: Record<string, string> = {
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

/**
 * One wrk load of `url` with `script` (`wrk -t1`, `connections` connections for `duration` s),
 * and the main-thread CPU of process `pid` meanwhile.
 *
 * @throws {Error} when wrk prints no result.
 */
export async function wrk(
  url: string,
  script: string,
  pid: number,
  { connections, duration }: { connections: number; duration: number },
): Promise<Load> {
  const file = await Deno.makeTempFile({ suffix: ".lua" });
  await Deno.writeTextFile(file, script);
  const cpuBefore = mainThreadCpuUs(pid);
  const out = await new Deno.Command("wrk", {
    args: ["-t1", `-c${connections}`, `-d${duration}s`, "-s", file, url],
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

/**
 * Push-to-delivery latency: `count` pushes, one at a time; each is timed from
 * just before its `POST /push` until a long-polling `GET /results?wait=` reader and a
 * `GET /results/stream` reader (both in this process) have it.
 *
 * @returns Latencies in ms, per reader.
 */
export async function deliveryLatency(
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

/** The total size of the files directly in `dir`, bytes. */
export async function dirSize(dir: string): Promise<number> {
  let size = 0;
  for await (const entry of Deno.readDir(dir)) {
    if (entry.isFile) size += (await Deno.stat(`${dir}/${entry.name}`)).size;
  }
  return size;
}

/** Empties the relay and queues 10 items per queue and 10 results, unique to `round`. */
export async function seed(base: string, round: number, clear: boolean): Promise<void> {
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

/** Copies the relay's answer to `relayPath` to the bare server's `reference` path; returns its length. */
export async function copyBody(
  base: string,
  bareBase: string,
  relayPath: string,
  reference: string,
): Promise<number> {
  const res = await fetch(base + relayPath, withKey({}));
  const body = await res.text();
  await (await fetch(bareBase + reference, { method: "PUT", body })).body?.cancel();
  return body.length;
}

/**
 * Test factories: a real Deno KV in a temp directory, the real app, a hand-moved clock,
 * and the real relay process started through `main.ts` under the permission set `relay` of
 * deno.json (`-P=relay`), which the run and compile tasks grant with the same explicit
 * `--allow-*` flags (tests/tasks_test.ts keeps them in step).
 *
 * @module
 */

import assert from "node:assert/strict";
import { NO_SUCH_DIR } from "./_relay.ts";
import { fileURLToPath } from "node:url";
import { createApp } from "../src/server/app.ts";
import { PROBLEM_KINDS, PROBLEM_TYPE_BASE } from "../src/errors.ts";
import type { Clock } from "../src/clock.ts";
import type { LogFormat } from "../src/constants.ts";
import { Logger } from "../src/server/log.ts";
import type { KeyRing } from "../src/access/named_keys.ts";
import type { FailedPublishes } from "../src/publish/failed.ts";
import type { PublishConfig } from "../src/publish/fan_out.ts";
import { createStore, type Store, type StoreStats } from "../src/store/store.ts";

/** The repository root. */
export const ROOT: string = fileURLToPath(new URL("../", import.meta.url));

/** The API key the in-process tests use. */
export const KEY = "test-key-0123456789abcdef";

/** A clock the test moves by hand; starts at 2026-01-01T00:00:00Z. */
export class ManualClock {
  /** Current time, epoch ms. */
  now = Date.UTC(2026, 0, 1);
  /** The clock as the store reads it. */
  readonly read: Clock = () => this.now;
  /** Moves time forward (or back, with a negative `ms`). */
  advance(ms: number): void {
    this.now += ms;
  }
}

/** A KV database in a fresh temp directory, closed and removed on dispose. */
export interface TempKv extends AsyncDisposable {
  kv: Deno.Kv;
  dir: string;
  path: string;
}

/** Opens a Deno KV file in a new temp directory. */
export async function openTempKv(): Promise<TempKv> {
  const dir = await Deno.makeTempDir({ prefix: "relay-test-" });
  const path = `${dir}/relay.kv`;
  const kv = await Deno.openKv(path);
  return {
    kv,
    dir,
    path,
    async [Symbol.asyncDispose]() {
      try {
        kv.close();
      } catch {
        // closed by the test
      }
      await Deno.remove(dir, { recursive: true });
    },
  };
}

/** A store on a temp KV file with a manual clock. */
export interface TestStore extends AsyncDisposable {
  store: Store;
  clock: ManualClock;
  temp: TempKv;
}

/**
 * Creates a store on a temp KV file; `dedupeWindowMs` defaults to 5 minutes. With
 * `systemClock` the store reads the real time (for real-time waits such as a lease ending
 * under a long-poll) and `clock` is not used.
 */
export async function makeStore(
  options: { dedupeWindowMs?: number; seenInMemory?: number; systemClock?: boolean } = {},
): Promise<TestStore> {
  const { systemClock, ...storeOptions } = options;
  const temp = await openTempKv();
  const clock = new ManualClock();
  const store = createStore(temp.kv, {
    ...(systemClock ? {} : { clock: clock.read }),
    ...storeOptions,
  });
  return { store, clock, temp, [Symbol.asyncDispose]: () => temp[Symbol.asyncDispose]() };
}

/** The real app on a temp store, its access log (and any error lines) kept in `logs`. */
export interface TestApp extends TestStore {
  app: ReturnType<typeof createApp>;
  logs: string[];
  /** `app.request(path, init)` with the API key header added. */
  call(path: string, init?: RequestInit): Promise<Response>;
}

/** Builds the app on a temp store with API key {@linkcode KEY}. */
export async function makeApp(
  options: {
    dedupeWindowMs?: number;
    maxBodyBytes?: number;
    qaHosts?: string[];
    publish?: PublishConfig;
    failed?: FailedPublishes;
    keepAliveMs?: number;
    closing?: AbortSignal;
    stopping?: AbortSignal;
    systemClock?: boolean;
    keyRing?: KeyRing;
    logFormat?: LogFormat;
  } = {},
): Promise<TestApp> {
  const { dedupeWindowMs, systemClock, logFormat, ...appOptions } = options;
  const base = await makeStore({
    ...(dedupeWindowMs === undefined ? {} : { dedupeWindowMs }),
    ...(systemClock === undefined ? {} : { systemClock }),
  });
  const logs: string[] = [];
  const app = createApp({
    store: base.store,
    apiKey: KEY,
    logger: new Logger({
      ...(logFormat === undefined ? {} : { format: logFormat }),
      write: (line) => logs.push(line),
    }),
    ...appOptions,
  });
  const call = (path: string, init: RequestInit = {}) =>
    Promise.resolve(app.request(path, withKey(init)));
  return { ...base, app, logs, call };
}

/** Asserts an RFC 9457 problem response and returns its detail. */
export async function assertProblem(res: Response, status: number): Promise<string> {
  assert.equal(res.status, status);
  assert.equal(res.headers.get("content-type"), "application/problem+json");
  const doc = await res.json();
  // The kind of problem, a heading of the catalogue, docs/problems.md.
  assert.ok(doc.type.startsWith(PROBLEM_TYPE_BASE), doc.type);
  assert.ok(PROBLEM_KINDS.includes(doc.type.slice(PROBLEM_TYPE_BASE.length)), doc.type);
  assert.equal(doc.status, status);
  assert.equal(typeof doc.title, "string");
  assert.ok(doc.title.length > 0);
  assert.equal(typeof doc.detail, "string");
  assert.ok(doc.detail.length > 0);
  return doc.detail;
}

/** Asserts nothing; reads a response's body as JSON and returns it untyped. */
export async function body(res: Response): Promise<unknown> {
  return JSON.parse(await res.text());
}

/** A relay process started from `main.ts`. */
export interface RelayProcess extends AsyncDisposable {
  /** Base URL on 127.0.0.1, e.g. `http://127.0.0.1:41234`. */
  url: string;
  /** Every line the process has printed to stdout so far. */
  stdout: string[];
  /** Every line the process has printed to stderr so far. */
  stderr: string[];
  child: Deno.ChildProcess;
  /** Sends a signal and waits for the exit status. */
  stop(signal?: Deno.Signal): Promise<Deno.CommandStatus>;
}

/** Every line `relay` has printed so far, to stderr then to stdout. */
export function printedLines(relay: RelayProcess): string[] {
  return relay.stderr.concat(relay.stdout);
}

/**
 * A directory that does not exist: where spawned commands look for the client config file
 * and (through the test entry script, tests/_relay.ts) the system data directory unless a
 * test says otherwise, so that neither the machine's `~/.config/relay/config` nor its
 * `/var/lib/relay` leaks into a test.
 */
export { NO_SUCH_DIR };

/** The command line run in this process, for tests about its output (tests/_cli.ts). */
export { type CliRun, runCli } from "./_cli.ts";

/**
 * The environment a spawned relay gets: this process's, minus every `RELAY_*` and
 * `STATE_DIRECTORY`, with `XDG_CONFIG_HOME` pointing at {@linkcode NO_SUCH_DIR}, plus
 * `extra`.
 */
export function childEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env = Deno.env.toObject();
  for (const name of Object.keys(env)) {
    if (name.startsWith("RELAY_") || name === "STATE_DIRECTORY") delete env[name];
  }
  return {
    ...env,
    XDG_CONFIG_HOME: NO_SUCH_DIR,
    ...extra,
  };
}

/**
 * Runs `main.ts` to completion with the relay's permission set; returns output and code.
 * `stdin` text is sent as UTF-8, bytes as they are. With `umask` (octal digits, e.g.
 * `"000"`) it runs under that umask.
 */
export async function runRelay(
  args: string[],
  options: {
    env?: Record<string, string>;
    cwd?: string;
    stdin?: string | Uint8Array;
    umask?: string;
    root?: string;
  } = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const child = relayCommand(args, options, options.stdin === undefined ? "null" : "piped")
    .spawn();
  if (options.stdin !== undefined) {
    const writer = child.stdin.getWriter();
    const { stdin } = options;
    await writer.write(typeof stdin === "string" ? new TextEncoder().encode(stdin) : stdin);
    await writer.close();
  }
  const out = await child.output();
  return {
    code: out.code,
    stdout: new TextDecoder().decode(out.stdout),
    stderr: new TextDecoder().decode(out.stderr),
  };
}

/** Starts `main.ts` with `args` in the background, collecting its output lines. */
export function spawnRelay(
  args: string[],
  options: { env?: Record<string, string> } = {},
): {
  child: Deno.ChildProcess;
  stdout: string[];
  stderr: string[];
  done: Promise<Deno.CommandStatus>;
} {
  const child = relayCommand(args, options, "null").spawn();
  const stdout: string[] = [];
  const stderr: string[] = [];
  const outDone = collectLines(child.stdout, stdout, () => {});
  const errDone = collectLines(child.stderr, stderr, () => {});
  const done = child.status.then(async (status) => {
    await Promise.all([outDone, errDone]);
    return status;
  });
  return { child, stdout, stderr, done };
}

/**
 * What `promise` settles with, or `undefined` when it has not within `ms`: for a process or a
 * stop that should end, given a generous while before the test says it did not.
 */
export async function within<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<undefined>((done) => timer = setTimeout(() => done(undefined), ms)),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** Polls `check` every 50 ms until it returns true; fails after `timeoutMs`. */
export async function eventually(
  check: () => boolean | Promise<boolean>,
  what: string,
  timeoutMs = 20_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * Whether the long stress runs are asked for: `RELAY_STRESS=1`, which CI sets. Without it
 * the reliability tests make the same checks over fewer rounds, so that `deno task test`
 * stays within a few minutes on two cores.
 */
export const STRESS: boolean = Deno.env.get("RELAY_STRESS") === "1";

/** `long` under {@linkcode STRESS}, else `short`: a number of rounds, items or runs. */
export function stressOr(short: number, long: number): number {
  return STRESS ? long : short;
}

/**
 * An address where nothing listens, for a relay that cannot be reached: port 2 is outside the
 * ephemeral range every test server binds in, so no test running beside it can take it between
 * the pick and the use, as one can take a port that was free a moment ago (and, unlike port 1,
 * it is not on fetch's list of blocked ports).
 */
export const REFUSED_URL = "http://127.0.0.1:2";

/** A TCP port that was free a moment ago, for a relay that must come back on the same port. */
export function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  return port;
}

/**
 * The program and arguments that run the relay with `args` and the relay's permission set;
 * `root` is the checkout to run (a directory path ending in `/`), by default this one, and
 * `entry` the script in it, by default `tests/_relay.ts` (main.ts with the system data
 * directory pointed at {@linkcode NO_SUCH_DIR}; a test's own entry script injects what the
 * command line never sets, e.g. `tests/reliability/_paused_relay.ts`; `main.ts` itself where
 * a test runs the program exactly as users do).
 */
export function relayArgv(
  args: string[],
  root: string = ROOT,
  entry = "tests/_relay.ts",
): string[] {
  return [
    Deno.execPath(),
    "run",
    "-P=relay",
    "--quiet",
    "--config",
    `${root}deno.json`,
    `${root}${entry}`,
    ...args,
  ];
}

/**
 * The command that runs `main.ts` with `args` and the relay's permission set, in
 * {@linkcode childEnv} plus `options.env`, with stdout and stderr piped (the caller reads
 * them, or leaves them unread on purpose). With `umask` or `nofile`, under `sh` with that
 * umask or open-file limit. With `root`, the `main.ts` of that copy of the repository.
 */
export function relayCommand(
  args: string[],
  options: {
    env?: Record<string, string>;
    cwd?: string;
    umask?: string;
    nofile?: number;
    root?: string;
    entry?: string;
  },
  stdin: "piped" | "null",
): Deno.Command {
  const deno = relayArgv(args, options.root, options.entry);
  if (options.umask !== undefined && !/^[0-7]{3,4}$/.test(options.umask)) {
    throw new Error(`bad umask ${options.umask}`);
  }
  if (options.nofile !== undefined && !Number.isInteger(options.nofile)) {
    throw new Error(`bad nofile ${options.nofile}`);
  }
  const limits = [
    ...(options.umask === undefined ? [] : [`umask ${options.umask}`]),
    ...(options.nofile === undefined ? [] : [`ulimit -n ${options.nofile}`]),
  ];
  const [program, ...rest] = limits.length === 0
    ? deno
    : ["sh", "-c", `${limits.join("; ")}; exec "$@"`, "sh", ...deno];
  return new Deno.Command(program!, {
    args: rest,
    env: childEnv(options.env),
    clearEnv: true,
    cwd: options.cwd ?? ROOT,
    stdin,
    stdout: "piped",
    stderr: "piped",
  });
}

async function collectLines(
  stream: ReadableStream<Uint8Array>,
  lines: string[],
  onLine: (line: string) => void,
): Promise<void> {
  let pending = "";
  for await (const chunk of stream.pipeThrough(new TextDecoderStream())) {
    pending += chunk;
    let newline;
    while ((newline = pending.indexOf("\n")) >= 0) {
      const line = pending.slice(0, newline);
      pending = pending.slice(newline + 1);
      lines.push(line);
      onLine(line);
    }
  }
  if (pending !== "") {
    lines.push(pending);
    onLine(pending);
  }
}

/** A log line's message: the line itself, or the `msg` of a JSON line (`--log-format json`). */
export function logMessage(line: string): string {
  if (!line.startsWith("{")) return line;
  try {
    const msg = (JSON.parse(line) as { msg?: unknown }).msg;
    return typeof msg === "string" ? msg : line;
  } catch {
    return line;
  }
}

/**
 * Starts the relay on 127.0.0.1 port 0 with `--db <dir>/relay.kv` and waits for its
 * start line. Rejects with its stderr when it exits first. With `umask` (octal
 * digits, e.g. `"000"`) it runs under that umask; with `nofile`, under that open-file
 * limit (`ulimit -n`, soft and hard).
 */
export async function startRelayProcess(
  dir: string,
  options: {
    args?: string[];
    env?: Record<string, string>;
    port?: number;
    umask?: string;
    nofile?: number;
    root?: string;
    /** The working directory; by default this checkout. */
    cwd?: string;
    /** The entry script, with arguments before `serve`'s (see {@linkcode relayArgv}). */
    entry?: { script: string; args: string[] };
  } = {},
): Promise<RelayProcess> {
  const port = String(options.port ?? 0);
  const args = ["serve", "--hostname", "127.0.0.1", "--port", port, "--db", `${dir}/relay.kv`];
  const child = relayCommand(
    [...(options.entry?.args ?? []), ...args, ...(options.args ?? [])],
    {
      env: options.env ?? {},
      ...(options.umask === undefined ? {} : { umask: options.umask }),
      ...(options.nofile === undefined ? {} : { nofile: options.nofile }),
      ...(options.root === undefined ? {} : { root: options.root }),
      ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
      ...(options.entry === undefined ? {} : { entry: options.entry.script }),
    },
    "null",
  ).spawn();
  const stdout: string[] = [];
  const stderr: string[] = [];
  const listening = Promise.withResolvers<string>();
  const outDone = collectLines(child.stdout, stdout, (line) => {
    const match = /^relay listening on (https?:\/\/\S+)$/.exec(logMessage(line));
    if (match?.[1]) listening.resolve(match[1]);
  });
  const errDone = collectLines(child.stderr, stderr, () => {});
  const exited = child.status.then(async (status) => {
    await Promise.all([outDone, errDone]);
    listening.reject(
      new Error(`relay exited with ${status.code} before listening:\n${stderr.join("\n")}`),
    );
    return status;
  });
  const url = await listening.promise;
  let stopped: Promise<Deno.CommandStatus> | undefined;
  const stop = (signal: Deno.Signal = "SIGTERM") => {
    if (stopped === undefined) {
      try {
        child.kill(signal);
      } catch {
        // already gone
      }
      stopped = exited;
    }
    return stopped;
  };
  return {
    url,
    stdout,
    stderr,
    child,
    stop,
    async [Symbol.asyncDispose]() {
      await stop("SIGKILL");
    },
  };
}

/** `fetch` against `base` with the test key; the caller reads or cancels the body. */
export function relayCall(
  base: string,
): (path: string, init?: RequestInit) => Promise<Response> {
  return (path, init = {}) => fetch(`${base}${path}`, withKey(init));
}

/** `init` with the `X-Auth-Key` header set to {@linkcode KEY} unless it has one. */
function withKey(init: RequestInit): RequestInit {
  const headers = new Headers(init.headers);
  if (!headers.has("x-auth-key")) headers.set("x-auth-key", KEY);
  return { ...init, headers };
}

/** `GET /stats`, parsed. */
export async function getStats(
  call: (path: string) => Promise<Response>,
): Promise<StoreStats> {
  const res = await call("/stats");
  if (res.status !== 200) throw new Error(`/stats answered ${res.status}: ${await res.text()}`);
  return await res.json() as StoreStats;
}

/** Resident set size of process `pid`, bytes (from `/proc/<pid>/status`). */
export function rssBytes(pid: number): number {
  const status = Deno.readTextFileSync(`/proc/${pid}/status`);
  const kb = /VmRSS:\s+(\d+)\s+kB/.exec(status)?.[1];
  if (kb === undefined) throw new Error(`no VmRSS for ${pid}`);
  return Number(kb) * 1024;
}

/** Runs `job` with a fresh temp directory, removed afterwards. */
export async function withTempDir(job: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "relay-rel-" });
  try {
    await job(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** One Server-Sent Event as a client sees it; comments are collected separately. */
export interface SseEvent {
  event: string;
  data: string;
  id: string | undefined;
}

/**
 * Reads a `text/event-stream` body as it arrives (the parsing rules of the HTML standard
 * that matter here: `event`, `data`, `id`, comments, any line end).
 */
export class SseReader {
  readonly events: SseEvent[] = [];
  readonly comments: string[] = [];
  readonly done: Promise<void>;

  constructor(body: ReadableStream<Uint8Array>) {
    this.done = this.#read(body);
  }

  async #read(body: ReadableStream<Uint8Array>): Promise<void> {
    let buffer = "";
    let data: string[] = [];
    let event = "message";
    let id: string | undefined;
    try {
      for await (const chunk of body.pipeThrough(new TextDecoderStream())) {
        buffer += chunk;
        const lines = buffer.split(/\r\n|\r|\n/);
        buffer = lines.pop()!;
        for (const line of lines) {
          if (line === "") {
            if (data.length > 0) this.events.push({ event, data: data.join("\n"), id });
            data = [];
            event = "message";
          } else if (line.startsWith(":")) this.comments.push(line.slice(1).trim());
          else {
            const colon = line.indexOf(":");
            const field = colon === -1 ? line : line.slice(0, colon);
            const value = colon === -1 ? "" : line.slice(colon + 1).replace(/^ /, "");
            if (field === "data") data.push(value);
            else if (field === "event") event = value;
            else if (field === "id") id = value;
          }
        }
      }
    } catch {
      // the test cancelled the stream
    }
  }
}

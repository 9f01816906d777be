/**
 * `deno task bench:store`: what the store costs a write on the main thread, without HTTP.
 *
 * Runs the store's own `submit` or `push` (src/store/store.ts) on a fresh KV file in a temp
 * directory: 50 items first (so that every write evicts one, as in `deno task bench`), then
 * 30,000 writes with 64 in flight, as 64 HTTP connections would keep them. The figure is the
 * CPU time of this process's main thread per write, in µs, from
 * `/proc/self/task/<pid>/stat` (utime + stime, in clock ticks of 10 ms): the store's
 * JavaScript, Deno KV's work on that thread, and the runtime's; not SQLite's own thread.
 *
 * With `--against <checkout>` it loads that checkout's store as well and runs the two in
 * interleaved rounds (the first of a round turns each round), so that a change to the write
 * path is measured against the code before it on the same noisy machine:
 *
 * ```sh
 * git worktree add /tmp/before HEAD~1
 * deno task bench:store --against /tmp/before --rounds 10
 * ```
 *
 * With `--through app` each write is a `Request` answered by the whole app
 * (`src/server/app.ts`: the request pipeline, the body's checks, the store, the response and
 * its access-log line, written to `/dev/null`), still without Deno's HTTP server: what the
 * relay's JavaScript costs a request, apart from the server's own native work. Building the
 * `Request` is counted too (about 3 µs).
 *
 * Options: `--write submit|push|submit-no-dedupe` (default `submit`; the last sends
 * `dedupe: false`), `--through store|app` (default `store`), `--rounds <n>` (default 6),
 * `--writes <n>` per round (default 30000), `--against <dir>`. Prints each round and the
 * medians; writes nothing else.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";
import { mainThreadCpuUs, parseOrExit, type Usage, usageError, wholeNumber } from "./_common.ts";

const USAGE: Usage = {
  program: "bench:store",
  text: `usage: deno task bench:store [options]
  --write <w>       submit, push or submit-no-dedupe (default submit)
  --rounds <n>      interleaved rounds (default 6)
  --writes <n>      writes a round (default 30000)
  --through <t>     store (the store's functions) or app (the whole app, no HTTP server)
  --against <dir>   another checkout, measured in the same rounds
  --help            this text`,
};

const { values } = parseOrExit(USAGE, () =>
  parseArgs({
    options: {
      write: { type: "string", default: "submit" },
      rounds: { type: "string", default: "6" },
      writes: { type: "string", default: "30000" },
      through: { type: "string", default: "store" },
      against: { type: "string" },
      help: { type: "boolean", short: "h", default: false },
    },
  }));
if (values.help) {
  console.log(USAGE.text);
  Deno.exit(0);
}
const WRITE = values.write;
if (!["submit", "push", "submit-no-dedupe"].includes(WRITE)) {
  usageError(USAGE, `--write ${WRITE}: use submit, push or submit-no-dedupe`);
}
const THROUGH = values.through;
if (!["store", "app"].includes(THROUGH)) {
  usageError(USAGE, `--through ${THROUGH}: use store or app`);
}
const ROUNDS = wholeNumber(USAGE, "--rounds", values.rounds, 1);
const WRITES = wholeNumber(USAGE, "--writes", values.writes, 1);
/** Writes in flight at once, as `wrk -c64` keeps requests in flight. */
const IN_FLIGHT = 64;

/** The store module of a checkout (the functions this bench calls). */
interface StoreModule {
  createStore(kv: Deno.Kv, options: { path: string }): unknown;
  submit(
    store: unknown,
    content: string,
    queue: string,
    options?: { dedupe?: boolean },
  ): Promise<unknown>;
  push(store: unknown, content: string): Promise<unknown>;
}

/** What `--through app` needs of a checkout: its app and its log. */
interface AppModule {
  createApp(options: { store: unknown; apiKey: string; logger: unknown }): {
    fetch(
      request: Request,
      info?: { remoteAddr: { hostname: string } },
    ): Response | Promise<Response>;
  };
  Logger: new (options: {
    write: (line: string) => void;
    writeAccess: (line: string) => void;
    writeError: (line: string) => void;
  }) => unknown;
  BatchedLog: new (out: { write(data: Uint8Array): Promise<number> }) => {
    line(text: string): void;
    lineNow(text: string): void;
  };
}

/** A checkout under test: its name in the report, its store module and its app. */
interface Subject {
  name: string;
  store: StoreModule;
  app: AppModule;
}

/** The key of the app under `--through app`. */
const KEY = "bench-key-0123456789abcdef";
/** Measures the bodies' `Content-Length`, outside the code under test. */
const encoder = new TextEncoder();

let sequence = 0;

/**
 * One round of `subject`: a new store, seeded, then `writes` writes.
 *
 * @returns Main-thread CPU per write, µs.
 */
async function round(subject: Subject, writes = WRITES): Promise<number> {
  const dir = await Deno.makeTempDir({ prefix: "relay-bench-store-" });
  const kv = await Deno.openKv(`${dir}/relay.kv`);
  try {
    const m = subject.store;
    const store = m.createStore(kv, { path: `${dir}/relay.kv` });
    for (let i = 0; i < 50; i++) {
      await m.submit(store, `https://example.com/seed/${i}`, "general");
      await m.push(store, `# Seed ${i}`);
    }
    const content = (n: number) =>
      WRITE === "push"
        ? `# Result ${n}\n\nA few lines of output ${Math.random()}`
        : `https://example.com/article/${n}-${Math.random()}`;
    const write = THROUGH === "app"
      ? appWriter(subject.app, store, content)
      : (n: number) =>
        WRITE === "push" ? m.push(store, content(n)) : m.submit(store, content(n), "general", {
          dedupe: WRITE === "submit",
        });
    let started = 0;
    const before = mainThreadCpuUs(Deno.pid);
    await Promise.all(Array.from({ length: IN_FLIGHT }, async () => {
      while (started < writes) {
        started++;
        await write(++sequence);
      }
    }));
    return (mainThreadCpuUs(Deno.pid) - before) / writes;
  } finally {
    kv.close();
    await Deno.remove(dir, { recursive: true });
  }
}

/**
 * Writes through the whole app: a `POST` with the body's length, as `wrk` sends it, from a
 * client on 127.0.0.1; the answer's body read.
 *
 * @throws {Error} on any answer but 200: a bench of refusals would measure nothing.
 */
function appWriter(
  m: AppModule,
  store: unknown,
  content: (n: number) => string,
): (n: number) => Promise<void> {
  // The access log, written as the relay writes it, to nowhere.
  const log = new m.BatchedLog(Deno.openSync("/dev/null", { write: true }));
  const logger = new m.Logger({
    write: log.lineNow,
    writeAccess: log.line,
    writeError: log.lineNow,
  });
  const app = m.createApp({ store, apiKey: KEY, logger });
  const path = WRITE === "push"
    ? "/push"
    : WRITE === "submit"
    ? "/submit?queue=general"
    : "/submit?queue=general&dedupe=false";
  const info = { remoteAddr: { hostname: "127.0.0.1" } };
  return async (n) => {
    const body = content(n);
    const request = new Request(`http://127.0.0.1:8787${path}`, {
      method: "POST",
      headers: {
        "x-auth-key": KEY,
        "content-type": "text/plain",
        "content-length": String(encoder.encode(body).byteLength),
      },
      body,
    });
    const response = await app.fetch(request, info);
    const text = await response.text();
    if (response.status !== 200) throw new Error(`${path} answered ${response.status}: ${text}`);
  };
}

const here = fileURLToPath(new URL("../", import.meta.url));
const subjects: Subject[] = [await load("this checkout", here)];
if (values.against !== undefined) subjects.push(await load(values.against, values.against));

/** The store module and the app of the checkout at `dir`. */
async function load(name: string, dir: string): Promise<Subject> {
  const base = `file://${dir.endsWith("/") ? dir : `${dir}/`}`;
  const module = async (path: string) => await import(new URL(path, base).href);
  return {
    name,
    store: await module("src/store/store.ts") as StoreModule,
    app: { ...await module("src/server/app.ts"), ...await module("src/server/log.ts") },
  };
}

// A short round each first, unmeasured: the first writes run before V8 has optimised the
// code (measured: a first round 10–15 µs a write above the next ones).
for (const subject of subjects) await round(subject, Math.min(WRITES, 5000));
const figures: number[][] = subjects.map(() => []);
for (let r = 0; r < ROUNDS; r++) {
  for (let i = 0; i < subjects.length; i++) {
    const k = (i + r) % subjects.length;
    figures[k]!.push(await round(subjects[k]!));
  }
  console.log(
    `round ${r + 1}: ` +
      subjects.map((s, k) => `${s.name} ${figures[k]!.at(-1)!.toFixed(1)} µs`).join(", "),
  );
}
const median = (xs: number[]) => {
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};
console.log(
  `${WRITE} through the ${THROUGH}, ${WRITES} writes a round, ${IN_FLIGHT} in flight, median of ${ROUNDS} rounds: ` +
    subjects.map((s, k) => `${s.name} ${median(figures[k]!).toFixed(1)} µs a write`).join(", "),
);

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
 * Options: `--write submit|push|submit-no-dedupe` (default `submit`; the last sends
 * `dedupe: false`), `--rounds <n>` (default 6), `--writes <n>` per round (default 30000),
 * `--against <dir>`. Prints each round and the medians; writes nothing else.
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
  --against <dir>   another checkout, measured in the same rounds
  --help            this text`,
};

const { values } = parseOrExit(USAGE, () =>
  parseArgs({
    options: {
      write: { type: "string", default: "submit" },
      rounds: { type: "string", default: "6" },
      writes: { type: "string", default: "30000" },
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

/** A checkout under test: its name in the report and its store module. */
interface Subject {
  name: string;
  store: StoreModule;
}

let sequence = 0;

/**
 * One round of `subject`: a new store, seeded, then {@linkcode WRITES} writes.
 *
 * @returns Main-thread CPU per write, µs.
 */
async function round(subject: Subject): Promise<number> {
  const dir = await Deno.makeTempDir({ prefix: "relay-bench-store-" });
  const kv = await Deno.openKv(`${dir}/relay.kv`);
  try {
    const m = subject.store;
    const store = m.createStore(kv, { path: `${dir}/relay.kv` });
    for (let i = 0; i < 50; i++) {
      await m.submit(store, `https://example.com/seed/${i}`, "general");
      await m.push(store, `# Seed ${i}`);
    }
    const write = (n: number) =>
      WRITE === "push"
        ? m.push(store, `# Result ${n}\n\nA few lines of output ${Math.random()}`)
        : m.submit(store, `https://example.com/article/${n}-${Math.random()}`, "general", {
          dedupe: WRITE === "submit",
        });
    let started = 0;
    const before = mainThreadCpuUs(Deno.pid);
    await Promise.all(Array.from({ length: IN_FLIGHT }, async () => {
      while (started < WRITES) {
        started++;
        await write(++sequence);
      }
    }));
    return (mainThreadCpuUs(Deno.pid) - before) / WRITES;
  } finally {
    kv.close();
    await Deno.remove(dir, { recursive: true });
  }
}

const here = fileURLToPath(new URL("../", import.meta.url));
const subjects: Subject[] = [{ name: "this checkout", store: await load(here) }];
if (values.against !== undefined) {
  subjects.push({ name: values.against, store: await load(values.against) });
}

/** The store module of the checkout at `dir`. */
async function load(dir: string): Promise<StoreModule> {
  const url = new URL("src/store/store.ts", `file://${dir.endsWith("/") ? dir : `${dir}/`}`);
  return await import(url.href) as StoreModule;
}

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
  `${WRITE}, ${WRITES} writes a round, ${IN_FLIGHT} in flight, median of ${ROUNDS} rounds: ` +
    subjects.map((s, k) => `${s.name} ${median(figures[k]!).toFixed(1)} µs a write`).join(", "),
);

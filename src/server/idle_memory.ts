/**
 * Memory given back while the relay is idle (issue 19). V8 keeps the heap it grew to, for
 * start-up or under load, until memory runs short; on a NAS or a Raspberry Pi that is
 * memory other programs could use. Once no request has arrived for a whole check interval
 * and the resident set has grown since the last collection (or none has run yet), the
 * relay runs one memory-reducing full collection (V8's "last resort" garbage collection,
 * which compacts the heap and returns its free pages): measured, the idle relay went from
 * about 76 MB to 66 MB, in a pause of 50–70 ms (docs/benchmarks.md, "Idle memory").
 *
 * A request that arrives during such a pause waits for it, so collections run only after
 * an idle interval and only when there is something to give back.
 *
 * @module
 */

/** How often the relay looks whether it is idle, ms. */
export const IDLE_CHECK_MS = 1_000;

/**
 * Growth of the resident set since the last collection that makes the next idle interval
 * collect again, bytes: less would pay a pause for little.
 */
export const COLLECT_AFTER_GROWTH_BYTES = 8 * 1024 * 1024;

/** What one collection did, for the debug log. */
export interface Collection {
  /** Resident set before and after, bytes. */
  readonly rssBefore: number;
  /** Resident set after, bytes. */
  readonly rssAfter: number;
  /** The collection's pause, ms. */
  readonly ms: number;
}

/** Options of {@linkcode IdleMemory}. */
export interface IdleMemoryOptions {
  /**
   * Runs one memory-reducing full collection; default V8's, reached through `node:v8` and
   * `node:vm` (loaded on first use). Synchronous: it is the pause.
   */
  collect?: () => void | Promise<void>;
  /** The process's resident set, bytes; default `Deno.memoryUsage().rss`. */
  rss?: () => number;
  /** Growth that calls for another collection, bytes; default {@linkcode COLLECT_AFTER_GROWTH_BYTES}. */
  growthBytes?: number;
  /** Told each collection's figures (the relay logs them at level `debug`). */
  collected?: (collection: Collection) => void;
}

/**
 * Decides when the idle relay collects garbage: {@linkcode IdleMemory.request} on every
 * request, {@linkcode IdleMemory.check} once an interval ({@linkcode IdleMemory.start}
 * runs it every {@linkcode IDLE_CHECK_MS}).
 */
export class IdleMemory {
  readonly #collect: () => void | Promise<void>;
  readonly #rss: () => number;
  readonly #growthBytes: number;
  readonly #collected: ((collection: Collection) => void) | undefined;
  #requests = 0;
  #seen = 0;
  /** Resident set right after the last collection, bytes; `-Infinity` before the first. */
  #after = -Infinity;
  #running = false;

  /** @param options How to collect and measure; defaults are V8's and Deno's. */
  constructor(options: IdleMemoryOptions = {}) {
    this.#collect = options.collect ?? collectWithV8;
    this.#rss = options.rss ?? (() => Deno.memoryUsage().rss);
    this.#growthBytes = options.growthBytes ?? COLLECT_AFTER_GROWTH_BYTES;
    this.#collected = options.collected;
  }

  /** Counts one request: the interval it arrived in is not idle. */
  request(): void {
    this.#requests++;
  }

  /**
   * One check: collects when no request arrived since the last check and the resident set
   * grew by the configured growth since the last collection (or none has run).
   *
   * @returns Whether it collected. A failed collection counts as none and is not retried
   *   until the set grows again.
   */
  async check(): Promise<boolean> {
    const idle = this.#requests === this.#seen;
    this.#seen = this.#requests;
    if (!idle || this.#running) return false;
    const before = this.#rss();
    if (before < this.#after + this.#growthBytes) return false;
    this.#running = true;
    try {
      const started = performance.now();
      await this.#collect();
      const ms = performance.now() - started;
      this.#after = this.#rss();
      this.#collected?.({ rssBefore: before, rssAfter: this.#after, ms });
      return true;
    } catch {
      this.#after = before;
      return false;
    } finally {
      this.#running = false;
    }
  }

  /**
   * Checks every `intervalMs` until the returned function is called; the timer does not keep
   * the process alive.
   */
  start(intervalMs: number = IDLE_CHECK_MS): () => void {
    const timer = setInterval(() => void this.check(), intervalMs);
    Deno.unrefTimer(timer);
    return () => clearInterval(timer);
  }
}

let v8Collect: ((options: object) => void) | undefined;

/**
 * One memory-reducing full collection by V8: `gc({ type: "major", execution: "sync",
 * flavor: "last-resort" })`. V8 gives `gc` only to contexts made after `--expose-gc` is set,
 * so it is taken from a new `node:vm` context once, as Node's documentation of
 * `v8.setFlagsFromString` shows.
 *
 * @throws When the runtime offers no `gc` (then the relay simply keeps its memory).
 */
export async function collectWithV8(): Promise<void> {
  if (v8Collect === undefined) {
    const [v8, vm] = await Promise.all([import("node:v8"), import("node:vm")]);
    v8.setFlagsFromString("--expose-gc");
    const gc: unknown = vm.runInNewContext("gc");
    if (typeof gc !== "function") throw new Error("V8 gave no gc function");
    v8Collect = gc as (options: object) => void;
  }
  v8Collect({ type: "major", execution: "sync", flavor: "last-resort" });
}

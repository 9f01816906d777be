/**
 * Memory given back while the relay is idle. V8 keeps the heap it grew to, for
 * start-up or under load, until memory runs short; on a NAS or a Raspberry Pi that is
 * memory other programs could use. The relay runs one memory-reducing full collection (V8's
 * "last resort" garbage collection, which compacts the heap and returns its free pages):
 *
 * - once, at the first check interval without a request (right after start-up, unless the
 *   relay is busy from its start): what start-up left behind (measured: the idle relay went
 *   from about 75 MB to 66 MB, in a pause of 50–120 ms; V8 does the same by itself 20–40 s
 *   after start, so this only makes it sooner; docs/benchmarks.md, "Idle memory");
 * - after that, once no request has arrived for {@linkcode QUIET_CHECKS} intervals (30 s)
 *   and V8's heap has grown by {@linkcode COLLECT_AFTER_GROWTH_BYTES} since the last
 *   collection. Not sooner: the requests right after a collection are slower while V8
 *   rebuilds what it dropped, and a relay loaded again a few seconds later spent about a
 *   fifth more CPU per request in its first second (measured).
 *
 * A request that arrives during the pause waits for it. V8's `gc` is reached through
 * `node:v8` and `node:vm`, loaded with the first collection (`v8Collector`, fenced with the
 * relay's other uses of runtime internals in _deno_internals.ts); where the runtime offers none, the relay says so once at level `debug` and keeps its memory.
 *
 * @module
 */

import { v8Collector } from "./_deno_internals.ts";

/** How often the relay looks whether it is idle, ms. */
export const IDLE_CHECK_MS = 1_000;

/** Check intervals without a request before a collection after the first: 30 s. */
export const QUIET_CHECKS = 30;

/**
 * Growth of V8's heap since the last collection that makes a quiet relay collect again,
 * bytes: less would pay a pause for little.
 */
export const COLLECT_AFTER_GROWTH_BYTES = 8 * 1024 * 1024;

/** The figures {@linkcode IdleMemory} reads, bytes (as `Deno.memoryUsage()` gives them). */
export interface MemoryFigures {
  /** The process's resident set. */
  readonly rss: number;
  /** The size of V8's heap: what a collection can give back comes out of it. */
  readonly heapTotal: number;
}

/** What one collection did, for the debug log. */
export interface Collection {
  /** Resident set before, bytes. */
  readonly rssBefore: number;
  /** Resident set after, bytes. */
  readonly rssAfter: number;
  /** V8's heap before, bytes. */
  readonly heapBefore: number;
  /** V8's heap after, bytes. */
  readonly heapAfter: number;
  /** The collection's pause, ms. */
  readonly ms: number;
}

/** Options of {@linkcode IdleMemory}. */
export interface IdleMemoryOptions {
  /**
   * Makes the function that runs one memory-reducing full collection, synchronously (its
   * run is the pause); called once, with the first collection. Default
   * {@linkcode v8Collector}. When it rejects, the relay never collects.
   */
  collector?: () => Promise<() => void>;
  /** The process's memory figures; default `Deno.memoryUsage()`. */
  memory?: () => MemoryFigures;
  /**
   * Growth that calls for another collection, bytes; default
   * {@linkcode COLLECT_AFTER_GROWTH_BYTES}.
   */
  growthBytes?: number;
  /** Told each collection's figures (the relay logs them at level `debug`). */
  collected?: (collection: Collection) => void;
  /** Told, once, why the relay cannot collect (the relay logs it at level `debug`). */
  unavailable?: (error: unknown) => void;
  /**
   * Checks without a request before a collection other than the first; default
   * {@linkcode QUIET_CHECKS}.
   */
  quietChecks?: number;
}

/**
 * Decides when the idle relay collects garbage: {@linkcode IdleMemory.request} on every
 * request, {@linkcode IdleMemory.check} once an interval ({@linkcode IdleMemory.start}
 * runs it every {@linkcode IDLE_CHECK_MS}).
 */
export class IdleMemory {
  readonly #collector: () => Promise<() => void>;
  readonly #memory: () => MemoryFigures;
  readonly #growthBytes: number;
  readonly #collected: ((collection: Collection) => void) | undefined;
  readonly #unavailable: ((error: unknown) => void) | undefined;
  readonly #quietChecks: number;
  #requests = 0;
  #seen = 0;
  /** Checks in a row that saw no request. */
  #quiet = 0;
  /** V8's heap right after the last collection, bytes; `-Infinity` before the first. */
  #after = -Infinity;
  /** The collection function, once made; `null` when it cannot be. */
  #collect: (() => void) | null | undefined;
  #running = false;

  /** @param options How to collect and measure; defaults are V8's and Deno's. */
  constructor(options: IdleMemoryOptions = {}) {
    this.#collector = options.collector ?? v8Collector;
    this.#memory = options.memory ?? (() => Deno.memoryUsage());
    this.#growthBytes = options.growthBytes ?? COLLECT_AFTER_GROWTH_BYTES;
    this.#collected = options.collected;
    this.#unavailable = options.unavailable;
    this.#quietChecks = options.quietChecks ?? QUIET_CHECKS;
  }

  /** Counts one request: the interval it arrived in is not idle. */
  request(): void {
    this.#requests++;
  }

  /**
   * One check: collects when no request arrived since the last check and either no
   * collection has run yet, or none arrived for the last `quietChecks` checks and V8's
   * heap grew by the configured growth since the last collection. The heap, not the
   * resident set: V8 sometimes shrinks its heap by itself, and memory outside it (the
   * database's cache) does not come back with a collection.
   *
   * @returns Whether it collected; never rejects. A collection that throws counts as one
   *   (tried again only once the heap has grown); a collector that cannot be made stops
   *   all collections.
   */
  async check(): Promise<boolean> {
    this.#quiet = this.#requests === this.#seen ? this.#quiet + 1 : 0;
    this.#seen = this.#requests;
    const first = this.#after === -Infinity;
    if (this.#quiet < (first ? 1 : this.#quietChecks)) return false;
    if (this.#running || this.#collect === null) return false;
    this.#running = true;
    try {
      const before = this.#memory();
      if (before.heapTotal < this.#after + this.#growthBytes) return false;
      if (this.#collect === undefined) {
        try {
          this.#collect = await this.#collector();
        } catch (error) {
          this.#collect = null;
          this.#unavailable?.(error);
          return false;
        }
        // A request that came while the collector was loaded: not idle after all.
        if (this.#requests !== this.#seen) return false;
      }
      const started = performance.now();
      try {
        this.#collect();
      } catch {
        this.#after = before.heapTotal;
        return false;
      }
      const ms = performance.now() - started;
      const after = this.#memory();
      this.#after = after.heapTotal;
      this.#collected?.({
        rssBefore: before.rss,
        rssAfter: after.rss,
        heapBefore: before.heapTotal,
        heapAfter: after.heapTotal,
        ms,
      });
      return true;
    } catch {
      return false; // the figures could not be read: try at the next check
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

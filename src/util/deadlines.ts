/**
 * Many deadlines on one timer: for work that nearly always finishes long before its
 * deadline, such as reading a request body (90 s allowed, a few ms taken). A `setTimeout`
 * and `clearTimeout` per request cost a tenth of a small write's main-thread time
 * (docs/benchmarks.md, "Writes"); here setting and clearing a deadline is a `Set` insert and
 * delete, and one timer ticks only while some deadline is pending.
 *
 * @module
 */

/** One pending deadline, as {@linkcode Deadlines.add} returns it. */
export interface Deadline {
  /** Clears the deadline: `onLate` will not run. Clearing twice does nothing. */
  clear(): void;
}

/**
 * Deadlines that fire late by at most their resolution: each is put in the bucket of the
 * tick at or after it, and a timer that runs every `resolutionMs` while any bucket holds a
 * deadline fires the buckets whose time has come.
 *
 * @example
 * ```ts
 * const deadlines = new Deadlines(50);
 * const late = new AbortController();
 * const deadline = deadlines.add(90_000, () => late.abort());
 * try {
 *   await fetch("https://example.com/", { signal: late.signal });
 * } finally {
 *   deadline.clear();
 * }
 * ```
 */
export class Deadlines {
  readonly #resolutionMs: number;
  /** Pending callbacks by tick number (`Math.ceil(ms / resolution)` of `performance.now()`). */
  readonly #buckets = new Map<number, Set<() => void>>();
  #timer: ReturnType<typeof setTimeout> | undefined;

  /**
   * Makes an empty set of deadlines.
   *
   * @param resolutionMs How late a deadline may fire, ms (> 0); also the timer's interval
   *   while any deadline is pending.
   */
  constructor(resolutionMs: number) {
    this.#resolutionMs = resolutionMs;
  }

  /** Deadlines pending now. */
  get size(): number {
    let n = 0;
    for (const bucket of this.#buckets.values()) n += bucket.size;
    return n;
  }

  /**
   * Runs `onLate` once `ms` have passed (and at most the resolution more), unless the
   * returned deadline is cleared first.
   *
   * @param ms Time allowed, ms (≥ 0).
   * @param onLate What to do when the time is up; an exception it throws is dropped.
   */
  add(ms: number, onLate: () => void): Deadline {
    const tick = Math.ceil((performance.now() + ms) / this.#resolutionMs);
    let bucket = this.#buckets.get(tick);
    if (bucket === undefined) {
      bucket = new Set();
      this.#buckets.set(tick, bucket);
    }
    // A callback of its own, so that two deadlines with the same `onLate` stay apart.
    const callback = () => onLate();
    bucket.add(callback);
    this.#arm();
    const buckets = this.#buckets;
    return {
      clear() {
        // The bucket may have fired (and left the map) already: then there is nothing to do.
        if (bucket.delete(callback) && bucket.size === 0 && buckets.get(tick) === bucket) {
          buckets.delete(tick);
        }
      },
    };
  }

  #arm(): void {
    if (this.#timer !== undefined) return;
    // Not unref'd: a pending deadline is work in progress, as a timer of its own would be.
    this.#timer = setTimeout(() => this.#fire(), this.#resolutionMs);
  }

  #fire(): void {
    this.#timer = undefined;
    const now = performance.now() / this.#resolutionMs;
    // A timer that ran late finds several buckets due: they fire oldest first, not in the
    // order they were made.
    const due = [...this.#buckets.keys()].filter((tick) => tick <= now).sort((a, b) => a - b);
    for (const tick of due) {
      const bucket = this.#buckets.get(tick)!;
      this.#buckets.delete(tick);
      for (const callback of bucket) {
        try {
          callback();
        } catch {
          // the deadline's owner has gone; nothing else depends on it
        }
      }
    }
    if (this.#buckets.size > 0) this.#arm();
  }
}

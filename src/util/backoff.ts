/**
 * Waiting: an abortable sleep (also used by the relay's long-poll and stream waits), and the
 * exponential backoff of the long-running client commands (`relay work`,
 * `relay results --follow`).
 *
 * @module
 */

/** First wait after a failure, ms. */
const BACKOFF_START_MS = 500;

/**
 * Longest wait between attempts, ms: a relay that comes back after a restart or a reboot
 * is noticed within this long.
 */
const BACKOFF_MAX_MS = 15_000;

/**
 * Waits `ms`, or less when `signal` aborts.
 *
 * @returns `true` when the full time passed, `false` when aborted.
 */
export function sleep(ms: number, signal?: AbortSignal): Promise<boolean> {
  if (signal?.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve(true);
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      resolve(false);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** Doubling waits from {@linkcode BACKOFF_START_MS} to {@linkcode BACKOFF_MAX_MS}. */
export class Backoff {
  #next = BACKOFF_START_MS;

  /** The wait for the current failure, ms; each call doubles the next one. */
  next(): number {
    const wait = this.#next;
    this.#next = Math.min(this.#next * 2, BACKOFF_MAX_MS);
    return wait;
  }

  /** Starts over after a success. */
  reset(): void {
    this.#next = BACKOFF_START_MS;
  }
}

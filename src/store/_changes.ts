/**
 * Change notification: long polls and streams wait here for the next commit that changes
 * a queue or the feed, instead of polling the store.
 *
 * @module
 */

import type { Collection } from "./_state.ts";

/** Waiters on the collections a commit changes. */
export class Changes {
  #waiters = new Set<{ collections: readonly Collection[]; wake(): void }>();

  /**
   * Resolves when {@linkcode Changes.notify} names one of `collections`, on
   * {@linkcode Changes.notifyAll}, or when `signal` aborts (at once if it already has).
   */
  next(collections: readonly Collection[], signal: AbortSignal): Promise<void> {
    if (signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const waiter = {
        collections,
        wake: () => {
          this.#waiters.delete(waiter);
          signal.removeEventListener("abort", waiter.wake);
          resolve();
        },
      };
      this.#waiters.add(waiter);
      signal.addEventListener("abort", waiter.wake, { once: true });
    });
  }

  /** Wakes the waiters on any of `changed`: a commit that changed them succeeded. */
  notify(changed: ReadonlySet<Collection>): void {
    for (const waiter of this.#waiters) {
      if (waiter.collections.some((c) => changed.has(c))) waiter.wake();
    }
  }

  /** Wakes every waiter: a commit's outcome is unknown, so let each look again. */
  notifyAll(): void {
    for (const waiter of this.#waiters) waiter.wake();
  }
}

/**
 * The drain of a stop: the handler the listener calls counts the requests in flight, and a
 * stop answers new ones 503 until those finish (or {@linkcode SHUTDOWN_GRACE_MS} passes), then
 * shuts Deno's server down.
 *
 * @module
 */

import type { RelayApp } from "./app.ts";
import type { ConnectionHandler, ServedConnections } from "./connections.ts";
import type { IdleMemory } from "./idle_memory.ts";

/**
 * How long in-flight requests may take to finish after SIGINT/SIGTERM before the relay
 * exits anyway, ms. Long enough for a 768 KiB body on a slow phone link; short enough
 * that systemd's default 90 s stop timeout never has to SIGKILL.
 */
export const SHUTDOWN_GRACE_MS = 10_000;

/**
 * The handler the listener calls, and the drain of a stop. Deno's server.shutdown() cuts
 * off request bodies still being read (measured: the handler's read fails with
 * BadResource), so the relay drains its own handlers first: it counts requests in its
 * handler, lets the app answer new ones 503 while draining (its stopping signal is aborted
 * first), and has the server shut down only once the count reaches zero.
 */
export class Drain {
  #inFlight = 0;
  #draining = false;
  readonly #idle = Promise.withResolvers<void>();
  readonly #done = () => {
    if (--this.#inFlight === 0 && this.#draining) this.#idle.resolve();
  };

  /**
   * Makes the handler: `app` answers every request, with 503 once the relay is stopping.
   *
   * @param app The relay's app.
   * @param idleMemory Told of every request, so that it collects only when idle.
   */
  handler(app: RelayApp, idleMemory: IdleMemory): ConnectionHandler {
    return (request, info) => {
      idleMemory.request();
      // While draining, the app answers 503 itself (the relay's stopping signal has been
      // aborted first), through the same steps as any answer.
      const answer = app.fetch(request, info); // a rejection still reaches onError
      // A cached read is answered at once (a `Response`): nothing of it is left to wait for.
      if (answer instanceof Promise) {
        this.#inFlight++;
        answer.then(this.#done, this.#done);
      }
      return answer;
    };
  }

  /**
   * Waits up to {@linkcode SHUTDOWN_GRACE_MS} for the requests in flight (new ones are
   * answered 503 by the app, whose stopping signal the caller aborts first), then shuts
   * `server` down.
   *
   * @returns `true` when every request finished in time.
   */
  async drain(server: ServedConnections): Promise<boolean> {
    this.#draining = true;
    if (this.#inFlight === 0) this.#idle.resolve();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const drained = await Promise.race([
      this.#idle.promise.then(() => server.shutdown()).then(() => true),
      new Promise<boolean>((done) => {
        timer = setTimeout(() => done(false), SHUTDOWN_GRACE_MS);
      }),
    ]);
    clearTimeout(timer);
    return drained;
  }
}

/**
 * Everything of the relay that leans on the runtime beyond its public API, fenced in one
 * place so that a Deno upgrade breaks here, and tests/server/deno_internals_test.ts says
 * what broke:
 *
 * - `Deno[Deno.internal].serveHttpOnConnection`: Deno's HTTP server for one connection,
 *   the function `Deno.serve` runs on each connection it accepts. The relay accepts
 *   connections itself (connections.ts: a cap, an idle timeout, surviving the open-file
 *   limit) and hands each one to it; Deno has no public name for it.
 * - The `AbortSignal` it takes is a stand-in ({@linkcode cancelHook}): it only adds an
 *   `abort` listener, and calling that listener ourselves, inside `try`, cannot throw into
 *   the event loop when the connection has already closed.
 * - V8's `gc`, exposed with `--expose-gc` through `node:v8` and taken from a new `node:vm`
 *   context ({@linkcode v8Collector}), for the idle relay's collection (idle_memory.ts).
 *
 * The Deno version these were written for is `denoVersion` in deno.json, which CI, the
 * package scripts and {@linkcode PINNED_DENO} read.
 *
 * @module
 */

import denoConfig from "../../deno.json" with { type: "json" };

/** The Deno version the relay is built and tested with (`denoVersion` in deno.json). */
export const PINNED_DENO: string = denoConfig.denoVersion;

/** Deno's server for one connection, as `Deno.serve` calls it for each it accepts. */
export type ServeOnConnection = (
  connection: Deno.Conn,
  signal: AbortSignal,
  handler: (request: Request, info: Deno.ServeHandlerInfo) => Response | Promise<Response>,
  onError: (error: unknown) => Response | Promise<Response>,
  onListen: () => void,
) => { finished: Promise<void>; shutdown(): Promise<void> };

/**
 * Deno's per-connection HTTP server, or `undefined` in a Deno that no longer has it under
 * `Deno[Deno.internal].serveHttpOnConnection`.
 */
export function serveOnConnection(): ServeOnConnection | undefined {
  const deno = Deno as unknown as Record<symbol, Record<string, unknown> | undefined>;
  const internal = (Deno as unknown as { internal?: symbol }).internal;
  const serve = internal === undefined ? undefined : deno[internal]?.serveHttpOnConnection;
  return typeof serve === "function" ? serve as ServeOnConnection : undefined;
}

/**
 * A stand-in for the `AbortSignal` that Deno's per-connection server takes: the server
 * only adds an `abort` listener (which cancels the connection), and calling that listener
 * here, inside `try`, cannot throw into the event loop when the connection has already
 * closed (a real signal would report the error as uncaught and end the process).
 *
 * @returns The signal to hand to the server, and `cancel()`, which closes the connection.
 */
export function cancelHook(): { signal: AbortSignal; cancel(): void } {
  let listener: (() => void) | undefined;
  const signal = {
    aborted: false,
    addEventListener(_type: string, callback: () => void) {
      listener = callback;
    },
    removeEventListener() {
      listener = undefined;
    },
  } as unknown as AbortSignal;
  return {
    signal,
    cancel() {
      const callback = listener;
      listener = undefined;
      try {
        callback?.();
      } catch {
        // the connection has closed already
      }
    },
  };
}

/**
 * Makes the function that runs one memory-reducing full collection by V8:
 * `gc({ type: "major", execution: "sync", flavor: "last-resort" })`. V8 gives `gc` only to
 * contexts made after `--expose-gc` is set, so it is taken from a new `node:vm` context, as
 * Node's documentation of `v8.setFlagsFromString` shows. The flag stays set for the
 * process: contexts made later (the speech worker's) have a `gc` global too, unused.
 *
 * @throws {Error} when the runtime offers no `gc` function.
 */
export async function v8Collector(): Promise<() => void> {
  const [v8, vm] = await Promise.all([import("node:v8"), import("node:vm")]);
  v8.setFlagsFromString("--expose-gc");
  const gc: unknown = vm.runInNewContext("gc");
  if (typeof gc !== "function") throw new Error("V8 gave no gc function");
  return () => gc({ type: "major", execution: "sync", flavor: "last-resort" });
}

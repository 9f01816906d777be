/**
 * Helpers for the built-in services' tests: the services on a real loopback port over a
 * temporary data directory, with a key check like the relay's.
 *
 * @module
 */

import {
  type BuiltinOptions,
  type BuiltinServices,
  createBuiltinServices,
} from "../../src/server/routes/downstream.ts";

/** The relay key the tests use; `reader-key` has only the read scope. */
export const MAIN_KEY = "main-key-0123456789abcdef";
export const READER_KEY = "reader-key-0123456789";
export const APP_ID = "app-id-0123456789abcdef";

/** A running instance of the services. */
export interface Running extends AsyncDisposable {
  url: string;
  dataDir: string;
  services: BuiltinServices;
  /** Stops the server and the worker (the data directory stays). */
  close(): Promise<void>;
}

/**
 * Serves the built-in services on 127.0.0.1 and starts their worker.
 *
 * @param dataDir An existing temporary directory, or a new one.
 */
export async function serveServices(
  options: Partial<BuiltinOptions> & { dataDir?: string } = {},
): Promise<Running> {
  const dataDir = options.dataDir ?? await Deno.makeTempDir({ prefix: "relay-publish-" });
  const services = createBuiltinServices({
    authorize: (key, scope) => key === MAIN_KEY || (key === READER_KEY && scope === "read"),
    appId: APP_ID,
    log: () => {},
    ...options,
    dataDir,
  });
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    services.app.fetch,
  );
  const url = `http://127.0.0.1:${server.addr.port}`;
  services.listening(url);
  services.start();
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    await services.stop();
    await server.shutdown();
  };
  return { url, dataDir, services, close, [Symbol.asyncDispose]: close };
}

/** POSTs JSON, by default with the app id (pass `{}` to send none). */
export function postJson(
  url: string,
  body: unknown,
  headers: Record<string, string> = { "x-app-id": APP_ID },
): Promise<Response> {
  return fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
    redirect: "manual",
  });
}

/** Polls `check` every 50 ms until it returns a value, for at most `ms`. */
export async function eventually<T>(
  check: () => Promise<T | undefined>,
  ms = 60_000,
): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > end) throw new Error("gave up waiting");
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

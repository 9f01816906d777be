/**
 * Helpers shared by the tests that run `relay serve` as a child process (server_test.ts,
 * server_net_test.ts, server_log_test.ts).
 */
import { eventually } from "../_helpers.ts";

/** A new temporary directory for one test's database and files; the test removes it. */
export async function tempDir(): Promise<string> {
  return await Deno.makeTempDir({ prefix: "relay-server-test-" });
}

/** Waits until the relay at `base` answers `GET /health` with 200. */
export async function answering(base: string): Promise<void> {
  await eventually(async () => {
    try {
      const res = await fetch(`${base}/health`);
      await res.body?.cancel();
      return res.status === 200;
    } catch {
      return false;
    }
  }, `${base}/health to answer 200`);
}

/** The API key these tests start their relays with (at least 16 characters, so no warning). */
export const KEY = "server-test-key-0123456789";

/** A `fetch` bound to the relay at `url` that sends `key` in `x-auth-key` with every call. */
export function client(
  url: string,
  key = KEY,
): (path: string, init?: RequestInit) => Promise<Response> {
  return (path: string, init: RequestInit = {}) =>
    fetch(`${url}${path}`, { ...init, headers: { "x-auth-key": key, ...init.headers } });
}

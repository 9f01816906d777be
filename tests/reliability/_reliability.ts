/**
 * Helpers shared by the reliability suite: HTTP calls with the test key, `/stats`, the
 * RSS of a process, temp directories.
 *
 * @module
 */

import { KEY } from "../_helpers.ts";
import type { StoreStats } from "../../src/store.ts";

/** `fetch` against `base` with the test key; the caller reads or cancels the body. */
export function relayCall(
  base: string,
): (path: string, init?: RequestInit) => Promise<Response> {
  return (path, init = {}) => {
    const headers = new Headers(init.headers);
    if (!headers.has("x-auth-key")) headers.set("x-auth-key", KEY);
    return fetch(`${base}${path}`, { ...init, headers });
  };
}

/** `GET /stats`, parsed. */
export async function getStats(
  call: (path: string) => Promise<Response>,
): Promise<StoreStats> {
  const res = await call("/stats");
  if (res.status !== 200) throw new Error(`/stats answered ${res.status}: ${await res.text()}`);
  return await res.json() as StoreStats;
}

/** Resident set size of process `pid`, bytes (from `/proc/<pid>/status`). */
export function rssBytes(pid: number): number {
  const status = Deno.readTextFileSync(`/proc/${pid}/status`);
  const kb = /VmRSS:\s+(\d+)\s+kB/.exec(status)?.[1];
  if (kb === undefined) throw new Error(`no VmRSS for ${pid}`);
  return Number(kb) * 1024;
}

/** Runs `job` with a fresh temp directory, removed afterwards. */
export async function withTempDir(job: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "relay-rel-" });
  try {
    await job(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

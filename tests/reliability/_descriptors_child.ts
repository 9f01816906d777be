/**
 * The child of tests/reliability/descriptors_test.ts: serves a ready episode through the
 * relay's app in this process, uses up every file descriptor it may open, asks for the
 * episode's audio, and prints what came back as one JSON line. It runs in a process of its
 * own so that the descriptors it takes are not missing from the tests run beside it.
 *
 * @module
 */

import { createApp } from "../../src/server/app.ts";
import { Logger } from "../../src/server/log.ts";
import { createBuiltinServices } from "../../src/builtin/services.ts";
import { KEY, makeStore } from "../_helpers.ts";

const [dir, id] = Deno.args as [string, string];
await using base = await makeStore();
const services = createBuiltinServices({ dataDir: dir, log: () => {} });
const app = createApp({
  store: base.store,
  apiKey: KEY,
  logger: new Logger({ write: () => {} }),
  builtin: { services, appId: "app-id-0123456789abcdef" },
});

/** Runs `job` while this process holds every file descriptor it may open. */
async function withoutDescriptors<T>(job: () => T | Promise<T>): Promise<T> {
  const held: Deno.FsFile[] = [];
  try {
    for (;;) held.push(Deno.openSync("/dev/null"));
  } catch (error) {
    if (!/too many open files|os error 24/i.test(String(error))) {
      for (const file of held) file.close();
      throw error;
    }
  }
  try {
    return await job();
  } finally {
    for (const file of held) file.close();
  }
}

// The episodes are read from their folder once, while descriptors are still there.
const first = await app.request(`/podcast/${id}.mp3`, { method: "HEAD" });
const refused = await withoutDescriptors(async () => {
  const res = await app.request(`/podcast/${id}.mp3`);
  return { status: res.status, headers: Object.fromEntries(res.headers), body: await res.text() };
});
const again = await app.request(`/podcast/${id}.mp3`);
console.log(JSON.stringify({
  first: first.status,
  refused,
  again: { status: again.status, bytes: (await again.arrayBuffer()).byteLength },
}));

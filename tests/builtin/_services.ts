/**
 * Helpers for the built-in services' tests: the real relay app with its built-in
 * services, on a real loopback port over a temporary store and data directory, with the
 * main key and a named key that may only read.
 *
 * @module
 */

import { createHash } from "node:crypto";
import { join } from "node:path";
import { KeyRing, writeKeys } from "../../src/access/named_keys.ts";
import {
  type BuiltinOptions,
  type BuiltinServices,
  createBuiltinServices,
} from "../../src/builtin/services.ts";
import type { Pcm, TtsEngine } from "../../src/builtin/tts.ts";
import { createApp, type RelayApp } from "../../src/server/app.ts";
import { Logger } from "../../src/server/log.ts";
import type { BuiltinPublishing } from "../../src/server/route.ts";
import { makeStore } from "../_helpers.ts";

/** The relay key the tests use; `reader-key` is a named key with only the read scope. */
export const MAIN_KEY = "main-key-0123456789abcdef";
export const READER_KEY = "reader-key-0123456789";
export const APP_ID = "app-id-0123456789abcdef";

/** A running relay serving the services. */
export interface Running extends AsyncDisposable {
  url: string;
  dataDir: string;
  services: BuiltinServices;
  /** The relay's app, for in-process requests. */
  app: RelayApp;
  /** Stops the server and the worker (the data directory stays). */
  close(): Promise<void>;
}

/**
 * What {@linkcode serveServices} takes: the services' options and the relay's, and where the
 * relay's log lines go (default nowhere).
 */
export type ServeOptions =
  & Partial<BuiltinOptions>
  & Partial<
    Pick<BuiltinPublishing, "publicUrl" | "privateBlog" | "privatePodcast" | "podcastFeed">
  >
  & { readonly logger?: Logger };

/**
 * Serves the relay with its built-in services on 127.0.0.1 and starts their worker.
 *
 * @param options.dataDir An existing temporary directory, or a new one.
 */
export async function serveServices(options: ServeOptions = {}): Promise<Running> {
  const { publicUrl, privateBlog, privatePodcast, podcastFeed, logger, ...serviceOptions } =
    options;
  const dataDir = options.dataDir ?? await Deno.makeTempDir({ prefix: "relay-publish-" });
  const base = await makeStore({ systemClock: true });
  const keysFile = join(await Deno.makeTempDir({ prefix: "relay-keys-" }), "keys.json");
  const sha256 = createHash("sha256").update(READER_KEY, "utf8").digest("hex");
  writeKeys(keysFile, [{ name: "reader", sha256, scopes: ["read"], created_at: 0 }]);
  const services = createBuiltinServices({ log: () => {}, ...serviceOptions, publicUrl, dataDir });
  const app = createApp({
    store: base.store,
    apiKey: MAIN_KEY,
    keyRing: new KeyRing(keysFile, Date.now, () => {}),
    logger: logger ?? new Logger({ write: () => {} }),
    builtin: { services, appId: APP_ID, publicUrl, privateBlog, privatePodcast, podcastFeed },
  });
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    (request, info) => app.fetch(request, info),
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
    await base[Symbol.asyncDispose]();
    await Deno.remove(join(keysFile, ".."), { recursive: true });
  };
  return { url, dataDir, services, app, close, [Symbol.asyncDispose]: close };
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

/** A real engine that is fast: a 440 Hz tone of `seconds` for every chunk, at 22 050 Hz. */
export class ToneEngine implements TtsEngine {
  readonly name = "tone";
  chunks = 0;
  constructor(readonly seconds = 0.3) {}
  synthesize(): Promise<Pcm> {
    this.chunks++;
    const samples = new Int16Array(Math.round(22050 * this.seconds));
    for (let i = 0; i < samples.length; i++) {
      samples[i] = Math.round(Math.sin((2 * Math.PI * 440 * i) / 22050) * 8000);
    }
    return Promise.resolve({ samples, sampleRate: 22050 });
  }
}

/**
 * The relay's HTTP API on Hono: the endpoints of spec §4.1–4.8 with the contract's rules,
 * and the extensions: `/stats` (issue 5), long-poll, `/results/stream`, leases with `/ack`,
 * and `/metrics` (issue 6); named keys with scopes, `/openapi.json` and the web app under
 * `/app/` (issue 7), where `GET /` sends a browser. The endpoints themselves are in
 * `routes/`, one module per group: `queues.ts`, `results.ts`, `publish.ts`, `admin.ts`,
 * `pages.ts`.
 *
 * Every request passes, in this order (C3): known path (else 404), allowed method (else
 * 405 with `Allow`), an `Origin` of the relay's own (else 403: another site's page; docs/
 * api.md, "Requests from web pages"), API key (else 401, or 429 for an address with too
 * many failures), the named key's scope (else 403, issue 7),
 * content type (else 415), body size (else 413),
 * then the handler's own checks (400). Handlers are thin: parse, call one store function,
 * answer. Every error leaves as an RFC 9457 problem document (C1).
 *
 * @module
 */

import { type Context, Hono, type MiddlewareHandler } from "hono";
import pLimit from "p-limit";
import {
  DEFAULT_MAX_BODY_BYTES,
  DEFAULT_MAX_STREAMS,
  DEFAULT_MAX_STREAMS_PER_KEY,
  WEBAPP_PATH,
} from "../constants.ts";
import { HttpError, problemResponse, truncate } from "../errors.ts";
import { storageProblem } from "./faults.ts";
import type { KeyRing } from "../access/named_keys.ts";
import type { PublishConfig } from "../publish/publish.ts";
import type { FailedPublishes } from "../publish/failed.ts";
import type { BuiltinPublishing } from "./route.ts";
import { DEFAULT_QA_HOSTS } from "../queues.ts";
import { StorageError, type Store, StoreBusyError } from "../store/store.ts";
import { AuthFailureLimiter, clientAddress, createRequireKey, redactedTarget } from "./auth.ts";
import { KEEP_ALIVE_MS, StreamLimits } from "./live.ts";
import { Logger } from "./log.ts";
import { RelayMetrics } from "./metrics.ts";
import type { RouteContext, Routes } from "./route.ts";
import { adminRoutes } from "./routes/admin.ts";
import { pageRoutes } from "./routes/pages.ts";
import { publishRoutes } from "./routes/publish.ts";
import { queueRoutes } from "./routes/queues.ts";
import { resultRoutes } from "./routes/results.ts";

/** Options of {@linkcode createApp}. */
export interface AppOptions {
  /** The store the endpoints read and write. */
  store: Store;
  /** The shared secret of spec §5; compared in constant time (C4). */
  apiKey: string;
  /** Named keys with scopes (issue 7); without it only `apiKey` is accepted. */
  keyRing?: KeyRing;
  /** Lower-case Q&A domains for routing (C11); default {@linkcode DEFAULT_QA_HOSTS}. */
  qaHosts?: readonly string[];
  /** Body limit in bytes (C5); default 512 KiB. */
  maxBodyBytes?: number;
  /**
   * Downstream services of `POST /publish` (C61); without it every publish answers 503
   * (C63).
   */
  publish?: PublishConfig;
  /** Where publishes with a failed target are kept to be retried; none are without it. */
  failed?: FailedPublishes;
  /**
   * Where the access log (one line per request, at level `info`: client address, method,
   * path with the key redacted, status, body bytes, duration in ms) and unexpected errors
   * go; default a text {@linkcode Logger} on standard output and error.
   */
  logger?: Logger;
  /**
   * The metrics `GET /metrics` reports (issue 6); default a new set. Pass the one whose
   * `commit` observer the store was created with to get KV commit latency.
   */
  metrics?: RelayMetrics;
  /**
   * Aborts when the relay is stopping: long-polls answer at once and streams end, so that
   * the graceful shutdown (C72) is not held up by them.
   */
  closing?: AbortSignal;
  /** Interval of keep-alive comments on an idle results stream, ms; default 30 s. */
  keepAliveMs?: number;
  /** The built-in notes store, blog and podcast; without it the relay serves none. */
  builtin?: BuiltinPublishing;
  /**
   * Origins (as `URL.origin` gives them) whose web pages may call the API besides the
   * relay's own (`--allow-origin`); default none.
   */
  allowedOrigins?: readonly string[];
  /** Results streams open at once (`--max-streams`); default {@linkcode DEFAULT_MAX_STREAMS}. */
  maxStreams?: number;
  /**
   * Results streams one key may have open at once (`--max-streams-per-key`); default
   * {@linkcode DEFAULT_MAX_STREAMS_PER_KEY}.
   */
  maxStreamsPerKey?: number;
}

/**
 * Reads that may return whole queues or the whole feed (pull, peek, results) running at
 * once. Each can hold 50 items of up to 768 KiB several times over while it decodes and
 * serialises them (about 100 MB), so 50 concurrent peeks of full queues took 4 GB and
 * killed a relay with a 1 GiB heap. Four at a time fit a Raspberry Pi; the rest wait.
 */
const CONCURRENT_BULK_READS = 4;

/**
 * The size of the body a response sends, bytes, for the access log: 0 for HEAD, its
 * `Content-Length` when it has one, else measured on a copy (problem documents, web app
 * files: bodies already in memory); `undefined` for an event stream, whose size is not
 * known when it starts.
 */
async function bodyBytes(method: string, res: Response): Promise<number | undefined> {
  if (method === "HEAD") return 0;
  const declared = res.headers.get("content-length");
  if (declared !== null && /^\d+$/.test(declared)) return Number(declared);
  if (res.headers.get("content-type")?.startsWith("text/event-stream")) return undefined;
  try {
    return (await res.clone().arrayBuffer()).byteLength;
  } catch {
    return undefined; // a body already read: the log line must not fail the request
  }
}

/**
 * A middleware that refuses every method but `methods` with 405 and `Allow` (C3). Hono
 * answers HEAD with the GET route; `c.req.method` is still the real method.
 */
function allowMethods(path: string, methods: readonly string[]): MiddlewareHandler {
  const allow = methods.join(", ");
  return async (c, next) => {
    if (!methods.includes(c.req.method)) {
      throw new HttpError(405, `Cannot ${c.req.method} ${path}: use ${allow}`, { allow });
    }
    await next();
  };
}

/**
 * Every route of the relay, in the order the 404 message lists them: the queues, the
 * results feed, publish, the admin endpoints, then the web app's pages.
 *
 * @param relay What the handlers share.
 * @returns The route table the app serves, and the API document describes.
 */
export function appRoutes(relay: RouteContext): Routes {
  const routes: Routes = {
    ...queueRoutes(relay),
    ...resultRoutes(relay),
    ...publishRoutes(relay),
    ...adminRoutes(relay, () => routes),
    ...pageRoutes(),
  };
  return routes;
}

/**
 * Builds the relay's HTTP app from the store and the configured options. Serve it with
 * `Deno.serve(app.fetch)` or call `app.request()` in tests.
 *
 * @example
 * ```ts
 * const app = createApp({ store, apiKey: "secret" });
 * const res = await app.request("/health");
 * ```
 */
export function createApp(options: AppOptions): Hono {
  const { store } = options;
  const logger = options.logger ?? new Logger();
  const metrics = options.metrics ?? new RelayMetrics();
  const relay: RouteContext = {
    store,
    qaHosts: options.qaHosts ?? DEFAULT_QA_HOSTS,
    maxBodyBytes: options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES,
    publish: options.publish,
    builtin: options.builtin,
    failed: options.failed,
    logger,
    metrics,
    closing: options.closing ?? new AbortController().signal,
    keepAliveMs: options.keepAliveMs ?? KEEP_ALIVE_MS,
    bulkRead: pLimit(CONCURRENT_BULK_READS),
    streams: new StreamLimits({
      total: options.maxStreams ?? DEFAULT_MAX_STREAMS,
      perKey: options.maxStreamsPerKey ?? DEFAULT_MAX_STREAMS_PER_KEY,
    }),
  };
  const routes = appRoutes(relay);
  const requireKey = createRequireKey({
    apiKey: options.apiKey,
    keyRing: options.keyRing,
    failures: new AuthFailureLimiter(store.clock),
    allowedOrigins: options.allowedOrigins,
  });

  const secrets = { mainKey: options.apiKey, isNamedKey: options.keyRing?.isKey };
  const app = new Hono();

  // The access log and the request metrics; a Host header that makes no URL stops here.
  app.use(async (c, next) => {
    const started = performance.now();
    // Deno builds the URL from the Host header: a malformed one makes it unparsable.
    const refused = URL.canParse(c.req.url) ? undefined : problemResponse(
      400,
      "Cannot read the request: its Host header does not make a valid URL",
    );
    if (refused === undefined) await next();
    const status = refused?.status ?? c.res.status;
    const ms = performance.now() - started;
    if (logger.enabled("info")) {
      logger.access({
        method: c.req.method,
        path: redactedTarget(c.req.url, secrets),
        status,
        durationMs: ms,
        bytes: await bodyBytes(c.req.method, refused ?? c.res),
        client: clientAddress(c),
      });
    }
    metrics.request(
      refused === undefined && c.req.path in routes ? c.req.path : "other",
      c.req.method,
      status,
      ms,
    );
    return refused;
  });

  for (const [path, route] of Object.entries(routes)) {
    const handle = (c: Context) => route.handler(c, new URL(c.req.url));
    if (route.open) app.all(path, allowMethods(path, route.methods), handle);
    else app.all(path, allowMethods(path, route.methods), requireKey(route.scope), handle);
  }

  // The built-in publishing services, beside the API (they check their own keys).
  if (options.builtin) app.route("/", options.builtin.services.app);

  // The API's endpoints and the app's entry, for the 404 message (not every app file).
  const endpoints = Object.keys(routes).filter((path) =>
    path !== "/" && !path.startsWith(WEBAPP_PATH)
  );
  endpoints.push(WEBAPP_PATH);
  if (options.builtin) endpoints.push("/notes/", "/blog/", "/podcast/", "/downstream/…");
  app.notFound((c) => {
    const path = truncate(c.req.path);
    return problemResponse(
      404,
      `No endpoint at "${path}": the relay serves ${endpoints.join(", ")}`,
    );
  });

  app.onError((error) => {
    if (error instanceof HttpError) {
      return problemResponse(error.status, error.message, error.headers);
    }
    if (error instanceof StoreBusyError) {
      return problemResponse(503, `${error.message}: try again`, { "retry-after": "1" });
    }
    if (error instanceof StorageError) return storageProblem(error);
    logger.error("relay: unexpected error", error);
    return problemResponse(500, "Internal error: the relay logged the cause");
  });

  return app;
}

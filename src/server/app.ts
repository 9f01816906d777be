/**
 * The relay's HTTP API: the endpoints with the contract's rules, and the extensions:
 * `/stats`, long-poll, `/results/stream`, leases with `/ack`, and `/metrics`; named keys
 * with scopes, `/openapi.json` and the web app under `/app/`, where `GET /` sends a browser.
 * The endpoints themselves are in `routes/`, one module per group: `queues.ts`,
 * `results.ts`, `publish.ts`, `admin.ts`, `pages.ts`, and the built-in services'.
 *
 * Every request takes one pipeline (pipeline.ts), in this order: known path (else 404),
 * allowed method (else 405 with `Allow`), an `Origin` of the relay's own (else 403: another
 * site's page; docs/api/basics.md, "Requests from web pages"), API key (else 401, or 429 for an
 * address with too many failures), the named key's scope (else 403), content type (else
 * 415), body size (else 413), then the handler's own checks (400). Handlers are thin:
 * parse, call one store function, answer. Every error leaves as an RFC 9457 problem
 * document.
 *
 * @module
 */

import pLimit from "p-limit";
import {
  DEFAULT_MAX_BODY_BYTES,
  DEFAULT_MAX_STREAMS,
  DEFAULT_MAX_STREAMS_PER_KEY,
} from "../constants.ts";
import type { KeyRing } from "../access/named_keys.ts";
import { podcastFeedKey } from "../access/podcast_feed_key.ts";
import { feedKeysOf } from "../access/feed_keys.ts";
import type { PublishConfig } from "../publish/fan_out.ts";
import type { FailedPublishes } from "../publish/failed.ts";
import type { BuiltinPublishing } from "./route.ts";
import { DEFAULT_QA_HOSTS } from "../queue_names.ts";
import type { Store } from "../store/store.ts";
import { AuthFailureLimiter, type Authorize, createAuthorize } from "./auth.ts";
import { corsOrigin } from "./cors.ts";
import { KEEP_ALIVE_MS, StreamLimits } from "./live.ts";
import { Logger } from "./log.ts";
import { RelayMetrics } from "./metrics.ts";
import { createPipeline, type RequestInfo } from "./pipeline.ts";
import type { RouteContext, Routes } from "./route.ts";
import { adminRoutes } from "./routes/admin.ts";
import { downstreamRoutes } from "./routes/downstream.ts";
import { siteRoutes } from "./routes/sites.ts";
import { pageRoutes } from "./routes/pages.ts";
import { publishRoutes } from "./routes/publish.ts";
import { queueRoutes } from "./routes/queues.ts";
import { resultRoutes } from "./routes/results.ts";

export type { RequestInfo } from "./pipeline.ts";

/** Options of {@linkcode createApp}. */
export interface AppOptions {
  /** The store the endpoints read and write. */
  store: Store;
  /** The shared secret; compared in constant time. */
  apiKey: string;
  /** Named keys with scopes; without it only `apiKey` is accepted. */
  keyRing?: KeyRing;
  /** Lower-case Q&A domains for routing; default {@linkcode DEFAULT_QA_HOSTS}. */
  qaHosts?: readonly string[];
  /** Body limit in bytes; default 512 KiB. */
  maxBodyBytes?: number;
  /**
   * Downstream services of `POST /publish`; without it every publish answers 503.
   * `relay serve` always passes them: the built-in services unless configured.
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
   * The metrics `GET /metrics` reports; default a new set. Pass the one whose
   * `commit` observer the store was created with to get KV commit latency.
   */
  metrics?: RelayMetrics;
  /**
   * Aborts when the relay is stopping: long-polls answer at once and streams end, so that
   * the graceful shutdown is not held up by them.
   */
  closing?: AbortSignal;
  /**
   * Aborted when the relay stops taking requests: each new one is answered 503 while
   * those in flight finish. `relay serve` passes its closing signal here too.
   */
  stopping?: AbortSignal;
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
 * Every route of the relay, in the order the 404 message lists them: the queues, the
 * results feed, publish, the admin endpoints, then the web app's pages, and the built-in
 * services' API and pages when the relay serves them.
 *
 * @param relay What the handlers share.
 * @returns The route table the app serves, and the API document describes.
 */
export function appRoutes(relay: RouteContext): Routes {
  const builtin = relay.builtin;
  const routes: Routes = {
    ...queueRoutes(relay),
    ...resultRoutes(relay),
    ...publishRoutes(relay),
    ...adminRoutes(relay, () => routes),
    ...pageRoutes(),
    ...(builtin === undefined ? {} : downstreamRoutes({ ...relay, builtin })),
    ...(builtin === undefined ? {} : siteRoutes(builtin, relay.feedKeys)),
  };
  return routes;
}

/**
 * The relay's HTTP app: what `Deno.serve` (or the relay's own accept loop) calls, and
 * `request()` for tests.
 */
export interface RelayApp {
  /**
   * Answers one request through the pipeline (pipeline.ts).
   *
   * @param request The request; its URL's host comes from the `Host` header.
   * @param info The connection it came on; without it (in-process) the client has no
   *   address, is never rate limited and is logged as `-`.
   * @returns The response; never rejects (errors become problem documents). A read
   *   answered from its cache comes back at once, not in a promise (docs/benchmarks.md,
   *   "Reads").
   */
  fetch(request: Request, info?: RequestInfo): Response | Promise<Response>;
  /**
   * Answers a request made in-process, as Hono's `app.request()`: `input` a path such as
   * `/peek?queue=qa` (on `http://localhost`), a full URL, or a `Request`.
   *
   * @param input What to request.
   * @param init The request's method, headers and body.
   * @param info The connection the request is said to come on.
   */
  request(
    input: string | URL | Request,
    init?: RequestInit,
    info?: RequestInfo,
  ): Promise<Response>;
  /** Every route served, as {@linkcode ServedRoute}s, in the order of the route tables. */
  readonly routes: readonly ServedRoute[];
}

/** A route as {@linkcode RelayApp.routes} lists it. */
export interface ServedRoute {
  /** Its path, a parameter written `:name`, e.g. `/blog/:post_id`. */
  readonly path: string;
  /** `ALL`: one handler answers the methods it lists in `methods`, 405 the others. */
  readonly method: string;
  /** The methods it answers, e.g. `["GET", "HEAD"]`. */
  readonly methods: readonly string[];
  /** Whether its requests need a key (or the app id, or the podcast's feed key). */
  readonly keyed: boolean;
  /** Whether its answers say `Cache-Control: no-store` (else `private` when keyed). */
  readonly noStore: boolean;
}

/** What the handlers share, from the app's options. */
function routeContext(options: AppOptions, logger: Logger, metrics: RelayMetrics): RouteContext {
  return {
    store: options.store,
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
    feedKeys: feedKeysOf(options.apiKey),
  };
}

/** The podcast's feed key, when the relay serves the built-in podcast. */
function podcastFeedKeyOf(options: AppOptions): string | undefined {
  return options.builtin === undefined ? undefined : podcastFeedKey(options.builtin.appId);
}

/** The one authorisation path of every route ({@linkcode createAuthorize}), as configured. */
function authorizeOf(options: AppOptions, feedKey: string | undefined): Authorize {
  return createAuthorize({
    apiKey: options.apiKey,
    keyRing: options.keyRing,
    failures: new AuthFailureLimiter(options.store.clock),
    // The public URL's origin is the relay's own, whatever Host a proxy in front sends.
    allowedOrigins: [
      ...(options.allowedOrigins ?? []),
      ...[URL.parse(options.builtin?.publicUrl ?? "")?.origin ?? []].flat(),
    ],
    appId: options.builtin?.appId,
    podcastFeedKey: feedKey,
    feedKeys: feedKeysOf(options.apiKey),
  });
}

/**
 * Builds the relay's HTTP app from the store and the configured options: its routes, and
 * the one pipeline every request takes (pipeline.ts). Serve it with `Deno.serve(app.fetch)`
 * or call `app.request()` in tests.
 *
 * @example
 * ```ts
 * import { createStore } from "../store/store.ts";
 *
 * const store = createStore(await Deno.openKv(":memory:"));
 * const app = createApp({ store, apiKey: "secret" });
 * const res = await app.request("/health");
 * ```
 */
export function createApp(options: AppOptions): RelayApp {
  const logger = options.logger ?? new Logger();
  const metrics = options.metrics ?? new RelayMetrics();
  const routes = appRoutes(routeContext(options, logger, metrics));
  // Derived once (an HMAC): the key check and the log's redaction both need it.
  const feedKey = podcastFeedKeyOf(options);
  const answer = createPipeline({
    routes,
    authorize: authorizeOf(options, feedKey),
    cors: corsOrigin(options.allowedOrigins ?? []),
    logger,
    metrics,
    secrets: {
      mainKey: options.apiKey,
      isNamedKey: options.keyRing?.isKey,
      podcastFeedKey: feedKey,
      feedKeys: [...feedKeysOf(options.apiKey).values()],
    },
    builtin: options.builtin !== undefined,
    ...(options.stopping === undefined ? {} : { stopping: options.stopping }),
  });
  return {
    // A request from the network must name its host; one made in-process (`request()`, or
    // `fetch` without a client address) has none to name.
    fetch: (request, info) => answer(request, info, info?.remoteAddr !== undefined),
    routes: Object.entries(routes).map(([path, route]) => ({
      path,
      method: "ALL",
      methods: route.methods,
      keyed: !route.open,
      noStore: !route.open && route.noStore === true,
    })),
    async request(input, init, info) {
      if (input instanceof Request) {
        return await answer(init === undefined ? input : new Request(input, init), info, false);
      }
      const text = String(input);
      const url = /^https?:\/\//.test(text)
        ? text
        : `http://localhost${text.startsWith("/") ? "" : "/"}${text}`;
      return await answer(new Request(url, init), info, false);
    },
  };
}

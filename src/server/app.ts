/**
 * The relay's HTTP API on Hono: the endpoints with the contract's rules,
 * and the extensions: `/stats`, long-poll, `/results/stream`, leases with `/ack`,
 * and `/metrics`; named keys with scopes, `/openapi.json` and the web app under
 * `/app/`, where `GET /` sends a browser. The endpoints themselves are in
 * `routes/`, one module per group: `queues.ts`, `results.ts`, `publish.ts`, `admin.ts`,
 * `pages.ts`.
 *
 * Every request passes, in this order: known path (else 404), allowed method (else
 * 405 with `Allow`), an `Origin` of the relay's own (else 403: another site's page; docs/
 * api.md, "Requests from web pages"), API key (else 401, or 429 for an address with too
 * many failures), the named key's scope (else 403),
 * content type (else 415), body size (else 413),
 * then the handler's own checks (400). Handlers are thin: parse, call one store function,
 * answer. Every error leaves as an RFC 9457 problem document.
 *
 * @module
 */

import { type Context, Hono } from "hono";
import pLimit from "p-limit";
import {
  DEFAULT_MAX_BODY_BYTES,
  DEFAULT_MAX_STREAMS,
  DEFAULT_MAX_STREAMS_PER_KEY,
  WEBAPP_PATH,
} from "../constants.ts";
import { HttpError, problemResponse, truncate } from "../errors.ts";
import { fileFaultProblem, storageProblem } from "./faults.ts";
import { sizeOf } from "./responses.ts";
import type { KeyRing } from "../access/named_keys.ts";
import { podcastFeedKey } from "../access/podcast_feed_key.ts";
import { feedKeysOf } from "../access/feed_keys.ts";
import type { PublishConfig } from "../publish/fan_out.ts";
import type { FailedPublishes } from "../publish/failed.ts";
import type { BuiltinPublishing } from "./route.ts";
import { DEFAULT_QA_HOSTS } from "../queue_names.ts";
import { StorageError, type Store, StoreBusyError } from "../store/store.ts";
import {
  type Access,
  AuthFailureLimiter,
  type Authorize,
  createAuthorize,
  KEY_ID,
  type Secrets,
  targetRedactor,
} from "./auth.ts";
import { corsOrigin, granted, optionsAnswer, varyOrigin } from "./cors.ts";
import { KEEP_ALIVE_MS, StreamLimits } from "./live.ts";
import { Logger } from "./log.ts";
import { RelayMetrics } from "./metrics.ts";
import { accessOf, type RequestEnv, type RouteContext, type Routes } from "./route.ts";
import { adminRoutes } from "./routes/admin.ts";
import { downstreamRoutes } from "./routes/downstream.ts";
import { siteRoutes } from "./routes/sites.ts";
import { pageRoutes } from "./routes/pages.ts";
import { compressed, encoded, headLength, lacksHost } from "./representation.ts";
import { validated } from "./validators.ts";
import { directWrites, type ErrorResponder } from "./writes.ts";
import { publishRoutes } from "./routes/publish.ts";
import { queueRoutes } from "./routes/queues.ts";
import { resultRoutes } from "./routes/results.ts";

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
 * The size of the body a response sends, bytes, for the access log: 0 for HEAD, the size
 * its maker recorded ({@linkcode sizeOf}), its `Content-Length` when it has one, else
 * measured on a copy (problem documents, web app files: bodies already in memory);
 * `undefined` for an event stream, whose size is not known when it starts. Synchronous
 * unless it has to be measured.
 */
function bodyBytes(
  method: string,
  res: Response,
): number | undefined | Promise<number | undefined> {
  if (method === "HEAD") return 0;
  const known = sizeOf(res);
  if (known !== undefined) return known;
  const declared = res.headers.get("content-length");
  if (declared !== null && /^\d+$/.test(declared)) return Number(declared);
  if (res.headers.get("content-type")?.startsWith("text/event-stream")) return undefined;
  return measured(res);
}

/** The size of a response's body, measured on a copy; `undefined` when it was read. */
async function measured(res: Response): Promise<number | undefined> {
  try {
    return (await res.clone().arrayBuffer()).byteLength;
  } catch {
    return undefined; // a body already read: the log line must not fail the request
  }
}

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

/** Paths of the built-in services, listed once each in a 404's message. */
const BUILTIN_PREFIXES = ["/notes", "/blog", "/podcast", "/downstream"];

/**
 * The relay's HTTP app: what `Deno.serve` (or the relay's own accept loop) calls, and
 * `request()` for tests, as Hono's app has it.
 */
export interface RelayApp {
  /**
   * Answers one request: the access log line and the request metrics around the routes.
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
  /** Every route Hono serves, as `{ path, method }` (`ALL` for an endpoint's one handler). */
  readonly routes: readonly { readonly path: string; readonly method: string }[];
}

/** The connection a request came on, as the relay's server passes it. */
export interface RequestInfo {
  /** The client's address, when it came over the network. */
  readonly remoteAddr?: { readonly hostname?: string } | undefined;
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

/**
 * Registers one Hono handler per endpoint, checking in the contract's order: method (405
 * with Allow; a CORS preflight from an origin let in is answered instead), then Origin,
 * key and scope. Hono answers HEAD with the GET route; `c.req.method` is still the real
 * method.
 */
function registerRoutes(
  app: Hono,
  routes: Readonly<Routes>,
  checks: { authorize: Authorize; cors: (headers: Headers) => string | undefined },
): void {
  const { authorize, cors } = checks;
  for (const [path, route] of Object.entries(routes)) {
    const { methods, handler } = route;
    const allow = methods.join(", ");
    const access = accessOf(route);
    app.all(path, (c: Context) => {
      const method = c.req.method;
      if (!methods.includes(method)) {
        const options = method === "OPTIONS" ? optionsAnswer(c.req.raw, cors, methods) : undefined;
        if (options !== undefined) return options;
        throw new HttpError(405, `Cannot ${method} ${path}: use ${allow}`, { allow });
      }
      const { url, remoteAddr } = c.env as RequestEnv;
      if (access !== undefined) {
        c.set(KEY_ID, authorize(c.req.raw, url, remoteAddr?.hostname, access, path));
      }
      return handler(c, url);
    });
  }
}

/** The 404 of a path no route serves: it lists the API's endpoints and the app's entry. */
function notFound(routes: Readonly<Routes>, builtin: boolean): (c: Context) => Response {
  // Not every app file, nor every page of the built-in services: their entries.
  const endpoints = Object.keys(routes).filter((path) =>
    path !== "/" && !path.startsWith(WEBAPP_PATH) &&
    !BUILTIN_PREFIXES.some((prefix) => path.startsWith(prefix))
  );
  endpoints.push(WEBAPP_PATH);
  if (builtin) endpoints.push("/notes/", "/blog/", "/podcast/", "/downstream/…");
  return (c) =>
    problemResponse(
      404,
      `No endpoint at "${truncate(c.req.path)}": the relay serves ${endpoints.join(", ")}`,
    );
}

/** Every error as an RFC 9457 problem document; an unexpected one is logged and answers 500. */
function errorResponder(logger: Logger): ErrorResponder {
  return (error, c) => {
    if (error instanceof HttpError) {
      return problemResponse(error.status, error.message, error.headers);
    }
    if (error instanceof StoreBusyError) {
      return problemResponse(503, `${error.message}: try again`, { "retry-after": "1" });
    }
    if (error instanceof StorageError) return storageProblem(error);
    const fault = fileFaultProblem(
      error,
      c === undefined ? "answer this request" : `${c.req.method} ${c.req.path}`,
    );
    if (fault !== undefined) return fault;
    logger.error("relay: unexpected error", error);
    return problemResponse(500, "Internal error: the relay logged the cause");
  };
}

/** What {@linkcode cachedReads} needs. */
interface CachedReadParts {
  readonly routes: Readonly<Routes>;
  readonly authorize: Authorize;
  readonly errorResponse: (error: unknown) => Response;
  readonly recorded: Recorded;
}

/**
 * Answers `GET`s of reads from their cache before routing: the same checks in the same
 * order (a known path, a usable host, then Origin, key and scope; an open route such as
 * `/health` has no key to check), without Hono's dispatch, and without parsing the URL: the
 * path and query are cut out of the URL's text, as received. A path that parsing would
 * change (`/x/../peek`) or a query that parsing would encode finds no read or no cached
 * answer here and is routed. The host is checked as for any request ({@linkcode lacksHost},
 * `URL.parse`), then remembered: the next requests with the same scheme and host skip the
 * check. Never `localhost`, which Deno also writes when the `Host` header is missing or empty.
 *
 * @returns `(request, info, network, started)`: the recorded answer, or `undefined` when
 *   the request is not such a read, names no usable host, or its cache has no answer.
 */
function cachedReads(
  parts: CachedReadParts,
): (
  request: Request,
  info: RequestInfo | undefined,
  network: boolean,
  started: number,
) => Response | Promise<Response> | undefined {
  const { routes, authorize, errorResponse, recorded } = parts;
  const reads = new Map<
    string,
    { access: Access | undefined; cached: (search: string) => Response | undefined }
  >();
  for (const [path, route] of Object.entries(routes)) {
    if (route.cached !== undefined && route.methods.includes("GET")) {
      reads.set(path, { access: accessOf(route), cached: route.cached });
    }
  }
  let knownHost = "";
  const usable = (request: Request, text: string, hostEnd: number, network: boolean) => {
    if (hostEnd === knownHost.length && text.startsWith(knownHost)) return true;
    const url = URL.parse(text);
    if (url === null || (network && lacksHost(request, url))) return false;
    if (url.hostname !== "localhost") knownHost = text.slice(0, hostEnd);
    return true;
  };
  return (request, info, network, started) => {
    const text = request.url;
    const hostEnd = text.indexOf("/", text.indexOf("//") + 2);
    if (hostEnd < 0) return undefined;
    const queryAt = text.indexOf("?", hostEnd);
    const path = queryAt < 0 ? text.slice(hostEnd) : text.slice(hostEnd, queryAt);
    const route = reads.get(path);
    if (route === undefined || !usable(request, text, hostEnd, network)) return undefined;
    let hit: Response | undefined;
    try {
      if (route.access !== undefined) {
        authorize(request, text, info?.remoteAddr?.hostname, route.access, path);
      }
      hit = route.cached(queryAt < 0 ? "" : text.slice(queryAt));
      if (hit === undefined) return undefined;
    } catch (error) {
      hit = errorResponse(error);
    }
    // Compressed for a client that asks: then, and only then, it takes a promise.
    const sent = request.headers.has("accept-encoding") ? encoded(request, hit) : hit;
    return sent instanceof Promise
      ? sent.then((response) => recorded(request, path, info, response, started))
      : recorded(request, path, info, sent, started);
  };
}

/**
 * Records an answer: `recorded(request, route, info, response, started)` grants it to a
 * CORS origin let in (and gives every answer `Vary: Origin`), writes its access log line
 * and counts it in the request metrics under `route` (a route's path, or `other`),
 * `started` being the answer's `performance.now()`. Synchronous unless the body's size has
 * to be measured.
 */
type Recorded = (
  request: Request,
  route: string,
  info: RequestInfo | undefined,
  response: Response,
  started: number,
) => Response | Promise<Response>;

/** What {@linkcode recorder} needs. */
interface RecorderParts {
  readonly logger: Logger;
  readonly metrics: RelayMetrics;
  readonly secrets: Secrets;
  readonly cors: (headers: Headers) => string | undefined;
}

/** Makes the {@linkcode Recorded} function of the app. */
function recorder(parts: RecorderParts): Recorded {
  const { logger, metrics, cors } = parts;
  const logging = logger.enabled("info");
  const redacted = targetRedactor(parts.secrets);
  const record = (
    request: Request,
    route: string,
    info: RequestInfo | undefined,
    answer: Response,
    ms: number,
    bytes: number | undefined,
  ): Response => {
    const method = request.method;
    const origin = cors(request.headers);
    const response = origin === undefined ? varyOrigin(answer) : granted(answer, origin);
    if (logging) {
      logger.access({
        method,
        path: redacted(request.url),
        status: response.status,
        durationMs: ms,
        bytes,
        client: info?.remoteAddr?.hostname,
      });
    }
    metrics.request(route, method, response.status, ms);
    return response;
  };
  return (request, route, info, response, started) => {
    const ms = performance.now() - started;
    const bytes = logging ? bodyBytes(request.method, response) : undefined;
    return typeof bytes === "object"
      ? bytes.then((measured) => record(request, route, info, response, ms, measured))
      : record(request, route, info, response, ms, bytes);
  };
}

/**
 * The Hono app that answers every request not answered from a cache: the steps every answer
 * leaves through, one handler per route, the 404 and the error handler.
 */
function honoApp(
  routes: Readonly<Routes>,
  checks: {
    authorize: Authorize;
    cors: (headers: Headers) => string | undefined;
    errorResponse: (error: unknown) => Response;
  },
  builtin: boolean,
): Hono {
  const app = new Hono();
  // What every answer gets on its way out, whichever route made it: validators, then
  // compression, then a HEAD's length (middleware registered later runs first on the way
  // out). A GET that changes state (a pull, which refuses HEAD) is never answered 304.
  app.use(headLength());
  app.use(compressed());
  app.use(validated((path) => routes[path]?.methods.includes("HEAD") ?? true));
  registerRoutes(app, routes, checks);
  app.notFound(notFound(routes, builtin));
  app.onError(checks.errorResponse);
  return app;
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
 * The 400 of a request that names no usable host: Deno builds the URL from the `Host`
 * header, so a malformed one makes it unparsable (`badHost`), and HTTP/1.1 requires one.
 */
function unreadable(badHost: boolean): Response {
  return problemResponse(
    400,
    badHost
      ? "Cannot read the request: its Host header does not make a valid URL"
      : "Cannot read the request: it has no Host header (HTTP/1.1 requires one): send " +
        "Host: with the relay's address, as every HTTP client does",
  );
}

/**
 * Builds the relay's HTTP app from the store and the configured options. Serve it with
 * `Deno.serve(app.fetch)` or call `app.request()` in tests.
 *
 * Each endpoint is one Hono handler that checks the method, the key and its scope and then
 * runs the route (no middleware chain); the access log and the metrics wrap the whole app,
 * and the request URL is parsed once, here, and handed down in Hono's `env`
 * ({@linkcode RequestEnv}).
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
  const authorize = authorizeOf(options, feedKey);
  const cors = corsOrigin(options.allowedOrigins ?? []);
  const secrets = {
    mainKey: options.apiKey,
    isNamedKey: options.keyRing?.isKey,
    podcastFeedKey: feedKey,
    feedKeys: [...feedKeysOf(options.apiKey).values()],
  };
  const errorResponse = errorResponder(logger);
  const app = honoApp(routes, { authorize, cors, errorResponse }, options.builtin !== undefined);
  const recorded = recorder({ logger, metrics, secrets, cors });
  const fromCache = cachedReads({ routes, authorize, errorResponse, recorded });
  const fromWrite = directWrites(routes, authorize, errorResponse);

  // Everything but a cached read: a direct write, or through Hono.
  const routed = async (
    request: Request,
    info: RequestInfo | undefined,
    network: boolean,
    started: number,
  ): Promise<Response> => {
    const url = URL.parse(request.url);
    let response: Response;
    if (url === null || (network && lacksHost(request, url))) {
      response = unreadable(url === null);
    } else {
      const env: RequestEnv = { url, remoteAddr: info?.remoteAddr };
      try {
        response = await (fromWrite(request, url, info) ?? app.fetch(request, env));
      } catch (error) {
        // Hono's onError answers what handlers throw; this is for Hono itself failing.
        logger.error("relay: unexpected error", error);
        response = problemResponse(500, "Internal error: the relay logged the cause");
      }
    }
    const path = url?.pathname;
    const route = path !== undefined && Object.hasOwn(routes, path) ? path : "other";
    return await recorded(request, route, info, response, started);
  };

  // The access log and the request metrics around the app. A read answered from its cache
  // is answered in the same turn, without a promise: a promise and its continuations cost
  // about a tenth of a cached read (docs/benchmarks.md, "Reads").
  // A request from the network must name its host; one made in-process (`request()`, or
  // `fetch` without a client address) has none to name.
  const answer = (
    request: Request,
    info: RequestInfo | undefined,
    network: boolean,
  ): Response | Promise<Response> => {
    const started = performance.now();
    return (request.method === "GET" ? fromCache(request, info, network, started) : undefined) ??
      routed(request, info, network, started);
  };

  return {
    fetch: (request, info) => answer(request, info, info?.remoteAddr !== undefined),
    routes: app.routes,
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

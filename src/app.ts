/**
 * The relay's HTTP API on Hono: the endpoints of spec §4.1–4.8 with the contract's rules,
 * and the extensions: `/stats` (issue 5), long-poll, `/results/stream`, leases with `/ack`,
 * and `/metrics` (issue 6); named keys with scopes, `/openapi.json` and the web app under
 * `/app/` (issue 7).
 *
 * Every request passes, in this order (C3): known path (else 404), allowed method (else
 * 405 with `Allow`), API key (else 401), the named key's scope (else 403, issue 7),
 * content type (else 415), body size (else 413),
 * then the handler's own checks (400). Handlers are thin: parse, call one store function,
 * answer. Every error leaves as an RFC 9457 problem document (C1).
 *
 * @module
 */

import { type Context, Hono } from "hono";
import denoConfig from "../deno.json" with { type: "json" };
import { streamSSE } from "hono/streaming";
import pLimit from "p-limit";
import { AuthFailureLimiter, keysMatch, presentedKey, redactedTarget } from "./auth.ts";
import {
  type BodyType,
  bodyType,
  DEFAULT_MAX_BODY_BYTES,
  parseBody,
  type ParsedBody,
  readLimited,
} from "./body.ts";
import { HttpError, problemResponse, truncate } from "./errors.ts";
import type { KeyRing, Scope } from "./named_keys.ts";
import { WEBAPP_FILES, WEBAPP_PAGES, WEBAPP_PATH, webappFile } from "./webapp.ts";
import { KEEP_ALIVE_MS, longPoll, streamResults } from "./live.ts";
import { RelayMetrics, type Waiter } from "./metrics.ts";
import { missingConfiguration, publish, type PublishConfig } from "./publish.ts";
import { builtinMetricsText, withBuiltinTargets } from "./publish/builtin.ts";
import type { BuiltinServices } from "./publish/routes.ts";
import { DEFAULT_QA_HOSTS, QUEUE_NAMES, routeContent } from "./queues.ts";
import {
  ackBodySchema,
  dedupeParamSchema,
  itemId,
  parseOr400,
  publishBodySchema,
  pullQuerySchema,
  pushFieldsSchema,
  queueParamSchema,
  resultsQuerySchema,
  streamStartSchema,
  submitFieldsSchema,
} from "./schemas.ts";
import {
  ack,
  clear,
  type Collection,
  lease,
  nextLeaseEnd,
  peek,
  probe,
  pullFirst,
  push,
  readResults,
  stats,
  type Store,
  StoreBusyError,
  submit,
} from "./store.ts";

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
  /**
   * Where the access log goes, one line per request (method, path with the key redacted,
   * status, duration in ms); default `console.log`.
   */
  log?: (line: string) => void;
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
  /**
   * The built-in notes store, blog and podcast (docs/publishing-builtin.md): served beside
   * the API, and the target of every publish target without a URL of its own.
   */
  builtin?: {
    readonly services: BuiltinServices;
    /** The app id the built-in read-aloud queue accepts. */
    readonly appId: string;
    /** `--public-url`: the origin for links; default the request's origin. */
    readonly publicUrl?: string | undefined;
  };
}

/** What a route handler gets: the Hono context and the parsed request URL. */
type Handler = (c: Context, url: URL) => Promise<Response>;

/**
 * One endpoint: the methods it answers, and either `open` (no key needed) or the scope a
 * named key needs for it (issue 7; the main key has every scope).
 */
type Route =
  & { readonly methods: readonly string[]; readonly handler: Handler }
  & ({ readonly open: true; readonly scope?: never } | {
    readonly open?: never;
    readonly scope: Scope;
  });

/**
 * Reads that may return whole queues or the whole feed (pull, peek, results) running at
 * once. Each can hold 50 items of up to 768 KiB several times over while it decodes and
 * serialises them (about 100 MB), so 50 concurrent peeks of full queues took 4 GB and
 * killed a relay with a 1 GiB heap. Four at a time fit a Raspberry Pi; the rest wait.
 */
const CONCURRENT_BULK_READS = 4;

const TEXT = "text/plain; charset=utf-8";

/** Publishing without downstream services: every target is "not configured" (C63). */
const NOT_CONFIGURED: PublishConfig = {
  urls: { notes: undefined, blog: undefined, nas: undefined },
  appId: undefined,
  timeoutMs: 1,
};
const JSON_TYPE = "application/json; charset=utf-8";

/** A `text/plain; charset=utf-8` response (C2). */
function text(body: string, status = 200): Response {
  return new Response(body, { status, headers: { "content-type": TEXT } });
}

/** An `application/json; charset=utf-8` response (C2). */
function json(value: unknown, status = 200): Response {
  return new Response(JSON.stringify(value), { status, headers: { "content-type": JSON_TYPE } });
}

/** `YYYY-MM-DD HH:MM:SS` in UTC, as peek shows `created_at` (spec §2.2, C7). */
function formatTimestamp(ms: number): string {
  return new Date(ms).toISOString().slice(0, 19).replace("T", " ");
}

/** Reads a POST body under the content-type and size rules of C5, in C3's order. */
async function readBody(
  c: Context,
  limit: number,
  action: string,
  accepted?: readonly BodyType[],
): Promise<ParsedBody> {
  const type = bodyType(c.req.raw.headers, accepted);
  const bytes = await readLimited(c.req.raw, limit);
  return parseBody(bytes, type, action);
}

/**
 * The client's IP address as the server saw it (`Deno.ServeHandlerInfo.remoteAddr`, passed
 * as Hono's `env`), or `undefined` for an in-process request without one (never rate
 * limited). A reverse proxy's `X-Forwarded-For` is not trusted: behind a proxy all clients
 * share its address.
 */
function clientAddress(c: Context): string | undefined {
  const env = c.env as { remoteAddr?: { hostname?: string } } | undefined;
  return env?.remoteAddr?.hostname;
}

function absentIfEmpty(value: string | null | undefined): string | undefined {
  return value === null || value === "" ? undefined : value;
}

/**
 * Builds the relay's HTTP app. Serve it with `Deno.serve(app.fetch)` or call
 * `app.request()` in tests.
 *
 * @example
 * ```ts
 * const app = createApp({ store, apiKey: "secret" });
 * const res = await app.request("/health");
 * ```
 */
export function createApp(options: AppOptions): Hono {
  const { store, apiKey } = options;
  const qaHosts = options.qaHosts ?? DEFAULT_QA_HOSTS;
  const maxBody = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const log = options.log ?? ((line: string) => console.log(line));
  const bulkRead = pLimit(CONCURRENT_BULK_READS);
  const authFailures = new AuthFailureLimiter(store.clock);
  const metrics = options.metrics ?? new RelayMetrics();
  const closing = options.closing ?? new AbortController().signal;
  const keepAliveMs = options.keepAliveMs ?? KEEP_ALIVE_MS;

  /**
   * Long-polls (issue 6): tries `attempt` and, with `waitS` > 0, waits for a change to
   * `collections` until it finds something, the client leaves or the relay stops.
   */
  async function waitFor<T>(
    c: Context,
    kind: Waiter,
    waitS: number,
    collections: readonly Collection[],
    attempt: () => Promise<T | undefined>,
    wakeAt?: () => Promise<number | undefined>,
  ): Promise<T | undefined> {
    if (waitS === 0) return await attempt();
    const done = metrics.wait(kind);
    try {
      const signal = AbortSignal.any([c.req.raw.signal, closing]);
      const waitMs = waitS * 1000;
      return await longPoll(store, { collections, waitMs, signal, wakeAt }, attempt);
    } finally {
      done();
    }
  }

  let apiDocument: Promise<string> | undefined;

  const routes: Record<string, Route> = {
    "/submit": {
      scope: "submit",
      methods: ["POST"],
      handler: async (c, url) => {
        const body = await readBody(c, maxBody, "submit");
        let content: string;
        let queueField: string | undefined;
        if (body.kind === "text") {
          content = body.text.trim();
        } else {
          const fields = parseOr400(submitFieldsSchema, body.fields, "submit");
          // C10: a non-empty content wins over url.
          content = fields.content?.trim() || (fields.url?.trim() ?? "");
          queueField = absentIfEmpty(fields.queue);
        }
        const named = parseOr400(
          queueParamSchema,
          queueField ?? absentIfEmpty(url.searchParams.get("queue")),
          "submit",
        );
        if (content === "") {
          throw new HttpError(
            400,
            'Cannot submit: content is empty (send text, or a "content" or "url" field)',
          );
        }
        const dedupe = parseOr400(
          dedupeParamSchema,
          absentIfEmpty(url.searchParams.get("dedupe")),
          "submit",
        );
        const queue = named ?? routeContent(content, qaHosts);
        const outcome = await submit(store, content, queue, { dedupe });
        return text(outcome.accepted ? `OK (${outcome.queue})` : "OK (duplicate)");
      },
    },
    "/pull": {
      scope: "consume",
      methods: ["GET"],
      handler: async (c, url) => {
        const query = parseOr400(pullQuerySchema, {
          queue: url.searchParams.get("queue") ?? undefined,
          wait: absentIfEmpty(url.searchParams.get("wait")),
          lease: absentIfEmpty(url.searchParams.get("lease")),
          limit: absentIfEmpty(url.searchParams.get("limit")),
        }, "pull");
        const order = query.queue === undefined ? QUEUE_NAMES : [query.queue];
        const leaseS = query.lease;
        // Serialised inside the limit of concurrent bulk reads, like the read itself.
        const take = () =>
          bulkRead(async () => {
            if (leaseS === undefined) {
              const taken = await pullFirst(store, order);
              return taken && json(taken.items.map((item) => item.content));
            }
            const leaseMs = leaseS * 1000;
            const taken = await lease(store, order, { leaseMs, limit: query.limit ?? 50 });
            return taken && json(taken.items.map((item) => ({
              id: itemId(item),
              content: item.content,
              created_at: formatTimestamp(item.created_at),
              lease_until: item.lease_until,
            })));
          });
        // An ended lease makes its item available without a commit: wake then too.
        const wakeAt = () => nextLeaseEnd(store, order);
        return await waitFor(c, "pull", query.wait, order, take, wakeAt) ??
          new Response(null, { status: 204 });
      },
    },
    "/ack": {
      scope: "consume",
      methods: ["POST"],
      handler: async (c) => {
        const body = await readBody(c, maxBody, "ack", ["application/json"]);
        if (body.kind !== "fields") {
          throw new HttpError(400, "Cannot ack: the body must be a JSON object");
        }
        const { ids } = parseOr400(ackBodySchema, body.fields, "ack");
        const outcome = await ack(store, ids);
        return json({ acked: outcome.acked.length, unknown: outcome.unknown.map(itemId) });
      },
    },
    "/peek": {
      scope: "read",
      methods: ["GET", "HEAD"],
      handler: async (_c, url) => {
        const queue = parseOr400(
          queueParamSchema,
          url.searchParams.get("queue") ?? undefined,
          "peek",
        );
        return await bulkRead(async () => {
          const found = await peek(store, queue === undefined ? QUEUE_NAMES : [queue]);
          let total = 0;
          const queues: Record<string, unknown[]> = {};
          for (const [name, items] of found) {
            total += items.length;
            queues[name] = items.map((item) => ({
              content: item.content,
              queue_type: item.queue,
              created_at: formatTimestamp(item.created_at),
              // Issue 6: an item a leased pull holds says until when.
              ...(item.lease_until === undefined ? {} : { lease_until: item.lease_until }),
            }));
          }
          if (total === 0) return new Response(null, { status: 204 });
          return json({ total, queues });
        });
      },
    },
    "/push": {
      scope: "push",
      methods: ["POST"],
      handler: async (c) => {
        const body = await readBody(c, maxBody, "push");
        const content = body.kind === "text"
          ? body.text.trim()
          : (parseOr400(pushFieldsSchema, body.fields, "push").content?.trim() ?? "");
        if (content === "") {
          throw new HttpError(
            400,
            'Cannot push: content is empty (send text, or a "content" field)',
          );
        }
        await push(store, content);
        return text("OK");
      },
    },
    "/results": {
      scope: "read",
      methods: ["GET", "HEAD"],
      handler: async (c, url) => {
        const since = absentIfEmpty(url.searchParams.get("since"));
        const query = parseOr400(resultsQuerySchema, {
          since,
          limit: absentIfEmpty(url.searchParams.get("limit")),
          wait: absentIfEmpty(url.searchParams.get("wait")),
        }, "read results");
        // Serialised inside the limit of concurrent bulk reads, like the read itself.
        const read = () =>
          bulkRead(async () => {
            const page = await readResults(store, query);
            const answer = json({
              cursor: page.cursor,
              items: page.items.map((item) => ({ t: item.t, c: item.content })),
              // Issue 6: only for a reader that gave a cursor, and only when it missed some.
              ...(since !== undefined && page.gap ? { gap: true } : {}),
            });
            return { found: page.items.length > 0, answer };
          });
        // Without wait, one read answers, whatever it found.
        if (query.wait === 0) return (await read()).answer;
        const found = async () => {
          const { found, answer } = await read();
          return found ? answer : undefined;
        };
        return await waitFor(c, "results", query.wait, ["feed"], found) ?? (await read()).answer;
      },
    },
    "/results/stream": {
      scope: "read",
      methods: ["GET"],
      handler: (c, url) => {
        const since = parseOr400(streamStartSchema, {
          lastEventId: absentIfEmpty(c.req.header("last-event-id")),
          since: absentIfEmpty(url.searchParams.get("since")),
        }, "stream results");
        const resumed = c.req.header("last-event-id") !== undefined ||
          url.searchParams.has("since");
        const signal = AbortSignal.any([c.req.raw.signal, closing]);
        return Promise.resolve(streamSSE(c, async (stream) => {
          const done = metrics.wait("stream");
          const left = new AbortController();
          stream.onAbort(() => left.abort());
          try {
            await streamResults(store, stream, {
              since,
              keepAliveMs,
              resumed,
              signal: AbortSignal.any([signal, left.signal]),
            });
          } catch (error) {
            // The cause stays in the relay's log; the client learns only that it failed.
            console.error("relay: results stream failed:", error);
            await stream.writeSSE({ event: "error", data: "the relay failed; reconnect" });
          } finally {
            done();
          }
        }));
      },
    },
    "/publish": {
      scope: "publish",
      methods: ["POST"],
      handler: async (c) => {
        const body = await readBody(c, maxBody, "publish", ["application/json"]);
        if (body.kind !== "fields") {
          throw new HttpError(400, "Cannot publish: the body must be a JSON object");
        }
        const { article, targets } = parseOr400(publishBodySchema, body.fields, "publish");
        const builtin = options.builtin;
        const config = builtin === undefined
          ? options.publish ?? NOT_CONFIGURED
          : withBuiltinTargets(
            options.publish ?? { ...NOT_CONFIGURED, timeoutMs: 15_000 },
            builtin.services,
            builtin.appId,
            builtin.publicUrl ?? new URL(c.req.url).origin,
          );
        const missing = missingConfiguration(targets, config);
        if (missing.length > 0) {
          throw new HttpError(503, `Cannot publish: ${missing.join("; ")}`);
        }
        const outcome = await publish(article, targets, config);
        return json(outcome.body, outcome.httpStatus);
      },
    },
    "/stats": {
      scope: "admin",
      methods: ["GET", "HEAD"],
      handler: async () =>
        json({
          ...await stats(store),
          ...(options.builtin ? { publishing: await options.builtin.services.stats() } : {}),
        }),
    },
    "/metrics": {
      scope: "admin",
      methods: ["GET", "HEAD"],
      handler: async () =>
        new Response(
          await metrics.text(store) +
            (options.builtin ? await builtinMetricsText(options.builtin.services) : ""),
          {
            headers: { "content-type": metrics.contentType },
          },
        ),
    },
    "/clear": {
      scope: "admin",
      methods: ["POST"],
      handler: async () => {
        await clear(store);
        return text("OK (all queues cleared)");
      },
    },
    // Issue 7: the API document, built at the first request (zod-openapi is loaded then).
    "/openapi.json": {
      methods: ["GET", "HEAD"],
      open: true,
      handler: async () => {
        apiDocument ??= import("./openapi.ts").then((m) =>
          JSON.stringify(m.openApiDocument(denoConfig.version))
        );
        // A failed build is not kept: the next request tries again.
        const document = await apiDocument.catch((error) => {
          apiDocument = undefined;
          throw error;
        });
        return new Response(document, { headers: { "content-type": JSON_TYPE } });
      },
    },
    // Issue 7: the phone web app; its files are public, the key stays on the device.
    "/app": {
      methods: ["GET", "HEAD"],
      open: true,
      handler: (_c, url) =>
        Promise.resolve(
          new Response(null, {
            status: 308,
            headers: { location: `${WEBAPP_PATH}${url.search}` },
          }),
        ),
    },
    ...Object.fromEntries(
      [
        ...WEBAPP_PAGES.map((path) => [path, "index.html"] as const),
        ...Object.keys(WEBAPP_FILES).map((name) => [`${WEBAPP_PATH}${name}`, name] as const),
      ].map(([path, name]): [string, Route] => [path, {
        methods: ["GET", "HEAD"],
        open: true,
        handler: () => webappFile(name),
      }]),
    ),
    "/health": {
      methods: ["GET", "HEAD"],
      open: true,
      handler: async () => {
        const ok = await probe(store);
        const ts = Math.floor(store.clock());
        // C51: the one error that is not a problem document.
        return ok
          ? json({ ok: true, ts, db: "connected" })
          : json({ ok: false, ts, db: "error" }, 503);
      },
    },
  };

  const app = new Hono();

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
    const target = redactedTarget(c.req.url);
    log(`${new Date().toISOString()} ${c.req.method} ${target} ${status} ${ms.toFixed(1)}ms`);
    metrics.request(
      refused === undefined && c.req.path in routes ? c.req.path : "other",
      c.req.method,
      status,
      ms,
    );
    return refused;
  });

  for (const [path, route] of Object.entries(routes)) {
    const allow = route.methods.join(", ");
    app.all(path, async (c) => {
      // Hono answers HEAD with the GET route; c.req.method is still the real method.
      if (!route.methods.includes(c.req.method)) {
        throw new HttpError(405, `Cannot ${c.req.method} ${path}: use ${allow}`, { allow });
      }
      const url = new URL(c.req.url);
      if (!route.open) {
        const address = clientAddress(c);
        const wait = address === undefined ? 0 : authFailures.retryAfter(address);
        if (wait > 0) {
          throw new HttpError(
            429,
            `Too many failed authentications from ${address}: try again in ${wait} s`,
            { "retry-after": String(wait) },
          );
        }
        const given = presentedKey(c.req.raw.headers, url.searchParams);
        if (given === undefined) {
          if (address !== undefined) authFailures.fail(address);
          throw new HttpError(
            401,
            "Missing API key: send it in the X-Auth-Key header or the key query parameter",
          );
        }
        if (!keysMatch(given, apiKey)) {
          const named = options.keyRing?.find(given);
          if (named === undefined) {
            if (address !== undefined) authFailures.fail(address);
            throw new HttpError(401, "Wrong API key");
          }
          if (!named.scopes.includes(route.scope)) {
            throw new HttpError(
              403,
              `The key "${named.name}" may not use ${path}: that needs the "${route.scope}" ` +
                `scope, and it has ${named.scopes.join(", ")}`,
            );
          }
        }
      }
      return await route.handler(c, url);
    });
  }

  // The built-in publishing services, beside the API (they check their own keys).
  if (options.builtin) app.route("/", options.builtin.services.app);

  // The API's endpoints and the app's entry, for the 404 message (not every app file).
  const endpoints = Object.keys(routes).filter((path) => !path.startsWith(WEBAPP_PATH));
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
    console.error("relay: unexpected error:", error);
    return problemResponse(500, "Internal error: the relay logged the cause");
  });

  return app;
}

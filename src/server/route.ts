/**
 * What a route is and what every route module shares. Each module of `routes/` returns a
 * table of {@linkcode Routes} (path → methods, the scope a named key needs or `open`, and
 * the handler); the pipeline (pipeline.ts) looks them up, checks method and key before the
 * handler runs,
 * and the API document takes each path's methods and scope from the same tables.
 *
 * @module
 */

import type { PodcastFeedSettings } from "../builtin/feeds.ts";
import type { LimitFunction } from "p-limit";
import type { Scope } from "../access/named_keys.ts";
import type { Access } from "./auth.ts";
import type { PublishConfig } from "../publish/fan_out.ts";
import type { FailedPublishes } from "../publish/failed.ts";
import type { BuiltinServices } from "../builtin/services.ts";
import type { Collection, Store } from "../store/store.ts";
import { longPoll, type StreamLimits } from "./live.ts";
import type { Logger } from "./log.ts";
import type { RelayMetrics, Waiter } from "./metrics.ts";
import type { RelaySearch } from "./searching.ts";

/**
 * What a handler gets of its request besides the URL, once the method and the key have been
 * checked (pipeline.ts makes it).
 */
export interface HandlerContext {
  /** The request. */
  readonly req: {
    /** The request as the runtime gave it: headers, body, its `signal`. */
    readonly raw: Request;
    /** Its method, e.g. `GET` (a `HEAD` stays `HEAD`). */
    readonly method: string;
    /** A request header's value, or `undefined` when it is absent. */
    header(name: string): string | undefined;
    /**
     * A path parameter of the route (`:name` in its path), percent-decoded; `undefined`
     * when the route has no such parameter.
     */
    param(name: string): string | undefined;
  };
  /**
   * Which key the request presented (`main`, `named:<name>`, … as
   * `auth.ts` names them), for limits per key; `undefined` on an open route.
   */
  readonly keyId: string | undefined;
}

/**
 * A route handler: gets its request and the parsed request URL once the method and the key
 * have been checked, and answers. Errors it throws are answered as problem documents.
 */
export type Handler = (c: HandlerContext, url: URL) => Promise<Response>;

/**
 * One endpoint: the methods it answers, and either `open` (no key needed) or the scope a
 * named key needs for it (the main key has every scope). With `appId`, the
 * relay's app id in `X-App-ID` is taken instead of a key with that scope (what external
 * callers of the built-in services' API send). With `podcastFeed`, the podcast's feed key
 * (`podcast_feed_key.ts`) is taken as such a key: what a podcast app subscribed to a private
 * podcast sends, and which no other route takes. A built-in page that is public unless
 * `--private-blog` or `--private-podcast` is `open` or has the `read` scope, as configured.
 */
export type Route =
  & {
    readonly methods: readonly string[];
    readonly handler: Handler;
    /**
     * For a read whose answers are cached (`cache.ts`): the answer to a `GET` with this
     * query string (`URL.search`, or the query as received: `""` or starting with `?`)
     * when the cache has it, else `undefined`. Synchronous and without the request's
     * request's context, so that the pipeline answers a cached read in the same turn,
     * without parsing its URL (docs/benchmarks.md, "Reads"). `handler` still answers every
     * request it returns `undefined` for.
     */
    readonly cached?: (search: string) => Response | undefined;
    /**
     * Whether no cache, private or shared, may keep its answers (`Cache-Control: no-store`):
     * a pull, which takes what it answers, or a stream, which never ends. Every other answer
     * to a request that needed a key says `private`; an open route's answers are public.
     */
    readonly noStore?: boolean;
  }
  & ({
    readonly open: true;
    readonly scope?: never;
    readonly appId?: never;
    readonly podcastFeed?: never;
    /**
     * Whether a page of any origin may read it (its answers say
     * `Access-Control-Allow-Origin: *`: a public feed, transcript or audio): a CORS
     * preflight from any origin is answered too.
     */
    readonly anyOrigin?: boolean;
  } | {
    readonly open?: never;
    readonly scope: Scope;
    readonly appId?: boolean;
    readonly podcastFeed?: boolean;
    readonly anyOrigin?: never;
  });

/** Endpoints by path, e.g. `{ "/submit": { scope: "submit", methods: ["POST"], … } }`. */
export type Routes = Record<string, Route>;

/**
 * What a route's requests must hold, as the one authorisation path checks it: its scope and
 * whether the app id or the podcast's feed key is taken; `undefined` for an open route.
 * The pipeline asks it once per route, when it builds its route table.
 */
export function accessOf(route: Route): Access | undefined {
  return route.open
    ? undefined
    : { scope: route.scope, appId: route.appId, podcastFeed: route.podcastFeed };
}

/**
 * The built-in notes store, blog and podcast (docs/publishing-builtin.md): served beside the
 * API, and the target of every publish target without a URL of its own.
 */
export interface BuiltinPublishing {
  /** The services: their stores and podcast worker. */
  readonly services: BuiltinServices;
  /** The app id (`X-App-ID`) the services' API takes instead of a key with `publish`. */
  readonly appId: string;
  /** `--public-url`: the origin for links; default the request's origin. */
  readonly publicUrl?: string | undefined;
  /** `--private-blog`: the blog's pages and feed need a key with the `read` scope. */
  readonly privateBlog?: boolean | undefined;
  /**
   * `--private-podcast`: the podcast's pages, feed and audio need a key with `read`, or the
   * podcast's feed key (derived from `appId`), which the feed's and the files' addresses
   * carry.
   */
  readonly privatePodcast?: boolean | undefined;
  /**
   * The search index over the services' notes, posts and episodes and the results feed
   * (`searching.ts`); without it the relay serves no `GET /search`.
   */
  readonly search?: RelaySearch | undefined;
  /** The podcast feed's language and owner address (`--podcast-language`, `--podcast-email`). */
  readonly podcastFeed?: PodcastFeedSettings | undefined;
}

/** What the route handlers share: the store, the app's options, its limits and signals. */
export interface RouteContext {
  /** The store the endpoints read and write. */
  readonly store: Store;
  /** Lower-case Q&A domains for routing. */
  readonly qaHosts: readonly string[];
  /** Body limit, bytes. */
  readonly maxBodyBytes: number;
  /** Downstream services of `POST /publish`; `undefined` when none are configured. */
  readonly publish: PublishConfig | undefined;
  /** The built-in services, when the relay serves them. */
  readonly builtin: BuiltinPublishing | undefined;
  /** Publishes with a failed target, kept to be retried; none kept when `undefined`. */
  readonly failed?: FailedPublishes | undefined;
  /** Where unexpected errors of a results stream are logged. */
  readonly logger: Logger;
  /** Request, waiting-client and store metrics. */
  readonly metrics: RelayMetrics;
  /** Aborts when the relay is stopping: long-polls answer at once and streams end. */
  readonly closing: AbortSignal;
  /** Interval of keep-alive comments on an idle results stream, ms. */
  readonly keepAliveMs: number;
  /**
   * Runs a read that may return whole queues or the whole feed (pull, peek, results)
   * within the app's limit of such reads at once; the rest wait their turn.
   */
  readonly bulkRead: LimitFunction;
  /** The open results streams, counted against `--max-streams` and its per-key limit. */
  readonly streams: StreamLimits;
  /** The feeds' keys by their feed's path (`feed_keys.ts`), for their self links. */
  readonly feedKeys?: ReadonlyMap<string, string> | undefined;
}

/** Options of {@linkcode waitFor}. */
export interface WaitOptions {
  /** Which gauge of waiting clients counts this wait. */
  readonly kind: Waiter;
  /** How long to wait, seconds (the request's `wait`); 0 tries once. */
  readonly waitS: number;
  /** What the wait wakes for a change to: the queues pulled from, or `"feed"`. */
  readonly collections: readonly Collection[];
  /** Ends the wait when the client leaves (the request's signal). */
  readonly signal: AbortSignal;
  /** When something becomes available without a commit (a lease ending), epoch ms. */
  readonly wakeAt?: () => Promise<number | undefined>;
}

/**
 * Long-polls: tries `attempt` and, with `waitS` > 0, waits for a change to
 * `collections` until it finds something, the client leaves or the relay stops.
 *
 * @param relay The app's shared context (store, metrics, closing signal).
 * @param options What to wait for and how long.
 * @param attempt Looks once; `undefined` means nothing yet.
 * @returns What `attempt` found, or `undefined` when the wait ended with nothing.
 * @throws whatever `attempt` throws.
 */
export async function waitFor<T>(
  relay: RouteContext,
  options: WaitOptions & { readonly attempt: () => Promise<T | undefined> },
): Promise<T | undefined> {
  const { kind, waitS, collections, wakeAt, attempt } = options;
  if (waitS === 0) return await attempt();
  const done = relay.metrics.wait(kind);
  try {
    const signal = AbortSignal.any([options.signal, relay.closing]);
    const waitMs = waitS * 1000;
    return await longPoll(relay.store, { collections, waitMs, signal, wakeAt }, attempt);
  } finally {
    done();
  }
}

/**
 * A query parameter's value, with an empty value counted as absent.
 *
 * @param value What `URLSearchParams.get` returned.
 * @returns The value, or `undefined` when it is missing or empty.
 */
export function absentIfEmpty(value: string | null | undefined): string | undefined {
  return value === null || value === "" ? undefined : value;
}

/**
 * Unified publish: one article fanned out to the targets of `registry.ts` (the notes store,
 * the blog and the podcast), in parallel, each call with a timeout and no retry (a retried
 * POST can publish twice) unless the targets file asks for retries.
 *
 * Each target goes one of three ways: through an adapter of the targets file (IMA, Memos, a
 * generic HTTP target), to an external service speaking the relay's own shapes (its kind's
 * preset, sent by the generic HTTP adapter), or to the relay's built-in service, which the
 * caller hands over as {@linkcode BuiltinTargets}. Nothing a service answers (HTML, garbage,
 * silence, a refused connection) or throws escapes as an exception.
 *
 * @module
 */

import type { Config } from "../config/config.ts";
import { errorMessage, fetchFailure } from "../errors.ts";
import { sleep } from "../util/backoff.ts";
import { joinUrl } from "../util/url.ts";
import { type Target, TARGET_KINDS, TARGETS } from "./registry.ts";
import type { Article, BuiltinTargets, TargetResult } from "./target_kind.ts";
import type { AdapterTarget, HttpTarget, TargetsFile } from "./targets.ts";

export { type Target, TARGETS } from "./registry.ts";
export type { Article, BuiltinTargets, TargetResult } from "./target_kind.ts";

/** Where and how to reach the downstream services. */
export interface PublishConfig {
  /** Base URL per target (the `--publish-url`, or the target's own override). */
  readonly urls: Readonly<Record<Target, string | undefined>>;
  /** The podcast service's `X-App-ID` (`RELAY_APP_ID`). */
  readonly appId: string | undefined;
  /** Timeout of one downstream call, ms (`--publish-timeout`, default 15 s). */
  readonly timeoutMs: number;
  /** Sends one downstream request; default the global `fetch`. */
  readonly fetch?: (request: Request) => Promise<Response>;
  /**
   * Targets served by an adapter (IMA, Memos, a generic HTTP target) from the targets file
   * (docs/publishing-targets.md); they win over `urls`.
   */
  readonly adapters?: Partial<Record<Target, AdapterTarget>>;
  /** Waits between an adapter's attempts, ms; default a real timer (tests inject one). */
  readonly sleep?: (ms: number) => Promise<void>;
  /**
   * The relay's own notes store, blog and podcast, called directly for every target that
   * has neither an adapter nor a URL (docs/publishing-builtin.md).
   */
  readonly builtin?: BuiltinTargets;
}

/**
 * The downstream services as configured: each target's own URL option, else the
 * base `--publish-url`; the podcast's app id; the timeout.
 *
 * @param config The validated configuration (only its publish options are read).
 */
export function publishConfig(config: Config): PublishConfig {
  const urls = Object.fromEntries(
    TARGETS.map((target) => [target, TARGET_KINDS[target].url(config)]),
  ) as Record<Target, string | undefined>;
  return { urls, appId: config.secrets.appId, timeoutMs: config.publishTimeoutMs };
}

/**
 * `base` with the targets file applied: its adapters, the URLs of its `spec` entries, and
 * its `builtin` entries sent to the built-in services (no URL) whatever `--publish-url` says.
 */
export function withTargetsFile(base: PublishConfig, file: TargetsFile): PublishConfig {
  const urls = { ...base.urls, ...file.urls };
  for (const target of file.builtin) urls[target] = undefined;
  return { ...base, urls, adapters: { ...base.adapters, ...file.adapters } };
}

/** The answer of `POST /publish`: 200 ok, 207 partial, 502 error. */
export interface PublishOutcome {
  /** 200 when every target succeeded, 207 when some did, 502 when none did. */
  readonly httpStatus: 200 | 207 | 502;
  /** The JSON body: `{status, results}`. */
  readonly body: {
    readonly status: "ok" | "partial" | "error";
    readonly results: Partial<Record<Target, TargetResult>>;
  };
}

/**
 * The targets of `targets` that cannot be reached with `config`: no base URL, or (for the
 * podcast) no `X-App-ID`.
 *
 * @returns Sentences naming what is missing, one per target; empty when all are configured.
 */
export function missingConfiguration(
  targets: readonly Target[],
  config: PublishConfig,
): string[] {
  const missing: string[] = [];
  for (const target of targets) {
    const kind = TARGET_KINDS[target];
    if (config.adapters?.[target] !== undefined) continue;
    if (config.urls[target] === undefined && config.builtin !== undefined) continue;
    if (config.urls[target] === undefined) {
      missing.push(`target "${target}" has no URL (set --publish-url or ${kind.urlFlag})`);
    } else if (kind.needsAppId && config.appId === undefined) {
      missing.push(`target "${target}" needs RELAY_APP_ID`);
    }
  }
  return missing;
}

/**
 * Publishes `article` to every target at once and collects the per-target results.
 * The caller has validated the request and checked {@linkcode missingConfiguration}.
 *
 * @param targets Distinct targets, at least one.
 * @returns The HTTP status and body of `POST /publish`. Never throws for anything a
 *   downstream service does.
 */
export async function publish(
  article: Article,
  targets: readonly Target[],
  config: PublishConfig,
): Promise<PublishOutcome> {
  const results = await Promise.all(
    targets.map(async (target) => [target, await publishTo(target, article, config)] as const),
  );
  const ok = results.filter(([, r]) => r.status === "success").length;
  const status = ok === results.length ? "ok" : ok === 0 ? "error" : "partial";
  return {
    httpStatus: status === "ok" ? 200 : status === "partial" ? 207 : 502,
    body: { status, results: Object.fromEntries(results) },
  };
}

async function publishTo(
  target: Target,
  article: Article,
  config: PublishConfig,
): Promise<TargetResult> {
  const kind = TARGET_KINDS[target];
  const base = config.urls[target];
  const adapter = config.adapters?.[target] ?? (base === undefined ? undefined : {
    // An external service speaking the relay's own shapes: the kind's preset, sent once.
    kind: "http",
    url: joinUrl(base, kind.preset.path),
    method: "POST",
    headers: kind.needsAppId ? { "x-app-id": config.appId ?? "" } : {},
    body: kind.preset.body,
    success: { status: undefined, ...kind.preset.success },
    report: kind.preset.report,
    label: kind.preset.label,
    retry: { attempts: 1, delayMs: 1 },
  } satisfies HttpTarget);
  if (adapter !== undefined) {
    // Loaded with the first article sent out: a relay with only built-in services needs none.
    const { publishWithAdapter } = await import("./adapters.ts");
    return await publishWithAdapter(adapter, article, {
      fetch: config.fetch ?? fetch,
      timeoutMs: config.timeoutMs,
      sleep: config.sleep ?? ((ms) => sleep(ms).then(() => {})),
    });
  }
  if (config.builtin === undefined) return { status: "error", error: "Not configured" };
  try {
    return await kind.builtin(config.builtin, article);
  } catch (error) {
    // A full or failing disk: the target's failure, kept to be retried, not the request's.
    return { status: "error", error: `The built-in ${target} failed: ${errorMessage(error)}` };
  }
}

/**
 * Deletes a blog post: `POST /delete/{post_id}` with the identity gateway's access cookie
 * as the whole `Cookie` header and the blog's own `Origin`; success is the 303 redirect,
 * not followed.
 *
 * @param postId The post's id; sent URL-encoded.
 * @param options.baseUrl The blog's base URL.
 * @param options.cookie The access cookie (`RELAY_BLOG_ACCESS_COOKIE`).
 * @param options.timeoutMs Timeout, ms.
 * @param options.fetch Sends the request; default the global `fetch`.
 * @returns `undefined` on success, else one sentence saying why it failed.
 */
export async function deleteBlogPost(
  postId: string,
  options: {
    baseUrl: string;
    cookie: string;
    timeoutMs: number;
    fetch?: (request: Request) => Promise<Response>;
  },
): Promise<string | undefined> {
  const url = joinUrl(options.baseUrl, `/delete/${encodeURIComponent(postId)}`);
  try {
    const send = options.fetch ?? fetch;
    const res = await send(
      new Request(url, {
        method: "POST",
        // The blog's own origin: a relay takes a cookie for a change only with its own
        // Origin (a browser would send another site's), and other blogs ignore it.
        headers: { cookie: options.cookie, origin: new URL(url).origin },
        redirect: "manual",
        signal: AbortSignal.timeout(options.timeoutMs),
      }),
    );
    await res.body?.cancel();
    if (res.status === 303) return undefined;
    return `The blog answered ${res.status} ${res.statusText || ""}`.trim() +
      (res.status === 401 || res.status === 403 || res.status === 302
        ? ": check RELAY_BLOG_ACCESS_COOKIE"
        : "");
  } catch (error) {
    return describeFailure(url, error, options.timeoutMs);
  }
}

function describeFailure(url: string, error: unknown, timeoutMs: number): string {
  if (error instanceof DOMException && error.name === "TimeoutError") {
    return `${url} did not answer within ${timeoutMs} ms`;
  }
  const { refused, reason } = fetchFailure(error);
  return refused ? `${url} refused the connection` : `Cannot reach ${url}: ${reason}`;
}

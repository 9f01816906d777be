/**
 * Unified publish: one article fanned out to the notes
 * store, the blog and the podcast (read-aloud) queue, in parallel, each call with a
 * timeout and no retry (a retried POST can publish twice).
 *
 * One function per target builds exactly the request and turns the answer
 * into a per-target result; nothing a downstream service answers (HTML, garbage, silence,
 * a refused connection) escapes as an exception.
 *
 * @module
 */

import type { Config } from "../config/config.ts";
import type { Target } from "../constants.ts";
import { fetchFailure } from "../errors.ts";
import { readAtMost } from "../util/streams.ts";
import { sleep } from "../util/backoff.ts";
import type { AdapterTarget, TargetsFile } from "./targets.ts";

export { type Target, TARGETS } from "../constants.ts";

/** A validated publish request. Optional fields are absent, never empty. */
export interface Article {
  /** Non-empty title. */
  readonly title: string;
  /** Non-empty body text: plain summary for the blog, speech text for the podcast. */
  readonly content: string;
  /** Markdown original; the notes store gets it instead of `content` when given. */
  readonly content_md?: string;
  /** Comma-separated tags. */
  readonly tags?: string;
}

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
   * has neither an adapter nor a URL (docs/publishing-builtin.md). Never throws: a refusal
   * is an `error` result.
   */
  readonly builtin?: (target: Target, article: Article) => Promise<TargetResult>;
}

/**
 * The downstream services as configured: each target's own URL option, else the
 * base `--publish-url`; the podcast's app id; the timeout.
 *
 * @param config The validated configuration (only its publish options are read).
 */
export function publishConfig(config: Config): PublishConfig {
  return {
    urls: {
      notes: config.notesUrl ?? config.publishUrl,
      blog: config.blogUrl ?? config.publishUrl,
      nas: config.podcastUrl ?? config.publishUrl,
    },
    appId: config.secrets.appId,
    timeoutMs: config.publishTimeoutMs,
  };
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

/** What one target did. */
export type TargetResult =
  | { readonly status: "success"; readonly doc_id: string }
  | { readonly status: "success"; readonly url: string }
  | { readonly status: "success"; readonly message: string }
  | { readonly status: "error"; readonly error: string };

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

/** Largest downstream answer read, bytes: the services answer a few hundred bytes. */
const MAX_ANSWER_BYTES = 1024 * 1024;

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
  const flag: Record<Target, string> = {
    notes: "--notes-url",
    blog: "--blog-url",
    nas: "--podcast-url",
  };
  for (const target of targets) {
    if (config.adapters?.[target] !== undefined) continue;
    if (config.urls[target] === undefined && config.builtin !== undefined) continue;
    if (config.urls[target] === undefined) {
      missing.push(`target "${target}" has no URL (set --publish-url or ${flag[target]})`);
    } else if (target === "nas" && config.appId === undefined) {
      missing.push(`target "nas" needs RELAY_APP_ID`);
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

function publishTo(target: Target, article: Article, config: PublishConfig): Promise<TargetResult> {
  const adapter = config.adapters?.[target];
  if (adapter !== undefined) {
    // Loaded with the first article for a target's adapter: most relays publish to none.
    return import("./adapters.ts").then(({ publishWithAdapter }) =>
      publishWithAdapter(adapter, article, {
        fetch: config.fetch ?? fetch,
        timeoutMs: config.timeoutMs,
        sleep: config.sleep ?? ((ms) => sleep(ms).then(() => {})),
      })
    );
  }
  if (config.urls[target] === undefined && config.builtin !== undefined) {
    return config.builtin(target, article);
  }
  switch (target) {
    case "notes":
      return publishToNotes(article, config);
    case "blog":
      return publishToBlog(article, config);
    case "nas":
      return publishToPodcast(article, config);
  }
}

/**
 * Saves the article in the notes store: `POST /api/notes/import` with `title`, `content`
 * (the Markdown original when given, else `content`), `content_format` 1 (Markdown) and
 * `tags`. Success is a 2xx answer with `code` 0.
 */
async function publishToNotes(
  article: Article,
  config: PublishConfig,
): Promise<TargetResult> {
  const answer = await callDownstream(
    config.urls.notes,
    "/api/notes/import",
    {
      title: article.title,
      content: article.content_md ?? article.content,
      content_format: 1,
      ...(article.tags === undefined ? {} : { tags: article.tags }),
    },
    {},
    config,
  );
  if ("error" in answer) return answer;
  const { code, doc_id } = answer.json as { code?: unknown; doc_id?: unknown };
  if (code === 0) return { status: "success", doc_id: String(doc_id ?? "") };
  return {
    status: "error",
    error: `The notes store answered code ${JSON.stringify(code)}${describeMessage(answer.json)}`,
  };
}

/**
 * Publishes the article on the blog: `POST /api/publish` with `title`, `content`,
 * `content_md`, `tags` and `targets: ["blog"]`. Success is a 2xx answer
 * with `blog.status` = `success`; its `blog.redirect_url` is the post's URL.
 */
async function publishToBlog(
  article: Article,
  config: PublishConfig,
): Promise<TargetResult> {
  const answer = await callDownstream(
    config.urls.blog,
    "/api/publish",
    {
      title: article.title,
      content: article.content,
      ...(article.content_md === undefined ? {} : { content_md: article.content_md }),
      ...(article.tags === undefined ? {} : { tags: article.tags }),
      targets: ["blog"],
    },
    {},
    config,
  );
  if ("error" in answer) return answer;
  const blog = (answer.json as { blog?: { status?: unknown; redirect_url?: unknown } }).blog;
  if (blog?.status === "success" && typeof blog.redirect_url === "string") {
    return { status: "success", url: blog.redirect_url };
  }
  return {
    status: "error",
    error: `The blog answered status ${JSON.stringify(blog?.status ?? null)}${
      describeMessage(answer.json)
    }`,
  };
}

/**
 * Queues the article for reading aloud: `POST /api/publish` with header `X-App-ID` and
 * `title`, `content`, `content_md`, `targets: ["nas"]`, `transform: "read"`. Success is a 2xx answer with `status` = `success`.
 */
async function publishToPodcast(
  article: Article,
  config: PublishConfig,
): Promise<TargetResult> {
  const answer = await callDownstream(
    config.urls.nas,
    "/api/publish",
    {
      title: article.title,
      content: article.content,
      ...(article.content_md === undefined ? {} : { content_md: article.content_md }),
      targets: ["nas"],
      transform: "read",
    },
    { "x-app-id": config.appId ?? "" },
    config,
  );
  if ("error" in answer) return answer;
  const { status, message } = answer.json as { status?: unknown; message?: unknown };
  if (status === "success") return { status: "success", message: String(message ?? "") };
  return {
    status: "error",
    error: `The podcast service answered status ${JSON.stringify(status ?? null)}${
      describeMessage(answer.json)
    }`,
  };
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

/** Appends `path` to a base URL, keeping any path the base has (`http://h/x` + `/api`). */
export function joinUrl(base: string, path: string): string {
  return base.replace(/\/+$/, "") + path;
}

type Answer = { json: unknown } | { status: "error"; error: string };

/** POSTs JSON and returns the parsed JSON of a 2xx answer, or a one-sentence error. */
async function callDownstream(
  base: string | undefined,
  path: string,
  body: unknown,
  headers: Record<string, string>,
  config: PublishConfig,
): Promise<Answer> {
  if (base === undefined) return { status: "error", error: "Not configured" };
  const { timeoutMs } = config;
  const url = joinUrl(base, path);
  let res: Response;
  let bytes: Uint8Array | undefined;
  try {
    const send = config.fetch ?? fetch;
    res = await send(
      new Request(url, {
        method: "POST",
        headers: { ...headers, "content-type": "application/json" },
        body: JSON.stringify(body),
        redirect: "manual",
        signal: AbortSignal.timeout(timeoutMs),
      }),
    );
    bytes = await readAtMost(res.body, MAX_ANSWER_BYTES);
  } catch (error) {
    return { status: "error", error: describeFailure(url, error, timeoutMs) };
  }
  if (bytes === undefined) {
    return { status: "error", error: `${url} answered more than ${MAX_ANSWER_BYTES} bytes` };
  }
  const text = new TextDecoder().decode(bytes);
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  if (res.status < 200 || res.status > 299) {
    return {
      status: "error",
      error: `${url} answered HTTP ${res.status}${json === undefined ? "" : describeMessage(json)}`,
    };
  }
  if (typeof json !== "object" || json === null) {
    const type = res.headers.get("content-type") ?? "no content type";
    return { status: "error", error: `${url} answered something that is not JSON (${type})` };
  }
  return { json };
}

function describeMessage(json: unknown): string {
  const message = (json as { message?: unknown } | null)?.message;
  return typeof message === "string" && message !== "" ? `: ${message.slice(0, 200)}` : "";
}

function describeFailure(url: string, error: unknown, timeoutMs: number): string {
  if (error instanceof DOMException && error.name === "TimeoutError") {
    return `${url} did not answer within ${timeoutMs} ms`;
  }
  const { refused, reason } = fetchFailure(error);
  return refused ? `${url} refused the connection` : `Cannot reach ${url}: ${reason}`;
}

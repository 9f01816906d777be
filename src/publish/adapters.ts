/**
 * The target adapters (docs/publishing-targets.md): Tencent IMA notes, Memos, and a generic
 * HTTP-JSON target (with the relay's own shapes as presets). Each turns whatever its service
 * answers into one per-target result, and retries only what is safe to send twice: a
 * connection that was refused or a name that did not resolve (nothing was sent), and a
 * service saying it is rate-limited or unavailable (HTTP 429 or 503, IMA code 20002).
 *
 * Redirects are never followed; a redirect to a Cloudflare Access login page is an
 * authentication failure.
 *
 * @module
 */

import { fetchFailure } from "../errors.ts";
import { readAtMost } from "../util/streams.ts";
import type { Article, TargetResult } from "./target_kind.ts";
import type { AdapterTarget, HttpTarget, ImaTarget, MemosTarget, RetryPolicy } from "./targets.ts";

/** The article as an adapter sees it: the article of `POST /publish` (target_kind.ts). */
export type AdapterArticle = Article;

/** What one target did, as `POST /publish` reports it (target_kind.ts). */
export type AdapterResult = TargetResult;

/** How adapters reach the network and wait. */
export interface AdapterContext {
  /** Sends one request. */
  readonly fetch: (request: Request) => Promise<Response>;
  /** Timeout of one call, ms. */
  readonly timeoutMs: number;
  /** Waits between attempts, ms (injected by tests). */
  readonly sleep: (ms: number) => Promise<void>;
}

/** Largest answer read, bytes. */
const MAX_ANSWER_BYTES = 1024 * 1024;

/** Longest wait between two attempts, ms. */
const MAX_WAIT_MS = 60_000;

/** IMA's error codes: rate-limited, and a note too large (continue it with `append_doc`). */
const IMA_RATE_LIMITED = 20002;
const IMA_TOO_LARGE = 100009;

/** Smallest part of a note sent on its own, bytes. */
const MIN_PART_BYTES = 1024;

/**
 * Publishes `article` through the adapter `target` describes.
 *
 * @returns The target's result; never throws for anything a service does.
 */
export function publishWithAdapter(
  target: AdapterTarget,
  article: AdapterArticle,
  context: AdapterContext,
): Promise<AdapterResult> {
  switch (target.kind) {
    case "ima":
      return publishToIma(target, article, context);
    case "memos":
      return publishToMemos(target, article, context);
    case "http":
      return publishToHttp(target, article, context);
  }
}

/** One attempt's outcome: done (success or final error), or worth another try. */
type Attempt<T> =
  | { readonly done: T }
  | { readonly retry: string; readonly afterMs?: number | undefined };

type Failure = { readonly status: "error"; readonly error: string };

/** Runs `attempt` up to `policy.attempts` times, waiting with doubling backoff in between. */
async function withRetries<T>(
  policy: RetryPolicy,
  context: AdapterContext,
  attempt: () => Promise<Attempt<T>>,
): Promise<T | Failure> {
  let last = "";
  for (let n = 1; n <= policy.attempts; n++) {
    const outcome = await attempt();
    if ("done" in outcome) return outcome.done;
    last = outcome.retry;
    if (n < policy.attempts) {
      const backoff = Math.min(policy.delayMs * 2 ** (n - 1), MAX_WAIT_MS);
      await context.sleep(Math.min(Math.max(backoff, outcome.afterMs ?? 0), MAX_WAIT_MS));
    }
  }
  return {
    status: "error",
    error: policy.attempts > 1 ? `${last} (gave up after ${policy.attempts} attempts)` : last,
  };
}

/** An answer read in full, or a failure to get one. */
type Call =
  | {
    readonly status: number;
    readonly json: unknown;
    readonly contentType: string;
    readonly retryAfterMs: number | undefined;
  }
  | { readonly failed: string; readonly retryable: boolean };

/**
 * What an attempt comes to when no answer came back: tried again when sending twice is safe
 * (`retryable`), else the target's error.
 */
function unanswered(
  answer: { readonly failed: string; readonly retryable: boolean },
): { readonly retry: string } | { readonly done: { status: "error"; error: string } } {
  return answer.retryable
    ? { retry: answer.failed }
    : { done: { status: "error", error: answer.failed } };
}

/** Sends one JSON request without following redirects and reads the JSON answer. */
async function call(
  url: string,
  init: { method: string; headers: Record<string, string>; body: unknown },
  context: AdapterContext,
): Promise<Call> {
  let res: Response;
  let bytes: Uint8Array | undefined;
  try {
    res = await context.fetch(
      new Request(url, {
        method: init.method,
        headers: { ...init.headers, "content-type": "application/json" },
        body: JSON.stringify(init.body),
        redirect: "manual",
        signal: AbortSignal.timeout(context.timeoutMs),
      }),
    );
    if (res.status >= 300 && res.status <= 399) {
      await res.body?.cancel();
      return { failed: describeRedirect(url, res), retryable: false };
    }
    bytes = await readAtMost(res.body, MAX_ANSWER_BYTES);
  } catch (error) {
    if (error instanceof DOMException && error.name === "TimeoutError") {
      return { failed: `${url} did not answer within ${context.timeoutMs} ms`, retryable: false };
    }
    const { refused, reason } = fetchFailure(error);
    if (refused) return { failed: `${url} refused the connection`, retryable: true };
    // A name that does not resolve: nothing was sent (a NAS whose internet is down).
    const unsent = /lookup|dns|resolve|unreachable/i.test(reason);
    return { failed: `Cannot reach ${url}: ${reason}`, retryable: unsent };
  }
  if (bytes === undefined) {
    return { failed: `${url} answered more than ${MAX_ANSWER_BYTES} bytes`, retryable: false };
  }
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    json = undefined;
  }
  const retryAfter = Number(res.headers.get("retry-after"));
  return {
    status: res.status,
    json,
    contentType: res.headers.get("content-type") ?? "no content type",
    retryAfterMs: Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter * 1000 : undefined,
  };
}

/**
 * Whether `location` is a login page of an identity gateway (Cloudflare Access): its host
 * is under `cloudflareaccess.com`, or its path is Access's own login path.
 */
export function isLoginRedirect(location: string, base: string): boolean {
  try {
    const url = new URL(location, base);
    return /(^|\.)cloudflareaccess\.com$/i.test(url.hostname) ||
      url.pathname.startsWith("/cdn-cgi/access/login");
  } catch {
    return false;
  }
}

function describeRedirect(url: string, res: Response): string {
  const location = res.headers.get("location") ?? "";
  if (isLoginRedirect(location, url)) {
    return `Authentication failed: ${url} redirected to the Cloudflare Access login page; ` +
      "check the service token (CF-Access-Client-Id, CF-Access-Client-Secret)";
  }
  return `${url} answered a redirect (HTTP ${res.status}${location ? ` to ${location}` : ""}), ` +
    "which is not followed";
}

function messageOf(json: unknown): string {
  const { message, msg } = (json ?? {}) as { message?: unknown; msg?: unknown };
  const text = typeof message === "string" && message !== ""
    ? message
    : typeof msg === "string" && msg !== ""
    ? msg
    : "";
  return text === "" ? "" : `: ${text.slice(0, 200).replace(/\s+/g, " ")}`;
}

/** The Markdown of an article with its title as the first heading (unless it has one). */
function markdownWithTitle(article: AdapterArticle): string {
  const markdown = article.content_md ?? article.content;
  return /^#\s/.test(markdown.trimStart()) ? markdown : `# ${article.title}\n\n${markdown}`;
}

// ---------------------------------------------------------------------------------------
// Tencent IMA notes

type ImaStep = { readonly noteId: string } | { readonly tooLarge: true } | Failure;

/** One `import_doc` or `append_doc` call, retried while IMA is rate-limiting. */
function imaCall(
  target: ImaTarget,
  operation: "import_doc" | "append_doc",
  body: Record<string, unknown>,
  context: AdapterContext,
): Promise<ImaStep> {
  const url = `${target.url}/${operation}`;
  return withRetries<ImaStep>(target.retry, context, async () => {
    const answer = await call(url, {
      method: "POST",
      headers: {
        "ima-openapi-clientid": target.clientId,
        "ima-openapi-apikey": target.apiKey,
      },
      body,
    }, context);
    if ("failed" in answer) return unanswered(answer);
    const { status, json } = answer;
    if (status === 401 || status === 403) {
      return {
        done: {
          status: "error",
          error: `IMA refused the client id and API key (HTTP ${status})${messageOf(json)}`,
        },
      };
    }
    if (status === 429 || status === 503) {
      return { retry: `IMA ${operation} answered HTTP ${status}`, afterMs: answer.retryAfterMs };
    }
    if (status < 200 || status > 299 || typeof json !== "object" || json === null) {
      return {
        done: {
          status: "error",
          error: `IMA ${operation} answered HTTP ${status} (${answer.contentType})${
            messageOf(json)
          }`,
        },
      };
    }
    const { code, data } = json as {
      code?: unknown;
      data?: { note_id?: unknown; doc_id?: unknown };
    };
    if (code === 0) {
      const id = data?.note_id ?? data?.doc_id;
      if ((typeof id === "string" && id !== "") || typeof id === "number") {
        return { done: { noteId: String(id) } };
      }
      if (operation === "append_doc") return { done: { noteId: "" } };
      return {
        done: { status: "error", error: `IMA ${operation} answered code 0 without a note id` },
      };
    }
    if (code === IMA_RATE_LIMITED) {
      return { retry: `IMA is rate-limiting (code ${IMA_RATE_LIMITED})${messageOf(json)}` };
    }
    if (code === IMA_TOO_LARGE) return { done: { tooLarge: true } };
    return {
      done: {
        status: "error",
        error: `IMA ${operation} answered code ${JSON.stringify(code ?? null)}${messageOf(json)}`,
      },
    };
  });
}

/**
 * Saves the article as an IMA note: `import_doc` with the Markdown (title as its first
 * heading, `content_format` 1, `folder_id` when set); a note IMA finds too large (code
 * 100009) is cut at paragraph breaks into halves, then quarters, … : the first part is
 * imported and the rest continued with `append_doc` (`note_id`, `content`,
 * `content_format`).
 */
async function publishToIma(
  target: ImaTarget,
  article: AdapterArticle,
  context: AdapterContext,
): Promise<AdapterResult> {
  const markdown = markdownWithTitle(article);
  const folder = target.folderId === undefined ? {} : { folder_id: target.folderId };
  let partBytes = new TextEncoder().encode(markdown).length;
  let parts = [markdown];
  let noteId: string | undefined;
  while (noteId === undefined) {
    const first = await imaCall(
      target,
      "import_doc",
      { content: parts[0], content_format: 1, ...folder },
      context,
    );
    if ("noteId" in first) {
      noteId = first.noteId;
      break;
    }
    if ("tooLarge" in first) {
      partBytes = Math.floor(partBytes / 2);
      if (partBytes < MIN_PART_BYTES) {
        return { status: "error", error: "IMA refused the note as too large (code 100009)" };
      }
      parts = splitText(markdown, partBytes);
      continue;
    }
    return first;
  }
  const queue = parts.slice(1);
  let appended = 0;
  while (queue.length > 0) {
    const part = queue.shift()!;
    const step = await imaCall(
      target,
      "append_doc",
      { note_id: noteId, content: part, content_format: 1 },
      context,
    );
    if ("tooLarge" in step) {
      const smaller = Math.floor(new TextEncoder().encode(part).length / 2);
      if (smaller < MIN_PART_BYTES) {
        return {
          status: "error",
          error: `IMA note ${noteId} was created, but a part of it was refused as too large`,
        };
      }
      queue.unshift(...splitText(part, smaller));
      continue;
    }
    if ("status" in step) {
      return {
        status: "error",
        error: `IMA note ${noteId} was created with ${appended + 1} of its parts: ${step.error}`,
      };
    }
    appended++;
  }
  return { status: "success", doc_id: noteId };
}

/**
 * Cuts `text` into parts of at most `maxBytes` UTF-8 bytes, at a paragraph break when one
 * lies in the second half of a part, else at a line break, else between characters.
 *
 * @param maxBytes At least 4 (one character).
 */
export function splitText(text: string, maxBytes: number): string[] {
  const encoder = new TextEncoder();
  const parts: string[] = [];
  let rest = text;
  while (encoder.encode(rest).length > maxBytes) {
    // The longest prefix within maxBytes: a binary search on the character count.
    let low = 0;
    let high = Math.min(rest.length, maxBytes);
    while (low < high) {
      const mid = Math.ceil((low + high) / 2);
      if (encoder.encode(rest.slice(0, mid)).length <= maxBytes) low = mid;
      else high = mid - 1;
    }
    let cut = low;
    const code = rest.charCodeAt(cut - 1);
    if (code >= 0xd800 && code <= 0xdbff) cut--; // never split a surrogate pair
    const prefix = rest.slice(0, cut);
    const paragraph = prefix.lastIndexOf("\n\n");
    const line = prefix.lastIndexOf("\n");
    if (paragraph >= cut / 2) cut = paragraph + 2;
    else if (line >= cut / 2) cut = line + 1;
    parts.push(rest.slice(0, cut));
    rest = rest.slice(cut);
  }
  if (rest !== "" || parts.length === 0) parts.push(rest);
  return parts;
}

// ---------------------------------------------------------------------------------------
// Memos

/**
 * Saves the article as a memo: `POST /api/v1/memos` with `Authorization: Bearer <token>`
 * and `{content, visibility}`; the content is the Markdown with the title as its first
 * heading and the tags as `#tag` words on the last line. The memo's `name` (e.g.
 * `memos/abc`) is reported as the `doc_id`.
 */
function publishToMemos(
  target: MemosTarget,
  article: AdapterArticle,
  context: AdapterContext,
): Promise<AdapterResult> {
  const url = `${target.url}/api/v1/memos`;
  const tags = (article.tags ?? "").split(/[,，]/).map((t) => t.trim().replace(/\s+/g, "_"))
    .filter((t) => t !== "");
  const content = markdownWithTitle(article) +
    (tags.length === 0 ? "" : `\n\n${tags.map((t) => `#${t}`).join(" ")}`);
  return withRetries<AdapterResult>(target.retry, context, async () => {
    const answer = await call(url, {
      method: "POST",
      headers: { authorization: `Bearer ${target.token}` },
      body: { content, visibility: target.visibility },
    }, context);
    if ("failed" in answer) return unanswered(answer);
    const { status, json } = answer;
    if (status === 401 || status === 403) {
      return {
        done: {
          status: "error",
          error: `Memos refused the access token (HTTP ${status})${messageOf(json)}`,
        },
      };
    }
    if (status === 429 || status === 503) {
      return { retry: `${url} answered HTTP ${status}`, afterMs: answer.retryAfterMs };
    }
    if (status < 200 || status > 299) {
      return {
        done: { status: "error", error: `${url} answered HTTP ${status}${messageOf(json)}` },
      };
    }
    const memo = (json ?? {}) as { name?: unknown; uid?: unknown; id?: unknown };
    const id = [memo.name, memo.uid, memo.id].find((v) =>
      (typeof v === "string" && v !== "") || typeof v === "number"
    );
    if (id === undefined) {
      return {
        done: {
          status: "error",
          error: `${url} answered HTTP ${status} without a memo (${answer.contentType})`,
        },
      };
    }
    return { done: { status: "success", doc_id: String(id) } };
  });
}

// ---------------------------------------------------------------------------------------
// Generic HTTP-JSON

/**
 * The body template filled in: a string that is exactly `{{field}}` becomes the field
 * (its key dropped when the article has no such field; `{{tags_list}}` is an array of
 * tags); a placeholder inside a longer string is replaced by the field's text ("" when
 * absent). Fields: `title`, `content`, `content_md`, `markdown` (`content_md`, else
 * `content`), `tags`, `tags_list`.
 */
export function renderTemplate(template: unknown, article: AdapterArticle): unknown {
  const tagsList = (article.tags ?? "").split(/[,，]/).map((t) => t.trim()).filter((t) => t !== "");
  const fields: Record<string, unknown> = {
    title: article.title,
    content: article.content,
    content_md: article.content_md,
    markdown: article.content_md ?? article.content,
    tags: article.tags,
    tags_list: tagsList,
  };
  const DROP = Symbol("drop");
  const walk = (value: unknown): unknown => {
    if (typeof value === "string") {
      const whole = /^\{\{\s*(\w+)\s*\}\}$/.exec(value);
      if (whole !== null && whole[1]! in fields) return fields[whole[1]!] ?? DROP;
      return value.replace(/\{\{\s*(\w+)\s*\}\}/g, (match, name: string) => {
        if (!(name in fields)) return match;
        const field = fields[name];
        return Array.isArray(field) ? field.join(",") : String(field ?? "");
      });
    }
    if (Array.isArray(value)) return value.map(walk).filter((v) => v !== DROP);
    if (typeof value === "object" && value !== null) {
      const out: Record<string, unknown> = {};
      for (const [key, inner] of Object.entries(value)) {
        const filled = walk(inner);
        if (filled !== DROP) out[key] = filled;
      }
      return out;
    }
    return value;
  };
  return walk(template);
}

/** The value at a dotted path (`blog.redirect_url`, `items.0.id`), or `undefined`. */
export function valueAt(json: unknown, path: string): unknown {
  let value = json;
  for (const key of path.split(".")) {
    if (typeof value !== "object" || value === null) return undefined;
    value = (value as Record<string, unknown>)[key];
  }
  return value;
}

/**
 * Publishes through a generic HTTP-JSON target: the body template filled in, sent with the
 * configured method and headers; success is one of the configured statuses (default any
 * 2xx) and, when a path is set, that field of the JSON answer equal to the expected value
 * (or present, when none is given).
 */
function publishToHttp(
  target: HttpTarget,
  article: AdapterArticle,
  context: AdapterContext,
): Promise<AdapterResult> {
  const body = renderTemplate(target.body, article);
  return withRetries<AdapterResult>(target.retry, context, async () => {
    const answer = await call(
      target.url,
      { method: target.method, headers: { ...target.headers }, body },
      context,
    );
    if ("failed" in answer) return unanswered(answer);
    const { status, json } = answer;
    if (status === 429 || status === 503) {
      return { retry: `${target.url} answered HTTP ${status}`, afterMs: answer.retryAfterMs };
    }
    const statusOk = target.success.status === undefined
      ? status >= 200 && status <= 299
      : target.success.status.includes(status);
    if (!statusOk) {
      const auth = status === 401 || status === 403
        ? ": authentication failed (check the target's headers)"
        : "";
      return {
        done: {
          status: "error",
          error: `${target.url} answered HTTP ${status}${auth}${
            json === undefined ? "" : messageOf(json)
          }`,
        },
      };
    }
    const { path } = target.success;
    if (path !== undefined) {
      if (typeof json !== "object" || json === null) {
        return {
          done: {
            status: "error",
            error: `${target.url} answered something that is not JSON (${answer.contentType})`,
          },
        };
      }
      const value = valueAt(json, path);
      const ok = "equals" in target.success
        ? JSON.stringify(value) === JSON.stringify(target.success.equals)
        : value !== undefined && value !== null && value !== false;
      if (!ok) {
        const field = path.split(".").at(-1);
        return {
          done: {
            status: "error",
            error: `${target.label} answered ${field} ${JSON.stringify(value ?? null)}${
              messageOf(json)
            }`,
          },
        };
      }
    }
    const report = target.report;
    if (report === undefined) {
      return { done: { status: "success", message: `published (HTTP ${status})` } };
    }
    const reported = valueAt(json, report.path);
    if (typeof reported !== "string" && typeof reported !== "number") {
      if (report.as === "url") {
        return {
          done: {
            status: "error",
            error: `${target.label} answered without ${report.path}${messageOf(json)}`,
          },
        };
      }
      return { done: { status: "success", [report.as]: "" } as AdapterResult };
    }
    return { done: { status: "success", [report.as]: String(reported) } as AdapterResult };
  });
}

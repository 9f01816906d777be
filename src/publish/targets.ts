/**
 * The targets file (`--targets-file`, default `targets.json` beside the database): which
 * service each publish target really is, when it is not the built-in one or a service
 * speaking the relay's own shapes (docs/publishing-targets.md).
 *
 * One entry per target of `registry.ts` (`notes`, `blog`, `podcast`; `nas` is taken for
 * `podcast`), each with a `kind`:
 *
 * - `builtin`: the relay's own service, even when `--publish-url` is set;
 * - `spec`: the relay's own shapes at `url` (as `--notes-url` …);
 * - `ima`: Tencent IMA notes (`import_doc`, `append_doc`);
 * - `memos`: a Memos server (`POST /api/v1/memos`);
 * - `http`: any JSON endpoint: URL, method, headers, a body template and a success rule,
 *   optionally starting from a preset (`notes`, `blog`, `podcast`: the relay's own shapes).
 *
 * Secrets are never written in the file: a secret field is `{"env": "RELAY_…"}` or
 * `{"file": "/path"}`, read once at start. Header values may be plain text or such a
 * reference.
 *
 * @module
 */

import { dirname, isAbsolute, join } from "node:path";
import { z } from "zod";
import { ConfigError, parseDuration } from "../config/config.ts";
import { type Target, TARGET_KINDS, TARGET_NAMES, targetNamed, TARGETS } from "./registry.ts";

/** Where a secret comes from: an environment variable or a file (trimmed). */
const secretRef = z.union([
  // The relay may read only RELAY_* variables (its permission set).
  z.strictObject({ env: z.string().regex(/^RELAY_[A-Za-z0-9_]+$/) }),
  z.strictObject({ file: z.string().min(1) }),
], {
  error: 'must be {"env": "RELAY_…"} or {"file": "/path"}: secrets are never written in this file',
});

const httpUrl = z.url({ protocol: /^https?$/, error: "must be an http:// or https:// URL" });

const retrySchema = z.strictObject({
  attempts: z.number().int().min(1).max(10).optional(),
  delay: z.string().optional(),
}).optional();

const headerValue = z.union([z.string(), secretRef]);

const successSchema = z.strictObject({
  status: z.array(z.number().int().min(100).max(599)).min(1).optional(),
  path: z.string().min(1).optional(),
  equals: z.unknown().optional(),
}).optional();

const reportSchema = z.strictObject({
  path: z.string().min(1),
  as: z.enum(["doc_id", "url", "message"]),
}).optional();

const entrySchema = z.discriminatedUnion("kind", [
  z.strictObject({ kind: z.literal("builtin") }),
  z.strictObject({ kind: z.literal("spec"), url: httpUrl.optional() }),
  z.strictObject({
    kind: z.literal("ima"),
    url: httpUrl.optional(),
    client_id: secretRef,
    api_key: secretRef,
    folder_id: z.string().min(1).optional(),
    retry: retrySchema,
  }),
  z.strictObject({
    kind: z.literal("memos"),
    url: httpUrl,
    token: secretRef,
    visibility: z.enum(["PRIVATE", "PROTECTED", "PUBLIC"]).optional(),
    retry: retrySchema,
  }),
  z.strictObject({
    kind: z.literal("http"),
    url: httpUrl,
    preset: z.enum(TARGETS).optional(),
    method: z.enum(["POST", "PUT", "PATCH"]).optional(),
    headers: z.record(z.string().regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/), headerValue).optional(),
    body: z.unknown().optional(),
    success: successSchema,
    report: reportSchema,
    retry: retrySchema,
  }),
]);

/** The file: an entry per target, under its name or an alias, at most one per target. */
const fileSchema = z.strictObject(
  Object.fromEntries(TARGET_NAMES.map((name) => [name, entrySchema.optional()])),
).transform((file, context) => {
  const entries: Partial<Record<Target, Entry>> = {};
  for (const [name, entry] of Object.entries(file)) {
    const target = targetNamed(name)!;
    if (entry === undefined) continue;
    if (entries[target] !== undefined) {
      context.addIssue({ code: "custom", path: [name], message: `a second entry for ${target}` });
    }
    entries[target] = entry;
  }
  return entries;
});

/** Retries of one target: how many attempts in all, and the first wait (doubling). */
export interface RetryPolicy {
  /** Attempts in all, 1–10; 1 is no retry. */
  readonly attempts: number;
  /** Wait before the second attempt, ms; each later wait doubles, up to 60 s. */
  readonly delayMs: number;
}

/** A Tencent IMA notes target, secrets resolved. */
export interface ImaTarget {
  readonly kind: "ima";
  /** Base URL of the notes API, e.g. `https://ima.qq.com/openapi/note/v1`. */
  readonly url: string;
  /** `ima-openapi-clientid` (secret). */
  readonly clientId: string;
  /** `ima-openapi-apikey` (secret). */
  readonly apiKey: string;
  /** The folder notes go to; the account's default when absent. */
  readonly folderId: string | undefined;
  readonly retry: RetryPolicy;
}

/** A Memos target, secret resolved. */
export interface MemosTarget {
  readonly kind: "memos";
  /** Base URL of the Memos server. */
  readonly url: string;
  /** The access token, sent as `Authorization: Bearer …` (secret). */
  readonly token: string;
  /** The memo's visibility. */
  readonly visibility: "PRIVATE" | "PROTECTED" | "PUBLIC";
  readonly retry: RetryPolicy;
}

/** A generic HTTP-JSON target, preset applied and secrets resolved. */
export interface HttpTarget {
  readonly kind: "http";
  /** The full URL called. */
  readonly url: string;
  readonly method: "POST" | "PUT" | "PATCH";
  /** Extra request headers (values may be secrets: never logged). */
  readonly headers: Readonly<Record<string, string>>;
  /** The body template: strings may hold `{{title}}`, `{{content}}`, … (docs/publishing-targets.md). */
  readonly body: unknown;
  /** Success: one of these statuses and, when `path` is set, that JSON field. */
  readonly success: {
    readonly status: readonly number[] | undefined;
    readonly path?: string;
    readonly equals?: unknown;
  };
  /** What a success reports, from the answer's JSON. */
  readonly report: { readonly path: string; readonly as: "doc_id" | "url" | "message" } | undefined;
  /** The service's name in error sentences, e.g. `The blog`. */
  readonly label: string;
  readonly retry: RetryPolicy;
}

/** A target served by an adapter of this module. */
export type AdapterTarget = ImaTarget | MemosTarget | HttpTarget;

/** What the targets file says, per target. */
export interface TargetsFile {
  /** Targets sent through an adapter. */
  readonly adapters: Partial<Record<Target, AdapterTarget>>;
  /** Targets of kind `spec` with their URL (it wins over `--notes-url` …). */
  readonly urls: Partial<Record<Target, string>>;
  /** Targets of kind `builtin`: the built-in service even when a URL option is set. */
  readonly builtin: readonly Target[];
}

/** Default base URL of IMA's notes API. */
export const IMA_URL = "https://ima.qq.com/openapi/note/v1";

/** Default retries of an adapter: 3 attempts, 1 s then 2 s apart. */
const DEFAULT_RETRY: RetryPolicy = { attempts: 3, delayMs: 1000 };

/** An entry of the targets file, as checked. */
type Entry = z.infer<typeof entrySchema>;

/** How {@linkcode loadTargetsFile} resolves an entry's secrets and retries. */
interface Resolver {
  /** The value of a secret reference; `where` names the field, for errors. */
  secret(ref: { env: string } | { file: string }, where: string): string;
  /** A target's retry policy from its `retry` field. */
  retry(
    r: { attempts?: number | undefined; delay?: string | undefined } | undefined,
    where: string,
  ): RetryPolicy;
  /** A configuration error about `where` in the file. */
  error(where: string, message: string): ConfigError;
}

/** The {@linkcode Resolver} of the targets file at `path`. */
function resolver(path: string, env: (name: string) => string | undefined): Resolver {
  const error = (where: string, message: string) =>
    new ConfigError(`targets file "${path}", ${where}: ${message}`);
  return {
    error,
    secret(ref, where) {
      if ("env" in ref) {
        const value = env(ref.env);
        if (value === undefined || value === "") throw error(where, `${ref.env} is not set`);
        return value;
      }
      const file = isAbsolute(ref.file) ? ref.file : join(dirname(path), ref.file);
      let value: string;
      try {
        value = Deno.readTextFileSync(file).trim();
      } catch (cause) {
        throw error(where, `cannot read "${file}": ${(cause as Error).message}`);
      }
      if (value === "") throw error(where, `"${file}" is empty`);
      return value;
    },
    retry(r, where) {
      const delayMs = r?.delay === undefined ? DEFAULT_RETRY.delayMs : parseDuration(r.delay);
      if (delayMs === undefined || delayMs < 1 || delayMs > 60_000) {
        throw error(`${where}.retry.delay`, "must be a duration from 1ms to 60s (e.g. 2s)");
      }
      return { attempts: r?.attempts ?? DEFAULT_RETRY.attempts, delayMs };
    },
  };
}

/** An `http` entry, starting from its preset when it names one. */
function httpTarget(
  target: Target,
  entry: Extract<Entry, { kind: "http" }>,
  resolve: Resolver,
): HttpTarget {
  // The relay's own shapes, as each target kind describes them.
  const preset = entry.preset === undefined ? undefined : TARGET_KINDS[entry.preset].preset;
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(entry.headers ?? {})) {
    headers[name] = typeof value === "string"
      ? value
      : resolve.secret(value, `${target}.headers.${name}`);
  }
  const url = preset === undefined ? entry.url : `${entry.url.replace(/\/+$/, "")}${preset.path}`;
  const body = entry.body ?? preset?.body;
  if (body === undefined) throw resolve.error(target, "an http target needs a body or a preset");
  // A success rule given replaces the preset's whole.
  const success: {
    status?: number[] | undefined;
    path?: string | undefined;
    equals?: unknown;
  } = entry.success ?? preset?.success ?? {};
  return {
    kind: "http",
    url,
    method: entry.method ?? "POST",
    headers,
    body,
    success: {
      status: success.status,
      ...(success.path === undefined ? {} : { path: success.path }),
      ...("equals" in success ? { equals: success.equals } : {}),
    },
    report: entry.report ?? preset?.report,
    label: preset?.label ?? `${new URL(url).host}`,
    retry: resolve.retry(entry.retry, target),
  };
}

/** The adapter of an `ima`, `memos` or `http` entry, its secrets resolved. */
function adapterOf(
  target: Target,
  entry: Exclude<Entry, { kind: "builtin" | "spec" }>,
  resolve: Resolver,
): AdapterTarget {
  switch (entry.kind) {
    case "ima":
      return {
        kind: "ima",
        url: (entry.url ?? IMA_URL).replace(/\/+$/, ""),
        clientId: resolve.secret(entry.client_id, `${target}.client_id`),
        apiKey: resolve.secret(entry.api_key, `${target}.api_key`),
        folderId: entry.folder_id,
        retry: resolve.retry(entry.retry, target),
      };
    case "memos":
      return {
        kind: "memos",
        url: entry.url.replace(/\/+$/, ""),
        token: resolve.secret(entry.token, `${target}.token`),
        visibility: entry.visibility ?? "PRIVATE",
        retry: resolve.retry(entry.retry, target),
      };
    case "http":
      return httpTarget(target, entry, resolve);
  }
}

/**
 * The targets file's entries as checked, or `undefined` when there is none to read.
 *
 * @throws {ConfigError} when it cannot be read, is not JSON or not a valid targets file.
 */
function readTargetsFile(
  path: string | undefined,
  required: boolean,
): z.output<typeof fileSchema> | undefined {
  if (path === undefined) return undefined;
  let text: string;
  try {
    text = Deno.readTextFileSync(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound && !required) return undefined;
    throw new ConfigError(`cannot read the targets file "${path}": ${(error as Error).message}`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new ConfigError(`the targets file "${path}" is not JSON: ${(error as Error).message}`);
  }
  const parsed = fileSchema.safeParse(json);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  throw new ConfigError(
    `invalid targets file "${path}" at ${issue?.path.join(".") || "top level"}: ${
      issue?.message ?? "invalid"
    }`,
  );
}

/**
 * Reads and checks the targets file, resolving every secret it names.
 *
 * @param path The file; `undefined` or (when `required` is false) a missing file means no
 *   targets file.
 * @param env Reads an environment variable; empty counts as unset.
 * @param required Whether the file was named (`--targets-file`): then it must exist.
 * @throws {ConfigError} naming the file, the entry and what is wrong (never a secret).
 */
export function loadTargetsFile(
  path: string | undefined,
  env: (name: string) => string | undefined,
  required: boolean,
): TargetsFile {
  const adapters: Partial<Record<Target, AdapterTarget>> = {};
  const urls: Partial<Record<Target, string>> = {};
  const builtin: Target[] = [];
  const file = readTargetsFile(path, required);
  if (file === undefined || path === undefined) return { adapters, urls, builtin };
  const resolve = resolver(path, env);
  for (const target of TARGETS) {
    const entry = file[target];
    if (entry === undefined) continue;
    if (entry.kind === "builtin") builtin.push(target);
    else if (entry.kind === "spec") {
      if (entry.url !== undefined) urls[target] = entry.url;
    } else adapters[target] = adapterOf(target, entry, resolve);
  }
  return { adapters, urls, builtin };
}

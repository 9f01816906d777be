/**
 * zod schemas for every request body field and query parameter, and the one function that turns a failed parse into a 400 problem.
 *
 * @module
 */

import { NOT_BLANK } from "../util/patterns.ts";
import { z } from "zod";
import { HttpError, type ProblemKind, truncate } from "../errors.ts";
import { type Target, TARGET_NAMES, targetNamed, TARGETS } from "../publish/registry.ts";
import { type Article, CONTENT_MAX, TAGS_MAX, TITLE_MAX } from "../publish/target_kind.ts";
import { QUEUE_NAMES, type QueueName } from "../queue_names.ts";
import { MAX_LEASE_MS } from "../constants.ts";
import { QUEUE_CAPACITY } from "../store/store.ts";

const QUEUE_LIST = QUEUE_NAMES.map((q) => `"${q}"`).join(", ");
const TARGET_LIST = TARGETS.map((t) => `"${t}"`).join(", ");

/** Whether an optional text is at most `max` characters long. */
function atMost(max: number) {
  return (text: string | undefined) => text === undefined || text.length <= max;
}

/** A received value for a message: quoted when a string, shortened when long. */
function quoted(value: unknown): string {
  if (typeof value === "string") return `"${truncate(value)}"`;
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = typeof value;
  }
  return truncate(text);
}

/** An absent or empty parameter counts as absent. */
function absentIfEmpty(value: string | undefined): string | undefined {
  return value === "" ? undefined : value;
}

const queueEnum = z.enum(QUEUE_NAMES, {
  error: (issue) => `queue ${quoted(issue.input)} is not one of ${QUEUE_LIST}`,
});

/*
 * Parameters are read in a transform that leads a pipe (`z.pipe(z.transform(…), schema)`):
 * the API document then shows the schema after it (an enum, a whole number with its
 * bounds), which is what a client must send, rather than "a string". The transform takes
 * `unknown`, so these schemas' input type is `unknown`.
 */

/** Optional `queue` of submit and peek: exactly a queue name; empty is absent. */
export const queueParamSchema: z.ZodType<QueueName | undefined, unknown> = z.pipe(
  z.transform((value: unknown) => value === "" ? undefined : value),
  queueEnum.optional(),
);

/**
 * Optional `queue` of pull: a queue name, also with the `queue_` prefix; empty is absent.
 * The document lists the names without the prefix.
 */
export const pullQueueParamSchema: z.ZodType<QueueName | undefined, unknown> = z.pipe(
  z.transform((value: unknown) =>
    typeof value === "string" ? absentIfEmpty(value)?.replace(/^queue_(?=.)/, "") : value
  ),
  z.enum(QUEUE_NAMES, {
    error: (issue) =>
      `queue ${quoted(issue.input)} is not one of ${QUEUE_LIST} (a "queue_" prefix is allowed)`,
  }).optional(),
);

/**
 * An optional string field. A JSON string can hold a lone UTF-16 surrogate (`"\ud800"`),
 * which has no UTF-8 form and could not be stored byte for byte: it is refused.
 */
function stringField(name: string) {
  return z.string({
    error: (issue) => `field "${name}" must be a string, got ${quoted(issue.input)}`,
  }).refine((text) => text.isWellFormed(), {
    error: `field "${name}" is not valid Unicode (it holds a lone surrogate)`,
  }).optional();
}

/**
 * Fields of a JSON or form body of `POST /submit`. A JSON body's other
 * fields are ignored; a form body naming any other field is plain text (its keys here are
 * the names a form may use; docs/api/queues.md, "POST /submit").
 */
export const submitFieldsSchema = z.object({
  content: stringField("content"),
  url: stringField("url"),
  queue: queueParamSchema,
});

/**
 * What a JSON or form body of `POST /submit` must hold, as the API document shows it:
 * {@linkcode submitFieldsSchema} with `content` or `url` holding more than white space
 * (the handler refuses any other body: "content is empty").
 */
export const submitBodyDocSchema = z.union([
  submitFieldsSchema.extend({ content: requiredText("content") }),
  submitFieldsSchema.extend({ url: requiredText("url") }),
]);

/** A plain-text body of `POST /submit` or `POST /push`: more than white space. */
export const contentTextSchema = z.string().regex(NOT_BLANK);

/**
 * Optional `dedupe` query parameter of `POST /submit`, an extension: `false` puts an item
 * back without the duplicate check (used by `relay work`); default `true`.
 */
export const dedupeParamSchema: z.ZodType<boolean, string | undefined> = z
  .enum(["true", "false"], {
    error: (issue) => `dedupe ${quoted(issue.input)} is not "true" or "false"`,
  })
  .optional()
  .transform((value) => value !== "false");

/**
 * Fields of a JSON or form body of `POST /push`. A JSON body's other fields are
 * ignored; a form body naming any other field is plain text.
 */
export const pushFieldsSchema = z.object({ content: stringField("content") });

/**
 * What a JSON or form body of `POST /push` must hold, as the API document shows it: a
 * `content` with more than white space (the handler refuses any other body).
 */
export const pushBodyDocSchema = pushFieldsSchema.extend({ content: requiredText("content") });

/** The fields of a publish body (checked as {@linkcode publishBodySchema} says). */
const publishFields = z
  .object({
    title: requiredText("title").max(TITLE_MAX, {
      error: `field "title" is longer than ${TITLE_MAX} characters`,
    }),
    content: requiredText("content").max(CONTENT_MAX, {
      error: `field "content" is longer than ${CONTENT_MAX} characters`,
    }),
    content_md: stringField("content_md").refine(atMost(CONTENT_MAX), {
      error: `field "content_md" is longer than ${CONTENT_MAX} characters`,
    }),
    tags: stringField("tags").refine(atMost(TAGS_MAX), {
      error: `field "tags" is longer than ${TAGS_MAX} characters`,
    }),
    targets: z
      .array(
        z.enum(TARGET_NAMES as [string, ...string[]], {
          error: (issue) =>
            typeof issue.input === "string"
              ? `target "${truncate(issue.input)}" is unknown: use ${TARGET_LIST}`
              : 'every value of "targets" must be a string',
        }),
        { error: `field "targets" must be an array of ${TARGET_LIST}` },
      )
      .min(1, { error: `field "targets" must name at least one of ${TARGET_LIST}` })
      // The same name twice is refused; a target and its alias (`podcast`, `nas`) are one target,
      // published once.
      .refine((names) => new Set(names).size === names.length, {
        error: 'field "targets" names a target twice',
      })
      // The document's words for the check above.
      .meta({ uniqueItems: true }),
    transform: z.literal("read", { error: 'field "transform" must be "read"' }).optional(),
  });

/** A publish body's article, targets and the names the request gave them. */
function toPublish(
  body: z.infer<typeof publishFields>,
): { article: Article; targets: Target[]; names: string[] } {
  return {
    article: {
      title: body.title,
      content: body.content,
      ...(body.content_md ? { content_md: body.content_md } : {}),
      ...(body.tags ? { tags: body.tags } : {}),
    },
    targets: [...new Set(body.targets.map((name) => targetNamed(name)!))],
    names: body.targets,
  };
}

/**
 * The body of `POST /publish`, the one check of an article before any target sees it:
 * `title` (at most 500 characters) and `content` non-empty strings; `targets` a non-empty array
 * of distinct target names of the registry (`notes`, `blog`, `podcast`, or an alias such as
 * `nas`); `tags` and `content_md` optional strings; `transform`, when given, `read` (the
 * podcast reads aloud whatever it is sent; older clients send it). Empty optional strings count
 * as absent. Gives the article, the targets, and the names the request used for them (the
 * answer's keys).
 */
export const publishBodySchema = publishFields.transform(toPublish);

/** Characters of the `error` of a reported publish, at most. */
const REPORT_ERROR_MAX = 2000;

/**
 * The body of `POST /publish/report`, a publish a client could not make (the relay could not
 * be reached, or kept answering 5xx): the body of `POST /publish` and `error`, why, in at
 * most 2,000 characters.
 */
export const publishReportSchema = publishFields.extend({
  error: requiredText("error").max(REPORT_ERROR_MAX, {
    error: `field "error" is longer than ${REPORT_ERROR_MAX} characters`,
  }),
}).transform((body) => ({ ...toPublish(body), error: body.error }));

/**
 * A string field that must hold more than white space: the pattern (a character that is
 * not white space, as `String.prototype.trim` counts it) is what the document shows.
 */
function requiredText(name: string) {
  return z
    .string({ error: `field "${name}" must be a non-empty string` })
    .regex(NOT_BLANK, { error: `field "${name}" must not be empty` })
    .refine((text) => text.isWellFormed(), {
      error: `field "${name}" is not valid Unicode (it holds a lone surrogate)`,
    });
}

/** A parameter's text as a whole number of decimal digits, or an issue quoting `value`. */
function digits(name: string, min: number) {
  return z.transform((value: unknown, ctx) => {
    if (typeof value === "string" && /^\d+$/.test(value)) return Number(value);
    ctx.issues.push({
      code: "custom",
      input: value,
      message: `"${name}" must be a whole number ≥ ${min}, got ${quoted(value)}`,
    });
    return z.NEVER;
  });
}

/** A whole number ≥ `min` (and ≤ `max`) given as decimal digits; the document shows both. */
function wholeNumber(name: string, min: number, max = Number.MAX_SAFE_INTEGER, unit = "") {
  const tooLarge = `"${name}" must be at most ${max}${unit}`;
  return z.pipe(
    digits(name, min),
    z.number({ error: tooLarge })
      .int({ error: tooLarge })
      .min(min, {
        error: (issue) => `"${name}" must be a whole number ≥ ${min}, got "${issue.input}"`,
      })
      .max(max, { error: (issue) => `${tooLarge}, got "${issue.input}"` }),
  );
}

function inRange(name: string, min: number, max: number, unit = "") {
  return wholeNumber(name, min, max, unit);
}

/** Highest `limit` of `GET /results`; larger values are clamped. */
const RESULTS_LIMIT_MAX = 50;

/** Longest long-poll, s. */
const MAX_WAIT_S = 60;

/** `wait`: seconds a long-poll may wait for something to arrive, 0–60; default 0. */
const waitParam = inRange("wait", 0, MAX_WAIT_S, " seconds").optional().default(0);

/**
 * Query of `GET /pull` and its extensions: `wait` (long-poll, 0–60 s), `lease` (seconds,
 * 1–43200: a leased pull) and `limit` (1–50: most items taken, by a plain or a leased pull).
 * `limit` once needed `lease`; a rule between two parameters is one the API document cannot
 * state, so a client made from it sent `limit` alone and was refused.
 */
export const pullQuerySchema = z.object({
  queue: pullQueueParamSchema,
  wait: waitParam,
  lease: inRange("lease", 1, MAX_LEASE_MS / 1000, " seconds (12 hours)").optional(),
  limit: inRange("limit", 1, QUEUE_CAPACITY).optional(),
});

/** Query of `GET /results`: `since` ≥ 0 (default 0), `limit` ≥ 1 clamped to 50. */
export const resultsQuerySchema = z.object({
  wait: waitParam,
  since: wholeNumber("since", 0).optional().default(0),
  // Any whole number ≥ 1, however large, is clamped to 50.
  limit: z.pipe(
    z.transform((value: unknown, ctx) => {
      if (typeof value === "string" && /^0*[1-9]\d*$/.test(value)) {
        return Math.min(Number(value), RESULTS_LIMIT_MAX);
      }
      ctx.issues.push({
        code: "custom",
        input: value,
        message: `"limit" must be a whole number ≥ 1, got ${quoted(value)}`,
      });
      return z.NEVER;
    }),
    z.number().int().min(1),
  ).optional().default(RESULTS_LIMIT_MAX),
});

/** The kind of refusal a bad value of these fields is, finer than `bad-request`. */
const FIELD_KINDS: Readonly<Record<string, ProblemKind>> = {
  queue: "unknown-queue",
  lease: "bad-lease",
};

/**
 * Parses `input` with `schema`, or throws the first problem as a 400 that names the
 * action, e.g. `Cannot pull: queue "x" is not one of "qa", "article", "general"`.
 *
 * @param action What the request does: `"submit"`, `"pull"`, …
 * @param kind The kind of refusal; by default `unknown-queue` for a queue parameter's schema,
 *   else the field's ({@linkcode FIELD_KINDS}), else `bad-request`.
 * @throws {HttpError} 400 when the input does not fit the schema.
 */
export function parseOr400<T>(
  schema: z.ZodType<T, unknown>,
  input: unknown,
  action: string,
  kind?: ProblemKind,
): T {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  const field = issue?.path[0];
  throw new HttpError(
    400,
    `Cannot ${action}: ${issue?.message ?? "the request is malformed"}`,
    {},
    kind ??
      (schema === queueParamSchema || schema === pullQueueParamSchema
        ? "unknown-queue"
        : typeof field === "string"
        ? FIELD_KINDS[field]
        : undefined),
  );
}

/**
 * A query parameter's value as `url.searchParams.get(name)` gives it, without building
 * the `URLSearchParams` (a few µs a write) when the query string has nothing to decode (no
 * `%` or `+`): the first `name=value` part's value, `""` for a bare `name` (empty parts
 * skipped, as `URLSearchParams` skips them).
 *
 * @param url The request's URL.
 * @param name The parameter's name.
 * @returns Its first value, or `null` when the query string does not name it.
 */
export function queryParam(url: URL, name: string): string | null {
  const search = url.search;
  if (search === "") return null;
  if (search.includes("%") || search.includes("+")) return url.searchParams.get(name);
  for (const part of search.slice(1).split("&")) {
    if (part === "") continue;
    const equals = part.indexOf("=");
    if ((equals < 0 ? part : part.slice(0, equals)) === name) {
      return equals < 0 ? "" : part.slice(equals + 1);
    }
  }
  return null;
}

/**
 * The optional `queue` parameter or field, as {@linkcode queueParamSchema} reads it: a
 * queue name, or absent when missing or empty. The common values are read without zod
 * (two zod parses were a twentieth of a write's JavaScript); anything else goes through
 * the schema, for its message.
 *
 * @param value The parameter's or field's value as received.
 * @param action What the request does, for the message: `"submit"`, `"peek"`.
 * @throws {HttpError} 400 when it is not a queue name.
 */
export function queueParam(value: unknown, action: string): QueueName | undefined {
  if (value === undefined || value === "") return undefined;
  if (typeof value === "string" && QUEUES.has(value)) return value as QueueName;
  return parseOr400(queueParamSchema, value, action);
}

const QUEUES: ReadonlySet<string> = new Set(QUEUE_NAMES);

/**
 * The optional `dedupe` parameter, as {@linkcode dedupeParamSchema} reads it: `false` only
 * for `"false"`; `"true"` or absent (missing or empty) is `true`. Read without zod unless
 * it is something else, for the schema's message.
 *
 * @param value The parameter's value, `undefined` when missing or empty.
 * @param action What the request does, for the message.
 * @throws {HttpError} 400 when it is not `"true"` or `"false"`.
 */
export function dedupeParam(value: string | undefined, action: string): boolean {
  if (value === undefined || value === "true") return true;
  if (value === "false") return false;
  return parseOr400(dedupeParamSchema, value, action);
}

/**
 * Where `GET /results/stream` starts: the `Last-Event-ID` header a reconnecting
 * `EventSource` sends, else the `since` parameter, else 0. Each must be a whole number.
 */
export const streamStartSchema = z
  .object({
    lastEventId: wholeNumber("Last-Event-ID", 0).optional(),
    since: wholeNumber("since", 0).optional(),
  })
  .transform((q) => q.lastEventId ?? q.since ?? 0);

/** Item ids as `POST /ack` takes them: `<queue>:<id>`, e.g. `qa:17`. */
const itemIdSchema = z
  .string({ error: 'every value of "ids" must be a string such as "qa:17"' })
  .regex(new RegExp(`^(${QUEUE_NAMES.join("|")}):[1-9][0-9]{0,14}$`), {
    error: (issue) => `id ${quoted(issue.input)} is not an item id such as "qa:17"`,
  })
  .transform((id) => {
    const [queue, n] = id.split(":") as [QueueName, string];
    return { queue, id: Number(n) };
  });

/** Most ids one `POST /ack` takes. */
const MAX_ACK_IDS = 500;

/** The body of `POST /ack`: `{"ids": ["qa:17", …]}`, 1–500 ids. */
export const ackBodySchema = z.object({
  ids: z
    .array(itemIdSchema, { error: 'field "ids" must be an array of item ids such as "qa:17"' })
    .min(1, { error: 'field "ids" must name at least one item' })
    .max(MAX_ACK_IDS, { error: `field "ids" may name at most ${MAX_ACK_IDS} items` }),
});

/** The id of a queued item as the API shows it: `<queue>:<id>`. */
export function itemId(item: { queue: QueueName; id: number }): string {
  return `${item.queue}:${item.id}`;
}

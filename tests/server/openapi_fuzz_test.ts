/**
 * Requests generated from the API document, sent to a live relay (`relay serve`, its
 * built-in services on): what Schemathesis does, written here because Schemathesis is a
 * Python tool this project's CI cannot install. For every operation the document lists,
 * fast-check draws path, query and header parameters and bodies from its schemas (each value
 * checked against the schema with ajv), sends them with the main key, and fails on any 5xx
 * and on any such request the relay refuses with 400 or 422: a request the document allows
 * must be taken; every JSON answer must fit the schema the document gives its status (as
 * Schemathesis's response checks do). The document's own examples must fit their schemas too.
 * The figures of a run are in docs/api/service.md, "GET /openapi.json".
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import { KEY, startRelayProcess, stressOr } from "../_helpers.ts";
import { type Document as Shape, inlined, schemaChecker } from "./_openapi.ts";

/** A JSON Schema, as far as the generator reads one. */
interface Schema {
  type?: string | string[];
  enum?: unknown[];
  const?: unknown;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  format?: string;
  items?: Schema;
  minItems?: number;
  maxItems?: number;
  uniqueItems?: boolean;
  properties?: Record<string, Schema>;
  required?: string[];
  anyOf?: Schema[];
  oneOf?: Schema[];
  allOf?: Schema[];
  example?: unknown;
  examples?: unknown[];
}

interface Parameter {
  in: "query" | "header" | "path" | "cookie";
  name: string;
  required?: boolean;
  example?: unknown;
  schema: Schema;
}

interface Operation {
  parameters?: Parameter[];
  requestBody?: {
    required?: boolean;
    content: Record<string, { schema: Schema; example?: unknown }>;
  };
}

type Document = Shape & { paths: Record<string, Record<string, Operation>> };

/** Strings the generator draws from besides random ones: URLs, Unicode, blanks. */
const STRINGS = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.constantFrom("https://example.com/a", "https://stackoverflow.com/q/1", "读一读", " ", "x"),
  fc.webUrl(),
);

/** A fast-check arbitrary of values of `schema` (which may draw some outside it). */
function arbitraryOf(schema: Schema): fc.Arbitrary<unknown> {
  if (schema.const !== undefined) return fc.constant(schema.const);
  if (schema.enum !== undefined) return fc.constantFrom(...schema.enum);
  const choices = schema.anyOf ?? schema.oneOf;
  if (choices !== undefined) return fc.oneof(...choices.map(arbitraryOf));
  if (schema.allOf !== undefined) return arbitraryOf(Object.assign({}, ...schema.allOf));
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  switch (type) {
    case "integer": {
      const min = schema.minimum ?? (schema.exclusiveMinimum ?? -1001) + 1;
      const max = schema.maximum ?? (schema.exclusiveMaximum ?? 1_000_001) - 1;
      return fc.oneof(
        fc.constantFrom(min, max),
        fc.integer({ min: Math.max(min, -1e9), max: Math.min(max, 1e9) }),
      );
    }
    case "number":
      return fc.double({ min: schema.minimum ?? -1e6, max: schema.maximum ?? 1e6, noNaN: true });
    case "boolean":
      return fc.boolean();
    case "array":
      return fc.array(arbitraryOf(schema.items ?? {}), {
        minLength: schema.minItems ?? 0,
        maxLength: Math.min(schema.maxItems ?? 4, 4),
      });
    case "object": {
      const properties = schema.properties ?? {};
      const required = new Set(schema.required ?? []);
      return fc.record(
        Object.fromEntries(Object.entries(properties).map(([name, s]) => [name, arbitraryOf(s)])),
        { requiredKeys: [...required].filter((name) => name in properties) },
      );
    }
    case "string":
    default: {
      if (schema.pattern !== undefined) return fc.stringMatching(new RegExp(schema.pattern));
      if (schema.format === "uri") return fc.webUrl();
      const examples = [schema.example, ...(schema.examples ?? [])].filter((e) => e !== undefined);
      return fc.oneof(
        { weight: 3, arbitrary: STRINGS },
        ...(examples.length > 0 ? [{ weight: 1, arbitrary: fc.constantFrom(...examples) }] : []),
      );
    }
  }
}

/** One request drawn for an operation. */
interface Drawn {
  path: string;
  query: Record<string, unknown>;
  headers: Record<string, unknown>;
  body?: { type: string; value: unknown };
}

/** The arbitrary of requests to one operation, every value fitting the document. */
function requestsOf(
  path: string,
  operation: Operation,
  fits: (schema: unknown, value: unknown) => string | undefined,
): fc.Arbitrary<Drawn> {
  const parameters = (operation.parameters ?? []).filter((p) => p.in !== "cookie");
  const valid = (schema: Schema) =>
    arbitraryOf(schema).filter((v) => fits(schema, v) === undefined);
  // A header holds visible ASCII only (RFC 9110, "Field Values"; fetch refuses the rest).
  const headerValue = (schema: Schema) =>
    valid(schema).filter((v) => /^[\x20-\x7e]*$/.test(String(v)));
  const group = (where: Parameter["in"]) =>
    fc.record(
      Object.fromEntries(
        parameters.filter((p) => p.in === where).map((p) => [
          p.name,
          where === "header" ? headerValue(p.schema) : valid(p.schema),
        ]),
      ),
      {
        requiredKeys: parameters.filter((p) => p.in === where && (p.required || where === "path"))
          .map((p) => p.name),
      },
    );
  const contents = Object.entries(operation.requestBody?.content ?? {});
  const body = contents.length === 0 ? fc.constant(undefined) : fc.oneof(
    ...contents.map(([type, media]) => valid(media.schema).map((value) => ({ type, value }))),
  );
  return fc.record({
    params: group("path"),
    query: group("query"),
    headers: group("header"),
    body,
  }).map(({ params, query, headers, body }) => ({
    path: path.replace(/\{(\w+)\}/g, (_, name: string) => encodeURIComponent(String(params[name]))),
    query,
    headers,
    ...(body === undefined ? {} : { body }),
  }));
}

/** The body's bytes as its media type carries them. */
function encodeBody(type: string, value: unknown): string {
  if (type.includes("json")) return JSON.stringify(value);
  if (type === "application/x-www-form-urlencoded") {
    const form = new URLSearchParams();
    for (const [name, field] of Object.entries(value as Record<string, unknown>)) {
      form.set(name, typeof field === "string" ? field : JSON.stringify(field));
    }
    return form.toString();
  }
  return String(value);
}

/** How long a drawn request may take before it counts as a long-poll or stream, ms. */
const ANSWER_WITHIN_MS = 5_000;

/** Requests drawn per operation: 20, or 100 with `RELAY_STRESS=1`. */
const RUNS = stressOr(20, 100);

/** Long-polls of an operation that wait (one second each): 2, or all with `RELAY_STRESS=1`. */
const WAITS_PER_OPERATION = stressOr(2, Infinity);

/** The media types of JSON answers, problem documents included. */
const JSON_TYPE = /^application\/(problem\+)?json/;

/** An operation's answers as the document describes them. */
interface Answered {
  responses?: Record<string, { content?: Record<string, { schema?: unknown }> }>;
}

/**
 * What is wrong with a JSON answer by the document's schema for its status and media type;
 * `undefined` when it fits or is not JSON.
 */
function answerMisfit(
  operation: Answered,
  status: number,
  type: string,
  text: string,
  fits: (schema: unknown, value: unknown) => string | undefined,
): string | undefined {
  if (!JSON_TYPE.test(type)) return undefined;
  const media = operation.responses?.[String(status)]?.content ?? {};
  const schema = Object.entries(media).find(([name]) => type.startsWith(name.split(";")[0]!))
    ?.[1].schema;
  if (schema === undefined) return `${type} is not documented for ${status}`;
  return fits(schema, JSON.parse(text));
}

/** What a drawn request got: its status (`"open"` for an answer still waiting), type and text. */
interface Got {
  /** The request, for a failure's message. */
  what: string;
  status: number | "open";
  type: string;
  text: string;
}

/**
 * Sends one drawn request to the relay at `base` with the main key. A long-poll or a stream
 * still waiting after {@linkcode ANSWER_WITHIN_MS} counts as taken (`"open"`).
 */
async function send(base: string, method: string, request: Drawn): Promise<Got> {
  const url = new URL(`${base}${request.path}`);
  for (const [name, value] of Object.entries(request.query)) {
    url.searchParams.set(name, String(value));
  }
  const headers: Record<string, string> = { "x-auth-key": KEY };
  for (const [name, value] of Object.entries(request.headers)) headers[name] = String(value);
  if (request.body !== undefined) headers["content-type"] = request.body.type;
  const what = `${method.toUpperCase()} ${url.pathname}${url.search} ${
    request.body === undefined ? "" : JSON.stringify(request.body)
  }`;
  const signal = AbortSignal.timeout(ANSWER_WITHIN_MS);
  try {
    const res = await fetch(url, {
      method: method.toUpperCase(),
      headers,
      signal,
      ...(request.body === undefined
        ? {}
        : { body: encodeBody(request.body.type, request.body.value) }),
    });
    const type = res.headers.get("content-type") ?? "";
    const text = type.startsWith("text/event-stream")
      ? (await res.body?.cancel(), "")
      : await res.text();
    return { what, status: res.status, type, text };
  } catch (error) {
    if (!signal.aborted) throw error;
    return { what, status: "open", type: "", text: "" };
  }
}

// Both steps read the document the relay serves, and the drawn requests change nothing the
// first step reads: one relay serves both.
Deno.test("API document, as a running relay serves it", async (t) => {
  const dir = await Deno.makeTempDir({ prefix: "relay-openapi-" });
  await using relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
  const doc = await (await fetch(`${relay.url}/openapi.json`)).json() as Document;
  const fits = schemaChecker(doc);
  await t.step("API document: its examples fit its schemas", () => {
    const wrong: string[] = [];
    for (const [path, methods] of Object.entries(doc.paths)) {
      for (const [method, operation] of Object.entries(methods)) {
        for (const parameter of operation.parameters ?? []) {
          if (parameter.example === undefined) continue;
          const example = parameter.example;
          const error = fits(parameter.schema, example);
          if (error !== undefined) {
            wrong.push(`${method} ${path} ${parameter.name}=${JSON.stringify(example)}: ${error}`);
          }
        }
        for (const [type, media] of Object.entries(operation.requestBody?.content ?? {})) {
          if (media.example === undefined) continue;
          const error = fits(media.schema, media.example);
          if (error !== undefined) wrong.push(`${method} ${path} ${type} example: ${error}`);
        }
      }
    }
    assert.deepEqual(wrong, []);
  });
  await t.step(
    "API document: requests drawn from it get no 5xx, none it allows is refused with 400 or 422, and every JSON answer fits it",
    async () => {
      const failures: string[] = [];
      const statuses = new Map<number | "open", number>();
      let sent = 0;
      let checked = 0;
      let operations = 0;
      for (const [path, methods] of Object.entries(doc.paths)) {
        for (const [method, operation] of Object.entries(methods)) {
          if (method === "parameters") continue;
          operations++;
          const drawn = fc.sample(requestsOf(path, inlined(operation, doc) as Operation, fits), {
            numRuns: RUNS,
            seed: 40,
          });
          let waits = 0;
          for (const request of drawn) {
            // A long-poll drawn with a wait holds this loop until it ends: the first
            // WAITS_PER_OPERATION of an operation wait one second (still a wait, and still what
            // the document allows), the rest none.
            if (typeof request.query.wait === "number" && request.query.wait > 0) {
              request.query.wait = waits++ < WAITS_PER_OPERATION ? 1 : 0;
            }
            const { what, status, type, text } = await send(relay.url, method, request);
            sent++;
            statuses.set(status, (statuses.get(status) ?? 0) + 1);
            if (status === "open") continue;
            if (status >= 500 || status === 400 || status === 422) {
              failures.push(`${what} → ${status} ${text.slice(0, 300)}`);
            }
            // A JSON answer is what the document says it is (its schema for that status).
            if (JSON_TYPE.test(type)) checked++;
            const misfit = answerMisfit(operation as Answered, status, type, text, fits);
            if (misfit !== undefined) failures.push(`${what} → ${status}: ${misfit}`);
          }
        }
      }
      const figures = [...statuses].sort().map(([status, n]) => `${status}: ${n}`).join(", ");
      console.log(`${sent} requests to ${operations} operations; ${figures}; ${checked} JSON`);
      assert.deepEqual(failures, []);
      assert.ok(operations >= 30, `${operations} operations`);
      assert.ok(
        checked >= sent / 2,
        `${checked} of ${sent} answers checked against the document`,
      );
    },
  );
  await relay.stop();
  await Deno.remove(dir, { recursive: true });
});

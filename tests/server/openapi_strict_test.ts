/**
 * The API document is as strict as the relay: what it allows, the relay accepts, and what
 * the relay refuses, it does not allow; so a client generated from it never sends what
 * the relay refuses. Answers are checked against it with a JSON Schema validator (ajv).
 */
import assert from "node:assert/strict";
import { makeApp } from "../_helpers.ts";
import { type Document as Shape, schemaChecker } from "./_openapi.ts";

interface Parameter {
  in: "query" | "header" | "path" | "cookie";
  name: string;
  required?: boolean;
  example?: string;
  schema: { type?: string; enum?: string[]; minimum?: number; maximum?: number };
}

interface Operation {
  "x-builtin"?: boolean;
  parameters?: Parameter[];
  requestBody?: { content: Record<string, { schema: unknown; example?: unknown }> };
  responses: Record<string, { content?: Record<string, { schema?: unknown }> }>;
}

/** The API document, as these tests read it. */
type Document = Shape & { paths: Record<string, Record<string, Operation>> };

/** The values the document allows for a parameter: its enum, or its bounds. */
function allowed(parameter: Parameter): string[] {
  const { schema } = parameter;
  if (schema.enum !== undefined) return schema.enum;
  if (schema.type === "integer") {
    return [schema.minimum, schema.maximum].filter((n) => n !== undefined).map(String);
  }
  return [];
}

Deno.test("every parameter value the API document allows, the relay accepts", async () => {
  // Long-polls and streams answer at once on a relay that is closing.
  await using t = await makeApp({ closing: AbortSignal.abort() });
  const doc = await (await t.call("/openapi.json")).json() as Document;
  let sent = 0;
  for (const [path, methods] of Object.entries(doc.paths)) {
    for (const [method, operation] of Object.entries(methods)) {
      if (operation["x-builtin"] || path.includes("{")) continue;
      const parameters = operation.parameters ?? [];
      const examples = Object.entries(operation.requestBody?.content ?? {});
      const [type, media] = examples.find(([type]) => type === "application/json") ??
        examples[0] ?? [];
      for (const varied of parameters) {
        for (const value of allowed(varied)) {
          const url = new URL(`http://localhost${path}`);
          const headers: Record<string, string> = type ? { "content-type": type } : {};
          for (const parameter of parameters) {
            const given = parameter === varied ? value : parameter.example;
            if (given === undefined) continue;
            if (parameter.in === "query") url.searchParams.set(parameter.name, given);
            else headers[parameter.name] = given;
          }
          const body = media === undefined
            ? undefined
            : type === "application/json"
            ? JSON.stringify(media.example)
            : String(media.example);
          const res = await t.call(`${url.pathname}${url.search}`, {
            method: method.toUpperCase(),
            headers,
            ...(body === undefined ? {} : { body }),
          });
          const answer = await res.text();
          const what = `${method.toUpperCase()} ${path} ${varied.name}=${value}`;
          assert.ok(res.status < 400, `${what}: ${res.status} ${answer}`);
          sent++;
        }
      }
    }
  }
  assert.ok(sent >= 20, `${sent} requests sent`);
});

Deno.test("parameters the relay does not need are not required by the API document", async () => {
  await using t = await makeApp();
  const doc = await (await t.call("/openapi.json")).json() as Document;
  const stream = doc.paths["/results/stream"]?.get?.parameters ?? [];
  const lastEventId = stream.find((parameter) => parameter.name === "Last-Event-ID");
  assert.ok(lastEventId);
  assert.notEqual(lastEventId.required, true);
  for (const [path, methods] of Object.entries(doc.paths)) {
    for (const [method, operation] of Object.entries(methods)) {
      for (const parameter of operation.parameters ?? []) {
        if (parameter.in !== "query" && parameter.in !== "header") continue; // a path or cookie
        assert.notEqual(parameter.required, true, `${method} ${path} ${parameter.name}`);
      }
    }
  }
});

Deno.test("a body the API document allows, the relay takes; one it refuses, the relay refuses", async () => {
  await using t = await makeApp();
  const doc = await (await t.call("/openapi.json")).json() as Document;
  const fits = schemaChecker(doc);
  const cases: Array<[string, string, unknown, boolean]> = [
    ["/submit", "application/json", {}, false],
    ["/submit", "application/json", { queue: "qa" }, false],
    ["/submit", "application/json", { content: " \n " }, false],
    ["/submit", "application/json", { content: "a", queue: "elsewhere" }, false],
    ["/submit", "application/json", { content: "", url: "https://example.com/a" }, true],
    ["/submit", "application/json", { content: "b", queue: "article" }, true],
    ["/submit", "text/plain", "  ", false],
    ["/submit", "text/plain", "c", true],
    ["/push", "application/json", {}, false],
    ["/push", "application/json", { content: "\t" }, false],
    ["/push", "application/json", { content: "d" }, true],
    ["/publish", "application/json", { title: "t", content: "c", targets: [] }, false],
    ["/publish", "application/json", { title: " ", content: "c", targets: ["blog"] }, false],
    ["/publish", "application/json", { title: "t", content: "c", targets: ["x"] }, false],
    ["/publish", "application/json", { title: "t", content: "c", targets: ["nas"] }, true],
    ["/publish", "application/json", { title: "t", content: "c", targets: ["podcast"] }, true],
    ["/publish", "application/json", {
      title: "t".repeat(501),
      content: "c",
      targets: ["blog"],
    }, false],
    ["/publish", "application/json", {
      title: "t",
      content: "c",
      targets: ["blog", "blog"],
    }, false],
    ["/publish", "application/json", {
      title: "t",
      content: "c",
      targets: ["nas"],
      transform: "loud",
    }, false],
    ["/publish", "application/json", {
      title: "t",
      content: "c",
      targets: ["nas", "blog"],
      transform: "read",
    }, true],
    ["/ack", "application/json", { ids: [] }, false],
    ["/ack", "application/json", { ids: ["qa:1"] }, true],
  ];
  for (const [path, type, value, allowedByDoc] of cases) {
    const schema = doc.paths[path]?.post?.requestBody?.content[type]?.schema;
    assert.ok(schema !== undefined, `${path} documents ${type}`);
    const what = `POST ${path} ${JSON.stringify(value)}`;
    assert.equal(fits(schema, value) === undefined, allowedByDoc, `the document on ${what}`);
    const body = type === "application/json" ? JSON.stringify(value) : String(value);
    const res = await t.call(path, { method: "POST", headers: { "content-type": type }, body });
    const answer = await res.text();
    // Publishing is not configured here: a body that passes the checks gets 503.
    const taken = res.status < 400 || (path === "/publish" && res.status === 503);
    assert.equal(taken, allowedByDoc, `the relay on ${what}: ${res.status} ${answer}`);
  }
});

Deno.test("a pull with limit and without lease takes that many items, oldest first, and leaves the rest", async () => {
  await using t = await makeApp();
  for (const content of ["one", "two", "three"]) {
    await t.call("/submit?queue=general", { method: "POST", body: content });
  }
  const first = await t.call("/pull?queue=general&limit=2");
  assert.equal(first.status, 200);
  assert.deepEqual(await first.json(), ["one", "two"]);
  assert.deepEqual(await (await t.call("/pull?queue=general")).json(), ["three"]);
});

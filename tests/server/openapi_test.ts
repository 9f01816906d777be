/**
 * The API document: every route is in it, and every example in it is accepted
 * by a running relay (with a downstream test server, so publishing succeeds); each
 * operation's `x-scope` is the scope the relay really asks of a named key.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { Validator } from "@seriousme/openapi-schema-validator";
import pLimit from "p-limit";
import { appRoutes } from "../../src/server/app.ts";
import { StreamLimits } from "../../src/server/live.ts";
import { Logger } from "../../src/server/log.ts";
import { RelayMetrics } from "../../src/server/metrics.ts";
import { openApiDocument } from "../../src/server/openapi.ts";
import type { Routes } from "../../src/server/route.ts";
import { WEBAPP_FILES } from "../../src/server/webapp.ts";
import { startDownstream } from "../downstream.ts";
import { type Document as StrictDocument, schemaChecker } from "./_openapi.ts";
import { KEY, makeApp, makeStore, runCli, startRelayProcess, withTempDir } from "../_helpers.ts";

interface Parameter {
  in: "query" | "header" | "path";
  name: string;
  example?: string;
}

interface Operation {
  description?: string;
  /** The built-in services' operations (tests/builtin/openapi_paths_test.ts sends their examples). */
  "x-builtin"?: boolean;
  parameters?: Parameter[];
  requestBody?: { content: Record<string, { example?: unknown }> };
  responses: Record<string, { content?: Record<string, { schema?: unknown }> }>;
  security?: unknown[];
  "x-scope"?: string;
}

type Document = StrictDocument & {
  openapi: string;
  paths: Record<string, Record<string, Operation>>;
};

/** The request each example describes: one per media type of the body, or one. */
function exampleRequests(path: string, method: string, operation: Operation) {
  const url = new URL(`http://relay${path}`);
  const headers: Record<string, string> = {};
  for (const parameter of operation.parameters ?? []) {
    assert.ok(parameter.example !== undefined, `${method} ${path}: ${parameter.name} example`);
    if (parameter.in === "query") url.searchParams.set(parameter.name, parameter.example);
    if (parameter.in === "header") headers[parameter.name] = parameter.example;
    if (parameter.in === "path") {
      url.pathname = url.pathname.replace(`%7B${parameter.name}%7D`, parameter.example);
    }
  }
  const target = `${url.pathname}${url.search}`;
  const bodies = Object.entries(operation.requestBody?.content ?? {});
  if (bodies.length === 0) return [{ target, init: { method, headers } }];
  return bodies.map(([type, media]) => {
    assert.ok(media.example !== undefined, `${method} ${path}: ${type} example`);
    const body = type === "application/json"
      ? JSON.stringify(media.example)
      : type === "application/x-www-form-urlencoded"
      ? new URLSearchParams(media.example as Record<string, string>).toString()
      : String(media.example);
    return { target, init: { method, headers: { ...headers, "content-type": type }, body } };
  });
}

Deno.test("/openapi.json is valid OpenAPI 3.1 and lists every route of the relay", async () => {
  await using t = await makeApp();
  const res = await t.app.request("/openapi.json");
  assert.equal(res.status, 200);
  assert.equal(res.headers.get("content-type"), "application/json; charset=utf-8");
  const doc = await res.json() as Document;
  assert.equal(doc.openapi, "3.1.0");
  // Checked against the OpenAPI 3.1 schema by a validator that knows it.
  const validator = new Validator();
  const checked = await validator.validate(doc as unknown as Record<string, unknown>);
  assert.equal(validator.version, "3.1");
  assert.ok(checked.valid, JSON.stringify(checked.errors));
  const routes = new Set(
    t.app.routes.map((route) => route.path).filter((path) => path !== "/*"),
  );
  assert.ok(routes.size > 15, "the app's routes were found");
  const documented = (path: string) =>
    path in doc.paths || (Object.keys(WEBAPP_FILES).some((file) => path === `/app/${file}`) &&
      "/app/{file}" in doc.paths);
  for (const path of routes) {
    if (path === "/app" || path === "/") continue; // Redirects to /app/.
    assert.ok(documented(path), `${path} is in the document`);
  }
  const builtin = (path: string) =>
    Object.values(doc.paths[path] ?? {}).some((operation) => operation["x-builtin"]);
  for (const path of Object.keys(doc.paths)) {
    if (builtin(path)) continue; // Not mounted by makeApp; checked in tests/publish/.
    assert.ok(routes.has(path) || path === "/app/{file}", `${path} is a real route`);
  }
  // Every protected operation documents 401 and 403, and the scope it needs.
  for (const [path, methods] of Object.entries(doc.paths)) {
    for (const [method, operation] of Object.entries(methods)) {
      if (operation.security !== undefined) continue;
      assert.ok("401" in operation.responses, `${method} ${path} documents 401`);
      assert.ok("403" in operation.responses, `${method} ${path} documents 403`);
      assert.ok(operation["x-scope"], `${method} ${path} has x-scope`);
    }
  }
});

Deno.test("every example in /openapi.json is accepted by a running relay, answered as the document says, and x-scope is the scope it checks", async () => {
  await withTempDir(async (dir) => {
    await using downstream = startDownstream();
    const db = join(dir, "relay.kv");
    // One named key per scope, added the way a household would.
    const scoped: Record<string, string> = {};
    for (const scope of ["submit", "consume", "push", "read", "publish", "admin"]) {
      const added = await runCli(["keys", "add", scope, "--scope", scope, "--db", db]);
      assert.equal(added.code, 0, added.stderr);
      scoped[scope] = added.stdout.trim();
    }
    await using relay = await startRelayProcess(dir, {
      args: ["--publish-url", downstream.url],
      env: {
        RELAY_API_KEY: KEY,
        RELAY_APP_ID: downstream.appId,
        RELAY_BLOG_ACCESS_COOKIE: downstream.cookie,
      },
    });
    const doc = await (await fetch(`${relay.url}/openapi.json`)).json() as Document;
    const fits = schemaChecker(doc);
    let sent = 0;
    for (const [path, methods] of Object.entries(doc.paths)) {
      for (const [method, operation] of Object.entries(methods)) {
        if (operation["x-builtin"]) continue; // Sent by tests/builtin/openapi_paths_test.ts.
        // Needs a kept failed publish: tests/publish/adapters_relay_test.ts retries one.
        if (path === "/publish/retry") continue;
        const expected = Object.keys(operation.responses).filter((s) => s.startsWith("2"));
        for (const { target, init } of exampleRequests(path, method.toUpperCase(), operation)) {
          const scope = operation["x-scope"];
          const key = scope === undefined ? KEY : scoped[scope]!;
          const res = await fetch(`${relay.url}${target}`, {
            ...init,
            headers: { ...init.headers, "x-auth-key": key },
          });
          const what = `${init.method} ${target} (${init.headers["content-type"] ?? "no body"})`;
          assert.ok(expected.includes(String(res.status)), `${what}: ${res.status}`);
          // The answer is the one the document gives: its media type and, for JSON, schema.
          const type = res.headers.get("content-type") ?? "";
          const media = Object.entries(operation.responses[String(res.status)]?.content ?? {});
          const documented = media.find(([name]) => type.startsWith(name.split(";")[0]!));
          assert.ok(documented, `${what}: ${type} is documented`);
          if (type.startsWith("text/event-stream")) {
            await res.body?.cancel();
          } else if (type.startsWith("application/json")) {
            const wrong = fits(documented[1].schema, await res.json());
            assert.equal(wrong, undefined, `${what}: the answer fits the document`);
          } else await res.body?.cancel();
          sent++;
        }
      }
    }
    assert.ok(sent >= 20, `${sent} examples sent`);
    // The publish example reached all three downstream services.
    assert.deepEqual(
      [...new Set(downstream.requests.map((r) => r.service))].sort(),
      ["blog", "notes", "podcast"],
    );
  });
});

Deno.test("openApiDocument() takes each path's methods and scope from the app's routes", async () => {
  await using t = await makeStore();
  const routes = appRoutes({
    store: t.store,
    qaHosts: [],
    maxBodyBytes: 1024,
    publish: undefined,
    builtin: undefined,
    logger: new Logger({ write: () => {} }),
    metrics: new RelayMetrics(),
    closing: new AbortController().signal,
    keepAliveMs: 1000,
    bulkRead: pLimit(1),
    streams: new StreamLimits({ total: 1, perKey: 1 }),
  });
  const paths = (table: Routes) => (openApiDocument("1.0.0", table) as unknown as Document).paths;
  const served = paths(routes);
  assert.equal(served["/peek"]?.get?.["x-scope"], "read");
  assert.deepEqual(Object.keys(served["/submit"] ?? {}), ["post"]);
  assert.deepEqual(served["/health"]?.get?.security, []);

  // A route given another scope, or made open, is documented so.
  const peek = routes["/peek"]!;
  const rescoped = paths({
    ...routes,
    "/peek": { methods: peek.methods, scope: "admin", handler: peek.handler },
  });
  assert.equal(rescoped["/peek"]?.get?.["x-scope"], "admin");
  assert.match(rescoped["/peek"]?.get?.description ?? "", /needs the `admin` scope/);
  const opened = paths({
    ...routes,
    "/stats": { methods: ["GET", "HEAD"], open: true, handler: routes["/stats"]!.handler },
  });
  assert.equal(opened["/stats"]?.get?.["x-scope"], undefined);
  assert.deepEqual(opened["/stats"]?.get?.security, []);
  // Another method is another operation.
  const posted = paths({ ...routes, "/peek": { ...peek, methods: ["GET", "POST"] } });
  assert.deepEqual(Object.keys(posted["/peek"] ?? {}), ["get", "post"]);

  // A documented path the app does not serve, or one whose routes disagree, is an error.
  const { "/stats": _stats, ...withoutStats } = routes;
  assert.throws(() => openApiDocument("1.0.0", withoutStats), /describes \/stats, which/);
  const icon = routes["/app/icon.svg"]!;
  assert.throws(
    () => openApiDocument("1.0.0", { ...routes, "/app/icon.svg": { ...icon, methods: ["GET"] } }),
    /routes of \/app\/\{file\} differ/,
  );
});

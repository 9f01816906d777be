import assert from "node:assert/strict";
import { Validator } from "@seriousme/openapi-schema-validator";
import { createApp } from "../../src/server/app.ts";
import { Logger } from "../../src/server/log.ts";
import { createBuiltinServices } from "../../src/builtin/services.ts";
import { KEY, makeStore } from "../_helpers.ts";
import { APP_ID, serveServices } from "./_services.ts";
import { type Document, schemaChecker } from "../server/_openapi.ts";

/** An answer as the document describes it. */
interface Response {
  content?: Record<string, { schema?: unknown }>;
}

interface Operation {
  "x-builtin"?: boolean;
  parameters?: Array<{ in: string; name: string; example?: string }>;
  requestBody?: { content: Record<string, { example?: unknown }> };
  responses: Record<string, unknown>;
}

Deno.test("the API document lists every route of the built-in services, and each example works", async () => {
  await using base = await makeStore({ systemClock: true });
  const dataDir = await Deno.makeTempDir({ prefix: "relay-publish-" });
  const services = createBuiltinServices({ dataDir, log: () => {} });
  const app = createApp({
    store: base.store,
    apiKey: KEY,
    logger: new Logger({ write: () => {} }),
    builtin: { services, appId: APP_ID },
  });
  services.start();
  try {
    const doc = await (await app.request("/openapi.json")).json() as {
      paths: Record<string, Record<string, Operation>>;
    };
    const fits = schemaChecker(doc as unknown as Document);
    // Every pattern reads alike in every regex dialect: `\d`, `\s` and `\w` are Unicode
    // classes in Python's, so Schemathesis sent ids with other scripts' digits that the relay
    // (reading ASCII digits) refused.
    const patterns: string[] = [];
    JSON.stringify(doc, (key, value) => {
      if (key === "pattern" && typeof value === "string") patterns.push(value);
      return value;
    });
    assert.ok(patterns.length >= 5, `${patterns.length} patterns`);
    for (const pattern of patterns) {
      assert.doesNotMatch(pattern, /\\[dDsSwWb]/, `pattern ${pattern} has a dialect's class`);
    }
    const validator = new Validator();
    const checked = await validator.validate(doc as unknown as Record<string, unknown>);
    assert.ok(checked.valid, JSON.stringify(checked.errors));

    const served = app.routes
      .map(({ path }) => path)
      .filter((path) => /^\/(notes|blog|podcast|downstream|robots\.txt)\b/.test(path))
      .map((path) => path.replace(/:([a-z_]+)/g, "{$1}"));
    const documented = Object.entries(doc.paths)
      .filter(([, methods]) => Object.values(methods).some((op) => op["x-builtin"]))
      .map(([path]) => path);
    assert.deepEqual([...documented].sort(), [...new Set(served)].sort());

    // Real ids for the path examples: a note, a post and a spoken episode.
    const post = async (path: string, body: unknown, headers: Record<string, string> = {}) =>
      await (await app.request(path, {
        method: "POST",
        headers: { "content-type": "application/json", "x-app-id": APP_ID, ...headers },
        body: JSON.stringify(body),
      })).json();
    const docId = (await post("/downstream/api/notes/import", { title: "n", content: "n" }))
      .doc_id;
    const postIds = [
      (await post("/downstream/api/publish", { title: "p", content: "p", targets: ["blog"] }))
        .blog.post_id,
      (await post("/downstream/api/publish", { title: "q", content: "q", targets: ["blog"] }))
        .blog.post_id,
    ];
    const episodeId = (await post("/downstream/api/publish", {
      title: "e",
      // A heading makes a chapter, and a passage in Thai one left out for want of a voice:
      // every field an episode can have is in the list the document describes.
      content: "# Part one\n\nHello.\n\nสวัสดีครับ ยินดีที่ได้รู้จัก",
      targets: ["nas"],
      transform: "read",
    }, { "x-app-id": APP_ID })).episode_id;
    await services.podcast.idle(60_000);
    const real: Record<string, string> = {
      doc_id: docId,
      post_id: postIds[0]!,
      file: `${episodeId}.mp3`,
      "X-App-ID": APP_ID,
      relay_access: KEY,
    };

    let sent = 0;
    for (const path of documented) {
      for (const [method, operation] of Object.entries(doc.paths[path]!)) {
        let target = path;
        const headers: Record<string, string> = { "x-auth-key": KEY };
        for (const parameter of operation.parameters ?? []) {
          assert.ok(parameter.example !== undefined, `${path} ${parameter.name} example`);
          // The delete takes the second post, so that the first is still there to read.
          const value = parameter.name === "post_id" && path.includes("delete")
            ? postIds[1]!
            : real[parameter.name] ?? parameter.example;
          if (parameter.in === "path") target = target.replace(`{${parameter.name}}`, value);
          if (parameter.in === "header") headers[parameter.name] = value;
          if (parameter.in === "cookie") headers.cookie = `${parameter.name}=${value}`;
        }
        const body = operation.requestBody?.content["application/json"]?.example;
        const res = await app.request(target, {
          method: method.toUpperCase(),
          headers: body === undefined
            ? headers
            : { ...headers, "content-type": "application/json" },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        });
        const expected = Object.keys(operation.responses).filter((s) => /^[23]/.test(s));
        assert.ok(expected.includes(String(res.status)), `${method} ${target}: ${res.status}`);
        // A JSON answer fits the schema the document gives it.
        const media = (operation.responses[String(res.status)] as Response | undefined)?.content;
        const schema = Object.entries(media ?? {})
          .find(([name]) => name.startsWith("application/json"))?.[1].schema;
        if (
          schema !== undefined && res.headers.get("content-type")?.startsWith("application/json")
        ) {
          const wrong = fits(schema, await res.json());
          assert.equal(wrong, undefined, `${method} ${target}: the answer fits the document`);
        } else await res.body?.cancel();
        sent++;
      }
    }
    assert.ok(sent >= 14, `${sent} examples sent`);

    // An error of a built-in path is the problem document its schema describes.
    const missing = await app.request("/notes/20261123-114218-k3f9q2ab", {
      headers: { "x-auth-key": KEY },
    });
    assert.equal(missing.status, 404);
    const problem = await missing.json();
    const schema = (doc.paths["/notes/{doc_id}"]!.get as unknown as {
      responses: Record<string, { content: Record<string, { schema: unknown }> }>;
    }).responses["404"]!.content["application/problem+json"]!.schema;
    const verdict = await new Validator().validate({
      openapi: "3.1.0",
      info: { title: "t", version: "1" },
      paths: {},
      components: { schemas: { P: schema as Record<string, unknown> } },
    });
    assert.ok(verdict.valid);
    const typeSchema =
      (schema as { properties: { type: Record<string, unknown> } }).properties.type;
    assert.equal(typeSchema.const, undefined, "the type is not one fixed value");
    assert.equal(typeof problem.type, "string");
    assert.match(problem.type, /^\/docs\/problems\.md#/);
  } finally {
    await services.stop();
  }
});

Deno.test("the API document takes the built-in services' access from their routes", async () => {
  type Op = { security?: unknown[]; "x-scope"?: string };
  const document = async (options: { privateBlog?: boolean }) => {
    await using relay = await serveServices(options);
    return (await (await relay.app.request("/openapi.json")).json()).paths as Record<
      string,
      Record<string, Op>
    >;
  };
  const open = await document({});
  assert.deepEqual(open["/blog/"]?.get?.security, []);
  assert.equal(open["/notes/"]?.get?.["x-scope"], "read");
  assert.equal(open["/downstream/api/publish"]?.post?.["x-scope"], "publish");
  assert.deepEqual(open["/downstream/api/publish"]?.post?.security?.at(-1), { appId: [] });
  assert.equal(open["/downstream/delete/{post_id}"]?.post?.security, undefined);
  const closed = await document({ privateBlog: true });
  assert.equal(closed["/blog/"]?.get?.["x-scope"], "read");
  assert.equal(closed["/blog/{post_id}"]?.get?.["x-scope"], "read");
  assert.deepEqual(closed["/podcast/"]?.get?.security, []);
});

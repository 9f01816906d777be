import assert from "node:assert/strict";
import fc from "fast-check";
import { bodyType, parseBody, readLimited } from "../../src/server/body.ts";
import { HttpError } from "../../src/errors.ts";
import { makeApp, type TestApp } from "../_helpers.ts";

const FORM = "application/x-www-form-urlencoded";

Deno.test("readLimited() answers 408 when the body stalls past the timeout", async () => {
  let sent = false;
  const stalled = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (!sent) controller.enqueue(new Uint8Array([0x61]));
      sent = true;
      // then nothing more, ever
    },
  });
  const request = new Request("http://relay/submit", { method: "POST", body: stalled });
  await assert.rejects(readLimited(request, 1024, 50), (error: unknown) => {
    assert.ok(error instanceof HttpError);
    assert.equal(error.status, 408);
    assert.match(error.message, /did not arrive within 0.05 s/);
    return true;
  });
});

Deno.test("readLimited() answers 408 when a body with a Content-Length stalls past the timeout", async () => {
  const stalled = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(new Uint8Array([0x61])); // 1 of the 10 bytes declared, then nothing
    },
  });
  const request = new Request("http://relay/submit", {
    method: "POST",
    body: stalled,
    headers: { "content-length": "10" },
  });
  await assert.rejects(readLimited(request, 1024, 50), (error: unknown) => {
    assert.ok(error instanceof HttpError);
    assert.equal(error.status, 408);
    assert.match(error.message, /did not arrive within 0.05 s/);
    return true;
  });
});

Deno.test("readLimited() refuses a declared Content-Length over the limit without reading", async () => {
  let pulled = 0;
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      pulled++;
      controller.enqueue(new Uint8Array(10));
    },
  });
  const request = new Request("http://relay/push", {
    method: "POST",
    body,
    headers: { "content-length": "2048" },
  });
  await assert.rejects(readLimited(request, 1024), (error: unknown) => {
    assert.ok(error instanceof HttpError);
    assert.equal(error.status, 413);
    return true;
  });
  assert.ok(pulled <= 1, "the body was not read");
});

Deno.test("bodyType() refuses a charset other than UTF-8 with 415", () => {
  const type = (value: string) => bodyType(new Headers({ "content-type": value }));
  assert.equal(type("text/plain; charset=utf-8"), "text/plain");
  assert.equal(type('application/json; charset="UTF-8"'), "application/json");
  assert.equal(
    type("application/x-www-form-urlencoded; charset=us-ascii"),
    "application/x-www-form-urlencoded",
  );
  for (
    const value of [
      "text/plain; charset=iso-8859-1",
      "application/x-www-form-urlencoded;charset=gbk",
    ]
  ) {
    assert.throws(() => type(value), (error: unknown) => {
      assert.ok(error instanceof HttpError);
      assert.equal(error.status, 415);
      assert.match(error.message, /send UTF-8/);
      return true;
    });
  }
});

Deno.test("parseBody() reads a form as fields only when every field is one the endpoint takes", () => {
  const form = (text: string, formFields: string[]) =>
    parseBody(new TextEncoder().encode(text), FORM, { action: "submit", formFields });
  const submitFields = ["content", "url", "queue"];
  assert.deepEqual(form("content=hello+world&queue=qa", submitFields), {
    kind: "fields",
    fields: { content: "hello world", queue: "qa" },
  });
  assert.deepEqual(form("%63ontent=a%26b&", submitFields), {
    kind: "fields",
    fields: { content: "a&b" },
  });
  for (
    const text of [
      "https://x.example/redirect?id=1&url=https://t.example/a",
      "content=a&id=1",
      "content",
      "url=x&content",
      "some text",
    ]
  ) {
    assert.deepEqual(form(text, submitFields), { kind: "text", text }, text);
  }
  // Push takes only content: a url field makes the body text.
  assert.deepEqual(form("url=https://t.example/a", ["content"]), {
    kind: "text",
    text: "url=https://t.example/a",
  });
  // Without field names every form body is text.
  assert.deepEqual(parseBody(new TextEncoder().encode("content=x"), FORM, { action: "ack" }), {
    kind: "text",
    text: "content=x",
  });
});

/** What `curl -H "X-Auth-Key: …" -d "<text>" <relay><path>` sends. */
function curlData(t: TestApp, path: string, text: string): Promise<Response> {
  return t.call(path, { method: "POST", body: text, headers: { "content-type": FORM } });
}

/** Every item `GET /peek` shows, as `<queue>: <content>`. */
async function peekAll(t: TestApp): Promise<string[]> {
  const res = await t.call("/peek");
  if (res.status === 204) return [];
  assert.equal(res.status, 200);
  const { queues } = await res.json() as {
    queues: Record<string, { content: string; queue_type: string }[]>;
  };
  return Object.values(queues).flat().map((item) => `${item.queue_type}: ${item.content}`);
}

/** Every result's content `GET /results` shows. */
async function results(t: TestApp): Promise<string[]> {
  const res = await t.call("/results");
  assert.equal(res.status, 200);
  return (await res.json() as { items: { c: string }[] }).items.map((item) => item.c);
}

const LINK = "https://x.example/redirect?id=1&url=https://t.example/a";

Deno.test("POST /submit form bodies", async (t) => {
  await t.step("stores a link sent with curl -d whole, byte for byte", async () => {
    await using app = await makeApp();
    const res = await curlData(app, "/submit", LINK);
    assert.equal(res.status, 200);
    assert.equal(await res.text(), "OK (general)");
    assert.deepEqual(await peekAll(app), [`general: ${LINK}`]);
  });

  await t.step("reads an HTML form's fields", async () => {
    await using app = await makeApp();
    const res = await curlData(app, "/submit", "content=hello+world&queue=qa");
    assert.equal(res.status, 200);
    assert.equal(await res.text(), "OK (qa)");
    assert.deepEqual(await peekAll(app), ["qa: hello world"]);
  });

  await t.step(
    "stores any link with any query string sent with curl -d byte for byte",
    async () => {
      await using app = await makeApp();
      await fc.assert(
        fc.asyncProperty(curlLink, async (link) => {
          // Emptied first: a failed run (and fast-check's shrinking after it) leaves items.
          assert.equal((await app.call("/clear", { method: "POST" })).status, 200);
          const res = await curlData(app, "/submit", link);
          assert.equal(res.status, 200, link);
          assert.match(await res.text(), /^OK \((general|qa)\)$/);
          const stored = await peekAll(app);
          assert.equal(stored.length, 1);
          assert.equal(stored[0]!.replace(/^\w+: /, ""), link.trim());
        }),
        { numRuns: 150 },
      );
    },
  );
});

Deno.test("POST /push form bodies", async (t) => {
  await t.step("stores a link sent with curl -d whole, byte for byte", async () => {
    await using app = await makeApp();
    const res = await curlData(app, "/push", LINK);
    assert.equal(res.status, 200);
    assert.equal(await res.text(), "OK");
    assert.deepEqual(await results(app), [LINK]);
  });

  await t.step("reads a form's content field", async () => {
    await using app = await makeApp();
    assert.equal((await curlData(app, "/push", "content=hello+world")).status, 200);
    assert.deepEqual(await results(app), ["hello world"]);
  });

  await t.step(
    "stores any link with any query string sent with curl -d byte for byte",
    async () => {
      await using app = await makeApp();
      await fc.assert(
        fc.asyncProperty(curlLink, async (link) => {
          // Emptied first: a failed run (and fast-check's shrinking after it) leaves items.
          assert.equal((await app.call("/clear", { method: "POST" })).status, 200);
          const res = await curlData(app, "/push", link);
          assert.equal(res.status, 200, link);
          assert.deepEqual(await results(app), [link.trim()]);
        }),
        { numRuns: 100 },
      );
    },
  );
});

/** Pieces of a query string, the ones that look like the relay's fields among them. */
const queryPiece = fc.oneof(
  fc.constantFrom("url=", "content=", "queue=", "&", "=", "+", "?", "/", "#", "qa", ";"),
  fc.constantFrom("%20", "%26", "%3D", "%2B", "%25", "%3F", "%E2%9C%93", "%zz", "%"),
  fc.integer({ min: 0, max: 255 }).map((n) => `%${n.toString(16).padStart(2, "0")}`),
  fc.webSegment(),
  fc.webUrl(),
  fc.string({ unit: "grapheme", maxLength: 4 }),
);

/** A query string: any mix of the pieces. */
const queryString = fc.array(queryPiece, { maxLength: 16 }).map((pieces) => pieces.join(""));

/**
 * A link as a person pastes it after `curl -d`: any web URL (with or without its own query
 * and fragment) and any query string, maybe with white space around it.
 */
const curlLink = fc.tuple(
  fc.webUrl({ withQueryParameters: true, withFragments: true }),
  queryString,
  fc.constantFrom("", " ", "\n", "\t ", "\r\n"),
  fc.constantFrom("", " ", "\n"),
).map(([url, query, before, after]) => {
  const hash = url.indexOf("#");
  const [base, fragment] = hash < 0 ? [url, ""] : [url.slice(0, hash), url.slice(hash)];
  return `${before}${base}${base.includes("?") ? "&" : "?"}${query}${fragment}${after}`;
});

Deno.test("POST /submit and /push read JSON sent without saying it is JSON", async (t) => {
  const json = '{"content": "Remember the plants", "queue": "article"}';
  await t.step("curl -d with a JSON object submits its content to its queue", async () => {
    await using app = await makeApp();
    const res = await curlData(app, "/submit", json);
    assert.equal(res.status, 200);
    assert.equal(await res.text(), "OK (article)");
    assert.deepEqual(await peekAll(app), ["article: Remember the plants"]);
  });

  await t.step("a body without Content-Type that is a JSON object is read as JSON", async () => {
    await using app = await makeApp();
    const body = new TextEncoder().encode(json); // bytes: fetch adds no Content-Type
    const res = await app.call("/submit", { method: "POST", body });
    assert.equal(res.status, 200);
    assert.equal(await res.text(), "OK (article)");
    assert.deepEqual(await peekAll(app), ["article: Remember the plants"]);
  });

  await t.step("push with curl -d stores the content, not the JSON", async () => {
    await using app = await makeApp();
    assert.equal((await curlData(app, "/push", '{"content": "# Summary"}')).status, 200);
    const results = await (await app.call("/results")).json();
    assert.deepEqual(results.items.map((item: { c: string }) => item.c), ["# Summary"]);
  });

  await t.step("text that is not such an object, or declared text/plain, stays text", async () => {
    await using app = await makeApp();
    for (const text of ['{"title": "no field of submit"}', "{not json}"]) {
      assert.equal((await curlData(app, "/submit", text)).status, 200);
    }
    const plain = { "content-type": "text/plain" };
    const res = await app.call("/submit", { method: "POST", body: json, headers: plain });
    assert.equal(await res.text(), "OK (general)");
    assert.deepEqual((await peekAll(app)).sort(), [
      'general: {"content": "Remember the plants", "queue": "article"}',
      'general: {"title": "no field of submit"}',
      "general: {not json}",
    ]);
  });
});

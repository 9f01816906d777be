import assert from "node:assert/strict";
import { STATUS_CODES } from "node:http";
import { problem, PROBLEM_KINDS, PROBLEM_STATUS, problemResponse } from "../src/errors.ts";
import { makeApp, ROOT } from "./_helpers.ts";

Deno.test("problem() titles are the reason phrases of RFC 9110, without loading node:http", () => {
  const renamed: Record<number, string> = {
    413: "Content Too Large",
    422: "Unprocessable Content",
  };
  for (const status of [400, 401, 403, 404, 405, 408, 409, 411, 413, 414, 415, 422, 429, 431]) {
    assert.equal(problem(status, "x").title, renamed[status] ?? STATUS_CODES[status], `${status}`);
  }
  for (const status of [500, 501, 502, 503, 504, 507]) {
    assert.equal(problem(status, "x").title, STATUS_CODES[status], `${status}`);
  }
  assert.equal(problem(499, "x").title, "Error");
});

/** The kinds docs/problems.md has a heading for: `### \`kind\``. */
async function cataloguedKinds(text?: string): Promise<string[]> {
  const page = text ?? await Deno.readTextFile(`${ROOT}docs/problems.md`);
  return [...page.matchAll(/^### `([a-z-]+)`$/gm)].map((match) => match[1]!);
}

Deno.test("problem documents name their kind, each a heading of docs/problems.md and no other", async () => {
  assert.equal(problem(413, "x").type, "/docs/problems.md#content-too-large");
  assert.equal(problem(400, "x").type, "/docs/problems.md#bad-request");
  assert.equal(problem(503, "x").type, "/docs/problems.md#unavailable");
  assert.equal(problem(503, "x", "disk-read-only").type, "/docs/problems.md#disk-read-only");
  assert.equal(problem(412, "x").type, "/docs/problems.md#precondition-failed");
  const body = await problemResponse(429, "slow down").json();
  assert.equal(body.type, "/docs/problems.md#too-many-requests");
  assert.deepEqual((await cataloguedKinds()).sort(), [...PROBLEM_KINDS].sort());
  for (const kind of PROBLEM_KINDS) {
    const page = await Deno.readTextFile(`${ROOT}docs/problems.md`);
    const text = page.split(`### \`${kind}\``)[1]!.split("\n### ")[0]!;
    assert.match(text.trim(), new RegExp(`^${PROBLEM_STATUS[kind]}: `), `${kind}'s status`);
  }
});

Deno.test("every problem type written in src/ points at a heading that exists", async () => {
  const kinds = new Set(await cataloguedKinds());
  const walk = async (dir: string): Promise<string[]> => {
    const found: string[] = [];
    for await (const entry of Deno.readDir(dir)) {
      const path = `${dir}/${entry.name}`;
      if (entry.isDirectory) found.push(...await walk(path));
      else if (entry.name.endsWith(".ts")) found.push(path);
    }
    return found;
  };
  let seen = 0;
  for (const file of await walk(`${ROOT}src`)) {
    const text = await Deno.readTextFile(file);
    // A kind given by name (HttpError's or problemResponse's last argument, a table's field).
    for (const [, kind] of text.matchAll(/"([a-z]+(?:-[a-z]+)+)",?\n?\s*\)/g)) {
      if (kind!.includes("-") && kinds.has(kind!)) seen++;
    }
    for (const [, page, kind] of text.matchAll(/"\/docs\/([\w.]+)#([\w-]+)"/g)) {
      assert.equal(page, "problems.md", `${file} names a type outside the catalogue`);
      assert.ok(kinds.has(kind!), `${file}: /docs/problems.md#${kind} has no heading`);
      seen++;
    }
  }
  assert.ok(seen >= 5, `${seen} types found in src/`);
});

Deno.test("a running relay serves the catalogue its problem types point into", async () => {
  await using app = await makeApp();
  const wrongMethod = await app.call("/submit", { method: "DELETE" });
  const { type } = await wrongMethod.json();
  assert.equal(type, "/docs/problems.md#method-not-allowed");
  const page = await app.app.request(new URL(type, "http://relay.test/").pathname);
  assert.equal(page.status, 200);
  assert.equal(page.headers.get("content-type"), "text/markdown; charset=utf-8");
  const kinds = await cataloguedKinds(await page.text());
  assert.deepEqual(kinds.sort(), [...PROBLEM_KINDS].sort());
  assert.equal(
    (await app.app.request("/docs/problems.md", { method: "HEAD" })).status,
    200,
  );
  assert.equal((await app.app.request("/docs/api.md")).status, 404, "only the catalogue");
});

Deno.test("each kind of refusal has its own type: unknown queue, empty content, bad lease, malformed body, cross-site", async () => {
  await using app = await makeApp();
  const typeOf = async (res: Response) => (await res.json()).type.replace(/^.*#/, "");
  assert.equal(await typeOf(await app.call("/peek?queue=x")), "unknown-queue");
  assert.equal(await typeOf(await app.call("/pull?queue=nope")), "unknown-queue");
  assert.equal(
    await typeOf(await app.call("/submit", { method: "POST", body: "   " })),
    "empty-content",
  );
  assert.equal(
    await typeOf(await app.call("/push", { method: "POST", body: "" })),
    "empty-content",
  );
  assert.equal(await typeOf(await app.call("/pull?lease=0")), "bad-lease");
  assert.equal(await typeOf(await app.call("/results?since=abc")), "bad-request");
  const json = { "content-type": "application/json" };
  assert.equal(
    await typeOf(await app.call("/submit", { method: "POST", headers: json, body: "{" })),
    "malformed-body",
  );
  assert.equal(
    await typeOf(await app.call("/ack", { method: "POST", headers: json, body: "[1]" })),
    "malformed-body",
  );
  assert.equal(
    await typeOf(
      await app.call("/peek", { headers: { origin: "https://elsewhere.example" } }),
    ),
    "cross-site",
  );
  assert.equal(
    await typeOf(await app.app.request("/peek", { headers: { "x-auth-key": "wrong" } })),
    "unauthorized",
  );
});

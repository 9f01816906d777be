import assert from "node:assert/strict";
import { STATUS_CODES } from "node:http";
import { problem, PROBLEM_KINDS, problemResponse } from "../src/errors.ts";
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

Deno.test("problem documents name their kind, each a heading of docs/api.md", async () => {
  assert.equal(problem(413, "x").type, "/docs/api.md#content-too-large");
  assert.equal(problem(503, "x", "disk-read-only").type, "/docs/api.md#disk-read-only");
  const body = await problemResponse(429, "slow down").json();
  assert.equal(body.type, "/docs/api.md#too-many-requests");
  const api = await Deno.readTextFile(`${ROOT}docs/api.md`);
  for (const kind of PROBLEM_KINDS) {
    assert.ok(api.includes(`\n### \`${kind}\`\n`), `docs/api.md has a heading for ${kind}`);
  }
  await using app = await makeApp();
  const wrongMethod = await app.call("/submit", { method: "DELETE" });
  assert.equal((await wrongMethod.json()).type, "/docs/api.md#method-not-allowed");
  const badQueue = await app.call("/peek?queue=x");
  assert.equal((await badQueue.json()).type, "/docs/api.md#bad-request");
});

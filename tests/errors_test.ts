import assert from "node:assert/strict";
import { STATUS_CODES } from "node:http";
import { problem } from "../src/errors.ts";

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

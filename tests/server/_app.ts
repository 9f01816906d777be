/**
 * Helpers shared by the app's in-process tests (app_test.ts, app_http_test.ts,
 * app_results_test.ts): calls that submit and pull through the real app.
 */
import assert from "node:assert/strict";
import type { TestApp } from "../_helpers.ts";

/** The content type the relay answers plain text with. */
export const TEXT = "text/plain; charset=utf-8";
/** The content type the relay answers JSON with. */
export const JSON_TYPE = "application/json; charset=utf-8";

/** Asserts a 200 answer in plain text whose body is exactly `expected`. */
export async function assertText(res: Response, expected: string): Promise<void> {
  assert.equal(res.status, 200);
  assert.equal(res.headers.get("content-type"), TEXT);
  assert.equal(await res.text(), expected);
}

/** POSTs `text` as text/plain to `path` (default `/submit`). */
export function submitText(t: TestApp, text: string, path = "/submit"): Promise<Response> {
  return t.call(path, { method: "POST", body: text, headers: { "content-type": "text/plain" } });
}

/** POSTs `value` as a JSON body to `path` (default `/submit`). */
export function submitJson(t: TestApp, value: unknown, path = "/submit"): Promise<Response> {
  return t.call(path, {
    method: "POST",
    body: JSON.stringify(value),
    headers: { "content-type": "application/json" },
  });
}

/** Pulls every item of `queue`: the parsed JSON array, or `[]` when the answer is 204. */
export async function pullAll(t: TestApp, queue: string): Promise<unknown> {
  const res = await t.call(`/pull?queue=${queue}`);
  return res.status === 204 ? [] : await res.json();
}

import assert from "node:assert/strict";
import { bodyType, readLimited } from "../src/body.ts";
import { HttpError } from "../src/errors.ts";

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

Deno.test("readLimited() C5 refuses a declared Content-Length over the limit without reading", async () => {
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

Deno.test("bodyType() C5 refuses a charset other than UTF-8 with 415", () => {
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

/**
 * The file server on a real file: whole, ranges, validators, HEAD, a missing file, and a
 * file handle closed on every way out (Deno's sanitizers fail a test that leaks one).
 *
 * @module
 */

import assert from "node:assert/strict";
import { HttpError } from "../../src/errors.ts";
import { serveFile } from "../../src/server/file_server.ts";
import { assertProblem, withTempDir } from "../_helpers.ts";

const OPTIONS = { type: "audio/mpeg", cacheControl: "public, max-age=86400", notFound: "No such" };

/** 200 KB of numbered bytes, so that a slice shows where it came from. */
const BYTES = Uint8Array.from({ length: 200_000 }, (_, i) => (i * 7) % 251);

/** Runs `job` with the bytes written to a file. */
async function withFile(job: (path: string) => Promise<void>): Promise<void> {
  await withTempDir(async (dir) => {
    await Deno.writeFile(`${dir}/file.mp3`, BYTES);
    await job(`${dir}/file.mp3`);
  });
}

/** Serves `path` to a request with `headers` (and `method`, GET by default). */
function ask(path: string, headers: Record<string, string> = {}, method = "GET") {
  return serveFile(new Request("http://relay/file.mp3", { method, headers }), path, OPTIONS);
}

Deno.test("serveFile() sends the whole file with its validators, and HEAD the same headers alone", async () => {
  await withFile(async (path) => {
    const whole = await ask(path);
    assert.equal(whole.status, 200);
    assert.deepEqual(new Uint8Array(await whole.arrayBuffer()), BYTES);
    assert.equal(whole.headers.get("content-length"), String(BYTES.length));
    assert.equal(whole.headers.get("content-type"), "audio/mpeg");
    assert.equal(whole.headers.get("accept-ranges"), "bytes");
    assert.equal(whole.headers.get("cache-control"), "public, max-age=86400");
    assert.match(whole.headers.get("etag") ?? "", /^"[\w-]+"$/);
    const { mtime } = await Deno.stat(path);
    assert.equal(whole.headers.get("last-modified"), mtime?.toUTCString());

    const head = await ask(path, {}, "HEAD");
    assert.equal(head.status, 200);
    assert.equal(head.body, null);
    assert.equal(head.headers.get("content-length"), String(BYTES.length));
    assert.equal(head.headers.get("etag"), whole.headers.get("etag"));
  });
});

Deno.test("serveFile() sends one range as 206, and the whole for several or a malformed one", async () => {
  await withFile(async (path) => {
    for (
      const [range, start, end] of [
        ["bytes=10-19", 10, 19],
        ["bytes=150000-", 150_000, 199_999],
        ["bytes=-5", 199_995, 199_999],
        ["bytes=0-0", 0, 0],
        ["bytes=199990-300000", 199_990, 199_999],
        ["bytes=0-9,10-19", 0, 19],
      ] as const
    ) {
      const part = await ask(path, { range });
      assert.equal(part.status, 206, range);
      assert.equal(part.headers.get("content-range"), `bytes ${start}-${end}/200000`);
      assert.equal(part.headers.get("content-length"), String(end - start + 1));
      assert.deepEqual(new Uint8Array(await part.arrayBuffer()), BYTES.subarray(start, end + 1));
    }
    const head = await ask(path, { range: "bytes=10-19" }, "HEAD");
    assert.equal(head.status, 200, "a HEAD is never partial");
    for (const range of ["bytes=0-9,100-109", "bytes=x-y", "items=0-9"]) {
      const whole = await ask(path, { range });
      assert.equal(whole.status, 200, range);
      assert.equal((await whole.arrayBuffer()).byteLength, BYTES.length);
    }
  });
});

Deno.test("serveFile() answers a range past the end 416, a current copy 304, another version 412", async () => {
  await withFile(async (path) => {
    const past = await ask(path, { range: "bytes=200000-" });
    assert.match(await assertProblem(past, 416), /the file has 200000 bytes/);
    assert.equal(past.headers.get("content-range"), "bytes */200000");

    const first = await ask(path);
    await first.body?.cancel();
    const etag = first.headers.get("etag")!;
    const unchanged = await ask(path, { "if-none-match": etag });
    assert.equal(unchanged.status, 304);
    assert.equal(unchanged.body, null);
    assert.equal(unchanged.headers.get("etag"), etag);
    const since = await ask(path, { "if-modified-since": first.headers.get("last-modified")! });
    assert.equal(since.status, 304);

    const otherVersion = await ask(path, { range: "bytes=0-9", "if-range": '"other"' });
    assert.equal(otherVersion.status, 200);
    await otherVersion.body?.cancel();
    const same = await ask(path, { range: "bytes=0-9", "if-range": etag });
    assert.equal(same.status, 206);
    await same.body?.cancel();

    const changed = await ask(path, { "if-match": '"other"', range: "bytes=0-9" });
    assert.equal(changed.status, 412);
    assert.match((await changed.json()).detail, /not in the state the request names/);
    assert.equal(changed.headers.get("etag"), etag);
    const current = await ask(path, { "if-match": etag, range: "bytes=0-9" });
    assert.equal(current.status, 206);
    await current.body?.cancel();
  });
});

Deno.test("serveFile() refuses a missing file with a 404 that says so", async () => {
  await withTempDir(async (dir) => {
    await assert.rejects(
      () => ask(`${dir}/gone.mp3`),
      (error) => error instanceof HttpError && error.status === 404 && error.message === "No such",
    );
  });
});

import assert from "node:assert/strict";
import { ChangeCache } from "../../src/util/change_cache.ts";

Deno.test("ChangeCache builds once per change and key; readers during a build share it", async () => {
  const cache = new ChangeCache();
  let builds = 0;
  const build = () => Promise.resolve(`value ${++builds}`);
  const [a, b] = await Promise.all([cache.get("k", build), cache.get("k", build)]);
  assert.equal(a, "value 1");
  assert.equal(b, "value 1");
  assert.equal(await cache.get("k", build), "value 1");
  cache.changed();
  assert.equal(await cache.get("k", build), "value 2");
  assert.equal(await cache.get("other", build), "value 3");
  assert.equal(await cache.get("k", build), "value 4", "one value is kept, for the last key");
});

Deno.test("ChangeCache keeps no failed build: the next reader builds again", async () => {
  const cache = new ChangeCache();
  await assert.rejects(cache.get("k", () => Promise.reject(new Error("disk gone"))), /disk gone/);
  assert.equal(await cache.get("k", () => Promise.resolve("built")), "built");
});

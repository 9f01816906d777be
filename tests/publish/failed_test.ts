/**
 * The kept failed publishes: bounded to the newest 100, kept in a 0600 file across a
 * reopen, settled by retries, and a damaged file moved aside instead of stopping the relay.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { FailedPublishes, MAX_FAILED_ENTRIES } from "../../src/publish/failed.ts";
import { assertProblem, makeApp } from "../_helpers.ts";

Deno.test("failed publishes: bounded, persistent, settled by retries", async () => {
  const dir = await Deno.makeTempDir({ prefix: "relay-failed-" });
  const path = join(dir, "failed-publishes.json");
  let now = Date.UTC(2026, 0, 1);
  const list = await FailedPublishes.open(path, () => now);
  const ids: string[] = [];
  for (let i = 0; i < MAX_FAILED_ENTRIES + 5; i++) {
    now += 1000;
    ids.push(await list.add({ title: `t${i}`, content: "c" }, { blog: "down" }));
  }
  assert.equal(list.list().length, MAX_FAILED_ENTRIES);
  assert.equal(list.list()[0]!.title, "t5");
  assert.equal(list.get(ids[0]!), undefined);
  assert.equal((await Deno.stat(path)).mode! & 0o777, 0o600);

  const last = ids.at(-1)!;
  await list.settle(last, { blog: "still down" });
  const reopened = await FailedPublishes.open(path);
  assert.equal(reopened.list().length, MAX_FAILED_ENTRIES);
  assert.equal(reopened.get(last)!.tries, 2);
  assert.deepEqual(reopened.get(last)!.errors, { blog: "still down" });
  assert.equal(reopened.get(last)!.article.content, "c");
  await reopened.settle(last, {});
  assert.equal((await FailedPublishes.open(path)).get(last), undefined);
});

Deno.test("failed publishes: kept in memory while the relay has no room, written whole once it has", async () => {
  const dir = await Deno.makeTempDir({ prefix: "relay-failed-" });
  const path = join(dir, "failed-publishes.json");
  let room = false;
  const list = await FailedPublishes.open(path, Date.now, () => {}, () => Promise.resolve(room));
  const first = await list.add({ title: "on a full disk", content: "c" }, { blog: "full" });
  assert.equal(list.get(first)!.article.title, "on a full disk");
  await assert.rejects(() => Deno.stat(path), Deno.errors.NotFound);
  room = true;
  await list.add({ title: "with room", content: "c" }, { blog: "down" });
  const titles = (await FailedPublishes.open(path)).list().map((e) => e.title);
  assert.deepEqual(titles, ["on a full disk", "with room"]);
});

Deno.test("failed publishes: a damaged file is moved aside", async () => {
  const dir = await Deno.makeTempDir({ prefix: "relay-failed-" });
  const path = join(dir, "failed-publishes.json");
  await Deno.writeTextFile(path, '{"entries": [{"id": 1}]');
  const warnings: string[] = [];
  const list = await FailedPublishes.open(path, Date.now, (line) => warnings.push(line));
  assert.equal(list.list().length, 0);
  assert.equal(warnings.length, 1);
  assert.equal(await Deno.readTextFile(`${path}.broken`), '{"entries": [{"id": 1}]');
});

Deno.test("POST /publish/retry: problems for a bad body or an unknown id; GET /publish/failed", async () => {
  const dir = await Deno.makeTempDir({ prefix: "relay-failed-" });
  const failed = await FailedPublishes.open(join(dir, "failed-publishes.json"));
  await using app = await makeApp({ failed });
  const retry = (body: string) =>
    app.call("/publish/retry", {
      method: "POST",
      body,
      headers: { "content-type": "application/json" },
    });
  assert.match(await assertProblem(await retry("{}"), 400), /"id"/);
  assert.match(await assertProblem(await retry('{"id": 7}'), 400), /"id"/);
  assert.match(await assertProblem(await retry('{"id": "nope"}'), 404), /no failed publish "nope"/);
  const list = await app.call("/publish/failed");
  assert.deepEqual(await list.json(), { max: 100, entries: [] });
});

Deno.test("POST /publish/report keeps a publish a client could not make, listed and retried like the others", async () => {
  const dir = await Deno.makeTempDir({ prefix: "relay-failed-" });
  const failed = await FailedPublishes.open(join(dir, "failed-publishes.json"));
  await using app = await makeApp({ failed });
  const report = (body: unknown) =>
    app.call("/publish/report", {
      method: "POST",
      body: JSON.stringify(body),
      headers: { "content-type": "application/json" },
    });
  const article = { title: "Weekend reading", content: "c", targets: ["nas", "blog"] };
  assert.match(await assertProblem(await report(article), 400), /"error"/);
  assert.match(await assertProblem(await report({ ...article, error: " " }), 400), /"error"/);
  assert.match(
    await assertProblem(await report({ ...article, error: "x".repeat(2001) }), 400),
    /"error" is longer than 2000/,
  );
  assert.match(
    await assertProblem(await report({ ...article, targets: ["fax"], error: "HTTP 503" }), 400),
    /target "fax" is unknown/,
  );
  const kept = await report({ ...article, error: "The relay answered 503" });
  assert.equal(kept.status, 201);
  const { id } = await kept.json() as { id: string };
  const list = await (await app.call("/publish/failed")).json() as { entries: unknown[] };
  assert.deepEqual(list.entries, [{
    id,
    at: failed.get(id)!.at,
    last_try: failed.get(id)!.at,
    tries: 1,
    // Kept under the targets' own names, as the relay's own failures are.
    errors: { podcast: "The relay answered 503", blog: "The relay answered 503" },
    title: "Weekend reading",
  }]);
  assert.equal(failed.get(id)!.article.content, "c");
});

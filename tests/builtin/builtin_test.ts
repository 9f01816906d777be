import assert from "node:assert/strict";
import { join } from "node:path";
import { resolveAppId } from "../../src/access/app_id.ts";
import { publish } from "../../src/publish/fan_out.ts";
import { APP_ID, MAIN_KEY, serveServices } from "./_services.ts";

Deno.test("the app id: RELAY_APP_ID wins; else a file generated once (0600) and reused", async () => {
  const dir = await Deno.makeTempDir();
  assert.deepEqual(await resolveAppId("from-env", dir), {
    appId: "from-env",
    source: "environment",
    path: undefined,
  });
  const first = await resolveAppId(undefined, dir);
  assert.equal(first.source, "generated");
  assert.equal(first.path, join(dir, "app-id"));
  assert.ok(first.appId.length >= 43);
  assert.equal((await Deno.stat(join(dir, "app-id"))).mode! & 0o777, 0o600);
  const again = await resolveAppId(undefined, dir);
  assert.deepEqual(again, { appId: first.appId, source: "file", path: first.path });
  await Deno.writeTextFile(join(dir, "app-id"), "\n");
  await assert.rejects(resolveAppId(undefined, dir), /empty/);
});

Deno.test("publishing through a --public-url with a path reaches the services directly and links under that path", async () => {
  await using relay = await serveServices({ publicUrl: "https://example.org/relay/" });
  const res = await relay.app.request("/publish", {
    method: "POST",
    headers: { "content-type": "application/json", "x-auth-key": MAIN_KEY },
    body: JSON.stringify({
      title: "T",
      content: "Hello there.",
      targets: ["notes", "blog", "nas"],
      transform: "read",
    }),
  });
  const outcome = await res.json();
  assert.equal(res.status, 200, JSON.stringify(outcome));
  assert.equal(outcome.status, "ok");
  assert.match(
    outcome.results.blog.url,
    /^https:\/\/example\.org\/relay\/blog\/\d{8}-\d{6}-[a-z0-9]{8}$/,
  );
  const notes = await Array.fromAsync(Deno.readDir(join(relay.dataDir, "notes")));
  assert.equal(notes.length, 1);
});

Deno.test("POST /publish checks the article once, with the services' own limits, before any target", async () => {
  await using relay = await serveServices();
  const res = await relay.app.request("/publish", {
    method: "POST",
    headers: { "content-type": "application/json", "x-auth-key": MAIN_KEY },
    body: JSON.stringify({ title: "t".repeat(501), content: "c", targets: ["notes", "blog"] }),
  });
  assert.equal(res.status, 400);
  assert.match((await res.json()).detail, /field "title" is longer than 500 characters/);
  const notes = await Array.fromAsync(Deno.readDir(join(relay.dataDir, "notes"))).catch(() => []);
  assert.equal(notes.length, 0, "no note was saved");
  // The services' own API refuses the same title with the same words.
  const direct = await relay.app.request("/downstream/api/notes/import", {
    method: "POST",
    headers: { "content-type": "application/json", "x-auth-key": MAIN_KEY },
    body: JSON.stringify({ title: "t".repeat(501), content: "c" }),
  });
  assert.equal(direct.status, 400);
  assert.match((await direct.json()).detail, /field "title" is longer than 500 characters/);
});

Deno.test("the fan-out's HTTP client publishes to the services' /downstream API over HTTP as to an external service", async () => {
  await using relay = await serveServices({ publicUrl: "https://example.org" });
  const base = `${relay.url}/downstream`;
  const outcome = await publish(
    { title: "T", content: "Hello there.", content_md: "# Hello", tags: "a,b" },
    ["notes", "blog", "podcast"],
    {
      urls: { notes: base, blog: base, podcast: base },
      appId: APP_ID,
      timeoutMs: 10_000,
      // The notes store and blog take the app id too (the fan-out sends it to the podcast).
      fetch: (request) => {
        request.headers.set("x-app-id", APP_ID);
        return fetch(request);
      },
    },
  );
  assert.equal(outcome.body.status, "ok", JSON.stringify(outcome.body));
  const { notes, blog, podcast: nas } = outcome.body.results;
  assert.ok(notes?.status === "success" && "doc_id" in notes);
  assert.ok(blog?.status === "success" && "url" in blog);
  assert.match(blog.url, /^https:\/\/example\.org\/blog\/\d{8}-\d{6}-[a-z0-9]{8}$/);
  assert.ok(nas?.status === "success" && "message" in nas);
  assert.match(nas.message, /^queued for reading aloud as episode /);
  const note = await relay.app.request(`/notes/${notes.doc_id}?key=${MAIN_KEY}`);
  assert.match(await note.text(), /# Hello/);
  // The relay's own adapter gives the same answers in process.
  const direct = await relay.app.request("/publish", {
    method: "POST",
    headers: { "content-type": "application/json", "x-auth-key": MAIN_KEY },
    body: JSON.stringify({
      title: "T",
      content: "Hello there.",
      targets: ["blog", "nas"],
      transform: "read",
    }),
  });
  const results = (await direct.json()).results;
  assert.deepEqual(Object.keys(results.blog).sort(), Object.keys(blog).sort());
  assert.deepEqual(Object.keys(results.nas).sort(), Object.keys(nas).sort());
});

import assert from "node:assert/strict";
import { join } from "node:path";
import { publish } from "../../src/publish/fan_out.ts";
import { resolveAppId, withBuiltinTargets } from "../../src/server/builtin_wiring.ts";
import { APP_ID, serveServices } from "./_services.ts";

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

Deno.test("publishing in process through a --public-url with a path reaches the services and links under that path", async () => {
  await using relay = await serveServices({ publicUrl: "https://example.org/relay" });
  const config = withBuiltinTargets(
    {
      urls: { notes: undefined, blog: undefined, nas: undefined },
      appId: undefined,
      timeoutMs: 5000,
    },
    relay.services,
    APP_ID,
    "https://example.org/relay/",
  );
  assert.equal(config.urls.blog, "https://example.org/relay/downstream");
  const outcome = await publish(
    { title: "T", content: "Hello there." },
    ["notes", "blog", "nas"],
    config,
  );
  assert.equal(outcome.body.status, "ok", JSON.stringify(outcome.body));
  const blog = outcome.body.results.blog;
  assert.ok(blog?.status === "success" && "url" in blog);
  assert.match(blog.url, /^https:\/\/example\.org\/relay\/blog\/\d{8}-\d{6}-[a-z0-9]{8}$/);
  const notes = await Array.fromAsync(Deno.readDir(join(relay.dataDir, "notes")));
  assert.equal(notes.length, 1);
});

Deno.test("an external target keeps its own app id; the built-in one is never sent out", () => {
  const services = { app: { fetch: () => new Response() } } as unknown as Parameters<
    typeof withBuiltinTargets
  >[1];
  const external = withBuiltinTargets(
    {
      urls: { notes: undefined, blog: undefined, nas: "http://nas.example" },
      appId: undefined,
      timeoutMs: 1,
    },
    services,
    "built-in-id",
    "http://relay",
  );
  assert.equal(external.appId, undefined);
  const builtin = withBuiltinTargets(
    { urls: { notes: undefined, blog: undefined, nas: undefined }, appId: undefined, timeoutMs: 1 },
    services,
    "built-in-id",
    "http://relay",
  );
  assert.equal(builtin.appId, "built-in-id");
});

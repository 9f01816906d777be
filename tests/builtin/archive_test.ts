import assert from "node:assert/strict";
import { join } from "node:path";
import {
  describePublished,
  exportPublished,
  importPublished,
  publishedSchema,
} from "../../src/builtin/archive.ts";
import { runCli } from "../_helpers.ts";
import { walkMp3 } from "./_mp3.ts";
import { APP_ID, eventually, MAIN_KEY, postJson, serveServices } from "./_services.ts";

Deno.test("export and import carry notes, posts and episodes to a new data directory; audio is spoken again", async () => {
  const from = await Deno.makeTempDir({ prefix: "relay-publish-" });
  let docId: string, postId: string;
  {
    await using relay = await serveServices({ dataDir: from });
    docId = (await (await postJson(`${relay.url}/downstream/api/notes/import`, {
      title: "笔记",
      content: "# Note\n\ntext",
      tags: "a",
    })).json()).doc_id;
    postId = (await (await postJson(`${relay.url}/downstream/api/publish`, {
      title: "Post",
      content: "plain",
      content_md: "**md**",
      tags: "x,y",
      targets: ["blog"],
    })).json()).blog.post_id;
    await postJson(`${relay.url}/downstream/api/publish`, {
      title: "Episode",
      content: "Read me, please.",
      targets: ["nas"],
      transform: "read",
    }, { "x-app-id": APP_ID });
    await relay.services.podcast.idle(60_000);
  }
  const exported = await exportPublished(from);
  // Through JSON and the schema, as a backup file would go.
  const backup = publishedSchema.parse(JSON.parse(JSON.stringify(exported)));
  assert.equal(describePublished(backup), "1 notes, 1 posts and 1 podcast episodes");
  assert.deepEqual(backup.episodes.map((e) => e.text), ["Read me, please."]);

  const to = await Deno.makeTempDir({ prefix: "relay-publish-" });
  await importPublished(to, backup);
  assert.equal(
    await Deno.readTextFile(join(to, "notes", `${docId}.md`)),
    await Deno.readTextFile(join(from, "notes", `${docId}.md`)),
  );
  assert.equal((await Deno.stat(join(to, "notes", `${docId}.md`))).mode! & 0o777, 0o600);
  await using relay = await serveServices({ dataDir: to });
  const page = await (await fetch(`${relay.url}/blog/${postId}`)).text();
  assert.ok(page.includes("<strong>md</strong>"));
  const note = await fetch(`${relay.url}/notes/${docId}?key=${MAIN_KEY}`);
  assert.equal(note.status, 200);
  await note.body?.cancel();
  const episode = await eventually(async () => {
    const [found] = await relay.services.podcast.list();
    return found?.state === "ready" ? found : undefined;
  });
  assert.equal(episode.title, "Episode");
  const mp3 = await Deno.readFile(relay.services.podcast.audioPath(episode.id));
  assert.ok(walkMp3(mp3).seconds > 0.5);
});

Deno.test("a backup with a bad id or text is refused by the schema", () => {
  const bad = [
    { notes: [{ doc_id: "../api-key", file: "x" }], posts: [], episodes: [] },
    { notes: [], posts: [], episodes: [{ id: "x", title: "t", text: "t", created_at: 1 }] },
    { notes: [], posts: [{ post_id: "20260101-000000-aaaaaaaa" }], episodes: [] },
    { notes: [{ doc_id: "20260101-000000-aaaaaaaa", file: "\ud800" }], posts: [], episodes: [] },
  ];
  for (const value of bad) assert.equal(publishedSchema.safeParse(value).success, false);
});

Deno.test("relay export and relay import carry the built-in services' data", async () => {
  const from = await Deno.makeTempDir({ prefix: "relay-publish-" });
  {
    await using relay = await serveServices({ dataDir: from });
    await postJson(`${relay.url}/downstream/api/publish`, {
      title: "Moved",
      content: "c",
      targets: ["blog"],
    });
  }
  const out = join(from, "backup.json");
  const exported = await runCli(["export", "--db", join(from, "relay.kv"), "--out", out]);
  assert.equal(exported.code, 0, exported.stderr);
  assert.match(exported.stderr, /1 posts/);
  const to = await Deno.makeTempDir({ prefix: "relay-publish-" });
  const imported = await runCli(["import", "--db", join(to, "relay.kv"), out]);
  assert.equal(imported.code, 0, imported.stderr);
  const posts = [];
  for await (const entry of Deno.readDir(join(to, "blog"))) posts.push(entry.name);
  assert.equal(posts.length, 1);
  assert.match(await Deno.readTextFile(join(to, "blog", posts[0]!)), /"title": "Moved"/);
});

/**
 * The definition of done, with real processes: a relay started with no publishing
 * option publishes to its built-in notes store, blog and podcast; the post's page, the
 * note's file and the podcast episode's MP3 exist; delete works with the access cookie
 * only; and everything survives a restart.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { feedXml } from "../_xml.ts";
import { assertProblem, KEY, runCli, runRelay, startRelayProcess } from "../_helpers.ts";
import { startDownstream } from "../downstream.ts";
import { walkMp3 } from "../builtin/_mp3.ts";
import { eventually } from "../builtin/_services.ts";

const xml = feedXml;

Deno.test("a fresh relay publishes to its built-in notes, blog and podcast, and keeps them over a restart", async () => {
  const dir = await Deno.makeTempDir({ prefix: "relay-e2e-" });
  const env = { RELAY_API_KEY: KEY };
  let postUrl: string;
  let docId: string;
  let audioPath: string;
  let mp3Length: number;
  {
    await using relay = await startRelayProcess(dir, { env });
    const start = relay.stdout.join("\n");
    assert.match(start, /publishing to built-in notes, blog, podcast; read aloud by espeak-ng/);
    assert.match(start, /generated the podcast app id in .*app-id/);
    assert.equal((await Deno.stat(join(dir, "app-id"))).mode! & 0o777, 0o600);

    const cli = await runRelay([
      "publish",
      "--title",
      "Hello 你好",
      "--markdown-file",
      "-",
      "--target",
      "notes,blog,nas",
      "--tags",
      "test,e2e",
      "--json",
    ], {
      env: { RELAY_URL: relay.url, RELAY_API_KEY: KEY },
      stdin: "# Heading\n\nThe relay reads this aloud. 这是中文句子。",
    });
    assert.equal(cli.code, 0, cli.stderr);
    const body = JSON.parse(cli.stdout);
    assert.equal(body.status, "ok");
    assert.equal(body.results.notes.status, "success");
    assert.equal(body.results.blog.status, "success");
    assert.equal(body.results.nas.status, "success");
    docId = body.results.notes.doc_id;
    postUrl = body.results.blog.url;
    assert.ok(postUrl.startsWith(`${relay.url}/blog/`), postUrl);

    const page = await fetch(postUrl);
    assert.equal(page.status, 200);
    const html = await page.text();
    assert.ok(html.includes("<h1>Heading</h1>"));
    assert.ok(html.includes("Hello 你好"));

    const note = await Deno.readTextFile(join(dir, "notes", `${docId}.md`));
    assert.ok(note.startsWith('---\ntitle: "Hello 你好"\ntags: ["test", "e2e"]\n'));
    assert.ok(note.endsWith("# Heading\n\nThe relay reads this aloud. 这是中文句子。"));

    const item = await eventually(async () => {
      const res = await fetch(`${relay.url}/podcast/feed.xml`);
      const rss = xml.parse(await res.text()).rss;
      return rss.channel.item;
    });
    audioPath = new URL(item.enclosure["@url"]).pathname;
    assert.ok(item.enclosure["@url"].startsWith(relay.url));
    const audio = await fetch(`${relay.url}${audioPath}`);
    const mp3 = new Uint8Array(await audio.arrayBuffer());
    mp3Length = mp3.length;
    assert.equal(mp3.length, Number(item.enclosure["@length"]));
    assert.ok(walkMp3(mp3).seconds > 1);
    const range = await fetch(`${relay.url}${audioPath}`, { headers: { range: "bytes=0-99" } });
    assert.equal(range.status, 206);
    assert.equal((await range.arrayBuffer()).byteLength, 100);

    // Statistics and metrics show the podcast's figures and limits.
    const stats = await (await fetch(`${relay.url}/stats`, { headers: { "x-auth-key": KEY } }))
      .json();
    assert.equal(stats.publishing.posts, 1);
    assert.equal(stats.publishing.notes, 1);
    assert.equal(stats.publishing.podcast.episodes.ready, 1);
    assert.deepEqual(stats.publishing.podcast.retention, {
      keep: 100,
      max_disk_bytes: 1024 ** 3,
    });
    const metrics = await (await fetch(`${relay.url}/metrics`, { headers: { "x-auth-key": KEY } }))
      .text();
    assert.match(metrics, /^relay_podcast_episodes\{state="ready"\} 1$/m);
    assert.match(metrics, new RegExp(`^relay_podcast_audio_bytes ${mp3.length}$`, "m"));
    assert.match(metrics, /^relay_podcast_audio_max_bytes 1073741824$/m);

    // The notes need a key; the relay's 404 for an unknown path is still its own.
    await assertProblem(await fetch(`${relay.url}/notes/`), 401);
    const notes = await fetch(`${relay.url}/notes/`, { headers: { "x-auth-key": KEY } });
    assert.equal((await notes.json()).notes[0].doc_id, docId);
    assert.match(await assertProblem(await fetch(`${relay.url}/nothing`), 404), /\/blog\//);
    await relay.stop();
  }
  {
    await using relay = await startRelayProcess(dir, { env });
    const page = await fetch(`${relay.url}${new URL(postUrl).pathname}`);
    assert.equal(page.status, 200);
    await page.body?.cancel();
    const note = await fetch(`${relay.url}/notes/${docId}`, { headers: { "x-auth-key": KEY } });
    assert.equal(note.status, 200);
    await note.body?.cancel();
    const audio = await fetch(`${relay.url}${audioPath}`);
    assert.equal((await audio.arrayBuffer()).byteLength, mp3Length);

    // Delete: without the cookie nothing happens; with it the post is gone everywhere.
    const postId = new URL(postUrl).pathname.split("/").pop()!;
    const denied = await fetch(`${relay.url}/downstream/delete/${postId}`, {
      method: "POST",
      redirect: "manual",
    });
    await assertProblem(denied, 401);
    const cli = await runRelay(["blog-delete", postId], {
      env: {
        RELAY_PUBLISH_URL: `${relay.url}/downstream`,
        RELAY_BLOG_ACCESS_COOKIE: `relay_access=${KEY}`,
      },
    });
    assert.equal(cli.code, 0, cli.stderr);
    await assertProblem(await fetch(`${relay.url}/blog/${postId}`), 404);
    const index = await (await fetch(`${relay.url}/blog/`)).text();
    assert.ok(!index.includes(postId));
  }
});

Deno.test("publish mixes built-in and external targets: --notes-url sends notes out, the rest stays in", async () => {
  const dir = await Deno.makeTempDir({ prefix: "relay-e2e-" });
  // The household's own notes store: the downstream test server.
  await using downstream = startDownstream();
  await using relay = await startRelayProcess(dir, {
    env: { RELAY_API_KEY: KEY },
    args: ["--notes-url", downstream.url],
  });
  assert.match(relay.stdout.join("\n"), /built-in blog, podcast; external notes/);
  const res = await fetch(`${relay.url}/publish`, {
    method: "POST",
    headers: { "x-auth-key": KEY, "content-type": "application/json" },
    body: JSON.stringify({ title: "T", content: "C", targets: ["notes", "blog"] }),
  });
  const body = await res.json();
  assert.equal(res.status, 200, JSON.stringify(body));
  assert.match(body.results.notes.doc_id, /^doc-/);
  assert.deepEqual(downstream.requests.map((r) => r.service), ["notes"]);
  // The app id stays inside the relay: the external service never sees it.
  assert.equal(downstream.requests[0]!.headers["x-app-id"], undefined);
  assert.deepEqual(await Array.fromAsync(Deno.readDir(join(dir, "notes"))).catch(() => []), []);
  assert.ok(body.results.blog.url.startsWith(relay.url));
});

Deno.test("relay blog-delete deletes from the built-in blog with the client's key alone", async () => {
  const dir = await Deno.makeTempDir({ prefix: "relay-e2e-" });
  await using relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
  const res = await fetch(`${relay.url}/publish`, {
    method: "POST",
    headers: { "x-auth-key": KEY, "content-type": "application/json" },
    body: JSON.stringify({ title: "T", content: "C", targets: ["blog"] }),
  });
  const postId = new URL((await res.json()).results.blog.url).pathname.split("/").pop()!;
  const wrong = await runCli(["blog-delete", postId], {
    env: { RELAY_URL: relay.url, RELAY_API_KEY: "not-the-key" },
  });
  assert.notEqual(wrong.code, 0, wrong.stderr);
  assert.match(wrong.stderr, /401/);
  assert.equal((await fetch(`${relay.url}/blog/${postId}`)).status, 200);
  const deleted = await runCli(["blog-delete", postId], {
    env: { RELAY_URL: relay.url, RELAY_API_KEY: KEY },
  });
  assert.equal(deleted.code, 0, deleted.stderr);
  assert.equal(deleted.stdout.trim(), `deleted post ${postId}`);
  await assertProblem(await fetch(`${relay.url}/blog/${postId}`), 404);
});

Deno.test("an episode cut off by a killed relay resumes after restart and ends as one valid MP3", async () => {
  const dir = await Deno.makeTempDir({ prefix: "relay-e2e-" });
  const env = { RELAY_API_KEY: KEY };
  const text = Array.from(
    { length: 120 },
    (_, i) => `This is sentence ${i} of a long article that the relay reads aloud.`,
  ).join(" ");
  let id: string;
  {
    await using relay = await startRelayProcess(dir, { env });
    const res = await fetch(`${relay.url}/publish`, {
      method: "POST",
      headers: { "x-auth-key": KEY, "content-type": "application/json" },
      body: JSON.stringify({ title: "Long", content: text, targets: ["nas"], transform: "read" }),
    });
    assert.equal(res.status, 200);
    await res.body?.cancel();
    const episode = await eventually(async () => {
      const list = await (await fetch(`${relay.url}/podcast/episodes`)).json();
      const [found] = list.episodes;
      return found?.state === "synthesising" && found.chunks_done >= 1 ? found : undefined;
    });
    id = episode.id;
    assert.ok(episode.chunks_done < episode.chunks_total, "killed in the middle");
    await relay.stop("SIGKILL");
  }
  await using relay = await startRelayProcess(dir, { env });
  const done = await eventually(async () => {
    const list = await (await fetch(`${relay.url}/podcast/episodes`)).json();
    const found = list.episodes.find((e: { id: string }) => e.id === id);
    assert.notEqual(found.state, "failed", found.error);
    return found.state === "ready" ? found : undefined;
  });
  const audio = new Uint8Array(await (await fetch(done.audio_url)).arrayBuffer());
  assert.equal(audio.length, done.bytes);
  const walk = walkMp3(audio);
  assert.ok(Math.abs(walk.seconds - done.duration_s) < 0.1 * done.chunks_total + 0.2);
  await assert.rejects(Deno.stat(join(dir, "podcast", `${id}.mp3.part`)));
});

Deno.test("relay publish takes the issue's spelling: --content, --targets and --transform read", async () => {
  const dir = await Deno.makeTempDir({ prefix: "relay-e2e-" });
  try {
    await using relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
    const env = { RELAY_URL: relay.url, RELAY_API_KEY: KEY };
    const args = ["publish", "--title", "T", "--content", "C is short.", "--targets"];
    const cli = await runCli([...args, "notes,blog,nas", "--transform", "read"], { env });
    assert.equal(cli.code, 0, cli.stderr);
    assert.match(cli.stdout, /^notes: success \(.+\)\nblog: success \(http.+\)\nnas: success/);
    const wrong = await runCli([...args, "nas", "--transform", "summarise"], { env });
    assert.equal(wrong.code, 2);
    assert.match(wrong.stderr, /the only transform is read/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

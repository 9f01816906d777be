/**
 * The adapters' definition of done, with real processes: a relay whose targets file points
 * `notes` at an IMA-shaped server, `blog` at a Memos-shaped server and `nas` at an endpoint
 * behind Cloudflare Access publishes one article with `relay publish --target
 * notes,blog,nas`, reporting each target; then the same with IMA rate-limiting and the
 * note oversized (retried, continued with append_doc) and the Access token refused (the
 * login redirect is a failure of that target).
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { KEY, runCli, startRelayProcess } from "../_helpers.ts";
import { startVendors, VENDOR_SECRETS } from "./_vendors.ts";

Deno.test("relay publish --target notes,blog,nas reaches IMA, Memos and a protected endpoint", async () => {
  await using vendors = startVendors();
  const dir = await Deno.makeTempDir({ prefix: "relay-adapters-e2e-" });
  await Deno.writeTextFile(join(dir, "ima-api-key"), VENDOR_SECRETS.imaApiKey);
  await Deno.writeTextFile(
    join(dir, "targets.json"),
    JSON.stringify({
      notes: {
        kind: "ima",
        url: `${vendors.url}/openapi/note/v1`,
        client_id: { env: "RELAY_IMA_CLIENT_ID" },
        api_key: { file: "ima-api-key" },
        retry: { attempts: 4, delay: "20ms" },
      },
      blog: { kind: "memos", url: vendors.url, token: { env: "RELAY_MEMOS_TOKEN" } },
      nas: {
        kind: "http",
        url: `${vendors.url}/nas/api/episodes`,
        headers: {
          "CF-Access-Client-Id": { env: "RELAY_CF_ACCESS_CLIENT_ID" },
          "CF-Access-Client-Secret": { env: "RELAY_CF_ACCESS_CLIENT_SECRET" },
        },
        body: { title: "{{title}}", text: "{{content}}" },
        success: { path: "ok", equals: true },
        report: { path: "episode.id", as: "message" },
      },
    }),
  );
  const env = {
    RELAY_API_KEY: KEY,
    RELAY_IMA_CLIENT_ID: VENDOR_SECRETS.imaClientId,
    RELAY_MEMOS_TOKEN: VENDOR_SECRETS.memosToken,
    RELAY_CF_ACCESS_CLIENT_ID: VENDOR_SECRETS.cfId,
    RELAY_CF_ACCESS_CLIENT_SECRET: VENDOR_SECRETS.cfSecret,
  };
  const publish = async (markdown: string) => {
    const cli = await runCli([
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
    ], { env: { RELAY_URL: relay.url, RELAY_API_KEY: KEY }, stdin: markdown });
    return { code: cli.code, body: JSON.parse(cli.stdout), stderr: cli.stderr };
  };

  let relay = await startRelayProcess(dir, { env });
  try {
    const start = relay.stdout.join("\n");
    assert.match(start, /publishing to notes via ima; blog via memos; podcast via http/);
    for (const secret of Object.values(VENDOR_SECRETS)) {
      assert.ok(!start.includes(secret), "no secret in the log");
    }

    const ok = await publish("# Heading\n\nBody 中文。");
    assert.equal(ok.code, 0, ok.stderr);
    assert.equal(ok.body.status, "ok");
    assert.deepEqual(ok.body.results.notes, { status: "success", doc_id: "note-1" });
    assert.match(ok.body.results.blog.doc_id, /^memos\/m\d+$/);
    assert.match(ok.body.results.nas.message, /^ep-\d+$/);
    assert.equal(vendors.notes.get("note-1"), "# Heading\n\nBody 中文。");
    assert.match(
      String(vendors.memos.get(ok.body.results.blog.doc_id)!.content),
      /^# Heading\n\nBody 中文。\n\n#test #e2e$/,
    );
    assert.equal(vendors.episodes.length, 1);
    await relay.stop();

    // The Access secret goes wrong; IMA is rate-limiting and finds the note too large.
    relay = await startRelayProcess(dir, {
      env: { ...env, RELAY_CF_ACCESS_CLIENT_SECRET: "expired" },
    });
    vendors.imaRateLimited = 2;
    vendors.imaMaxBytes = 2000;
    const paragraphs = Array.from({ length: 30 }, (_, i) => `Paragraph ${i}: ${"x".repeat(90)}`);
    const partial = await publish(paragraphs.join("\n\n"));
    assert.equal(partial.code, 1);
    assert.equal(partial.body.status, "partial");
    const noteId = partial.body.results.notes.doc_id;
    assert.equal(partial.body.results.notes.status, "success");
    assert.equal(vendors.notes.get(noteId), `# Hello 你好\n\n${paragraphs.join("\n\n")}`);
    assert.ok(vendors.requests.some((r) => r.path.endsWith("/append_doc")));
    assert.equal(partial.body.results.blog.status, "success");
    assert.equal(partial.body.results.nas.status, "error");
    assert.match(partial.body.results.nas.error, /redirected to the Cloudflare Access login page/);
    assert.equal(vendors.episodes.length, 1);

    // The same, as people read it.
    const text = await runCli(
      ["publish", "--title", "T", "--content-file", "-", "--target", "nas"],
      { env: { RELAY_URL: relay.url, RELAY_API_KEY: KEY }, stdin: "text" },
    );
    assert.equal(text.code, 1);
    assert.match(
      text.stdout,
      /^nas: error \(Authentication failed: .*CF-Access-Client-Secret\)\)$/m,
    );
  } finally {
    await relay.stop("SIGKILL");
  }
});

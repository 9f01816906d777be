/**
 * The target adapters against loopback servers in the vendors' documented shapes (IMA,
 * Memos, an endpoint behind Cloudflare Access), configured through a real targets file:
 * success, authentication failure, rate limits retried with backoff (the waits injected, so
 * nothing sleeps), an oversized IMA note continued with append_doc, and the redirect to the
 * Access login page reported as an authentication failure.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { publish, type PublishConfig, type TargetResult } from "../../src/publish/fan_out.ts";
import { loadTargetsFile } from "../../src/publish/targets.ts";
import { renderTemplate, splitText } from "../../src/publish/adapters.ts";
import { ConfigError } from "../../src/config/config.ts";
import { startVendors, VENDOR_SECRETS, type Vendors } from "./_vendors.ts";
import { startDownstream } from "../downstream.ts";

const ARTICLE = {
  title: "Why WAL needs fsync",
  content: "A short plain summary.",
  content_md: "A *short* summary.\n\nSecond paragraph.",
  tags: "sqlite, durability",
};

const ENV: Record<string, string> = {
  RELAY_IMA_CLIENT_ID: VENDOR_SECRETS.imaClientId,
  RELAY_MEMOS_TOKEN: VENDOR_SECRETS.memosToken,
  RELAY_CF_ACCESS_CLIENT_ID: VENDOR_SECRETS.cfId,
};

/** A targets file like the docs' examples, pointed at the stand-ins. */
async function targetsFile(
  dir: string,
  vendors: Vendors,
  secrets: { imaKey?: string; memosToken?: string; cfSecret?: string } = {},
): Promise<string> {
  await Deno.writeTextFile(
    join(dir, "ima-api-key"),
    `${secrets.imaKey ?? VENDOR_SECRETS.imaApiKey}\n`,
  );
  await Deno.writeTextFile(join(dir, "cf-secret"), secrets.cfSecret ?? VENDOR_SECRETS.cfSecret);
  const path = join(dir, "targets.json");
  await Deno.writeTextFile(
    path,
    JSON.stringify({
      notes: {
        kind: "ima",
        url: `${vendors.url}/openapi/note/v1`,
        client_id: { env: "RELAY_IMA_CLIENT_ID" },
        api_key: { file: "ima-api-key" },
        folder_id: "folder-7",
        retry: { attempts: 3, delay: "2s" },
      },
      blog: {
        kind: "memos",
        url: vendors.url,
        token: secrets.memosToken === undefined
          ? { env: "RELAY_MEMOS_TOKEN" }
          : { env: "RELAY_OTHER_TOKEN" },
      },
      nas: {
        kind: "http",
        url: `${vendors.url}/nas/api/episodes`,
        headers: {
          "CF-Access-Client-Id": { env: "RELAY_CF_ACCESS_CLIENT_ID" },
          "CF-Access-Client-Secret": { file: join(dir, "cf-secret") },
          "X-Source": "relay",
        },
        body: {
          name: "{{title}}",
          text: "{{content}}",
          labels: "{{tags_list}}",
          md: "{{content_md}}",
        },
        success: { status: [201], path: "ok", equals: true },
        report: { path: "episode.id", as: "message" },
      },
    }),
  );
  return path;
}

async function setUp(
  vendors: Vendors,
  secrets: { imaKey?: string; memosToken?: string; cfSecret?: string } = {},
): Promise<{ config: PublishConfig; waits: number[] }> {
  const dir = await Deno.makeTempDir({ prefix: "relay-adapters-" });
  const env: Record<string, string> = {
    ...ENV,
    ...(secrets.memosToken === undefined ? {} : { RELAY_OTHER_TOKEN: secrets.memosToken }),
  };
  const file = loadTargetsFile(await targetsFile(dir, vendors, secrets), (n) => env[n], true);
  const waits: number[] = [];
  return {
    waits,
    config: {
      urls: { notes: undefined, blog: undefined, podcast: undefined },
      appId: undefined,
      timeoutMs: 5000,
      adapters: file.adapters,
      sleep: (ms) => {
        waits.push(ms);
        return Promise.resolve();
      },
    },
  };
}

function results(outcome: { body: { results: Record<string, TargetResult | undefined> } }) {
  return outcome.body.results as Record<string, Record<string, string>>;
}

Deno.test("adapters: IMA, Memos and a Cloudflare-Access-protected endpoint all succeed", async () => {
  await using vendors = startVendors();
  const { config, waits } = await setUp(vendors);
  const outcome = await publish(ARTICLE, ["notes", "blog", "podcast"], config);
  assert.equal(outcome.httpStatus, 200, JSON.stringify(outcome.body));
  const r = results(outcome);
  assert.deepEqual(r.notes, { status: "success", doc_id: "note-1" });
  assert.match(r.blog!.doc_id!, /^memos\/m\d+$/);
  assert.match(r.podcast!.message!, /^ep-\d+$/);
  assert.deepEqual(waits, []);

  const ima = vendors.requests.find((q) => q.path === "/openapi/note/v1/import_doc")!;
  assert.deepEqual(ima.body, {
    content: `# Why WAL needs fsync\n\n${ARTICLE.content_md}`,
    content_format: 1,
    folder_id: "folder-7",
  });
  assert.equal(ima.headers.get("ima-openapi-apikey"), VENDOR_SECRETS.imaApiKey);

  const memo = vendors.memos.get(r.blog!.doc_id!)!;
  assert.equal(
    memo.content,
    `# Why WAL needs fsync\n\n${ARTICLE.content_md}\n\n#sqlite #durability`,
  );
  assert.equal(memo.visibility, "PRIVATE");

  assert.deepEqual(vendors.episodes[0], {
    id: r.podcast!.message,
    name: ARTICLE.title,
    text: ARTICLE.content,
    labels: ["sqlite", "durability"],
    md: ARTICLE.content_md,
  });
  const nas = vendors.requests.find((q) => q.path === "/nas/api/episodes")!;
  assert.equal(nas.headers.get("x-source"), "relay");
});

Deno.test("adapters: authentication failures are reported per target, without retrying", async () => {
  await using vendors = startVendors();
  const { config, waits } = await setUp(vendors, {
    imaKey: "wrong",
    memosToken: "wrong",
    cfSecret: "wrong",
  });
  const outcome = await publish(ARTICLE, ["notes", "blog", "podcast"], config);
  assert.equal(outcome.httpStatus, 502);
  assert.equal(outcome.body.status, "error");
  const r = results(outcome);
  assert.match(r.notes!.error!, /^IMA refused the client id and API key \(HTTP 401\): invalid/);
  assert.match(r.blog!.error!, /^Memos refused the access token \(HTTP 401\)/);
  assert.match(
    r.podcast!.error!,
    /^Authentication failed: .* redirected to the Cloudflare Access login page/,
  );
  // The redirect was not followed: nothing but the loopback server was asked.
  assert.equal(vendors.requests.filter((q) => q.path === "/nas/api/episodes").length, 1);
  assert.equal(vendors.episodes.length, 0);
  assert.deepEqual(waits, []);
  for (const result of Object.values(r)) {
    assert.ok(!result.error!.includes("wrong"), "no secret in an error");
  }
});

Deno.test("adapters: rate limits are retried with doubling waits, then given up", async () => {
  await using vendors = startVendors();
  const { config, waits } = await setUp(vendors);
  vendors.imaRateLimited = 2;
  vendors.memosRateLimited = 1;
  const ok = await publish(ARTICLE, ["notes", "blog"], config);
  assert.equal(ok.httpStatus, 200, JSON.stringify(ok.body));
  // IMA: 2 s then 4 s (its retry delay is 2s); Memos: the default 1 s.
  assert.deepEqual([...waits].sort((a, b) => a - b), [1000, 2000, 4000]);
  assert.equal(vendors.notes.size, 1);

  waits.length = 0;
  vendors.imaRateLimited = 5;
  const failed = await publish(ARTICLE, ["notes"], config);
  assert.equal(failed.httpStatus, 502);
  assert.match(
    results(failed).notes!.error!,
    /^IMA is rate-limiting \(code 20002\): rate limited, try later \(gave up after 3 attempts\)$/,
  );
  assert.deepEqual(waits, [2000, 4000]);
});

Deno.test("adapters: an oversized IMA note is imported in parts and continued with append_doc", async () => {
  await using vendors = startVendors();
  const { config } = await setUp(vendors);
  vendors.imaMaxBytes = 4000;
  const paragraphs = Array.from({ length: 40 }, (_, i) => `段落 ${i}: ${"字".repeat(60)}`);
  const long = { ...ARTICLE, content_md: paragraphs.join("\n\n") };
  const outcome = await publish(long, ["notes"], config);
  assert.equal(outcome.httpStatus, 200, JSON.stringify(outcome.body));
  const id = results(outcome).notes!.doc_id!;
  assert.equal(vendors.notes.get(id), `# Why WAL needs fsync\n\n${long.content_md}`);
  const appends = vendors.requests.filter((q) => q.path.endsWith("/append_doc"));
  assert.ok(appends.length >= 2, `${appends.length} appends`);
  for (const append of appends) {
    assert.equal(append.body.note_id, id);
    assert.equal(append.body.content_format, 1);
  }
});

Deno.test("adapters: refused connections are retried; other failures are not", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const closed = `http://127.0.0.1:${(listener.addr as Deno.NetAddr).port}`;
  listener.close();
  const dir = await Deno.makeTempDir({ prefix: "relay-adapters-" });
  const path = join(dir, "targets.json");
  await Deno.writeTextFile(
    path,
    JSON.stringify({
      blog: {
        kind: "memos",
        url: closed,
        token: { env: "RELAY_T" },
        retry: { attempts: 4, delay: "10ms" },
      },
    }),
  );
  const waits: number[] = [];
  const file = loadTargetsFile(path, () => "token", true);
  const outcome = await publish(ARTICLE, ["blog"], {
    urls: { notes: undefined, blog: undefined, podcast: undefined },
    appId: undefined,
    timeoutMs: 2000,
    adapters: file.adapters,
    sleep: (ms) => {
      waits.push(ms);
      return Promise.resolve();
    },
  });
  assert.match(
    results(outcome).blog!.error!,
    /refused the connection \(gave up after 4 attempts\)$/,
  );
  assert.deepEqual(waits, [10, 20, 40]);
});

Deno.test("targets file: secrets only by reference, and clear errors", async () => {
  const dir = await Deno.makeTempDir({ prefix: "relay-targets-" });
  const path = join(dir, "targets.json");
  const attempt = async (json: unknown, env: Record<string, string> = {}) => {
    await Deno.writeTextFile(path, JSON.stringify(json));
    try {
      loadTargetsFile(path, (n) => env[n], true);
      return "ok";
    } catch (error) {
      assert.ok(error instanceof ConfigError, String(error));
      return error.message;
    }
  };
  assert.match(
    await attempt({ notes: { kind: "ima", client_id: "plain", api_key: { env: "RELAY_K" } } }),
    /notes\.client_id: must be \{"env": "RELAY_…"\} or \{"file": "\/path"\}/,
  );
  assert.match(
    await attempt({
      notes: { kind: "ima", client_id: { env: "RELAY_C" }, api_key: { env: "RELAY_K" } },
    }, {
      RELAY_C: "c",
    }),
    /notes\.api_key: RELAY_K is not set/,
  );
  assert.match(await attempt({ blog: { kind: "wordpress" } }), /at blog\.kind/);
  assert.match(
    await attempt({ blog: { kind: "http", url: "http://x" } }),
    /needs a body or a preset/,
  );
  assert.equal(await attempt({ blog: { kind: "http", url: "http://x", preset: "blog" } }), "ok");
  assert.equal(loadTargetsFile(join(dir, "none.json"), () => undefined, false).builtin.length, 0);
  assert.throws(() => loadTargetsFile(join(dir, "none.json"), () => undefined, true), ConfigError);
});

Deno.test("body templates and note parts", () => {
  assert.deepEqual(
    renderTemplate(
      {
        t: "{{title}}",
        md: "{{content_md}}",
        s: "[{{tags}}] {{title}}",
        n: 1,
        l: ["{{tags_list}}"],
      },
      { title: "T", content: "c", tags: "a,b" },
    ),
    { t: "T", s: "[a,b] T", n: 1, l: [["a", "b"]] },
  );
  const text = "aaaa\n\nbbbb\ncccc 你好".repeat(50);
  for (const max of [8, 64, 1000]) {
    const parts = splitText(text, max);
    assert.equal(parts.join(""), text);
    for (const part of parts) assert.ok(new TextEncoder().encode(part).length <= max);
  }
});

Deno.test("adapters: the relay's own blog and podcast shapes as presets of the HTTP target", async () => {
  await using downstream = startDownstream();
  const dir = await Deno.makeTempDir({ prefix: "relay-presets-" });
  const path = join(dir, "targets.json");
  await Deno.writeTextFile(
    path,
    JSON.stringify({
      blog: {
        kind: "http",
        preset: "blog",
        url: downstream.url,
        headers: { "CF-Access-Client-Id": { env: "RELAY_CF_ID" } },
      },
      podcast: {
        kind: "http",
        preset: "podcast",
        url: downstream.url,
        headers: { "X-App-ID": { env: "RELAY_APP_ID" } },
      },
    }),
  );
  const env: Record<string, string> = { RELAY_CF_ID: "id-1", RELAY_APP_ID: downstream.appId };
  const file = loadTargetsFile(path, (n) => env[n], true);
  const outcome = await publish(ARTICLE, ["blog", "podcast"], {
    urls: { notes: undefined, blog: undefined, podcast: undefined },
    appId: undefined,
    timeoutMs: 2000,
    adapters: file.adapters,
  });
  assert.equal(outcome.httpStatus, 200, JSON.stringify(outcome.body));
  const r = results(outcome);
  assert.match(r.blog!.url!, new RegExp(`^${downstream.url}/posts/\\d+$`));
  assert.match(r.podcast!.message!, /^queued for reading/);
  const blog = downstream.requests.find((q) => q.service === "blog")!;
  assert.deepEqual(blog.body, { ...ARTICLE, targets: ["blog"] });
});

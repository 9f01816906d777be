import assert from "node:assert/strict";
import { VERSION } from "../../src/cli/main.ts";
import { runRelay } from "../_helpers.ts";

Deno.test("relay --help lists every option with its environment variable", async () => {
  const { code, stdout } = await runRelay(["--help"]);
  assert.equal(code, 0);
  for (
    const name of [
      "--hostname",
      "RELAY_HOSTNAME",
      "--port",
      "RELAY_PORT",
      "--db",
      "RELAY_DB",
      "--dedupe-window",
      "RELAY_DEDUPE_WINDOW",
      "--qa-hosts",
      "RELAY_QA_HOSTS",
      "--max-body",
      "RELAY_MAX_BODY",
      "--publish-url",
      "RELAY_PUBLISH_URL",
      "--api-key-file",
      "RELAY_API_KEY_FILE",
      "--notes-url",
      "--blog-url",
      "--podcast-url",
      "--publish-timeout",
      "RELAY_PUBLISH_TIMEOUT",
      "relay submit",
      "relay work",
      "relay results",
      "--follow",
      "relay blog-delete",
      "RELAY_URL",
      "RELAY_API_KEY",
      "RELAY_APP_ID",
      "RELAY_BLOG_ACCESS_COOKIE",
    ]
  ) {
    assert.ok(stdout.includes(name), name);
  }
});

Deno.test("relay --version prints the version from deno.json and Deno's", async () => {
  const { code, stdout } = await runRelay(["--version"]);
  assert.equal(code, 0);
  assert.equal(stdout.trim(), `relay ${VERSION} (deno ${Deno.version.deno})`);
});

Deno.test("relay exits 2 with one line naming a bad option, before listening", async (t) => {
  const cases: Array<[string[], Record<string, string>, RegExp]> = [
    [["--port", "eighty"], {}, /^relay: invalid --port "eighty": /],
    [[], { RELAY_DEDUPE_WINDOW: "soon" }, /^relay: invalid RELAY_DEDUPE_WINDOW "soon": /],
    [["--max-body", "2MiB"], {}, /^relay: invalid --max-body "2MiB": /],
    [
      ["--no-such-flag"],
      {},
      /^relay: unknown option --no-such-flag for relay serve; see relay serve --help$/,
    ],
    [["frobnicate"], {}, /^relay: unknown command "frobnicate"; see relay --help$/],
  ];
  for (const [args, env, pattern] of cases) {
    await t.step(args.join(" ") || JSON.stringify(env), async () => {
      const { code, stdout, stderr } = await runRelay(args, { env });
      assert.equal(code, 2);
      assert.equal(stdout, "");
      const lines = stderr.trim().split("\n");
      assert.equal(lines.length, 1, stderr);
      assert.match(lines[0]!, pattern);
    });
  }
});

Deno.test("relay refuses an API key given as a flag: secrets come from the environment", async () => {
  const { code, stderr } = await runRelay(["--api-key", "secret"]);
  assert.equal(code, 2);
  assert.match(stderr, /api-key/);
});

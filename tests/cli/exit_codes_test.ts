/**
 * One exit-code table for every command (docs/cli/commands.md, "Exit codes"): 0 success; 1 the
 * relay could not be reached or failed (5xx); 2 a usage or configuration error; 3 the relay
 * answered with a client error (4xx). Checked against a real relay, and a real server on
 * 127.0.0.1 that answers 5xx. Most run `main` in this process; each exit code is also seen
 * from a real process (`runRelay`), so the entry script's exit is covered.
 */
import assert from "node:assert/strict";
import { REFUSED_URL, runCli, runRelay, startRelayProcess, withTempDir } from "../_helpers.ts";

const KEY = "exit-code-test-key-0123456789";

/** A server that answers every request with `status` and a problem document. */
function failingServer(status: number): Deno.HttpServer<Deno.NetAddr> & { url: string } {
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    () =>
      new Response(
        JSON.stringify({ type: "about:blank", title: "Error", status, detail: "it broke" }),
        { status, headers: { "content-type": "application/problem+json" } },
      ),
  );
  return Object.assign(server, { url: `http://127.0.0.1:${server.addr.port}` });
}

Deno.test("relay client commands exit 3 when the relay answers 4xx, 1 when it fails or cannot be reached, 2 for usage errors", async () => {
  await withTempDir(async (dir) => {
    const db = `${dir}/relay.kv`;
    const reader = await runCli(["keys", "add", "reader", "--scope", "read", "--db", db]);
    assert.equal(reader.code, 0, reader.stderr);
    const readerKey = reader.stdout.trim();
    await using relay = await startRelayProcess(dir, {
      env: { RELAY_API_KEY: KEY },
      args: ["--max-body", "1KiB"],
    });
    const env = { RELAY_URL: relay.url, RELAY_API_KEY: KEY };
    const expect = async (
      args: string[],
      code: number,
      line: RegExp,
      extra: Record<string, string> = {},
      run: typeof runCli = runCli,
    ) => {
      const out = await run(args, { env: { ...env, ...extra } });
      assert.equal(out.code, code, `${args.join(" ")}: ${out.stderr}`);
      assert.equal(out.stderr.split("\n").length, 2, out.stderr);
      assert.match(out.stderr, line);
    };
    // 4xx: the request itself was wrong; trying again will not help.
    await expect(["pull", "--queue", "nope"], 3, /^relay: The relay answered 400: Cannot pull/);
    await expect(["peek"], 3, /refused the API key \(401/, { RELAY_API_KEY: "wrong-key" });
    await expect(["clear"], 3, /answered 403: .*"admin" scope/, { RELAY_API_KEY: readerKey });
    await expect(["submit", "x".repeat(2048)], 3, /answered 413/);
    const worker = await runRelay(["work", "--queue", "nope", "--", "cat"], { env });
    assert.equal(worker.code, 3, worker.stderr);
    assert.match(worker.stderr, /\nrelay: The relay answered 400: [^\n]*\n$/);
    // Usage and configuration: nothing was sent.
    await expect(["pull", "--bogus"], 2, /unknown option --bogus/, {}, runRelay);
    await expect(["peek"], 2, /invalid RELAY_URL "ftp:\/\/x"/, { RELAY_URL: "ftp://x" });
    // Success.
    assert.equal((await runRelay(["peek"], { env })).code, 0);
    await relay.stop();
  });
  // The relay cannot be reached, or answers 5xx.
  const dead = REFUSED_URL;
  const down = await runRelay(["peek"], { env: { RELAY_URL: dead, RELAY_API_KEY: KEY } });
  assert.equal(down.code, 1);
  assert.match(down.stderr, /^relay: Cannot reach the relay at .*connection refused/);
  for (const status of [500, 503]) {
    await using server = failingServer(status);
    const env = { RELAY_URL: server.url, RELAY_API_KEY: KEY };
    const out = await runCli(["pull"], { env });
    assert.equal(out.code, 1, out.stderr);
    assert.equal(out.stderr, `relay: The relay answered ${status}: it broke\n`);
    const health = await runCli(["health"], { env });
    assert.equal(health.code, 1, health.stderr);
  }
});

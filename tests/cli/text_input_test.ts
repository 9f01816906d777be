/**
 * Text that is not UTF-8 on the command line: `relay submit`, `relay push` and `relay
 * publish` refuse it with one line rather than send U+FFFD in place of its bytes, and
 * convert it from the encoding `--encoding` names.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import {
  childEnv,
  KEY,
  relayArgv,
  ROOT,
  runCli,
  runRelay,
  startRelayProcess,
  withTempDir,
} from "../_helpers.ts";

/** "café" in windows-1252 (and Latin-1): é is the one byte 0xE9, not UTF-8. */
const CAFE_1252 = new Uint8Array([0x63, 0x61, 0x66, 0xe9]);
/** "你好" in GBK. */
const NIHAO_GBK = new Uint8Array([0xc4, 0xe3, 0xba, 0xc3]);

/** Asserts exit code 2, nothing on stdout and one line on stderr matching `message`. */
function assertRefused(out: { code: number; stdout: string; stderr: string }, message: RegExp) {
  assert.equal(out.code, 2, out.stderr);
  assert.equal(out.stdout, "");
  assert.equal(out.stderr.split("\n").length, 2, out.stderr);
  assert.match(out.stderr, message);
}

Deno.test("relay submit and push refuse text that is not UTF-8, and --encoding converts it", async () => {
  await withTempDir(async (dir) => {
    await using relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
    const env = { RELAY_URL: relay.url, RELAY_API_KEY: KEY };
    const run = (args: string[], stdin?: Uint8Array) =>
      runCli(args, stdin === undefined ? { env } : { env, stdin });

    // Through a real process once, the bytes on a real pipe; the rest in process.
    assertRefused(
      await runRelay(["submit", "-"], { env, stdin: CAFE_1252 }),
      /^relay: standard input is not UTF-8 text: give its encoding \(e\.g\. --encoding windows-1252 or --encoding gbk\), or convert it; see relay submit --help\n$/,
    );
    assertRefused(await run(["push", "-"], CAFE_1252), /^relay: standard input is not UTF-8/);
    assertRefused(
      await run(["submit", "-", "--encoding", "klingon"], CAFE_1252),
      /^relay: invalid --encoding "klingon": not an encoding name/,
    );
    assertRefused(
      await run(["submit", "-", "--encoding", "utf-16le"], new Uint8Array([0x00, 0xd8])),
      /^relay: standard input is not utf-16le text/,
    );
    const peek = await run(["peek", "--json"]);
    assert.equal(JSON.parse(peek.stdout).total, 0, "nothing was sent");

    assert.equal(
      (await run(["submit", "-", "--encoding", "windows-1252"], CAFE_1252)).stdout,
      "OK (general)\n",
    );
    assert.equal(
      (await run(["submit", "-", "--encoding", "gbk", "-q", "article"], NIHAO_GBK)).stdout,
      "OK (article)\n",
    );
    assert.equal((await run(["push", "-", "--encoding", "latin1"], CAFE_1252)).stdout, "OK\n");
    const queued = JSON.parse((await run(["peek", "--json"])).stdout).queues;
    assert.equal(queued.general[0].content, "café");
    assert.equal(queued.article[0].content, "你好");
    const results = JSON.parse((await run(["results", "--json"])).stdout);
    assert.deepEqual(results.items.map((item: { c: string }) => item.c), ["café"]);
  });
});

Deno.test("relay submit: an argument that is not UTF-8 never reaches the relay; a real U+FFFD does", async () => {
  await withTempDir(async (dir) => {
    await using relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
    const env = { RELAY_URL: relay.url, RELAY_API_KEY: KEY };
    // Deno.Command passes only strings: sh's printf puts the bytes in the argument.
    const submitWithShell = async (printf: string) => {
      const out = await new Deno.Command("sh", {
        args: ["-c", `exec "$@" "$(printf '${printf}')"`, "sh", ...relayArgv(["submit"])],
        env: childEnv(env),
        clearEnv: true,
        cwd: ROOT,
        stdout: "piped",
        stderr: "piped",
      }).output();
      return { code: out.code, stderr: new TextDecoder().decode(out.stderr) };
    };
    const refused = await submitWithShell("caf\\351");
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /invalid UTF-8/);
    const peek = async () => JSON.parse((await runCli(["peek", "--json"], { env })).stdout);
    assert.equal((await peek()).total, 0);
    // U+FFFD itself, written as UTF-8, is text like any other.
    const real = await submitWithShell("caf\\357\\277\\275");
    assert.equal(real.code, 0, real.stderr);
    assert.equal((await peek()).queues.general[0].content, "caf\ufffd");
  });
});

Deno.test("relay publish --markdown-file refuses a Latin-1 file, and publishes it with --encoding", async () => {
  await withTempDir(async (dir) => {
    await using relay = await startRelayProcess(dir, { env: { RELAY_API_KEY: KEY } });
    const env = { RELAY_URL: relay.url, RELAY_API_KEY: KEY };
    const file = join(dir, "latin1.md");
    await Deno.writeFile(
      file,
      new Uint8Array([...new TextEncoder().encode("# Menu\n\n"), ...CAFE_1252]),
    );
    const publish = (...extra: string[]) =>
      runCli(
        ["publish", "--title", "Menu", "--markdown-file", file, "--target", "notes", ...extra],
        { env },
      );
    assertRefused(
      await publish(),
      new RegExp(`^relay: "${file}" is not UTF-8 text: give its encoding`),
    );
    const done = await publish("--encoding", "windows-1252");
    assert.equal(done.code, 0, done.stderr);
    assert.match(done.stdout, /^notes: success/);
    const notes = [...Deno.readDirSync(join(dir, "notes"))].filter((e) => e.name.endsWith(".md"));
    assert.equal(notes.length, 1);
    const note = await Deno.readTextFile(join(dir, "notes", notes[0]!.name));
    assert.ok(note.includes("café"), note);
    assert.ok(!note.includes("\ufffd"), note);
  });
});

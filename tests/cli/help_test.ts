/**
 * The command line's help and its refusals: `relay help`, `relay help <command>` and
 * `relay <command> --help` print the command's usage with every option, its default and
 * its environment variable; `relay version`; an unknown command or option exits 2 with one
 * line and a suggestion, never the argument parser's own text.
 */
import assert from "node:assert/strict";
import { COMMANDS } from "../../src/cli/commands.ts";
import { VERSION } from "../../src/cli/main.ts";
import { runCli } from "../_helpers.ts";

Deno.test("relay help <command> and relay <command> --help show every option with its default and environment variable, for every command", async () => {
  for (const command of COMMANDS) {
    const words = command.name.split(" ");
    const viaHelp = await runCli(["help", ...words]);
    const viaFlag = await runCli([...words, "--help"]);
    const viaShort = await runCli([...words, "-h"]);
    assert.equal(viaHelp.code, 0, command.name);
    assert.equal(viaHelp.stderr, "", command.name);
    assert.equal(viaFlag.stdout, viaHelp.stdout, command.name);
    assert.equal(viaShort.stdout, viaHelp.stdout, command.name);
    assert.ok(viaHelp.stdout.startsWith(`Usage: relay ${command.name}`), viaHelp.stdout);
    for (const option of command.options) {
      assert.ok(viaHelp.stdout.includes(`--${option.name}`), `${command.name} --${option.name}`);
      if (option.short) assert.ok(viaHelp.stdout.includes(`-${option.short}, --${option.name}`));
      if (option.env) assert.ok(viaHelp.stdout.includes(`env ${option.env}`), option.env);
      if (option.default) {
        assert.ok(viaHelp.stdout.includes(`default: ${option.default}`), `${option.name} default`);
      }
    }
  }
});

Deno.test("relay help names the client options' defaults and variables for pull and work", async () => {
  const pull = await runCli(["pull", "--help"]);
  assert.equal(pull.code, 0);
  assert.equal(pull.stderr, "");
  for (
    const text of [
      "Usage: relay pull",
      "-q, --queue Q",
      "--json",
      "-0, --null",
      "env RELAY_URL",
      "http://127.0.0.1:8787",
      "env RELAY_API_KEY_FILE",
      "env RELAY_DB",
      "/var/lib/relay/relay.kv",
    ]
  ) {
    assert.ok(pull.stdout.includes(text), text);
  }
  const work = await runCli(["help", "work"]);
  assert.equal(work.code, 0);
  assert.match(work.stdout, /--attempts N .*\n.*default: 3/);
  assert.match(work.stdout, /--backoff D .*\n.*default: 2s/);
  assert.match(work.stdout, /--lease D .*\n.*default: 5m/);
  const keys = await runCli(["help", "keys"]);
  assert.equal(keys.code, 0);
  assert.match(keys.stdout, /relay keys add <name>/);
  assert.match(keys.stdout, /relay keys list/);
});

Deno.test("relay help and relay --help print the overview with every command; relay version and --version the version", async () => {
  const help = await runCli(["help"]);
  assert.equal(help.code, 0);
  assert.equal((await runCli(["--help"])).stdout, help.stdout);
  for (const command of COMMANDS) assert.ok(help.stdout.includes(`relay ${command.name}`));
  assert.match(help.stdout, /Exit codes: 0 success; 1 .*\n.*2 a usage .*3 the relay refused/);
  const expected = `relay ${VERSION} (deno ${Deno.version.deno})\n`;
  for (const args of [["version"], ["--version"], ["-V"]]) {
    assert.deepEqual(await runCli(args), { code: 0, stdout: expected, stderr: "" });
  }
});

Deno.test("relay refuses an unknown command or option with exit 2, one line and a suggestion, never the parser's text", async () => {
  const cases: Array<[string[], string]> = [
    [["pul"], 'relay: unknown command "pul" (did you mean "pull"?); see relay --help'],
    [["sumbit", "x"], 'relay: unknown command "sumbit" (did you mean "submit"?); see relay --help'],
    [["frobnicate"], 'relay: unknown command "frobnicate"; see relay --help'],
    [["help", "pul"], 'relay: unknown command "pul" (did you mean "pull"?); see relay --help'],
    [
      ["keys", "lst"],
      'relay: unknown command "keys lst" (did you mean "keys list"?); see relay help keys',
    ],
    [
      ["pull", "--queu", "qa"],
      "relay: unknown option --queu for relay pull (did you mean --queue?); see relay pull --help",
    ],
    [
      ["work", "--atempts", "2", "--", "cat"],
      "relay: unknown option --atempts for relay work (did you mean --attempts?); " +
      "see relay work --help",
    ],
    [["pull", "--bogus"], "relay: unknown option --bogus for relay pull; see relay pull --help"],
    [["pull", "-x"], "relay: unknown option -x for relay pull; see relay pull --help"],
    [
      ["pull", "extra"],
      'relay: pull takes no arguments (got "extra"); see relay pull --help',
    ],
    [["peek", "--json=yes"], 'relay: --json takes no value (got "yes"); see relay peek --help'],
    [
      ["results", "--limit"],
      'relay: --limit needs a value (--limit N; a value that starts with "-" goes as ' +
      "--limit=-…); see relay results --help",
    ],
    [
      ["--prot", "80"],
      "relay: unknown option --prot for relay serve (did you mean --port?); " +
      "see relay serve --help",
    ],
  ];
  for (const [args, line] of cases) {
    const out = await runCli(args);
    assert.equal(out.code, 2, args.join(" "));
    assert.equal(out.stdout, "", args.join(" "));
    assert.equal(out.stderr, `${line}\n`, args.join(" "));
    assert.ok(!/Unknown option '|To specify a positional|ERR_PARSE_ARGS/.test(out.stderr));
  }
});

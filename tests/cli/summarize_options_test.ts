/**
 * `relay work --summarize`'s options: the endpoint's key comes from `--summarize-key-file` or
 * from the command's environment (`RELAY_SUMMARIZE_KEY`), read through the command's
 * surroundings like every other variable, so that a command run in process sees the
 * environment it was given.
 *
 * @module
 */

import assert from "node:assert/strict";
import { parseCommandArgs } from "../../src/cli/command.ts";
import { summarizeSettings } from "../../src/cli/summarize_options.ts";
import { WORK_COMMANDS } from "../../src/cli/work_command.ts";

const ARGV = [
  "--queue",
  "general",
  "--extract",
  "--summarize",
  "--summarize-url",
  "http://127.0.0.1:2/v1",
  "--summarize-model",
  "tiny",
];

Deno.test("--summarize takes RELAY_SUMMARIZE_KEY from the command's environment, not the process's", () => {
  const args = parseCommandArgs(WORK_COMMANDS[0]!, ARGV);
  assert.notEqual(args, "help");
  if (args === "help") return;
  const given = (name: string) => name === "RELAY_SUMMARIZE_KEY" ? "  given-key \n" : undefined;
  assert.equal(summarizeSettings(args, given)?.key, "given-key");
  const before = Deno.env.get("RELAY_SUMMARIZE_KEY");
  Deno.env.set("RELAY_SUMMARIZE_KEY", "the-test-process-key");
  try {
    assert.equal(summarizeSettings(args, () => undefined)?.key, undefined);
  } finally {
    if (before === undefined) Deno.env.delete("RELAY_SUMMARIZE_KEY");
    else Deno.env.set("RELAY_SUMMARIZE_KEY", before);
  }
});

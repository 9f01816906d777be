/**
 * A test entry script: `relay serve` whose podcast worker stops for good at one step of an
 * episode's life, so that the crash test can kill the relay exactly there. The step is the
 * first argument (`started`, `appended`, …; see PODCAST_STEPS); the rest are `serve`'s own
 * (`serve` itself may come first). Run like main.ts, with the relay's permission set.
 *
 * @module
 */

import { type CommandIo, processIo, reportError } from "../../src/cli/io.ts";
import { runCommand, VERSION } from "../../src/cli/run_command.ts";
import { serveCommand } from "../../src/cli/serve.ts";
import { PODCAST_STEPS } from "../../src/builtin/podcast.ts";

const [step, ...rest] = Deno.args;
const pauseAt = PODCAST_STEPS.find((known) => known === step);
if (pauseAt === undefined) {
  console.error(
    `usage: _paused_relay.ts STEP [serve options]: STEP is ${PODCAST_STEPS.join(", ")}`,
  );
  Deno.exit(2);
}
const stop = new AbortController();
const io: CommandIo = processIo(stop.signal);
const args = rest[0] === "serve" ? rest.slice(1) : rest;
try {
  Deno.exit(await runCommand(serveCommand(VERSION, { podcastPauseAt: pauseAt }), args, io, stop));
} catch (error) {
  Deno.exit(reportError(error, io));
}

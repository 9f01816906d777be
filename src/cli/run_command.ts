/**
 * What both `main` and the command table need: the version, the `serve` command, and
 * running one command with its arguments. Apart from main.ts so that the command table
 * (commands.ts), which `main` loads only for a command other than `serve`, imports it
 * without an import cycle.
 *
 * @module
 */

import denoConfig from "../../deno.json" with { type: "json" };
import { type Command, parseCommandArgs } from "./command.ts";
import { commandHelp } from "./help.ts";
import type { CommandIo } from "./io.ts";
import { serveCommand } from "./serve.ts";

/** The relay's version, from `deno.json`. */
export const VERSION: string = denoConfig.version;

/** The `serve` command, the default when no command is given. */
export const SERVE: Command = serveCommand(VERSION);

/**
 * Parses `argv` for `command` and runs it; a long-running command gets SIGINT/SIGTERM as
 * `io.signal` (through `stop`).
 *
 * @param stop Aborted on SIGINT/SIGTERM; `undefined` when the caller handles signals
 *   (tests), and then no listener is added.
 * @returns The command's exit code; 0 after printing its help for `--help`.
 * @throws {UsageError} for arguments the command does not take, and what the command throws.
 */
export async function runCommand(
  command: Command,
  argv: readonly string[],
  io: CommandIo,
  stop: AbortController | undefined,
): Promise<number> {
  const args = parseCommandArgs(command, argv);
  if (args === "help") {
    io.out(commandHelp(command));
    return 0;
  }
  if (!command.longRunning || stop === undefined) return await command.run(args, io);
  const abort = () => stop.abort();
  for (const signal of ["SIGINT", "SIGTERM"] as const) Deno.addSignalListener(signal, abort);
  try {
    return await command.run(args, io);
  } finally {
    for (const signal of ["SIGINT", "SIGTERM"] as const) Deno.removeSignalListener(signal, abort);
  }
}

/**
 * The command line: `relay [serve] [options]`, `relay <command> [options]`,
 * `relay help [<command>]`, `relay version`. One table, `COMMANDS` in commands.ts, holds
 * every command with its synopsis, options and help; `main` finds the command, parses its
 * arguments, runs it and maps whatever it throws to an exit code (docs/cli.md).
 *
 * Serving needs none of the other commands: `main` runs `serve` without loading the
 * table, whose modules (the HTTP client, `relay work`, the key and backup commands) are
 * loaded only when another command is named. The relay's idle memory holds the source
 * text of every module loaded (docs/benchmarks.md, "Idle memory"). The other way round,
 * `serve` loads the server and the store only when it runs, and so do the commands that
 * need them (`relay work`, export and import): a client command starts with the command
 * line, the table and the HTTP client alone.
 *
 * @module
 */

import { type CommandIo, processIo, reportError } from "./io.ts";
import { runCommand, SERVE } from "./run_command.ts";

export { VERSION } from "./run_command.ts";

/** The first words that are not a command but ask for help or the version. */
const NOT_SERVE_OPTIONS = new Set(["--help", "-h", "--version", "-V"]);

/**
 * The arguments of `serve` when `args` run the relay (no command, only server options, or
 * `serve`), else `undefined`.
 */
function serveArgs(args: readonly string[]): readonly string[] | undefined {
  const [first, ...rest] = args;
  if (first === undefined) return [];
  if (first === "serve") return rest;
  if (first.startsWith("-") && !NOT_SERVE_OPTIONS.has(first)) return args;
  return undefined;
}

/**
 * Runs the command line.
 *
 * @param args The arguments after the program name.
 * @param io The surroundings; default the real process's (stdout, stderr, stdin, and
 *   SIGINT/SIGTERM for the long-running commands).
 * @param place Where the real process's surroundings differ from the defaults: the
 *   service's data directory (a test entry script points it away from the machine's).
 * @returns The exit code (docs/cli/commands.md, "Exit codes"); messages go to stdout and stderr.
 */
export async function main(
  args: readonly string[],
  io?: CommandIo,
  place: { systemDataDir?: string } = {},
): Promise<number> {
  const stop = io === undefined ? new AbortController() : undefined;
  const surroundings = io ?? { ...processIo(stop!.signal), ...place };
  try {
    const serving = serveArgs(args);
    if (serving !== undefined) return await runCommand(SERVE, serving, surroundings, stop);
    const { dispatch } = await import("./commands.ts");
    return await dispatch(args, surroundings, stop);
  } catch (error) {
    return reportError(error, surroundings);
  }
}

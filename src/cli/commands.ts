/**
 * Every command but `serve`, and what finds one by its words: the command table
 * ({@linkcode COMMANDS}, with `serve`), `relay help`, `relay version`, suggestions for a
 * mistyped command. `main` loads this module only when a command other than `serve` is
 * named, so that a serving relay does not hold the client commands' code (about 2 MB
 * resident, docs/benchmarks.md, "Idle memory").
 *
 * @module
 */

import { BACKUP_COMMANDS } from "./backup_commands.ts";
import { QUEUE_COMMANDS } from "./client_commands.ts";
import { type Command, suggest } from "./command.ts";
import { commandHelp, commandList, groupHelp, optionLines } from "./help.ts";
import { type CommandIo, UsageError } from "./io.ts";
import { KEYS_COMMANDS } from "./keys_commands.ts";
import { LOGIN_COMMANDS } from "./login_command.ts";
import { runCommand, SERVE, VERSION } from "./run_command.ts";
import { PUBLISH_COMMANDS } from "./publish_commands.ts";
import { WORK_COMMANDS } from "./work_command.ts";
import { SEARCH_COMMANDS } from "./search_command.ts";
import { CLIENT_OPTIONS } from "./client_config.ts";

/** Every command, in help order. */
export const COMMANDS: readonly Command[] = [
  SERVE,
  ...QUEUE_COMMANDS,
  ...WORK_COMMANDS,
  ...SEARCH_COMMANDS,
  ...PUBLISH_COMMANDS,
  ...LOGIN_COMMANDS,
  ...BACKUP_COMMANDS,
  ...KEYS_COMMANDS,
];

/** Groups of commands named by two words, e.g. `keys` for `keys add`. */
const GROUPS = [
  ...new Set(COMMANDS.flatMap((c) => c.name.includes(" ") ? [c.name.split(" ")[0]!] : [])),
];

/** The text of `relay help` and `relay --help`. */
function overview(): string {
  const client = COMMANDS.filter((c) => c !== SERVE);
  return [
    `relay ${VERSION}: a small HTTP relay for links, text and results`,
    "",
    "Usage: relay [serve] [options]     run the relay",
    "       relay <command> [options]   talk to a running relay, or manage its data",
    "       relay help [<command>]      a command's options, defaults and environment variables",
    "       relay version               print the version",
    "",
    "Server options (relay serve):",
    ...optionLines(SERVE.options),
    "",
    SERVE.help ?? "",
    "",
    "Commands:",
    ...commandList(client),
    "",
    "Options of the commands that talk to a relay:",
    ...optionLines(CLIENT_OPTIONS),
    "  (the key itself comes from RELAY_API_KEY, never from a flag; relay login saves URL and key)",
    "",
    "Exit codes: 0 success; 1 the relay could not be reached, timed out or failed (5xx), or",
    "the command failed; 2 a usage or configuration error; 3 the relay refused the request (4xx).",
  ].join("\n");
}

function versionLine(): string {
  return `relay ${VERSION} (deno ${Deno.version.deno})`;
}

/**
 * Finds the command that `words` start with.
 *
 * @returns The command and how many words name it, or the group when the words name a
 *   group and nothing more.
 * @throws {UsageError} for an unknown command, with a suggestion when one is close.
 */
function findCommand(words: readonly string[]): { command: Command; used: number } | string {
  const [first = "", second] = words;
  if (GROUPS.includes(first)) {
    if (second === undefined || second.startsWith("-")) return first;
    const name = `${first} ${second}`;
    const command = COMMANDS.find((c) => c.name === name);
    if (command !== undefined) return { command, used: 2 };
    const names = COMMANDS.filter((c) => c.name.startsWith(`${first} `)).map((c) => c.name);
    throw unknown(name, names, `relay help ${first}`);
  }
  const command = COMMANDS.find((c) => c.name === first);
  if (command !== undefined) return { command, used: 1 };
  const names = [...COMMANDS.map((c) => c.name.split(" ")[0]!), "help", "version"];
  throw unknown(first, [...new Set(names)], "relay --help");
}

function unknown(name: string, candidates: readonly string[], hint: string): UsageError {
  const guess = suggest(name, candidates);
  return new UsageError(
    `unknown command "${name}"${guess === undefined ? "" : ` (did you mean "${guess}"?)`}`,
    hint,
  );
}

/** `relay help [<command>]`. */
function help(words: readonly string[], io: CommandIo): number {
  if (words.length === 0) {
    io.out(overview());
    return 0;
  }
  const found = findCommand(words);
  if (typeof found === "string") {
    io.out(groupHelp(found, COMMANDS.filter((c) => c.name.startsWith(`${found} `))));
    return 0;
  }
  if (words.length > found.used) {
    throw new UsageError(`help takes one command, e.g. relay help pull`, "relay --help");
  }
  io.out(commandHelp(found.command));
  return 0;
}

/**
 * Runs the command that `args` name (or `help`, `version`, or `serve` when they start with
 * an option).
 *
 * @param stop Aborted on SIGINT/SIGTERM for a long-running command; `undefined` in tests.
 * @returns The command's exit code.
 * @throws {UsageError} for an unknown command or bad arguments, and what the command throws.
 */
export async function dispatch(
  args: readonly string[],
  io: CommandIo,
  stop: AbortController | undefined,
): Promise<number> {
  const [first, ...rest] = args;
  if (first === "version" || first === "--version" || first === "-V") {
    if (rest.length > 0) throw new UsageError("version takes no arguments");
    io.out(versionLine());
    return 0;
  }
  if (first === "help" || first === "--help" || first === "-h") return help(rest, io);
  if (first === undefined || first.startsWith("-")) return await runCommand(SERVE, args, io, stop);
  const found = findCommand(args);
  if (typeof found === "string") {
    if (rest.includes("--help") || rest.includes("-h")) return help([found], io);
    const names = COMMANDS.filter((c) => c.name.startsWith(`${found} `))
      .map((c) => c.name.split(" ")[1]);
    throw new UsageError(`${found} needs a command: ${names.join(", ")}`, `relay help ${found}`);
  }
  return await runCommand(found.command, args.slice(found.used), io, stop);
}

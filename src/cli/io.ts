/**
 * What every command needs from its surroundings ({@linkcode CommandIo}), the exit codes
 * of the command line, and the one function that turns a thrown error into an exit code
 * and one line on stderr (docs/cli/commands.md, "Exit codes").
 *
 * @module
 */

import { RelayError } from "../client/relay_error.ts";
import { ConfigError } from "../config/config.ts";
import { errorMessage } from "../errors.ts";
import { DatabaseInUseError } from "../store/lock.ts";
import { CannotStartError } from "../client/run.ts";

/**
 * Exit code: a failure at run time: the relay could not be reached, timed out or answered
 * 5xx; `relay work`'s command cannot start; a local operation failed (database in use).
 */
export const EXIT_FAILURE = 1;
/** Exit code: a bad command line or configuration; nothing was sent to the relay. */
export const EXIT_USAGE = 2;
/** Exit code: the relay answered with a client error (4xx): bad input, key, scope, 429. */
export const EXIT_REFUSED = 3;

/** What a command needs from its surroundings; `main` passes the real ones. */
export interface CommandIo {
  /** Reads an environment variable. */
  env: (name: string) => string | undefined;
  /** Prints a line of output (stdout), adding the newline. */
  out: (line: string) => void;
  /** Writes bytes or text to stdout exactly as given (for `-0` output). */
  write: (data: string | Uint8Array) => void;
  /** Prints a line of diagnostics (stderr), adding the newline. */
  err: (line: string) => void;
  /** Reads all of stdin, for `-` arguments: its bytes, which the command decodes. */
  stdin: () => Promise<Uint8Array>;
  /**
   * Reads a secret: with a terminal on stdin, prompts on stderr and reads one line without
   * echoing it; otherwise reads all of stdin. Trimmed.
   */
  readSecret: (prompt: string) => Promise<string>;
  /** Aborts on SIGINT/SIGTERM, for the long-running commands (`work`, `results --follow`). */
  signal: AbortSignal;
  /**
   * The relay's data directory under systemd, where commands run on the relay's machine look
   * for its database and key when `./data` has none; default `/var/lib/relay`
   * (docs/cli/commands.md, "Finding the relay and the key"). Tests point it elsewhere, so that a relay installed on the
   * machine running them is never touched.
   */
  systemDataDir?: string;
}

/**
 * A bad command line: an unknown option, a missing argument, an invalid value. Printed as
 * one line that points at the command's help; exit code {@linkcode EXIT_USAGE}.
 */
export class UsageError extends Error {
  /**
   * @param message What is wrong, e.g. `invalid --limit "x": must be a whole number`.
   * @param hint Where to read more, e.g. `relay pull --help`; default `relay --help`; `""`
   *   when the message says all there is to say.
   */
  constructor(message: string, readonly hint = "relay --help") {
    super(message);
    this.name = "UsageError";
  }
}

/**
 * A command that failed at run time for a reason it already explained in its message (not
 * a bug): exit code {@linkcode EXIT_FAILURE}.
 */
export class CommandFailure extends Error {
  /** @param message One line saying what failed and what happens now. */
  constructor(message: string) {
    super(message);
    this.name = "CommandFailure";
  }
}

/**
 * The exit code for an error a command threw (docs/cli/commands.md, "Exit codes"):
 * {@linkcode EXIT_USAGE} for a usage or configuration error, {@linkcode EXIT_REFUSED} when
 * the relay answered 4xx, {@linkcode EXIT_FAILURE} for everything else (unreachable,
 * timeout, 5xx, a local failure, a bug).
 */
export function exitCodeFor(error: unknown): number {
  if (error instanceof UsageError || error instanceof ConfigError) return EXIT_USAGE;
  if (error instanceof RelayError) {
    const status = error.status;
    return status !== undefined && status >= 400 && status < 500 ? EXIT_REFUSED : EXIT_FAILURE;
  }
  return EXIT_FAILURE;
}

/**
 * Prints `error` as one line on stderr and returns its exit code ({@linkcode exitCodeFor}).
 * A usage error points at the command's help; an error that is not one of the relay's own
 * (a bug, an unexpected system error) says so.
 */
export function reportError(error: unknown, io: Pick<CommandIo, "err">): number {
  const code = exitCodeFor(error);
  if (error instanceof UsageError) {
    io.err(`relay: ${error.message}${error.hint === "" ? "" : `; see ${error.hint}`}`);
  } else if (known(error)) io.err(`relay: ${errorMessage(error)}`);
  else io.err(`relay: unexpected error: ${firstLine(errorMessage(error))}`);
  return code;
}

function known(error: unknown): boolean {
  return error instanceof ConfigError || error instanceof RelayError ||
    error instanceof CommandFailure || error instanceof DatabaseInUseError ||
    error instanceof CannotStartError;
}

function firstLine(text: string): string {
  return text.split("\n")[0] ?? "";
}

const encoder = new TextEncoder();

function writeAll(file: { writeSync(data: Uint8Array): number }, data: Uint8Array): void {
  for (let done = 0; done < data.length;) done += file.writeSync(data.subarray(done));
}

/** Reads one line from a terminal without echoing it (raw mode), up to Enter. */
async function readHiddenLine(): Promise<string> {
  Deno.stdin.setRaw(true);
  const bytes: number[] = [];
  const buffer = new Uint8Array(64);
  try {
    for (;;) {
      const n = await Deno.stdin.read(buffer);
      if (n === null) break;
      for (const byte of buffer.subarray(0, n)) {
        if (byte === 0x0d || byte === 0x0a) return new TextDecoder().decode(Uint8Array.from(bytes));
        if (byte === 0x03) throw new UsageError("cancelled");
        if (byte === 0x7f || byte === 0x08) bytes.pop();
        else bytes.push(byte);
      }
    }
    return new TextDecoder().decode(Uint8Array.from(bytes));
  } finally {
    Deno.stdin.setRaw(false);
    writeAll(Deno.stderr, encoder.encode("\n"));
  }
}

/**
 * The real surroundings: this process's environment, stdout, stderr and stdin.
 *
 * @param signal Aborted on SIGINT/SIGTERM by the caller, for long-running commands.
 */
export function processIo(signal: AbortSignal): CommandIo {
  const write = (data: string | Uint8Array) =>
    writeAll(Deno.stdout, typeof data === "string" ? encoder.encode(data) : data);
  return {
    env: (name) => Deno.env.get(name),
    out: (line) => write(`${line}\n`),
    write,
    err: (line) => writeAll(Deno.stderr, encoder.encode(`${line}\n`)),
    stdin: async () => new Uint8Array(await new Response(Deno.stdin.readable).arrayBuffer()),
    readSecret: async (prompt) => {
      if (!Deno.stdin.isTerminal()) return (await new Response(Deno.stdin.readable).text()).trim();
      writeAll(Deno.stderr, encoder.encode(prompt));
      return (await readHiddenLine()).trim();
    },
    signal,
  };
}

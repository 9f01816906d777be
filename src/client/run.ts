/**
 * Running a user's command with one item on its stdin, for `relay work` and
 * `relay results --follow --exec`.
 *
 * @module
 */

import { errorMessage } from "../errors.ts";

/** The program could not be started at all: not found, not executable, not permitted. */
export class CannotStartError extends Error {
  /** The program as given, e.g. `./summarise`. */
  readonly program: string;

  /**
   * @param program The program as given.
   * @param message One line: what happened, and what the caller did about it.
   */
  constructor(program: string, message: string) {
    super(message);
    this.name = "CannotStartError";
    this.program = program;
  }
}

/**
 * Runs `command` with `input` on its stdin; its stdout and stderr go to ours.
 *
 * @returns The exit code.
 * @throws {CannotStartError} when the program cannot be started.
 */
export async function runWithInput(
  command: string[],
  input: string,
  env: Record<string, string> = {},
): Promise<number> {
  const result = await runCapturing(command, input, env, "inherit");
  return result.code;
}

/**
 * Runs `command` with `input` on its stdin and returns its exit code and stdout (when
 * `stdout` is `"piped"`; `undefined` when what it printed is not UTF-8, which is never
 * replaced by U+FFFD). Its stderr goes to ours.
 *
 * @throws {CannotStartError} when the program cannot be started (not found, not
 *   executable): nothing ran.
 */
export async function runCapturing(
  command: string[],
  input: string,
  env: Record<string, string> = {},
  stdout: "piped" | "inherit" = "piped",
): Promise<{ code: number; stdout: string | undefined }> {
  const [program, ...args] = command;
  if (program === undefined) throw new CannotStartError("", "no command to run");
  let child: Deno.ChildProcess;
  try {
    child = new Deno.Command(program, { args, env, stdin: "piped", stdout, stderr: "inherit" })
      .spawn();
  } catch (error) {
    throw new CannotStartError(program, `cannot run "${program}": ${startFailure(error)}`);
  }
  const writer = child.stdin.getWriter();
  // A command that does not read its input closes the pipe early: not an error here.
  await writer.write(new TextEncoder().encode(input)).catch(() => {});
  await writer.close().catch(() => {});
  if (stdout === "inherit") return { code: (await child.status).code, stdout: "" };
  const output = await child.output();
  try {
    return {
      code: output.code,
      stdout: new TextDecoder("utf-8", { fatal: true }).decode(output.stdout),
    };
  } catch {
    return { code: output.code, stdout: undefined };
  }
}

/** Why a program did not start, in a few words. */
function startFailure(error: unknown): string {
  if (error instanceof Deno.errors.NotFound) return "no such program (check the name and PATH)";
  if (error instanceof Deno.errors.PermissionDenied) return "not executable (permission denied)";
  return errorMessage(error).split("\n")[0] ?? "";
}

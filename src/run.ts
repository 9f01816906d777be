/**
 * Running a user's command with one item on its stdin, for `relay work` and
 * `relay results --follow --exec`.
 *
 * @module
 */

import { errorMessage } from "./errors.ts";

/**
 * Runs `command` with `input` on its stdin; its stdout and stderr go to ours.
 *
 * @returns The exit code (127 when the program cannot be started).
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
 * `stdout` is `"piped"`). Its stderr goes to ours.
 *
 * @returns `code` 127 when the program cannot be started.
 */
export async function runCapturing(
  command: string[],
  input: string,
  env: Record<string, string> = {},
  stdout: "piped" | "inherit" = "piped",
): Promise<{ code: number; stdout: string }> {
  const [program, ...args] = command;
  if (program === undefined) return { code: 127, stdout: "" };
  let child: Deno.ChildProcess;
  try {
    child = new Deno.Command(program, { args, env, stdin: "piped", stdout, stderr: "inherit" })
      .spawn();
  } catch (error) {
    console.error(`relay: cannot run "${program}": ${errorMessage(error)}`);
    return { code: 127, stdout: "" };
  }
  const writer = child.stdin.getWriter();
  // A command that does not read its input closes the pipe early: not an error here.
  await writer.write(new TextEncoder().encode(input)).catch(() => {});
  await writer.close().catch(() => {});
  if (stdout === "inherit") return { code: (await child.status).code, stdout: "" };
  const output = await child.output();
  return { code: output.code, stdout: new TextDecoder().decode(output.stdout) };
}

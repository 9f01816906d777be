/**
 * The command line run in the test process: `main` with surroundings the test gives
 * (environment, stdin) and its output captured, for tests about what a command prints and
 * which exit code it returns. Starting `deno run` for each command costs about 0.45 s of CPU
 * in module loading alone; in process it costs next to nothing. Tests about the process
 * itself (signals, a real stdin pipe or terminal, the umask, the permission flags, the
 * entry script, the compiled binary) start a real one with `runRelay` (tests/_helpers.ts).
 *
 * @module
 */

import { main } from "../src/cli/main.ts";
import type { CommandIo } from "../src/cli/io.ts";
import { NO_SUCH_DIR } from "./_relay.ts";

/** What a command run by {@linkcode runCli} left: the same shape as `runRelay`'s. */
export interface CliRun {
  /** The exit code `main` returned. */
  code: number;
  /** Everything written to stdout, bytes decoded as UTF-8 once at the end. */
  stdout: string;
  /** Everything written to stderr. */
  stderr: string;
}

const encoder = new TextEncoder();

/**
 * Runs `relay <args>` in this process and returns its exit code and output.
 *
 * The command sees only `options.env` (plus `XDG_CONFIG_HOME` pointing at a directory that
 * does not exist, as `runRelay`'s children get, unless the record sets it), never this
 * process's environment; its stdin is `options.stdin` (text as UTF-8, bytes as they are; empty
 * when not given), also what a secret prompt reads, as with a pipe; the service's data
 * directory is `options.systemDataDir`, by default one that does not exist. Stdout is kept as
 * bytes and decoded once, so `-0` output arrives exactly as a pipe would carry it.
 *
 * Relative paths resolve against this process's working directory (the checkout, under
 * `deno task test`): a process-wide `chdir` would move the files running beside this one under
 * `--parallel`, so `options.cwd` is accepted only when it is that directory already; a test
 * that needs another runs the real process.
 *
 * @throws Error when `options.cwd` is not this process's working directory.
 */
export async function runCli(
  args: string[],
  options: {
    env?: Record<string, string>;
    stdin?: string | Uint8Array;
    cwd?: string;
    systemDataDir?: string;
  } = {},
): Promise<CliRun> {
  if (options.cwd !== undefined && !sameDir(options.cwd, Deno.cwd())) {
    throw new Error(`runCli cannot run in ${options.cwd}: use runRelay for another directory`);
  }
  const env: Record<string, string> = { XDG_CONFIG_HOME: NO_SUCH_DIR, ...options.env };
  const input = typeof options.stdin === "string"
    ? encoder.encode(options.stdin)
    : options.stdin ?? new Uint8Array();
  const out: Uint8Array[] = [];
  let err = "";
  const write = (data: string | Uint8Array) =>
    void out.push(typeof data === "string" ? encoder.encode(data) : data.slice());
  const io: CommandIo = {
    env: (name) => Object.hasOwn(env, name) ? env[name] : undefined,
    out: (line) => write(`${line}\n`),
    write,
    err: (line) => void (err += `${line}\n`),
    stdin: () => Promise.resolve(input.slice()),
    readSecret: () => Promise.resolve(new TextDecoder().decode(input).trim()),
    signal: new AbortController().signal,
    systemDataDir: options.systemDataDir ?? NO_SUCH_DIR,
  };
  const code = await main(args, io);
  const bytes = new Uint8Array(out.reduce((sum, chunk) => sum + chunk.length, 0));
  let at = 0;
  for (const chunk of out) {
    bytes.set(chunk, at);
    at += chunk.length;
  }
  return { code, stdout: new TextDecoder().decode(bytes), stderr: err };
}

function sameDir(a: string, b: string): boolean {
  return a.replace(/\/+$/, "") === b.replace(/\/+$/, "");
}

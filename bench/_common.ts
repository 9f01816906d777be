/**
 * What the bench scripts share (`bench.ts`, `store.ts`): a process's main-thread CPU time,
 * and command-line options that end the script with its usage, exit code 2, on a mistake.
 *
 * @module
 */

/**
 * CPU time of the main thread of process `pid` so far (utime + stime of
 * `/proc/<pid>/task/<pid>/stat`, in clock ticks of 10 ms), µs.
 *
 * @throws {Deno.errors.NotFound} when there is no such process.
 */
export function mainThreadCpuUs(pid: number): number {
  const stat = Deno.readTextFileSync(`/proc/${pid}/task/${pid}/stat`);
  // Fields after the command name (which may hold spaces): state is field 3.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const ticks = Number(fields[11]) + Number(fields[12]); // utime, stime (fields 14, 15)
  return ticks * 10_000; // CLK_TCK is 100 on Linux
}

/** A bench script's name and usage text, for its messages about options. */
export interface Usage {
  /** The name its messages start with, e.g. `bench`. */
  readonly program: string;
  /** The usage text printed after a message and by `--help`. */
  readonly text: string;
}

/** Prints `<program>: <message>` and the usage to standard error and exits with code 2. */
export function usageError(usage: Usage, message: string): never {
  console.error(`${usage.program}: ${message}\n${usage.text}`);
  Deno.exit(2);
}

/**
 * Runs `parse` (a `parseArgs` call); what it throws (an unknown option, a missing value)
 * ends the script with {@linkcode usageError}.
 */
export function parseOrExit<T>(usage: Usage, parse: () => T): T {
  try {
    return parse();
  } catch (error) {
    usageError(usage, error instanceof Error ? error.message : String(error));
  }
}

/**
 * `text`, the value of `option`, as a whole number of at least `least`; anything else ends
 * the script with {@linkcode usageError}.
 */
export function wholeNumber(usage: Usage, option: string, text: string, least: number): number {
  const n = Number(text);
  if (Number.isInteger(n) && n >= least) return n;
  usageError(usage, `${option} ${text}: give a whole number of at least ${least}`);
}

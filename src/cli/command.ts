/**
 * The shape of a command in the command table ({@linkcode Command}, {@linkcode OptionSpec})
 * and the parsing of its arguments: `node:util`'s `parseArgs`, whose errors are told apart
 * by their `code` and turned into one line naming the argument at fault, with a "did you
 * mean" suggestion for a misspelt option.
 *
 * @module
 */

import { parseArgs } from "node:util";
import type { CommandIo } from "./io.ts";
import { UsageError } from "./io.ts";

/** One option of a command, as parsed and as shown in its help. */
export interface OptionSpec {
  /** Long name without dashes, e.g. `"queue"`. */
  readonly name: string;
  /** One-character short name, e.g. `"q"` for `-q`. */
  readonly short?: string;
  /** `"string"` takes a value; `"boolean"` is a switch. */
  readonly type: "string" | "boolean";
  /** May be given more than once (values collected in order). */
  readonly multiple?: boolean;
  /** Placeholder of the value in help, e.g. `"URL"`. */
  readonly value?: string;
  /** One line of help. */
  readonly help: string;
  /** The default as help shows it, when there is one. */
  readonly default?: string;
  /** The environment variable that sets it, when there is one. */
  readonly env?: string;
}

/** One entry of the command table. */
export interface Command {
  /** The words that name it, e.g. `"pull"` or `"keys add"`. */
  readonly name: string;
  /** What follows the name in a usage line, e.g. `"[--queue Q] [--json | -0]"`. */
  readonly synopsis: string;
  /** One line for the overview (`relay help`). */
  readonly summary: string;
  /** Paragraphs for `relay help <command>`, when there is more to say. */
  readonly help?: string;
  /** Its options; `--help` is added to every command. */
  readonly options: readonly OptionSpec[];
  /** Whether it takes arguments besides options. */
  readonly positionals?: boolean;
  /** Whether it runs until SIGINT/SIGTERM (then `io.signal` aborts instead of killing it). */
  readonly longRunning?: boolean;
  /**
   * Runs the command.
   *
   * @returns The exit code (docs/cli/commands.md, "Exit codes").
   * @throws Any error; `main` maps it with `exitCodeFor`.
   */
  run(args: Args, io: CommandIo): Promise<number>;
}

/** The parsed arguments of a command. Asking for an undeclared option is a bug and throws. */
export class Args {
  readonly #command: Command;
  readonly #values: Record<string, string | boolean | (string | boolean)[] | undefined>;
  /** The arguments that are not options, in order. */
  readonly positionals: readonly string[];

  /**
   * @param command The command they belong to.
   * @param values Option values by long name, as `parseArgs` returns them.
   * @param positionals The other arguments.
   */
  constructor(
    command: Command,
    values: Record<string, string | boolean | (string | boolean)[] | undefined>,
    positionals: readonly string[],
  ) {
    this.#command = command;
    this.#values = values;
    this.positionals = positionals;
  }

  #spec(name: string, type: "string" | "boolean"): OptionSpec {
    const spec = this.#command.options.find((o) => o.name === name);
    if (spec?.type !== type) {
      throw new Error(`relay ${this.#command.name} has no ${type} --${name}`);
    }
    return spec;
  }

  /** Whether the command has the option `name` (asking for one it has not is a bug). */
  declares(name: string): boolean {
    return this.#command.options.some((o) => o.name === name);
  }

  /** A string option's value (the last one when repeated), or `undefined`. */
  string(name: string): string | undefined {
    this.#spec(name, "string");
    const value = this.#values[name];
    const last = Array.isArray(value) ? value.at(-1) : value;
    return typeof last === "string" ? last : undefined;
  }

  /** Every value of a repeatable string option, in order. */
  list(name: string): string[] {
    this.#spec(name, "string");
    const value = this.#values[name];
    return (Array.isArray(value) ? value : [value]).filter((v) => typeof v === "string");
  }

  /** Whether a switch was given. */
  flag(name: string): boolean {
    this.#spec(name, "boolean");
    return this.#values[name] === true;
  }

  /** The usage hint of this command, for messages: `relay <name> --help`. */
  get hint(): string {
    return `relay ${this.#command.name} --help`;
  }

  /** A usage error of this command, pointing at its help. */
  usage(message: string): UsageError {
    return new UsageError(message, this.hint);
  }

  /** A usage error saying what the command lacks: `<name> needs <what>`. */
  needs(what: string): UsageError {
    return this.usage(`${this.#command.name} needs ${what}`);
  }
}

/** The `--help` switch every command has. */
const HELP_OPTION: OptionSpec = {
  name: "help",
  short: "h",
  type: "boolean",
  help: "show this help",
};

/** A command's options with `--help`. */
export function allOptions(command: Command): OptionSpec[] {
  return [...command.options, HELP_OPTION];
}

type ParseConfig = Parameters<typeof parseArgs>[0] & object;

function parseOptions(command: Command): NonNullable<ParseConfig["options"]> {
  return Object.fromEntries(
    allOptions(command).map((o) => [o.name, {
      type: o.type,
      ...(o.short === undefined ? {} : { short: o.short }),
      ...(o.multiple ? { multiple: true } : {}),
    }]),
  );
}

/**
 * Parses a command's arguments.
 *
 * @returns `"help"` when `--help` or `-h` comes before any `--`, else the parsed arguments.
 * @throws {UsageError} naming the first unknown option (with a suggestion), the option that
 *   lacks a value or should have none, or the unexpected argument.
 */
export function parseCommandArgs(command: Command, argv: readonly string[]): Args | "help" {
  const options = parseOptions(command);
  const loose = parseArgs({
    args: [...argv],
    options,
    strict: false,
    allowPositionals: true,
    tokens: true,
  });
  const end = loose.tokens.findIndex((t) => t.kind === "option-terminator");
  const beforeEnd = end === -1 ? loose.tokens : loose.tokens.slice(0, end);
  if (beforeEnd.some((t) => t.kind === "option" && t.name === "help")) return "help";
  try {
    const parsed = parseArgs({
      args: [...argv],
      options,
      strict: true,
      allowPositionals: command.positionals ?? false,
    });
    return new Args(command, parsed.values, parsed.positionals);
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (typeof code !== "string" || !code.startsWith("ERR_PARSE_ARGS_")) throw error;
    throw new UsageError(
      describeParseError(command, code, loose.tokens),
      `relay ${command.name} --help`,
    );
  }
}

type Token = ReturnType<typeof parseArgs>["tokens"] extends (infer T)[] | undefined ? T
  : never;

/** One sentence for a `parseArgs` error, from its code and the tokens of a lenient parse. */
function describeParseError(command: Command, code: string, tokens: readonly Token[]): string {
  const specs = allOptions(command);
  const byName = new Map(specs.map((o) => [o.name, o]));
  const shorts = new Set(specs.flatMap((o) => (o.short === undefined ? [] : [o.short])));
  const options = tokens.filter((t) => t.kind === "option");
  if (code === "ERR_PARSE_ARGS_UNKNOWN_OPTION") {
    const bad = options.find((t) =>
      t.rawName.startsWith("--") ? !byName.has(t.name) : !shorts.has(t.rawName.slice(1))
    );
    const raw = bad?.rawName ?? "";
    const names = specs.map((o) => `--${o.name}`);
    const guess = raw.startsWith("--") ? suggest(raw, names) : undefined;
    return `unknown option ${raw} for relay ${command.name}` +
      (guess === undefined ? "" : ` (did you mean ${guess}?)`);
  }
  if (code === "ERR_PARSE_ARGS_INVALID_OPTION_VALUE") {
    for (const token of options) {
      const spec = byName.get(token.name);
      if (spec?.type === "boolean" && token.value !== undefined) {
        return `--${spec.name} takes no value (got "${token.value}")`;
      }
      if (
        spec?.type === "string" &&
        (token.value === undefined || (!token.inlineValue && token.value.startsWith("-")))
      ) {
        const placeholder = spec.value ?? "VALUE";
        return `--${spec.name} needs a value (--${spec.name} ${placeholder}` +
          `; a value that starts with "-" goes as --${spec.name}=-…)`;
      }
    }
    return "an option has an invalid value";
  }
  if (code === "ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL") {
    const extra = tokens.find((t) => t.kind === "positional");
    return `${command.name} takes no arguments` +
      (extra?.kind === "positional" ? ` (got "${extra.value}")` : "");
  }
  return "the arguments cannot be read";
}

/**
 * The candidate closest to `word` when it is close enough to be a likely typo: an edit
 * distance (insertions, deletions, substitutions and swaps of neighbours) of at most 1 for
 * short words and 2 for longer ones, or `word` being the start of exactly one candidate.
 *
 * @returns The suggestion, or `undefined` when no candidate is close.
 */
export function suggest(word: string, candidates: readonly string[]): string | undefined {
  const limit = word.replace(/^-+/, "").length <= 4 ? 1 : 2;
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const candidate of candidates) {
    const distance = editDistance(word.toLowerCase(), candidate.toLowerCase());
    if (distance < bestDistance) [best, bestDistance] = [candidate, distance];
  }
  if (bestDistance <= limit) return best;
  const prefixed = candidates.filter((c) => word.length >= 2 && c.startsWith(word));
  return prefixed.length === 1 ? prefixed[0] : undefined;
}

/** Optimal string alignment distance: Levenshtein plus swaps of two neighbours. */
export function editDistance(a: string, b: string): number {
  const rows = Array.from({ length: a.length + 1 }, (_, i) => {
    const row = new Array<number>(b.length + 1).fill(0);
    row[0] = i;
    return row;
  });
  for (let j = 0; j <= b.length; j++) rows[0]![j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(rows[i - 1]![j]! + 1, rows[i]![j - 1]! + 1, rows[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        d = Math.min(d, rows[i - 2]![j - 2]! + 1);
      }
      rows[i]![j] = d;
    }
  }
  return rows[a.length]![b.length]!;
}

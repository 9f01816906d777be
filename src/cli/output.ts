/**
 * How `pull`, `peek` and `results` print items (docs/cli/commands.md, "Output formats"): one item
 * per line with the content escaped C-style (the default), the relay's JSON exactly
 * (`--json`), or each item's raw content followed by a NUL byte (`-0`, for `xargs -0`).
 *
 * @module
 */

import type { OptionSpec } from "./command.ts";
import { CommandFailure, type CommandIo, UsageError } from "./io.ts";

/** The output switches of the item-printing commands. */
export const OUTPUT_OPTIONS: readonly OptionSpec[] = [
  { name: "json", type: "boolean", help: "print the relay's JSON answer exactly as it came" },
  {
    name: "null",
    short: "0",
    type: "boolean",
    help: "print each item's raw content followed by a NUL byte (for xargs -0)",
  },
];

/** How to print items. */
export type OutputMode = "lines" | "json" | "null";

/**
 * The mode the switches ask for.
 *
 * @throws {UsageError} when both `--json` and `-0` are given.
 */
export function outputMode(json: boolean, nul: boolean, hint: string): OutputMode {
  if (json && nul) throw new UsageError("--json and -0 (--null) exclude each other", hint);
  return json ? "json" : nul ? "null" : "lines";
}

const ESCAPES: Record<string, string> = { "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t" };

/**
 * Characters that would break or hide a line: the backslash itself, the control characters
 * (U+0000 to U+001F and U+0080 to U+009F), DEL, and unpaired UTF-16 surrogates (never in well-formed text).
 */
const UNSAFE =
  // deno-lint-ignore no-control-regex -- control characters are what this matches
  /[\\\u0000-\u001f\u007f-\u009f]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/**
 * Escapes `text` so that it fits on one line and can be read back exactly, as git quotes
 * unusual file names: `\\`, `\n`, `\r`, `\t`; other control characters as `\xHH` (the code
 * point U+00HH); an unpaired surrogate as `\uHHHH`. Everything else, tabs aside, is kept.
 *
 * @example
 * ```ts
 * escapeLine("a\tb\nc\\d"); // "a\\tb\\nc\\\\d"
 * ```
 */
export function escapeLine(text: string): string {
  return text.replace(UNSAFE, (ch) => {
    const known = ESCAPES[ch];
    if (known !== undefined) return known;
    const code = ch.charCodeAt(0);
    const hex = code.toString(16).padStart(code <= 0xff ? 2 : 4, "0");
    return code <= 0xff ? `\\x${hex}` : `\\u${hex}`;
  });
}

/**
 * Prints each content raw, followed by a NUL byte.
 *
 * @throws {CommandFailure} before printing anything when a content itself holds a NUL
 *   byte, which this format cannot show; `onAmbiguous` is called first, so that items
 *   already taken from the relay can be printed another way instead of being lost.
 */
export function writeNulSeparated(
  contents: readonly string[],
  io: CommandIo,
  onAmbiguous: () => void = () => {},
): void {
  if (contents.some((c) => c.includes("\0"))) {
    onAmbiguous();
    throw new CommandFailure(
      "an item holds a NUL byte, which -0 cannot print unambiguously; use --json",
    );
  }
  io.write(contents.map((c) => `${c}\0`).join(""));
}

/** A time for a line of output: ISO 8601 in UTC with milliseconds. */
export function isoTime(ms: number): string {
  return new Date(ms).toISOString();
}

/**
 * Text that a command reads from standard input, a file or its arguments, before it goes
 * to the relay. The relay stores text as UTF-8 and answers 400 to bytes that are not, so
 * the command line never lets a decoder replace such bytes with U+FFFD: it refuses them
 * with one line, or converts them from the encoding that `--encoding` names (docs/cli/commands.md,
 * "Text that is not UTF-8").
 *
 * @module
 */

import type { Args, OptionSpec } from "./command.ts";
import type { CommandIo } from "./io.ts";
import { errorMessage } from "../errors.ts";

/** `--encoding`: what the text read from stdin or a file is encoded in. */
export const ENCODING_OPTION: OptionSpec = {
  name: "encoding",
  type: "string",
  value: "NAME",
  help: "encoding of text read from stdin or a file, converted to UTF-8 (e.g. windows-1252, gbk)",
  default: "utf-8",
};

/** Encodings a refusal suggests: the usual ones of Western and Chinese text files. */
const SUGGESTED = "e.g. --encoding windows-1252 or --encoding gbk";

/**
 * A decoder for `--encoding` (a WHATWG Encoding label such as `utf-8`, `latin1`,
 * `windows-1252`, `gbk`, `shift_jis`; UTF-8 for a command without the option), that
 * throws on bytes not valid in it.
 *
 * @throws {UsageError} when the label names no encoding that `TextDecoder` knows.
 */
export function inputDecoder(args: Args): TextDecoder {
  const label = (args.declares("encoding") ? args.string("encoding") : undefined) ?? "utf-8";
  try {
    return new TextDecoder(label, { fatal: true });
  } catch {
    throw args.usage(
      `invalid --encoding "${label}": not an encoding name (utf-8, windows-1252, gbk, …)`,
    );
  }
}

/**
 * `bytes` as text in the encoding of {@linkcode inputDecoder}; a byte order mark at the
 * start is dropped.
 *
 * @param origin What the bytes are, for the message: `standard input`, `"notes.md"`.
 * @throws {UsageError} when the bytes are not valid in that encoding: nothing is replaced.
 */
export function decodeInput(bytes: Uint8Array, origin: string, args: Args): string {
  const decoder = inputDecoder(args);
  try {
    return decoder.decode(bytes);
  } catch {
    throw args.usage(
      decoder.encoding === "utf-8"
        ? `${origin} is not UTF-8 text: give its encoding (${SUGGESTED}), or convert it`
        : `${origin} is not ${decoder.encoding} text: give the encoding it is in`,
    );
  }
}

/**
 * Reads a file named on the command line, `-` being standard input, as text
 * ({@linkcode decodeInput}).
 *
 * @throws {UsageError} when it cannot be read, or is not text in the encoding given.
 */
export async function readInput(path: string, io: CommandIo, args: Args): Promise<string> {
  let bytes: Uint8Array;
  try {
    bytes = path === "-" ? await io.stdin() : await Deno.readFile(path);
  } catch (error) {
    throw args.usage(`cannot read "${path}": ${errorMessage(error)}`);
  }
  return decodeInput(bytes, path === "-" ? "standard input" : `"${path}"`, args);
}

/**
 * The text a command was given as arguments: `-` alone reads standard input
 * ({@linkcode readInput}); several words are joined with spaces. (Arguments that are not
 * UTF-8 never reach it: Deno refuses them before the program starts.)
 *
 * @param needs What the command lacks when there are no words, for its usage error.
 * @throws {UsageError} when there are no words, or standard input is not text.
 */
export async function textArgument(args: Args, io: CommandIo, needs: string): Promise<string> {
  const words = args.positionals;
  if (words.length === 1 && words[0] === "-") return await readInput("-", io, args);
  if (words.length === 0) throw args.needs(needs);
  return words.join(" ");
}

/**
 * A command line split into its words as a POSIX shell would, without running a shell: the npm
 * package `shell-quote` reads `'…'` and `"…"` quotes and `\` escapes; `$NAME` stays as it is
 * (no variables), and shell syntax (`|`, `>`, `;`, `&&`, `*` patterns, `#` comments) is refused,
 * since no shell would carry it out. The household's speech command (`--speech-command`) is read
 * so, once, when the relay starts.
 *
 * `shell-quote` is loaded with the first line read, not with the relay: it is a CommonJS
 * package, and the first of those brings Node's module loader, which a relay without a speech
 * command never needs (docs/benchmarks.md, "Idle memory").
 *
 * @module
 */

/** `shell-quote`'s `parse`, once loaded. */
let parse: typeof import("shell-quote").parse | undefined;

/**
 * The words of `command`.
 *
 * @returns The program and its arguments, at least one word.
 * @throws {Error} with one sentence when the line is empty, holds shell syntax, or leaves a
 *   quote open.
 */
export async function commandWords(command: string): Promise<string[]> {
  const open = openQuote(command);
  if (open !== undefined) {
    throw new Error(`has a ${open} quote that is never closed, which a shell would refuse`);
  }
  parse ??= (await import("shell-quote")).parse;
  const words: string[] = [];
  for (const entry of parse(command, (name: string) => `$${name}`)) {
    if (typeof entry === "string") {
      words.push(entry);
      continue;
    }
    const syntax = "op" in entry ? entry.op : "#";
    throw new Error(`holds shell syntax (${syntax}), but no shell runs it: name a script instead`);
  }
  if (words.length === 0) throw new Error("is empty");
  return words;
}

/**
 * The quote left open at the end of `line`, as a POSIX shell reads quotes (`'…'` takes every
 * character as it is; in `"…"` and outside quotes a `\` escapes the next one), or `undefined`.
 * `shell-quote` would take such a line, ending the quote at the end of the line.
 */
function openQuote(line: string): "single" | "double" | undefined {
  let quote: "'" | '"' | undefined;
  for (let i = 0; i < line.length; i++) {
    const char = line[i];
    if (quote === "'") {
      if (char === "'") quote = undefined;
    } else if (char === "\\") {
      i++;
    } else if (char === '"') {
      quote = quote === '"' ? undefined : '"';
    } else if (char === "'" && quote === undefined) {
      quote = "'";
    } else if (char === "#" && quote === undefined && (i === 0 || /\s/.test(line[i - 1]!))) {
      // A comment to the end of the line (refused as shell syntax after this): its quotes
      // are words of the comment.
      break;
    }
  }
  return quote === "'" ? "single" : quote === '"' ? "double" : undefined;
}

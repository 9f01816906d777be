/**
 * The help texts, written from the command table: `relay help` (the overview) and
 * `relay help <command>` / `relay <command> --help` (every option with its default and
 * its environment variable).
 *
 * @module
 */

import { allOptions, type Command, type OptionSpec } from "./command.ts";

/** The usage line of a command: `relay <name> <synopsis>`. */
export function usageLine(command: Command): string {
  return `relay ${command.name}${command.synopsis === "" ? "" : ` ${command.synopsis}`}`;
}

function optionLabel(option: OptionSpec): string {
  const short = option.short === undefined ? "    " : `-${option.short}, `;
  const value = option.type === "string" ? ` ${option.value ?? "VALUE"}` : "";
  return `${short}--${option.name}${value}`;
}

/**
 * The lines describing `options`: the option and its help, then (indented) its
 * environment variable and default when it has them.
 */
export function optionLines(options: readonly OptionSpec[]): string[] {
  const width = Math.max(...options.map((o) => optionLabel(o).length)) + 2;
  return options.flatMap((option) => {
    const lines = [`  ${optionLabel(option).padEnd(width)}${option.help}`];
    const details = [
      ...(option.env === undefined ? [] : [`env ${option.env}`]),
      ...(option.default === undefined ? [] : [`default: ${option.default}`]),
      ...(option.multiple ? ["may be repeated"] : []),
    ];
    if (details.length > 0) lines.push(`  ${"".padEnd(width)}(${details.join("; ")})`);
    return lines;
  });
}

/** The text of `relay help <command>` and `relay <command> --help`. */
export function commandHelp(command: Command): string {
  return [
    `Usage: ${usageLine(command)}`,
    "",
    `${capitalise(command.summary)}.`,
    ...(command.help === undefined ? [] : ["", command.help]),
    "",
    "Options:",
    ...optionLines(allOptions(command)),
  ].join("\n");
}

/** The text of `relay help` for a group of commands, e.g. `relay keys`. */
export function groupHelp(group: string, commands: readonly Command[]): string {
  return [
    `Usage: relay ${group} <command> [options]`,
    "",
    "Commands:",
    ...commandList(commands),
    "",
    `See relay help ${group} <command> for a command's options.`,
  ].join("\n");
}

/** Two lines per command: its usage line, then its summary. */
export function commandList(commands: readonly Command[]): string[] {
  return commands.flatMap((c) => [`  ${usageLine(c)}`, `      ${c.summary}`]);
}

function capitalise(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

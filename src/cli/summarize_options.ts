/**
 * The options of `relay work --extract --summarize` (docs/cli/work.md, "Summaries"): offline by
 * default; with `--summarize-url` and `--summarize-model`, from an OpenAI-compatible endpoint,
 * its key from `RELAY_SUMMARIZE_KEY` or `--summarize-key-file`, never from the command line
 * (where every user of the machine can read it).
 *
 * @module
 */

import { DEFAULT_SUMMARIZE_TIMEOUT_MS, type SummarizeSettings } from "../client/summary.ts";
import type { Args, OptionSpec } from "./command.ts";
import { durationOption } from "./client_commands.ts";

/** The environment variable of the endpoint's key. */
export const SUMMARIZE_KEY_ENV = "RELAY_SUMMARIZE_KEY";

/** The options' names besides `--summarize`: each needs it. */
const MODEL_OPTIONS = [
  "summarize-url",
  "summarize-model",
  "summarize-key-file",
  "summarize-timeout",
];

/** The options, for the command's table. */
export const SUMMARIZE_OPTIONS: readonly OptionSpec[] = [
  {
    name: "summarize",
    type: "boolean",
    help: "with --extract: put a summary of at most five sentences before each article",
  },
  {
    name: "summarize-url",
    type: "string",
    value: "URL",
    help:
      "with --summarize: an OpenAI-compatible endpoint's base URL (POST URL/chat/completions), " +
      "e.g. http://localhost:11434/v1; offline without it",
  },
  {
    name: "summarize-model",
    type: "string",
    value: "NAME",
    help: "with --summarize-url: the model's name",
  },
  {
    name: "summarize-key-file",
    type: "string",
    value: "FILE",
    help: `with --summarize-url: a file holding the endpoint's key (else ${SUMMARIZE_KEY_ENV})`,
  },
  {
    name: "summarize-timeout",
    type: "string",
    value: "D",
    help: "with --summarize-url: time limit of the model's answer; then the offline summary",
    default: `${DEFAULT_SUMMARIZE_TIMEOUT_MS / 1000}s`,
  },
];

/**
 * The summary settings, or `undefined` without `--summarize`.
 *
 * @param env Reads an environment variable (the command's `io.env`): the endpoint's key may
 *   come from `RELAY_SUMMARIZE_KEY`.
 * @throws {UsageError} for a model option without `--summarize`, a URL without a model (or the
 *   reverse), a URL that is not http(s), or a key file that cannot be read.
 */
export function summarizeSettings(
  args: Args,
  env: (name: string) => string | undefined,
): SummarizeSettings | undefined {
  if (!args.flag("summarize")) {
    for (const name of MODEL_OPTIONS) {
      if (args.string(name) !== undefined) throw args.usage(`--${name} needs --summarize`);
    }
    return undefined;
  }
  const url = args.string("summarize-url");
  const model = args.string("summarize-model");
  if ((url === undefined) !== (model === undefined)) {
    throw args.usage("--summarize-url and --summarize-model go together");
  }
  if (url !== undefined && !/^https?:\/\/[^\s]+$/i.test(url)) {
    throw args.usage(`invalid --summarize-url "${url}": an http:// or https:// URL`);
  }
  const timeoutMs = durationOption(args, "summarize-timeout", DEFAULT_SUMMARIZE_TIMEOUT_MS);
  return { url, model, key: url === undefined ? undefined : summarizeKey(args, env), timeoutMs };
}

/** The endpoint's key: from `--summarize-key-file`, else `RELAY_SUMMARIZE_KEY`, else none. */
function summarizeKey(
  args: Args,
  env: (name: string) => string | undefined,
): string | undefined {
  const file = args.string("summarize-key-file");
  if (file !== undefined) {
    try {
      return Deno.readTextFileSync(file).trim() || undefined;
    } catch (error) {
      throw args.usage(`cannot read --summarize-key-file "${file}": ${(error as Error).message}`);
    }
  }
  try {
    return env(SUMMARIZE_KEY_ENV)?.trim() || undefined;
  } catch {
    return undefined; // not allowed to read the environment: no key
  }
}

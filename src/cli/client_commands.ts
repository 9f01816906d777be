/**
 * The commands that talk to a running relay about its queues and results: `submit`,
 * `pull`, `peek`, `push`, `results` (with `--follow`), `clear` and `health`.
 *
 * @module
 */

import {
  checkHealth,
  clearAll,
  peekQueues,
  pullQueue,
  pushResult,
  readResultsPage,
  type ResultEntry,
  submitContent,
} from "../client/client.ts";
import { parseDuration } from "../config/config.ts";
import { QUEUE_NAMES, queueList } from "../queue_names.ts";
import { errorMessage } from "../errors.ts";
import { followResults } from "../client/follow.ts";
import type { Args, Command, OptionSpec } from "./command.ts";
import { CLIENT_OPTIONS, readConfigFile, resolveClient, resolveUrl } from "./client_config.ts";
import { CommandFailure, type CommandIo, EXIT_FAILURE } from "./io.ts";
import { ENCODING_OPTION, textArgument } from "./text_input.ts";
import {
  escapeLine,
  isoTime,
  OUTPUT_OPTIONS,
  type OutputMode,
  outputMode,
  writeNulSeparated,
} from "./output.ts";

const JSON_OPTION: OptionSpec = {
  name: "json",
  type: "boolean",
  help: "print a JSON object instead of the relay's text answer",
};

const QUEUE_OPTION: OptionSpec = {
  name: "queue",
  short: "q",
  type: "string",
  value: "Q",
  help: `the queue: ${queueList()}`,
  default: `every queue, in the order ${QUEUE_NAMES.join(", ")}`,
};

/**
 * A duration option's value, ms.
 *
 * @throws {UsageError} when it is not a positive duration.
 */
export function durationOption(args: Args, name: string, fallback: number): number {
  const text = args.string(name);
  if (text === undefined) return fallback;
  const ms = parseDuration(text);
  if (ms === undefined || ms <= 0) {
    throw args.usage(`invalid --${name} "${text}": use a number with ms, s, m or h, e.g. 2s`);
  }
  return ms;
}

function wholeNumber(args: Args, name: string): number | undefined {
  const text = args.string(name);
  if (text === undefined) return undefined;
  if (!/^\d+$/.test(text)) throw args.usage(`invalid --${name} "${text}": must be a whole number`);
  return Number(text);
}

/** What `submit` and `push` lack without arguments. */
const TEXT_NEEDED = "text, or - to read stdin";

function modeOf(args: Args): OutputMode {
  return outputMode(args.flag("json"), args.flag("null"), args.hint);
}

/**
 * Prints items that were taken from the relay (and so exist nowhere else now). If the
 * printing fails (a closed pipe), the relay's JSON goes to stderr so they are not lost.
 */
function printTaken(text: string, count: number, io: CommandIo, print: () => void): void {
  try {
    print();
  } catch (error) {
    if (error instanceof CommandFailure) throw error;
    io.err(
      `relay: could not print the ${count} pulled items (${errorMessage(error)}); here they are:`,
    );
    io.err(text);
    throw new CommandFailure(`printing failed after pulling ${count} items; they are above`);
  }
}

const submit: Command = {
  name: "submit",
  synopsis: "<text|url|-> [--queue Q] [--json]",
  summary: "queue a link or text (- reads stdin)",
  help: "Without --queue, the relay routes the content: links to Q&A sites to qa, everything\n" +
    "else to general (name --queue article for a long read). Prints the relay's answer, e.g. OK (qa).",
  options: [
    { ...QUEUE_OPTION, default: "the relay routes it" },
    JSON_OPTION,
    ENCODING_OPTION,
    ...CLIENT_OPTIONS,
  ],
  positionals: true,
  async run(args, io) {
    const client = await resolveClient(args, io);
    const content = await textArgument(args, io, TEXT_NEEDED);
    const answer = await submitContent(client, content, { queue: args.string("queue") });
    if (!args.flag("json")) io.out(answer);
    else {
      const queue = /^OK \((\w+)\)$/.exec(answer)?.[1];
      io.out(JSON.stringify(
        queue === "duplicate" ? { status: "duplicate" } : { status: "accepted", queue },
      ));
    }
    return 0;
  },
};

const pull: Command = {
  name: "pull",
  synopsis: "[--queue Q] [--json | -0]",
  summary: "take every item of a queue (or of all queues) and print it",
  help: "The items are removed from the relay: print them somewhere safe. By default each\n" +
    "item is one line, its content escaped (\\n, \\t, \\\\, \\xHH); prints nothing and\n" +
    'says "nothing queued" on stderr when the queue is empty.',
  options: [QUEUE_OPTION, ...OUTPUT_OPTIONS, ...CLIENT_OPTIONS],
  async run(args, io) {
    const mode = modeOf(args);
    const { value: items, text } = await pullQueue(
      await resolveClient(args, io),
      args.string("queue"),
    );
    if (mode === "json") io.out(text);
    else if (items.length === 0) io.err("relay: nothing queued");
    else {
      printTaken(text, items.length, io, () => {
        if (mode === "null") {
          writeNulSeparated(items, io, () => {
            io.err("relay: the pulled items, as the relay sent them:");
            io.err(text);
          });
        } else io.write(items.map((item) => `${escapeLine(item)}\n`).join(""));
      });
    }
    return 0;
  },
};

const peek: Command = {
  name: "peek",
  synopsis: "[--queue Q] [--json | -0]",
  summary: "show queued items without removing them",
  help: "By default one line per item: queue, tab, created time (UTC), tab, the escaped\n" +
    'content. Prints nothing and says "nothing queued" on stderr when empty.',
  options: [QUEUE_OPTION, ...OUTPUT_OPTIONS, ...CLIENT_OPTIONS],
  async run(args, io) {
    const mode = modeOf(args);
    const { value, text } = await peekQueues(await resolveClient(args, io), args.string("queue"));
    const items = Object.entries(value.queues).flatMap(([queue, list]) =>
      list.map((item) => ({ queue, ...item }))
    );
    if (mode === "json") io.out(text);
    else if (items.length === 0) io.err("relay: nothing queued");
    else if (mode === "null") writeNulSeparated(items.map((item) => item.content), io);
    else {
      io.write(
        items.map((item) => `${item.queue}\t${item.created_at}\t${escapeLine(item.content)}\n`)
          .join(""),
      );
    }
    return 0;
  },
};

const push: Command = {
  name: "push",
  synopsis: "<text|-> [--json]",
  summary: "add a result to the results feed (- reads stdin)",
  options: [JSON_OPTION, ENCODING_OPTION, ...CLIENT_OPTIONS],
  positionals: true,
  async run(args, io) {
    const client = await resolveClient(args, io);
    await pushResult(client, await textArgument(args, io, TEXT_NEEDED));
    io.out(args.flag("json") ? JSON.stringify({ status: "ok" }) : "OK");
    return 0;
  },
};

/** Prints one result in the chosen mode (`--follow` prints JSON Lines for `--json`). */
function resultPrinter(mode: OutputMode, io: CommandIo): (item: ResultEntry) => void {
  if (mode === "json") return (item) => io.out(JSON.stringify(item));
  if (mode === "lines") return (item) => io.out(`${isoTime(item.t)}\t${escapeLine(item.c)}`);
  return (item) => {
    if (!item.c.includes("\0")) return io.write(`${item.c}\0`);
    io.err(`relay: result ${item.t} holds a NUL byte, which -0 cannot print; as JSON:`);
    io.err(JSON.stringify(item));
  };
}

const results: Command = {
  name: "results",
  synopsis:
    "[--since T] [--limit N] [--follow [--cursor-file F] [--exec CMD] [--interval D]] [--json | -0]",
  summary: "read the results feed, or follow it as results arrive",
  help: "By default one line per result: its time (ISO 8601, UTC), tab, the escaped content;\n" +
    "the cursor to pass as --since next goes to stderr. With --follow and --json, one JSON\n" +
    "object per line. --follow keeps the cursor in --cursor-file, so a restart neither\n" +
    "repeats nor skips a result; --exec runs CMD (with sh -c) once per result, the content\n" +
    "on stdin and its time in RELAY_RESULT_T, and retries it while it fails.",
  options: [
    { name: "since", type: "string", value: "T", help: "results after this cursor", default: "0" },
    { name: "limit", type: "string", value: "N", help: "most results, 1 to 50", default: "50" },
    { name: "follow", short: "f", type: "boolean", help: "keep reading as results arrive" },
    { name: "cursor-file", type: "string", value: "F", help: "with --follow: keeps the cursor" },
    { name: "exec", type: "string", value: "CMD", help: "with --follow: run CMD per result" },
    {
      name: "interval",
      type: "string",
      value: "D",
      help: "with --follow: least wait before a failed --exec runs again",
      default: "2s",
    },
    ...OUTPUT_OPTIONS,
    ...CLIENT_OPTIONS,
  ],
  longRunning: true,
  async run(args, io) {
    const mode = modeOf(args);
    if (args.flag("follow")) {
      const client = await resolveClient(args, io);
      await followResults(client, {
        cursorFile: args.string("cursor-file"),
        exec: args.string("exec"),
        intervalMs: durationOption(args, "interval", 2000),
        signal: io.signal,
        print: resultPrinter(mode, io),
        log: io.err,
      });
      return 0;
    }
    for (const name of ["cursor-file", "exec", "interval"]) {
      if (args.string(name) !== undefined) throw args.usage(`--${name} goes with --follow`);
    }
    const options = {
      since: wholeNumber(args, "since"),
      limit: wholeNumber(args, "limit"),
      signal: io.signal,
    };
    const { value: page, text } = await readResultsPage(await resolveClient(args, io), options);
    if (mode === "json") io.out(text);
    else if (mode === "null") writeNulSeparated(page.items.map((item) => item.c), io);
    else {
      const print = resultPrinter(mode, io);
      for (const item of page.items) print(item);
    }
    if (mode !== "json") io.err(`relay: cursor ${page.cursor}`);
    return 0;
  },
};

const clear: Command = {
  name: "clear",
  synopsis: "[--json]",
  summary: "empty every queue and the results feed",
  options: [JSON_OPTION, ...CLIENT_OPTIONS],
  async run(args, io) {
    const answer = await clearAll(await resolveClient(args, io));
    io.out(args.flag("json") ? JSON.stringify({ status: "ok" }) : answer);
    return 0;
  },
};

const health: Command = {
  name: "health",
  synopsis: "[--json]",
  summary: "check that the relay and its store answer (exit 1 when not); needs no key",
  help: "The relay answers it without a key, so none is sent: --api-key-file is accepted, and\n" +
    "not used; --db finds the address the relay on this machine last listened on.",
  options: [
    { ...JSON_OPTION, help: "print the answer as JSON: {ok, ts, db}" },
    ...CLIENT_OPTIONS,
  ],
  async run(args, io) {
    // The relay answers /health without a key, so none is looked for: the check works from
    // any machine, before relay login.
    const file = await readConfigFile(io.env);
    const health = await checkHealth({
      url: resolveUrl(args.string("url"), io, file, args.string("db")),
    });
    if (args.flag("json")) io.out(JSON.stringify(health));
    else io.out(health.ok ? `ok (store ${health.db})` : `not ok (store ${health.db})`);
    return health.ok ? 0 : EXIT_FAILURE;
  },
};

/** The commands about queues and results, in help order. */
export const QUEUE_COMMANDS: readonly Command[] = [
  submit,
  pull,
  peek,
  push,
  results,
  clear,
  health,
];

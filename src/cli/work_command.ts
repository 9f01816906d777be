/**
 * `relay work`: run a command for each item of a queue and push its output, or with
 * `--extract` read each link and push its article (see `src/client/work.ts` for the loop;
 * docs/cli/work.md, "relay work in detail", for what happens to an item).
 *
 * @module
 */

import { parseSize } from "../config/config.ts";
import { queueList } from "../queue_names.ts";
import { TARGET_NAMES, targetNamed, TARGETS } from "../publish/registry.ts";
import { MAX_LEASE_MS } from "../constants.ts";
import type { ExtractSettings } from "../client/work.ts";
import type { Args, Command } from "./command.ts";
import { durationOption } from "./client_commands.ts";
import { CLIENT_OPTIONS, resolveClient } from "./client_config.ts";
import { type AllowList, parseAllowList } from "../client/address_policy.ts";
import { defaultStateDir } from "../client/reading_record.ts";
import { SUMMARIZE_OPTIONS, summarizeSettings } from "./summarize_options.ts";

/** Default `--attempts`: a passing hiccup gets two more chances, a broken item not many. */
const DEFAULT_ATTEMPTS = 3;
/** Most `--attempts`: beyond this a broken item only keeps the worker busy. */
const MAX_ATTEMPTS = 100;
/** Default `--backoff`, ms: the wait after the first failure (then 4 s, 8 s, …). */
const DEFAULT_BACKOFF_MS = 2000;
/** Default `--lease`, ms: five minutes. */
const DEFAULT_LEASE_MS = 5 * 60_000;
/**
 * Default `--timeout`, ms: the deadline of reading one page, fetch and extraction together. A
 * slow site on a slow link answers within 20 s, and a long documentation page takes the
 * extractor several seconds more on a small machine.
 */
const DEFAULT_PAGE_TIMEOUT_MS = 30_000;
/** Default `--max-page`, bytes: 5 MiB, far above a real article, well below the Pi's memory. */
const DEFAULT_MAX_PAGE_BYTES = 5 * 1024 * 1024;
/** Default `--accept-language`: English, as a browser set to English sends it. */
const DEFAULT_ACCEPT_LANGUAGE = "en-US,en;q=0.8";
/** Targets `--publish` takes: the relay's publish targets, under any of their names. */
const PUBLISH_TARGETS = TARGET_NAMES;

/** `--lease`: whole seconds, 1 s to 12 h. */
function leaseSeconds(args: Args): number {
  const ms = durationOption(args, "lease", DEFAULT_LEASE_MS);
  if (ms % 1000 !== 0 || ms > MAX_LEASE_MS) {
    throw args.usage(
      `invalid --lease "${args.string("lease")}": use whole seconds up to 12h, e.g. 90s or 10m`,
    );
  }
  return ms / 1000;
}

function attempts(args: Args): number {
  const text = args.string("attempts");
  if (text === undefined) return DEFAULT_ATTEMPTS;
  const n = Number(text);
  if (!/^\d+$/.test(text) || n < 1 || n > MAX_ATTEMPTS) {
    throw args.usage(
      `invalid --attempts "${text}": must be a whole number from 1 to ${MAX_ATTEMPTS}`,
    );
  }
  return n;
}

/** The `--extract` settings, or `undefined` without `--extract`. */
function extractSettings(
  args: Args,
  env: (name: string) => string | undefined,
): ExtractSettings | undefined {
  const publish = (args.string("publish") ?? "").split(",").map((t) => t.trim()).filter((t) => t);
  if (!args.flag("extract")) {
    for (
      const name of [
        "publish",
        "timeout",
        "max-page",
        "accept-language",
        "allow-private",
        "state-dir",
      ]
    ) {
      if (args.string(name) !== undefined) throw args.usage(`--${name} needs --extract`);
    }
    if (summarizeSettings(args, env) !== undefined) {
      throw args.usage("--summarize needs --extract");
    }
    return undefined;
  }
  const unknown = publish.find((target) => !PUBLISH_TARGETS.includes(target));
  if (unknown !== undefined || new Set(publish.map(targetNamed)).size !== publish.length) {
    throw args.usage(
      `invalid --publish "${args.string("publish")}": distinct targets from ${
        TARGETS.join(", ")
      }, comma-separated`,
    );
  }
  const sizeText = args.string("max-page");
  const maxBytes = sizeText === undefined ? DEFAULT_MAX_PAGE_BYTES : parseSize(sizeText);
  if (maxBytes === undefined || maxBytes < 1) {
    throw args.usage(`invalid --max-page "${sizeText}": use bytes, or a number with KiB or MiB`);
  }
  const acceptLanguage = args.string("accept-language") ?? DEFAULT_ACCEPT_LANGUAGE;
  if (!/^[\w*-]+(?:;q=[\d.]+)?(?:\s*,\s*[\w*-]+(?:;q=[\d.]+)?)*$/.test(acceptLanguage)) {
    throw args.usage(`invalid --accept-language "${acceptLanguage}": e.g. de-DE,de;q=0.9,en;q=0.5`);
  }
  return {
    timeoutMs: durationOption(args, "timeout", DEFAULT_PAGE_TIMEOUT_MS),
    maxBytes,
    acceptLanguage,
    publish,
    allowPrivate: allowPrivate(args),
    summarize: summarizeSettings(args, env),
    stateDir: args.string("state-dir") || defaultStateDir(env),
  };
}

/** `--allow-private`: hosts read despite the address policy; none by default. */
function allowPrivate(args: Args): AllowList {
  const text = args.string("allow-private");
  if (text === undefined) return [];
  try {
    return parseAllowList(text);
  } catch (error) {
    throw args.usage(
      `invalid --allow-private: ${(error as Error).message}; or "all" to read any address`,
    );
  }
}

const workCommand: Command = {
  name: "work",
  synopsis: "--queue Q [--lease D] [--attempts N] [--backoff D] (-- CMD [ARGS…] | --extract " +
    "[--publish TARGETS])",
  summary: "run CMD for each item of a queue (or read each link) and push the result",
  help: [
    "Takes one item at a time under a lease and runs CMD with the item on stdin. When CMD",
    "exits 0, its stdout (if any) is pushed to the results feed and the item is deleted.",
    "When CMD fails, it runs again after --backoff, then twice that, up to --attempts runs;",
    "after the last one the item is left in its queue, and the relay hands it out again",
    "when its lease ends. When CMD cannot start (not found, not executable), the worker",
    "stops at once with exit code 1 and the item likewise goes back when its lease ends.",
    "SIGINT or SIGTERM stops the worker after the current item (exit code 0).",
    "",
    "With --extract no command runs: each item that is an http(s) link is fetched, its main",
    "article found (Readability) and pushed as Markdown; an item that is not a link is",
    "pushed as it is. A link that cannot be read (an HTTP error, --timeout, not a web page,",
    "no article) is fetched again after --backoff, up to --attempts times; then one line",
    "saying why (Could not read URL: HTTP 404) is pushed instead and the item deleted.",
    "--publish also sends each article to those targets through the relay's /publish.",
    "",
    "The reader refuses links (and redirects) to this machine, the local network and the",
    "relay itself (loopback, private, link-local addresses, localhost), checked on every",
    "address the name resolves to: any link in a queue could otherwise make it read and",
    "publish a router's or NAS's page. --allow-private HOST[:PORT],… reads those hosts;",
    "--allow-private all turns the check off (a risk: anyone who can submit a link can then",
    "read the household network's pages through the reader).",
    "",
    "Each link is recorded in --state-dir while it is read: a link whose reading stopped the",
    "reader itself (killed for its memory) --attempts times is not read again; one line",
    "(Could not read URL: reading this page stopped the reader N times) is pushed instead.",
  ].join("\n"),
  options: [
    {
      name: "queue",
      short: "q",
      type: "string",
      value: "Q",
      help: `the queue to work on: ${queueList()} (required)`,
    },
    {
      name: "lease",
      type: "string",
      value: "D",
      help: "how long an item is this worker's; longer than CMD ever needs, all attempts included",
      default: "5m",
    },
    {
      name: "attempts",
      type: "string",
      value: "N",
      help: `runs of CMD per item before giving up on it (1 to ${MAX_ATTEMPTS})`,
      default: String(DEFAULT_ATTEMPTS),
    },
    {
      name: "backoff",
      type: "string",
      value: "D",
      help: "wait after the first failed run; doubles after each further one",
      default: "2s",
    },
    { name: "extract", type: "boolean", help: "read each link's article instead of running CMD" },
    {
      name: "publish",
      type: "string",
      value: "TARGETS",
      help: `with --extract: also publish each article to ${TARGETS.join(", ")} (comma-separated)`,
    },
    {
      name: "timeout",
      type: "string",
      value: "D",
      help: "with --extract: deadline of reading one page: fetch, parse, extraction, Markdown",
      default: "30s",
    },
    {
      name: "max-page",
      type: "string",
      value: "SIZE",
      help: "with --extract: most bytes of a page read; a longer page is cut, with a note",
      default: "5MiB",
    },
    {
      name: "accept-language",
      type: "string",
      value: "LANGS",
      help: "with --extract: the Accept-Language header sent",
      default: DEFAULT_ACCEPT_LANGUAGE,
    },
    {
      name: "allow-private",
      type: "string",
      value: "HOSTS",
      help: "with --extract: HOST[:PORT],… on this machine or the local network that may be " +
        "read (all: any, a risk)",
    },
    {
      name: "state-dir",
      type: "string",
      value: "DIR",
      help: "with --extract: where each link is recorded while it is read, so that one that " +
        "stopped the reader --attempts times is given up on",
      default: "$STATE_DIRECTORY, else ~/.local/state/relay/reader",
    },
    ...SUMMARIZE_OPTIONS,
    ...CLIENT_OPTIONS,
  ],
  positionals: true,
  longRunning: true,
  async run(args, io) {
    const queue = args.string("queue");
    if (queue === undefined) throw args.needs(`--queue (${queueList()})`);
    const command = [...args.positionals];
    const extract = extractSettings(args, io.env);
    if (extract !== undefined && command.length > 0) {
      throw args.usage("--extract runs no command: give either --extract or -- CMD");
    }
    if (extract === undefined && command.length === 0) {
      throw args.needs(
        "a command after --, or --extract, e.g. relay work --queue general -- ./summarise",
      );
    }
    const options = {
      queue,
      command,
      extract,
      attempts: attempts(args),
      backoffMs: durationOption(args, "backoff", DEFAULT_BACKOFF_MS),
      leaseS: leaseSeconds(args),
      signal: io.signal,
      log: io.err,
    };
    const client = await resolveClient(args, io);
    if (extract !== undefined && extract.stateDir === undefined) {
      io.err(
        "relay: warning: no state directory (set HOME or give --state-dir): a link whose " +
          "reading stops the reader is read again after every restart",
      );
    }
    const waits = options.backoffMs * (2 ** (options.attempts - 1) - 1);
    if (waits >= options.leaseS * 1000) {
      io.err(
        `relay: warning: ${options.attempts} attempts wait ${waits / 1000} s in all, not less ` +
          `than --lease ${options.leaseS}s: an item may go to another worker while it is retried`,
      );
    }
    io.err(
      `relay: working on queue "${queue}" with: ${
        extract === undefined ? command.join(" ") : describeExtract(extract)
      }`,
    );
    // The worker's code loads when it runs, not with every command.
    const { work } = await import("../client/work.ts");
    const summary = await work(client, options);
    io.err(`relay: stopped after ${summary.done} done and ${summary.failed} given up on`);
    return 0;
  },
};

/** The worker's start line with `--extract`. */
function describeExtract(extract: ExtractSettings): string {
  const summary = extract.summarize;
  const to =
    (summary === undefined
      ? ""
      : summary.model === undefined
      ? ", with offline summaries"
      : `, with summaries by ${summary.model}`) +
    (extract.publish.length > 0 ? `, publishing to ${extract.publish.join(", ")}` : "");
  const mib = extract.maxBytes / (1 << 20);
  const size = Number.isInteger(mib) ? `${mib} MiB` : `${extract.maxBytes} bytes`;
  return `the built-in reader (pages up to ${size} within ${extract.timeoutMs / 1000} s${to})`;
}

/** The `work` command. */
export const WORK_COMMANDS: readonly Command[] = [workCommand];

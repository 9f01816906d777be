/**
 * `relay work`: run a command for each item of a queue and push its output (see
 * `src/client/work.ts` for the loop; docs/cli.md, "relay work", for what happens to an item).
 *
 * @module
 */

import { MAX_LEASE_MS } from "../store/store.ts";
import { work } from "../client/work.ts";
import type { Args, Command } from "./command.ts";
import { durationOption } from "./client_commands.ts";
import { CLIENT_OPTIONS, resolveClient } from "./client_config.ts";

/** Default `--attempts`: a passing hiccup gets two more chances, a broken item not many. */
const DEFAULT_ATTEMPTS = 3;
/** Most `--attempts`: beyond this a broken item only keeps the worker busy. */
const MAX_ATTEMPTS = 100;
/** Default `--backoff`, ms: the wait after the first failure (then 4 s, 8 s, …). */
const DEFAULT_BACKOFF_MS = 2000;
/** Default `--lease`, ms: five minutes. */
const DEFAULT_LEASE_MS = 5 * 60_000;

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

const workCommand: Command = {
  name: "work",
  synopsis: "--queue Q [--lease D] [--attempts N] [--backoff D] -- CMD [ARGS…]",
  summary: "run CMD for each item of a queue and push its output as a result",
  help: [
    "Takes one item at a time under a lease and runs CMD with the item on stdin. When CMD",
    "exits 0, its stdout (if any) is pushed to the results feed and the item is deleted.",
    "When CMD fails, it runs again after --backoff, then twice that, up to --attempts runs;",
    "after the last one the item is left in its queue, and the relay hands it out again",
    "when its lease ends. When CMD cannot start (not found, not executable), the worker",
    "stops at once with exit code 1 and the item likewise goes back when its lease ends.",
    "SIGINT or SIGTERM stops the worker after the current item (exit code 0).",
  ].join("\n"),
  options: [
    {
      name: "queue",
      short: "q",
      type: "string",
      value: "Q",
      help: "the queue to work on: qa, article or general (required)",
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
    ...CLIENT_OPTIONS,
  ],
  positionals: true,
  longRunning: true,
  async run(args, io) {
    const queue = args.string("queue");
    if (queue === undefined) throw args.needs("--queue (qa, article or general)");
    const command = [...args.positionals];
    if (command.length === 0) {
      throw args.needs("a command after --, e.g. relay work --queue general -- ./summarise");
    }
    const options = {
      queue,
      command,
      attempts: attempts(args),
      backoffMs: durationOption(args, "backoff", DEFAULT_BACKOFF_MS),
      leaseS: leaseSeconds(args),
      signal: io.signal,
      log: io.err,
    };
    const client = await resolveClient(args, io);
    const waits = options.backoffMs * (2 ** (options.attempts - 1) - 1);
    if (waits >= options.leaseS * 1000) {
      io.err(
        `relay: warning: ${options.attempts} attempts wait ${waits / 1000} s in all, not less ` +
          `than --lease ${options.leaseS}s: an item may go to another worker while it is retried`,
      );
    }
    io.err(`relay: working on queue "${queue}" with: ${command.join(" ")}`);
    const summary = await work(client, options);
    io.err(`relay: stopped after ${summary.done} done and ${summary.failed} given up on`);
    return 0;
  },
};

/** The `work` command. */
export const WORK_COMMANDS: readonly Command[] = [workCommand];

/**
 * `relay work`: the background daemon. Takes items from a queue one at a time under a lease,
 * runs a command once per item with the item on stdin, pushes the command's
 * stdout to the results feed, and only then acknowledges the item.
 *
 * Nothing is lost (at-least-once): an item is deleted only by its acknowledgement, after
 * its result was pushed. If the worker is killed (even with SIGKILL) mid-item, the relay
 * hands the item out again when its lease ends. A command that fails is run again, up to
 * `attempts` times in all, with doubling waits; after the last attempt the item is left
 * unacknowledged, so it stays in its queue and the relay hands it out again when its lease
 * ends (docs/cli/work.md, "relay work in detail"). A command that cannot start at all stops the worker at
 * once, the item likewise left to its lease. The wait for the next item is a long-poll, so
 * a submitted item starts within milliseconds.
 *
 * With `extract` (`relay work --extract`) no command runs: the worker reads each item that is a
 * link itself (src/client/extract_item.ts) and pushes the article as Markdown. Each link is
 * recorded on disk while it is read (src/client/reading_record.ts), so that one whose reading
 * killed the worker is given up on after `attempts` restarts instead of killing it again.
 *
 * @module
 */

import { Backoff, sleep } from "../util/backoff.ts";
import {
  ackItems,
  type LeasedItem,
  leaseItems,
  pushResult,
  type RelayClient,
  retrying,
  waitToRetry,
} from "./client.ts";
import { CannotStartError, runCapturing } from "./run.ts";
import { type ExtractSettings, linkOf, readItem } from "./extract_item.ts";
import { closeReadThread } from "./read_thread.ts";
import { ReadingRecords } from "./reading_record.ts";
import { failureResult } from "../article_result.ts";

export type { ExtractSettings } from "./extract_item.ts";

/** Long-poll of each leased pull, s: the most the relay allows. */
const LONG_POLL_S = 60;

/** Options of {@linkcode work}. */
export interface WorkOptions {
  /** The queue to pull: `qa`, `article` or `general`. */
  queue: string;
  /** The program and its arguments, run once per item (empty with `extract`). */
  command: string[];
  /** Reads each link itself instead of running a command (`relay work --extract`). */
  extract?: ExtractSettings | undefined;
  /** How many times the command runs for one item before the worker gives up on it, ≥ 1. */
  attempts: number;
  /** Wait after the first failed attempt, ms; doubles after each further one. */
  backoffMs: number;
  /**
   * Lease of each item, s (1–43200): longer than the command ever runs (all attempts and
   * waits included), or the item is handed out again while it still runs.
   */
  leaseS: number;
  /** Stops the loop after the current item (SIGINT/SIGTERM). */
  signal: AbortSignal;
  /** Where progress and errors go, one line each. */
  log: (line: string) => void;
}

/** What {@linkcode work} did, for its exit message and tests. */
export interface WorkSummary {
  /** Items whose command exited 0 (and whose output, if any, was pushed). */
  done: number;
  /**
   * Items whose command failed every attempt, left for their lease to return them; with
   * `extract`, links that could not be read, reported in the results feed and acknowledged.
   */
  failed: number;
}

/**
 * Runs the worker loop until `signal` aborts.
 *
 * @returns Counts of items done and given up on.
 * @throws {RelayError} when the relay refuses the key or the queue name (not retryable).
 * @throws {CannotStartError} when the command cannot start; the item it held is left to
 *   its lease (the message says so).
 */
export async function work(client: RelayClient, options: WorkOptions): Promise<WorkSummary> {
  const { queue, signal, log } = options;
  const summary: WorkSummary = { done: 0, failed: 0 };
  const backoff = new Backoff();
  const stateDir = options.extract?.stateDir;
  const records = stateDir === undefined ? undefined : new ReadingRecords(stateDir);
  try {
    while (!signal.aborted) {
      let items: LeasedItem[];
      try {
        items = await leaseItems(client, queue, {
          leaseS: options.leaseS,
          limit: 1,
          waitS: LONG_POLL_S,
          signal,
        });
        backoff.reset();
      } catch (error) {
        if (signal.aborted) break;
        await waitToRetry(error, backoff, log, signal);
        continue;
      }
      for (const item of items) {
        if (options.extract) {
          const read = await readRecorded(client, item, options, options.extract, records);
          if (read !== undefined) summary[read ? "done" : "failed"]++;
          continue;
        }
        const output = await runAttempts(item, options);
        if (output === undefined) {
          summary.failed++;
          continue;
        }
        summary.done++;
        if (output === "") {
          log(`relay: ${options.command[0]} printed nothing for item ${item.id}; nothing to push`);
        } else {
          await retrying(() => pushResult(client, output), "push the result", log, signal);
        }
        await acknowledge(client, item, log, signal);
      }
    }
  } finally {
    // The reading thread kept for the next link would keep the process alive.
    closeReadThread();
  }
  return summary;
}

/**
 * Reads one item with `--extract` and acknowledges it, recorded in the reader's state
 * directory while it is read (src/client/reading_record.ts): an item whose readings stopped
 * the reader `attempts` times is not read again but ends as one `Could not read` result.
 *
 * @returns As {@linkcode readItem}: `true` read, `false` reported as unreadable, `undefined`
 *   left to its lease (the worker is stopping).
 * @throws {RelayError} when the relay refuses a push (a 4xx).
 */
async function readRecorded(
  client: RelayClient,
  item: LeasedItem,
  options: WorkOptions,
  extract: ExtractSettings,
  records: ReadingRecords | undefined,
): Promise<boolean | undefined> {
  const { log, signal, attempts } = options;
  const link = linkOf(item.content);
  let stopped = 0;
  let recorded = false;
  if (records !== undefined && link !== undefined) {
    try {
      stopped = await records.begin(item.id, item.content);
      recorded = true;
    } catch (error) {
      log(
        `relay: cannot record item ${item.id} in ${records.dir} (${(error as Error).message}); ` +
          "reading it unrecorded: if it stops the reader, it is read again after the restart",
      );
    }
  }
  let read: boolean | undefined;
  try {
    if (stopped >= attempts) {
      const reason = `reading this page stopped the reader ${stopped} times`;
      log(
        `relay: could not read ${link} (item ${item.id}): ${reason}; reported in the results feed`,
      );
      await retrying(
        () => pushResult(client, failureResult(link!, reason)),
        "push the result",
        log,
        signal,
      );
      read = false;
    } else {
      read = await readItem(client, item, { ...options, ...extract });
    }
    if (read !== undefined) await acknowledge(client, item, log, signal);
  } finally {
    // Ended without stopping the reader: the item's earlier count stays only when it is left
    // to its lease (the worker stopping, or the relay refusing a push).
    if (recorded) {
      await records!.end(item.id, item.content, read === undefined ? stopped : 0).catch((error) =>
        log(`relay: cannot update the record of item ${item.id}: ${(error as Error).message}`)
      );
    }
  }
  return read;
}

/**
 * Runs the command for `item` up to `options.attempts` times.
 *
 * @returns Its trimmed stdout after a run that exited 0, or `undefined` when every attempt
 *   failed or the worker is stopping (the item is then left to its lease).
 * @throws {CannotStartError} when the command cannot start.
 */
async function runAttempts(item: LeasedItem, options: WorkOptions): Promise<string | undefined> {
  const { attempts, log, signal } = options;
  const program = options.command[0];
  const back = `stays on "${options.queue}" and the relay hands it out again when its ` +
    `lease ends (at most ${options.leaseS} s)`;
  for (let attempt = 1; attempt <= attempts; attempt++) {
    let code: number;
    let stdout: string | undefined;
    try {
      ({ code, stdout } = await runCapturing(options.command, item.content));
    } catch (error) {
      if (!(error instanceof CannotStartError)) throw error;
      throw new CannotStartError(
        error.program,
        `${error.message}; stopped: item ${item.id} ${back}`,
      );
    }
    // Output that is not UTF-8 is a failed run: the results feed holds text, and the
    // bytes are never replaced.
    const failure = code !== 0
      ? `exited with code ${code}`
      : stdout === undefined
      ? "printed output that is not UTF-8 (convert it, e.g. with iconv)"
      : undefined;
    if (failure === undefined) return (stdout ?? "").trim();
    if (attempt === attempts) {
      log(
        `relay: ${program} ${failure} for item ${item.id}: ` +
          `${attempts === 1 ? "the only attempt" : `all ${attempts} attempts`} failed; it ${back}`,
      );
      return undefined;
    }
    const wait = options.backoffMs * 2 ** (attempt - 1);
    log(
      `relay: ${program} ${failure} for item ${item.id} ` +
        `(attempt ${attempt} of ${attempts}); trying again in ${wait} ms`,
    );
    if (!await sleep(wait, signal)) {
      log(`relay: stopping before the next attempt: item ${item.id} ${back}`);
      return undefined;
    }
  }
  return undefined;
}

/** Acknowledges a finished item; says so when its lease had ended and it went elsewhere. */
async function acknowledge(
  client: RelayClient,
  item: LeasedItem,
  log: (line: string) => void,
  signal: AbortSignal,
): Promise<void> {
  let unknown: string[] = [];
  await retrying(
    async () => void ({ unknown } = await ackItems(client, [item.id])),
    "acknowledge an item",
    log,
    signal,
  );
  if (unknown.length > 0) {
    log(
      `relay: item ${item.id} was no longer leased to this worker (its lease ended); ` +
        "it may be processed twice: raise --lease above the command's longest run",
    );
  }
}

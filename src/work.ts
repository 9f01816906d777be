/**
 * `relay work`: the background daemon. Takes items from a queue one at a time under a lease
 * (issue 6), runs a command once per item with the item on stdin, pushes the command's
 * stdout to the results feed (spec §1, §4.4), and only then acknowledges the item.
 *
 * Nothing is lost (at-least-once): an item is deleted only by its acknowledgement, after
 * its result was pushed. If the worker is killed (even with SIGKILL) mid-item, the relay
 * hands the item out again when its lease ends. An item whose command fails is logged with
 * the exit code and put back at the end of its queue (without the duplicate check,
 * `POST /submit?dedupe=false`) before it is acknowledged. The wait for the next item is a
 * long-poll, so a submitted item starts within milliseconds.
 *
 * @module
 */

import { Backoff, sleep } from "./backoff.ts";
import {
  ackItems,
  type LeasedItem,
  leaseItems,
  pushResult,
  type RelayClient,
  RelayError,
  submitContent,
  waitToRetry,
} from "./client.ts";
import { runCapturing } from "./run.ts";

/** Long-poll of each leased pull, s: the most the relay allows (issue 6). */
const LONG_POLL_S = 60;

/** Options of {@linkcode work}. */
export interface WorkOptions {
  /** The queue to pull: `qa`, `article` or `general`. */
  queue: string;
  /** The program and its arguments, run once per item. */
  command: string[];
  /** Wait after an item failed, ms. */
  intervalMs: number;
  /**
   * Lease of each item, s (1–43200): longer than the command ever runs, or the item is
   * handed out again while it still runs.
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
  /** Items whose command failed and that were put back. */
  failed: number;
}

/**
 * Runs the worker loop until `signal` aborts.
 *
 * @returns Counts of items done and failed.
 * @throws {RelayError} when the relay refuses the key or the queue name (not retryable).
 */
export async function work(client: RelayClient, options: WorkOptions): Promise<WorkSummary> {
  const { queue, signal, log } = options;
  const summary: WorkSummary = { done: 0, failed: 0 };
  const backoff = new Backoff();
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
      const { code, stdout } = await runCapturing(options.command, item.content);
      if (code !== 0) {
        summary.failed++;
        log(
          `relay: ${
            options.command[0]
          } exited with code ${code}; putting the item back on "${queue}"`,
        );
        await retrying(
          () => submitContent(client, item.content, { queue, dedupe: false }),
          "put an item back",
          log,
          signal,
        );
      } else {
        summary.done++;
        const output = stdout.trim();
        if (output === "") {
          log(`relay: ${options.command[0]} printed nothing for an item; nothing to push`);
        } else {
          await retrying(() => pushResult(client, output), "push the result", log, signal);
        }
      }
      await acknowledge(client, item, log, signal);
      if (code !== 0) await sleep(options.intervalMs, signal);
    }
  }
  return summary;
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

/**
 * Retries a call to the relay with a backoff while it fails in a retryable way. Even after
 * `signal` aborts it keeps trying a few times, because giving up would lose the item.
 */
async function retrying(
  attempt: () => Promise<unknown>,
  what: string,
  log: (line: string) => void,
  signal: AbortSignal,
): Promise<void> {
  const backoff = new Backoff();
  for (let afterAbort = 0;;) {
    try {
      await attempt();
      return;
    } catch (error) {
      if (!(error instanceof RelayError) || !error.retryable) throw error;
      if (signal.aborted && ++afterAbort > 3) {
        log(`relay: could not ${what} before stopping: ${error.message}`);
        throw error;
      }
      const wait = backoff.next();
      log(`relay: cannot ${what}: ${error.message}; trying again in ${wait} ms`);
      await sleep(wait);
    }
  }
}

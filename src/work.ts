/**
 * `relay work`: the background daemon. Pulls a queue, runs a command once per item with the
 * item on stdin, and pushes the command's stdout to the results feed (spec §1, §4.2, §4.4).
 *
 * No item is silently lost: an item whose command fails is logged with the exit code and
 * put back on its queue (without the duplicate check, `POST /submit?dedupe=false`); items
 * not yet started when SIGTERM arrives are put back too. The spec's pull deletes what it
 * returns, so an item is only at risk while this process holds it: if the process is
 * killed with SIGKILL mid-item, that item is gone.
 *
 * @module
 */

import { Backoff, sleep } from "./backoff.ts";
import {
  pullQueue,
  pushResult,
  type RelayClient,
  RelayError,
  submitContent,
  waitToRetry,
} from "./client.ts";
import { runCapturing } from "./run.ts";

/** Options of {@linkcode work}. */
export interface WorkOptions {
  /** The queue to pull: `qa`, `article` or `general`. */
  queue: string;
  /** The program and its arguments, run once per item. */
  command: string[];
  /** Wait between pulls when the queue is empty or an item failed, ms. */
  intervalMs: number;
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
    let items: string[];
    try {
      items = await pullQueue(client, queue);
      backoff.reset();
    } catch (error) {
      await waitToRetry(error, backoff, log, signal);
      continue;
    }
    let anyFailed = false;
    for (const [index, item] of items.entries()) {
      if (signal.aborted) {
        await putBack(client, queue, items.slice(index), log, signal);
        break;
      }
      const { code, stdout } = await runCapturing(options.command, item);
      if (code !== 0) {
        anyFailed = true;
        summary.failed++;
        log(
          `relay: ${
            options.command[0]
          } exited with code ${code}; putting the item back on "${queue}"`,
        );
        await putBack(client, queue, [item], log, signal);
        continue;
      }
      summary.done++;
      const output = stdout.trim();
      if (output === "") {
        log(`relay: ${options.command[0]} printed nothing for an item; nothing to push`);
        continue;
      }
      await retrying(() => pushResult(client, output), "push the result", log, signal);
    }
    if (items.length === 0 || anyFailed) await sleep(options.intervalMs, signal);
  }
  return summary;
}

/** Puts items back at the end of their queue, without the duplicate check. */
async function putBack(
  client: RelayClient,
  queue: string,
  items: string[],
  log: (line: string) => void,
  signal: AbortSignal,
): Promise<void> {
  for (const item of items) {
    await retrying(
      () => submitContent(client, item, { queue, dedupe: false }),
      "put an item back",
      log,
      signal,
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

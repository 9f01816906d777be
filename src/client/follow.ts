/**
 * `relay results --follow`: the result puller. Reads the results feed from a cursor,
 * prints each result (or runs a command with it on stdin), and keeps the cursor in a file
 * so that a restart neither repeats nor skips a result.
 *
 * @module
 */

import { Backoff, sleep } from "../util/backoff.ts";
import { writeAtomically } from "../util/files.ts";
import { readResultsPage, type RelayClient, type ResultEntry, waitToRetry } from "./client.ts";
import { runWithInput } from "./run.ts";

/** Results asked for per page: the most `/results` returns. */
const PAGE_SIZE = 50;

/** Long-poll of each read, s: the most the relay allows. */
const LONG_POLL_S = 60;

/** Options of {@linkcode followResults}. */
export interface FollowOptions {
  /** File holding the cursor (epoch ms); read at start, rewritten after each result. */
  cursorFile?: string | undefined;
  /** Shell command run once per result with its content on stdin (`sh -c`). */
  exec?: string | undefined;
  /** Wait before a failed `exec` is tried again, at least, ms. */
  intervalMs: number;
  /** Stops the loop (SIGINT/SIGTERM). */
  signal: AbortSignal;
  /** Prints one result when there is no `exec`. */
  print: (item: ResultEntry) => void;
  /** Where progress and errors go, one line each. */
  log: (line: string) => void;
}

/**
 * Reads the cursor file: an integer ≥ 0, or 0 when the file does not exist.
 *
 * @throws {Error} when the file exists but does not hold a cursor.
 */
async function readCursor(path: string | undefined): Promise<number> {
  if (path === undefined) return 0;
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return 0;
    throw error;
  }
  const cursor = Number(text.trim());
  if (!Number.isSafeInteger(cursor) || cursor < 0) {
    throw new Error(`the cursor file "${path}" does not hold a cursor: "${text.trim()}"`);
  }
  return cursor;
}

/**
 * Follows the results feed until `signal` aborts. A result counts as handled once it was
 * printed or its command exited 0; only then does the cursor move past it. A failing
 * command is logged with its exit code and tried again after a backoff. An unreachable or
 * failing relay is logged and tried again with a backoff.
 *
 * @returns The last cursor.
 * @throws {RelayError} when the relay refuses the key or the request (not retryable).
 */
export async function followResults(client: RelayClient, options: FollowOptions): Promise<number> {
  let cursor = await readCursor(options.cursorFile);
  // A gap matters to a follower that had a cursor; said once per cursor.
  let resumed = cursor > 0;
  let gapAt: number | undefined;
  const backoff = new Backoff();
  while (!options.signal.aborted) {
    let page;
    try {
      page = (await readResultsPage(client, {
        since: cursor,
        limit: PAGE_SIZE,
        waitS: LONG_POLL_S,
        signal: options.signal,
      })).value;
    } catch (error) {
      if (options.signal.aborted) break;
      await waitToRetry(error, backoff, options.log, options.signal);
      continue;
    }
    backoff.reset();
    if (page.gap && resumed && gapAt !== cursor) {
      gapAt = cursor;
      options.log(
        `relay: results after cursor ${cursor} were evicted before they were read (the feed keeps 50)`,
      );
    }
    resumed = true;
    for (const item of page.items) {
      if (options.signal.aborted) break;
      if (options.exec !== undefined) {
        const code = await runWithInput(["sh", "-c", options.exec], item.c, {
          RELAY_RESULT_T: `${item.t}`,
        });
        if (code !== 0) {
          const wait = Math.max(backoff.next(), options.intervalMs);
          options.log(
            `relay: --exec exited with code ${code} for result ${item.t}; trying it again in ${wait} ms`,
          );
          await sleep(wait, options.signal);
          break;
        }
      } else {
        options.print(item);
      }
      cursor = item.t;
      // Durably, like every file the relay writes: a power cut must not roll the cursor back
      // (the result would be handled twice) or leave an empty file (read as no cursor).
      if (options.cursorFile !== undefined) {
        await writeAtomically(options.cursorFile, `${cursor}\n`);
      }
    }
  }
  return cursor;
}

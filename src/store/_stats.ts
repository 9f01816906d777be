/**
 * The counters and depths of `GET /stats`, read from the committed state.
 *
 * @module
 */

import { QUEUE_NAMES, type QueueName } from "../queue_names.ts";
import { available, type State } from "./_state.ts";
import type { QueueCounters, ResultCounters } from "./kv_keys.ts";

/** What `GET /stats` reports: the counters and the current depths. */
export interface StoreStats {
  /**
   * Per queue: its counters, how many items it holds now (`depth`, leased ones included)
   * and how many of those are leased (`in_flight`).
   */
  queues: Record<QueueName, QueueCounters & { depth: number; in_flight: number }>;
  /** The feed's counters, how many results it holds and the cursor mark. */
  results: ResultCounters & { depth: number; hwm: number };
}

/** The stats of `state` at `now` (epoch ms: which leases are still held). */
export function statsOf(state: State, now: number): StoreStats {
  const queues = {} as StoreStats["queues"];
  for (const q of QUEUE_NAMES) {
    const items = state.queues[q].items;
    queues[q] = {
      ...state.queues[q].counters,
      depth: items.length,
      in_flight: items.filter((i) => !available(i, now)).length,
    };
  }
  const feed = state.feed;
  return { queues, results: { ...feed.counters, depth: feed.items.length, hwm: feed.hwm } };
}

/**
 * The results feed: what push, readResults, clear and restore do to it, as writes for the
 * writer ({@linkcode WriteOp}, {@linkcode Change}) and readers of the committed state.
 * `store.ts` runs them.
 *
 * @module
 */

import { readParts, splitParts } from "./_parts.ts";
import {
  addCost,
  appendResult,
  appendResultCost,
  type Change,
  deleteParts,
  keyTOf,
  type State,
  type WriteOp,
} from "./_state.ts";
import { resultPartKey, resultPrefix } from "./kv_keys.ts";

/** A result in the feed: `t` is its push time and cursor. */
export interface ResultItem {
  /** Epoch ms, strictly increasing over the life of the store. */
  readonly t: number;
  /** The processed output, exactly as pushed. */
  readonly content: string;
}

/** A page of the results feed. */
export interface ResultsPage {
  /** `t` of the last item listed, or `since` when none is. */
  readonly cursor: number;
  /** Items with `t > since`, oldest first. */
  readonly items: ResultItem[];
  /**
   * `true` when results with `t > since` were evicted by the 50-result overflow before
   * this read: the reader missed them.
   */
  readonly gap: boolean;
}

/** The push write: appends `content` with `t = max(now, previous t + 1)` (see `push`). */
export function pushOp(content: string): WriteOp<ResultItem> {
  const parts = splitParts(content);
  return {
    name: "push",
    grows: true,
    cost: (draft) => appendResultCost(draft, parts),
    apply(draft, mutations) {
      const t = Math.max(draft.now, draft.feed.hwm + 1);
      appendResult(mutations, draft.feed, parts, content, t);
      draft.feed.counters.pushed++;
      return { t, content };
    },
  };
}

/**
 * The page of results with `t > since`, at most `limit`, content read from KV where not
 * in memory.
 *
 * @returns `undefined` when a result's parts are gone (removed by a later commit).
 * @throws KV errors.
 */
export async function readPage(
  kv: Deno.Kv,
  state: State,
  options: { since: number; limit: number },
): Promise<ResultsPage | undefined> {
  const { since, limit } = options;
  const wanted = state.feed.items.filter((r) => r.t > since).slice(0, limit);
  const gap = state.feed.evicted_t > since;
  const last = wanted.at(-1);
  if (last === undefined) return { cursor: since, items: [], gap };
  const items: ResultItem[] = [];
  for (const r of wanted) {
    const content = r.content ?? await readParts(kv, resultPrefix(keyTOf(r)), r.parts);
    if (content === undefined) return undefined;
    items.push({ t: r.t, content });
  }
  return { cursor: last.t, items, gap };
}

/** Empties the feed, counting its results as cleared; keeps the high-water mark. */
export const clearFeed: Change = (draft, mutations) => {
  const feed = draft.feed;
  if (feed.items.length === 0) return;
  for (const r of feed.items) deleteParts(mutations, r.parts, (p) => resultPartKey(keyTOf(r), p));
  feed.counters.cleared += feed.items.length;
  feed.items = [];
  mutations.touch("feed");
};

/** Restoring one backed-up result with its `t`, counted as pushed. */
export function restoreResultOp(result: { t: number; content: string }): WriteOp<true> {
  const parts = splitParts(result.content);
  return {
    name: "restore",
    grows: true,
    cost: (draft) => appendResultCost(draft, parts),
    apply(draft, mutations) {
      appendResult(mutations, draft.feed, parts, result.content, result.t);
      draft.feed.counters.pushed++;
      return true;
    },
  };
}

/** Raises the high-water mark to at least `hwm` (a restored backup's). */
export function restoreHwmOp(hwm: number): WriteOp<true> {
  return {
    name: "restore",
    grows: true,
    cost: () => addCost({ mutations: 0, bytes: 0 }, 1),
    apply(draft, mutations) {
      draft.feed.hwm = Math.max(draft.feed.hwm, hwm);
      mutations.touch("feed");
      return true;
    },
  };
}

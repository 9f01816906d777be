/**
 * Storage faults as HTTP answers (docs/api/basics.md, "Requests, answers and errors"): what a client
 * can do about a full, read-only, damaged or failing disk under the relay's database or its
 * other files (notes, posts, episodes), or about a process out of file descriptors.
 *
 * @module
 */

import { type ProblemKind, problemResponse } from "../errors.ts";
import type { Article, BuiltinTargets } from "../publish/target_kind.ts";
import {
  classifyFault,
  type FaultKind,
  roomForContent,
  StorageError,
  type Store,
} from "../store/store.ts";

/**
 * Per kind: the status, when to try again (seconds), what to tell the client and the
 * problem's kind (docs/problems.md).
 */
const ANSWERS: Record<
  FaultKind,
  { status: number; retryAfterS: number; detail: string; problem: ProblemKind }
> = {
  full: {
    problem: "disk-full",
    status: 507,
    retryAfterS: 30,
    detail: "the relay's disk is full. Pulls, acks and clears still work; " +
      "writes that add content work again once space is freed on the relay's machine",
  },
  "read-only": {
    problem: "disk-read-only",
    status: 503,
    retryAfterS: 60,
    detail: "the relay's disk is read-only (its file system was remounted read-only, " +
      "usually after disk errors). Reads still work; its operator must repair the disk " +
      "and restart the relay",
  },
  damaged: {
    problem: "database-damaged",
    status: 503,
    retryAfterS: 60,
    detail: "the relay's database is damaged. Its operator must restore it from a backup",
  },
  io: {
    problem: "disk-error",
    status: 503,
    retryAfterS: 30,
    detail: "the relay cannot use its disk (I/O error). Try again later",
  },
};

/**
 * The problem response for a storage fault: 507 Insufficient Storage for a full disk, 503
 * for a read-only, damaged or failing one; each with `Retry-After` and a detail that says
 * which.
 *
 * @example
 * ```ts
 * import { StorageError } from "../store/store.ts";
 *
 * storageProblem(new StorageError("full", "submit")); // 507, "Cannot submit: the relay's disk is full. …"
 * ```
 */
export function storageProblem(error: StorageError): Response {
  const answer = ANSWERS[error.kind];
  // A pull, ack or clear refused for a full disk: the room set aside for them is used up.
  const detail = error.kind === "full" && !ADDING.has(error.operation)
    ? FULL_EVEN_FOR_REMOVALS
    : answer.detail;
  return problemResponse(answer.status, `Cannot ${error.operation}: ${detail}`, {
    "retry-after": String(answer.retryAfterS),
  }, answer.problem);
}

/** What the built-in services' writes are called in their refusals ({@linkcode whileRoomLeft}). */
const BUILTIN_WRITES = {
  saveNote: "save the note",
  publishPost: "publish the post",
  queueEpisode: "queue the episode",
} as const;

/** The operations a full disk refuses first: those that store new content. */
const ADDING = new Set<string>(["submit", "push", "restore", ...Object.values(BUILTIN_WRITES)]);

/**
 * `targets`, the built-in services' writes, refused with a full-disk {@linkcode StorageError}
 * while the store is in disk-full mode (`roomForContent`): the room the store gave up on a
 * full disk is for pulls, acks and clears, and a note, a post or an episode written there
 * would take it.
 *
 * @param targets The built-in services' calls (`builtinTargets`).
 * @param store The relay's store.
 */
export function whileRoomLeft<T extends BuiltinTargets>(targets: T, store: Store): T {
  const guarded = <K extends keyof BuiltinTargets>(name: K) => async (article: Article) => {
    if (!await roomForContent(store)) throw new StorageError("full", BUILTIN_WRITES[name]);
    return await targets[name](article);
  };
  return {
    ...targets,
    saveNote: guarded("saveNote"),
    publishPost: guarded("publishPost"),
    queueEpisode: guarded("queueEpisode"),
  };
}

const FULL_EVEN_FOR_REMOVALS = "the relay's disk is full, and the room it sets aside for " +
  "pulls, acks and clears is used up. Free space on the relay's machine and try again";

/** When a request refused for want of a file descriptor may try again, seconds. */
const DESCRIPTORS_RETRY_AFTER_S = 5;

/**
 * The problem response for an error of the file system met outside the database (a note, a
 * post, an episode or its audio): 507 for a full disk, 503 for a read-only or failing one,
 * each with `Retry-After` and the same details as the database's faults; 503 with
 * `Retry-After` for a process that has no file descriptor left (`EMFILE`, `ENFILE`), which
 * frees itself as downloads end. A {@linkcode StorageError} (the database's, or a refusal in
 * disk-full mode) is answered as {@linkcode storageProblem} does. Routes call it before
 * answering anything else with 500.
 *
 * @param error What the file system or the store threw.
 * @param what What could not be done, e.g. `"save the note"`: the detail says `Cannot …`.
 * @returns `undefined` when `error` is none of these (a bug: the caller answers 500).
 */
export function fileFaultProblem(error: unknown, what: string): Response | undefined {
  // A fault the store has already named (its own, or a refusal in disk-full mode).
  if (error instanceof StorageError) return storageProblem(error);
  const message = error instanceof Error ? error.message : String(error);
  if (/too many open files|os error 2[34]\b/i.test(message)) {
    return problemResponse(
      503,
      `Cannot ${what}: the relay has as many files open as it may right now; try again shortly`,
      { "retry-after": String(DESCRIPTORS_RETRY_AFTER_S), "connection": "close" },
    );
  }
  const kind = classifyFault(error);
  if (kind === undefined || kind === "damaged") return undefined;
  const answer = ANSWERS[kind];
  return problemResponse(answer.status, `Cannot ${what}: ${answer.detail}`, {
    "retry-after": String(answer.retryAfterS),
  });
}

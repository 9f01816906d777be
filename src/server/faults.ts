/**
 * Storage faults as HTTP answers (docs/api.md, requests, answers and errors): what a client
 * can do about a full, read-only, damaged or failing disk under the relay's database.
 *
 * @module
 */

import { problemResponse } from "../errors.ts";
import type { FaultKind, StorageError } from "../store/store.ts";

/** Per kind: the status, when to try again (seconds) and what to tell the client. */
const ANSWERS: Record<FaultKind, { status: number; retryAfterS: number; detail: string }> = {
  full: {
    status: 507,
    retryAfterS: 30,
    detail: "the relay's disk is full. Pulls, acks and clears still work; " +
      "writes that add content work again once space is freed on the relay's machine",
  },
  "read-only": {
    status: 503,
    retryAfterS: 60,
    detail: "the relay's disk is read-only (its file system was remounted read-only, " +
      "usually after disk errors). Reads still work; its operator must repair the disk " +
      "and restart the relay",
  },
  damaged: {
    status: 503,
    retryAfterS: 60,
    detail: "the relay's database is damaged. Its operator must restore it from a backup",
  },
  io: {
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
  });
}

/** The operations a full disk refuses first: those that store new content. */
const ADDING = new Set(["submit", "push", "restore"]);

const FULL_EVEN_FOR_REMOVALS = "the relay's disk is full, and the room it sets aside for " +
  "pulls, acks and clears is used up. Free space on the relay's machine and try again";

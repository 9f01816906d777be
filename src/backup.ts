/**
 * Backup and move (`relay export`, `relay import`): the queues, the results and the
 * results' `t` high-water mark (C40) as one JSON document.
 *
 * Both commands open the database file themselves, under the relay's lock (C73): stop the
 * relay first. Duplicate records are not exported; they only matter for 5 minutes.
 *
 * @module
 */

import { z } from "zod";
import { publishedSchema } from "./publish/backup.ts";
import { QUEUE_NAMES } from "./queues.ts";
import {
  clear,
  isEmpty,
  peek,
  readResults,
  restore,
  RESULTS_CAPACITY,
  resultsHighWaterMark,
  type Store,
} from "./store.ts";

/** The value of `format` in every backup. */
const BACKUP_FORMAT = "content-relay-backup";

const contentSchema = z.string().min(1).refine((text) => text.isWellFormed());

const itemSchema = z.object({
  content: contentSchema,
  created_at: z.number().int().nonnegative(),
});

/** A backup document, version 1. Times are epoch ms. */
const backupSchema = z.object({
  format: z.literal(BACKUP_FORMAT),
  version: z.literal(1),
  exported_at: z.number().int(),
  results_hwm: z.number().int().nonnegative(),
  queues: z.object({
    qa: z.array(itemSchema),
    article: z.array(itemSchema),
    general: z.array(itemSchema),
  }),
  results: z
    .array(z.object({
      t: z.number().int().positive(),
      content: contentSchema,
    }))
    .refine((results) => results.every((r, i) => i === 0 || r.t > results[i - 1]!.t), {
      error: "results must be in strictly increasing t",
    }),
  /** The built-in notes, posts and podcast episodes (docs/publishing-builtin.md). */
  published: publishedSchema.optional(),
});

/** A backup document (see {@linkcode backupSchema}). */
export type Backup = z.infer<typeof backupSchema>;

/**
 * Reads everything the store holds into a backup document.
 *
 * @throws {StoreBusyError} when writers kept moving a collection while it was read.
 */
export async function exportStore(store: Store): Promise<Backup> {
  const queues = await peek(store, QUEUE_NAMES);
  const results = await readResults(store, { since: 0, limit: RESULTS_CAPACITY });
  const pick = (queue: typeof QUEUE_NAMES[number]) =>
    (queues.get(queue) ?? []).map((item) => ({
      content: item.content,
      created_at: item.created_at,
    }));
  return {
    format: BACKUP_FORMAT,
    version: 1,
    exported_at: Math.floor(store.clock()),
    results_hwm: await resultsHighWaterMark(store),
    queues: { qa: pick("qa"), article: pick("article"), general: pick("general") },
    results: results.items.map((item) => ({ t: item.t, content: item.content })),
  };
}

/** Thrown when a backup cannot be imported; the message says why in one sentence. */
export class ImportError extends Error {
  /** @param message One sentence a person can act on. */
  constructor(message: string) {
    super(message);
    this.name = "ImportError";
  }
}

/**
 * Parses a backup document's text.
 *
 * @throws {ImportError} when it is not JSON or not a version-1 backup.
 */
export function parseBackup(text: string): Backup {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new ImportError("the file is not JSON");
  }
  const parsed = backupSchema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new ImportError(
      `the file is not a relay backup (${issue?.path.join(".") || "document"}: ${issue?.message})`,
    );
  }
  return parsed.data;
}

/**
 * Restores `backup` into the store. Refuses a store that holds items or results unless
 * `force` (which replaces them; the high-water mark only ever grows, C40).
 *
 * @throws {ImportError} when the store is not empty and `force` is not set.
 */
export async function importStore(
  store: Store,
  backup: Backup,
  options: { force?: boolean } = {},
): Promise<void> {
  if (!await isEmpty(store)) {
    if (!options.force) {
      throw new ImportError(
        "the database already holds items or results: use --force to replace them",
      );
    }
    await clear(store);
  }
  await restore(store, {
    queues: backup.queues,
    results: backup.results,
    hwm: backup.results_hwm,
  });
}

/**
 * Backup and move (`relay export`, `relay import`; docs/backup.md): the queues, the
 * results and the results' `t` high-water mark, the named keys (digests, scopes,
 * creation and last use) and, when asked for, the main API key, as one JSON document.
 * Moved that way, a relay accepts every key it accepted before.
 *
 * Both commands open the database file themselves, under the relay's lock: stop the
 * relay first. Duplicate records are not exported; they only matter for 5 minutes.
 *
 * A running relay can take the same backups itself, through its own store, on a schedule
 * (`--backup-every`, `--backup-keep`; {@linkcode scheduleBackups}): into `backups/` beside
 * the database, without the main key.
 *
 * @module
 */

import { dirname, join } from "node:path";
import { z } from "zod";
import { findApiKey, generatedKeyPath } from "./access/api_key.ts";
import { ConfigError } from "./config/config.ts";
import { errorMessage } from "./errors.ts";
import { pathExists, writeAtomically, writePrivateFile } from "./util/files.ts";
import {
  namedKeySchema,
  namesUnique,
  readKeysFile,
  readLastUsed,
  writeKeys,
  writeLastUsed,
} from "./access/named_keys.ts";
import { exportPublished, importPublished, publishedSchema } from "./builtin/archive.ts";
import { QUEUE_NAMES, type QueueName } from "./queue_names.ts";
import { writeCounters } from "./store/integrity.ts";
import { withStore } from "./store/database.ts";
import {
  clear,
  isEmpty,
  peek,
  readResults,
  restore,
  RESULTS_CAPACITY,
  resultsHighWaterMark,
  roomForContent,
  type Store,
} from "./store/store.ts";

/** The value of `format` in every backup. */
const BACKUP_FORMAT = "content-relay-backup";

/**
 * The version this relay writes: 2 added `keys` and `api_key`. Version 1 files (no keys)
 * still import; a relay that knows only version 1 refuses a version 2 file rather than
 * drop its keys.
 */
const BACKUP_VERSION = 2;

const contentSchema = z.string().min(1).refine((text) => text.isWellFormed());

const itemSchema = z.object({
  content: contentSchema,
  created_at: z.number().int().nonnegative(),
});

/** A named key in a backup: the keys file's fields and when it was last used. */
const backupKeySchema = namedKeySchema.extend({
  /** Epoch ms of the last recorded use, or `null` when never used. */
  last_used_at: z.number().int().nonnegative().nullable(),
});

/**
 * The items of every queue of {@linkcode QUEUE_NAMES}, by name, built from that list so that a
 * queue added there is exported and imported too. A queue the file lacks (it was written before
 * that queue existed) imports as empty; a name this relay does not know is refused.
 */
function queuesSchema() {
  const item = z.array(itemSchema).default([]);
  const shape = Object.fromEntries(QUEUE_NAMES.map((queue) => [queue, item])) as Record<
    QueueName,
    typeof item
  >;
  return z.strictObject(shape, {
    error: (issue) =>
      issue.code === "unrecognized_keys"
        ? `unknown queue ${issue.keys.map((key) => `"${key}"`).join(", ")}: this relay has ${
          QUEUE_NAMES.join(", ")
        }`
        : undefined,
  });
}

/** A backup document, version 1 or 2. Times are epoch ms. */
const backupSchema = z.object({
  format: z.literal(BACKUP_FORMAT),
  version: z.union([z.literal(1), z.literal(2)], {
    error: "this relay reads versions 1 and 2; a newer relay wrote this file",
  }),
  exported_at: z.number().int(),
  results_hwm: z.number().int().nonnegative(),
  queues: queuesSchema(),
  results: z
    .array(z.object({
      t: z.number().int().positive(),
      content: contentSchema,
    }))
    .refine((results) => results.every((r, i) => i === 0 || r.t > results[i - 1]!.t), {
      error: "results must be in strictly increasing t",
    }),
  /** The named keys (version 2; absent in version 1 files and in {@linkcode exportStore}'s). */
  keys: z.array(backupKeySchema).refine(namesUnique, { error: "two keys have the same name" })
    .optional(),
  /** The main API key itself: only in `relay export --include-secrets` files. */
  api_key: z
    .string()
    .min(1)
    .refine((key) => key.trim() === key && !/[\r\n]/.test(key), {
      error: "the API key must be one line without surrounding spaces",
    })
    .optional(),
  /** The built-in notes, posts and podcast episodes (docs/publishing-builtin.md). */
  published: publishedSchema.optional(),
});

/** A backup document (see {@linkcode backupSchema}). */
export type Backup = z.infer<typeof backupSchema>;

/**
 * Where a relay keeps what a backup carries, as its configuration names them (the `Config`
 * of config.ts will do).
 */
export interface RelayFiles {
  /** The database file (`--db`). */
  readonly db: string;
  /** The keys file (`--keys-file`, default `keys.json` beside the database). */
  readonly keysFile: string;
  /** `--api-key-file`, when given; else the key is `api-key` beside the database. */
  readonly apiKeyFile: string | undefined;
  /** `RELAY_API_KEY`, which wins over the files when set (export only). */
  readonly secrets: { readonly apiKey: string | undefined };
}

/**
 * Reads everything the store holds into a backup document, without keys (see
 * {@linkcode exportRelay} for the whole relay).
 *
 * @throws {StoreBusyError} when writers kept moving a collection while it was read.
 */
export async function exportStore(store: Store): Promise<Backup> {
  const queues = await peek(store, QUEUE_NAMES);
  const results = await readResults(store, { since: 0, limit: RESULTS_CAPACITY });
  const pick = (queue: QueueName) =>
    (queues.get(queue) ?? []).map((item) => ({
      content: item.content,
      created_at: item.created_at,
    }));
  return {
    format: BACKUP_FORMAT,
    version: BACKUP_VERSION,
    exported_at: Math.floor(store.clock()),
    results_hwm: await resultsHighWaterMark(store),
    queues: Object.fromEntries(QUEUE_NAMES.map((queue) => [queue, pick(queue)])) as Record<
      QueueName,
      ReturnType<typeof pick>
    >,
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
 * @throws {ImportError} when it is not JSON or not a backup of version 1 or 2.
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
 * `force` (which replaces them; the high-water mark only ever grows).
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

/**
 * Exports a stopped relay (`relay export`): its database, under the lock, its named
 * keys with their last use, and, with `includeSecrets`, its main API key as the relay finds
 * it (`RELAY_API_KEY`, else the key file).
 *
 * @throws {DatabaseInUseError} when a relay holds the database.
 * @throws {ConfigError} when the keys file or the key file cannot be read, or
 *   `includeSecrets` is set and the relay has no main key yet.
 */
export async function exportRelay(
  files: RelayFiles,
  options: { includeSecrets?: boolean } = {},
): Promise<Backup> {
  return await withStore(files.db, async (store) => {
    const backup = {
      ...await exportStore(store),
      keys: backupKeys(files.keysFile),
      published: await exportPublished(dirname(files.db)),
    };
    if (!options.includeSecrets) return backup;
    const apiKey = await findApiKey({
      fromEnv: files.secrets.apiKey,
      keyFile: files.apiKeyFile,
      db: files.db,
    });
    if (apiKey === undefined) {
      throw new ConfigError(
        `no main API key to include: there is no ${generatedKeyPath(files.db)} ` +
          "(the relay writes it on its first start) and neither RELAY_API_KEY nor " +
          "RELAY_API_KEY_FILE is set",
      );
    }
    return { ...backup, api_key: apiKey.key };
  });
}

/**
 * The named keys of the keys file, with their last use, as a backup carries them.
 *
 * @throws {ConfigError} when the keys file cannot be read or is invalid.
 */
function backupKeys(keysFile: string): NonNullable<Backup["keys"]> {
  const lastUsed = readLastUsed(keysFile);
  return readKeysFile(keysFile).map((key) => ({
    ...key,
    scopes: [...key.scopes],
    last_used_at: lastUsed[key.name] ?? null,
  }));
}

/**
 * Imports a backup into a stopped relay (`relay import`), under the database's lock: the
 * database's contents, the named keys (replacing the keys file and its
 * last-use file; a version 1 backup has none and leaves them alone) and, when the backup
 * carries it, the main key (written to `--api-key-file`, else `api-key` beside the
 * database). Missing directories are created 0700 and files written 0600.
 *
 * Without `force` it refuses a target that is not empty: a database holding items or
 * results, a keys file holding keys, or a main key file holding another key than the
 * backup's. With `force` those are replaced.
 *
 * @throws {ImportError} when the target is not empty and `force` is not set.
 * @throws {DatabaseInUseError} when a relay holds the database.
 * @throws {ConfigError} when the keys file or the key file cannot be read or written, or
 *   the database cannot be opened.
 */
export async function importRelay(
  files: RelayFiles,
  backup: Backup,
  options: { force?: boolean } = {},
): Promise<void> {
  const apiKeyPath = files.apiKeyFile ?? generatedKeyPath(files.db);
  await withStore(files.db, async (store) => {
    if (!options.force) {
      const found: string[] = [];
      if (!await isEmpty(store)) found.push("the database holds items or results");
      const keys = readKeysFile(files.keysFile).length;
      if (keys > 0) found.push(`${files.keysFile} holds ${keys} named key(s)`);
      if (backup.api_key !== undefined) {
        const current = await readIfExists(apiKeyPath);
        if (current !== undefined && current.trim() !== backup.api_key) {
          found.push(`${apiKeyPath} holds another main key`);
        }
      }
      if (found.length > 0) {
        throw new ImportError(
          `the target is not empty (${found.join("; ")}): use --force to replace it`,
        );
      }
    }
    await importStore(store, backup, { force: true });
    // The restored counters start again from the backup's: the database's new baseline.
    try {
      await writeCounters(store, files.db);
    } catch (error) {
      throw new ConfigError(
        `cannot write the counters file beside "${files.db}": ${errorMessage(error)}`,
      );
    }
    // No keys to give and none to replace: no files to create.
    if (backup.keys !== undefined && (backup.keys.length > 0 || pathExists(files.keysFile))) {
      writeKeys(files.keysFile, backup.keys.map(({ last_used_at: _, ...key }) => key));
      writeLastUsed(
        files.keysFile,
        Object.fromEntries(
          backup.keys.flatMap((key) =>
            key.last_used_at === null ? [] : [[key.name, key.last_used_at]]
          ),
        ),
      );
    }
    if (backup.published !== undefined) {
      await importPublished(dirname(files.db), backup.published);
    }
    if (backup.api_key !== undefined) {
      try {
        writePrivateFile(apiKeyPath, `${backup.api_key}\n`);
      } catch (error) {
        throw new ConfigError(
          `cannot write the API key file "${apiKeyPath}": ${errorMessage(error)}`,
        );
      }
    }
  });
}

/** A file's text, or `undefined` when it does not exist. */
async function readIfExists(path: string): Promise<string | undefined> {
  try {
    return await Deno.readTextFile(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return undefined;
    throw new ConfigError(`cannot read "${path}": ${errorMessage(error)}`);
  }
}

/** The folder of the automatic backups: `backups` beside the database. */
export function backupsDirectory(db: string): string {
  return join(dirname(db), "backups");
}

/** An automatic backup's name: `relay-backup-YYYYMMDD-HHMMSS.json`, in UTC. */
const AUTOMATIC_BACKUP = /^relay-backup-(\d{4})(\d{2})(\d{2})-(\d{2})(\d{2})(\d{2})\.json$/;

/** The automatic backup's file name for a backup taken at `at` (epoch ms). */
export function automaticBackupName(at: number): string {
  const iso = new Date(at).toISOString(); // 2026-11-23T11:58:52.123Z
  return `relay-backup-${iso.slice(0, 10).replaceAll("-", "")}-${
    iso.slice(11, 19).replaceAll(":", "")
  }.json`;
}

/** The automatic backups in `dir`, oldest first, with when each was taken (epoch ms). */
function automaticBackups(dir: string): Array<{ name: string; at: number }> {
  const found: Array<{ name: string; at: number }> = [];
  try {
    for (const entry of Deno.readDirSync(dir)) {
      const m = AUTOMATIC_BACKUP.exec(entry.name);
      if (!entry.isFile || m === null) continue;
      const [, y, mo, d, h, mi, se] = m.map(Number) as number[];
      found.push({ name: entry.name, at: Date.UTC(y!, mo! - 1, d!, h!, mi!, se!) });
    }
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
  return found.sort((a, b) => a.at - b.at);
}

/** What {@linkcode scheduleBackups} needs. */
export interface BackupScheduleOptions {
  /** The database file: the backups go into `backups/` beside it. */
  readonly db: string;
  /** The keys file, whose named keys each backup carries. */
  readonly keysFile: string;
  /** Time between two backups, ms, ≥ 1000. */
  readonly everyMs: number;
  /** Backups kept, ≥ 1; the oldest beyond it are removed after each new one. */
  readonly keep: number;
  /** Told each backup written, e.g. `relay: backup … written`. */
  readonly info: (line: string) => void;
  /** Told each backup that failed (a full disk, a keys file that cannot be read). */
  readonly warn: (line: string) => void;
}

/** Running automatic backups. */
export interface BackupSchedule {
  /** Stops the schedule; waits for a backup being written. Never throws. */
  stop(): Promise<void>;
}

/**
 * Takes a backup of the running relay every `everyMs`, through its own store (the relay
 * holds the database's lock, so `relay export` cannot open it meanwhile): the queues, the
 * results, the cursor mark and the named keys, as `relay export` writes them without
 * `--include-secrets`. Each goes into `backups/` beside the database (made 0700) as
 * `relay-backup-YYYYMMDD-HHMMSS.json` (UTC, mode 0600, written under another name and
 * renamed, so a file with that name is always whole); then the oldest automatic backups
 * beyond `keep` are removed. The first is due `everyMs` after the newest one there, so a
 * relay that restarts often still takes them; at once when there is none or it is older.
 */
export function scheduleBackups(store: Store, options: BackupScheduleOptions): BackupSchedule {
  const dir = backupsDirectory(options.db);
  let timer: ReturnType<typeof setTimeout> | undefined;
  let running: Promise<void> | undefined;
  let stopped = false;
  const schedule = (at: number) => {
    if (stopped) return;
    timer = setTimeout(() => {
      const started = Date.now();
      running = takeBackup(store, options, dir, started)
        .then((line) => options.info(line))
        .catch((error) => options.warn(`relay: automatic backup failed: ${errorMessage(error)}`))
        .finally(() => {
          running = undefined;
          schedule(started + options.everyMs);
        });
    }, Math.max(0, at - Date.now()));
  };
  let newest: number | undefined;
  try {
    newest = automaticBackups(dir).at(-1)?.at;
  } catch (error) {
    options.warn(`relay: cannot list ${dir}: ${errorMessage(error)}`);
  }
  schedule(newest === undefined ? Date.now() : newest + options.everyMs);
  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}

/**
 * Writes one automatic backup and removes the oldest beyond `keep`.
 *
 * @returns The line to log.
 * @throws I/O errors (the temporary file is removed); {@linkcode ConfigError} for a keys file
 *   that cannot be read; an error saying the disk is full while the store is in disk-full
 *   mode, before anything is written.
 */
async function takeBackup(
  store: Store,
  options: BackupScheduleOptions,
  dir: string,
  at: number,
): Promise<string> {
  // In disk-full mode the room the store has left is for pulls and acks: a backup written
  // there would take it.
  if (!await roomForContent(store)) {
    throw new Error(
      "the disk is full, and what room is left is kept for pulls and acks: no backup until " +
        "space is freed",
    );
  }
  const backup: Backup = {
    ...await exportStore(store),
    keys: backupKeys(options.keysFile),
    published: await exportPublished(dirname(options.db)),
  };
  const path = join(dir, automaticBackupName(at));
  // Durable before older backups go: a power cut must not leave none whole.
  await writeAtomically(path, JSON.stringify(backup, null, 2) + "\n");
  const all = automaticBackups(dir);
  for (const old of all.slice(0, Math.max(0, all.length - options.keep))) {
    await Deno.remove(join(dir, old.name)).catch(() => {});
  }
  const queued = Object.values(backup.queues).reduce((n, items) => n + items.length, 0);
  return `relay: backup written to ${path} (${queued} queued items, ${backup.results.length} results)`;
}

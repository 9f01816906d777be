/**
 * What `relay export` and `relay import` do (their table entries are in
 * `backup_commands.ts`): loaded when one of them runs, since they open the store and read
 * the built-in services' files, which no other command needs.
 *
 * @module
 */

import { type Backup, exportRelay, ImportError, importRelay, parseBackup } from "../backup.ts";
import { commandDbPath, type Config, loadCheckedConfig } from "../config/config.ts";
import { writePrivateFile } from "../util/files.ts";
import { DatabaseInUseError } from "../store/lock.ts";
import { UnsafeDatabaseError } from "../store/database.ts";
import { StoreFormatError } from "../store/store.ts";
import { describePublished } from "../builtin/archive.ts";
import type { Args } from "./command.ts";
import { CommandFailure, type CommandIo, UsageError } from "./io.ts";
import { readInput } from "./text_input.ts";

/** What a backup holds, in a few words, for the commands' last line. */
function describeBackup(backup: Backup): string {
  const queued = Object.values(backup.queues).reduce((n, items) => n + items.length, 0);
  const keys = backup.keys === undefined ? "" : `, ${backup.keys.length} named keys`;
  const main = backup.api_key === undefined ? "" : " and the main API key";
  const published = backup.published;
  const built = published !== undefined &&
      published.notes.length + published.posts.length + published.episodes.length > 0
    ? ` (and ${describePublished(published)})`
    : "";
  return `${queued} queued items and ${backup.results.length} results${keys}${main}${built}`;
}

/** The relay's files as the server would find them, for the database the command means. */
function relayConfig(args: Args, io: CommandIo): Promise<Config> {
  const db = commandDbPath(args.string("db"), io.env, io.systemDataDir);
  return loadCheckedConfig({ db }, io.env);
}

/**
 * Runs `job`, turning the refusals of a backup into one line naming the command: a backup
 * that cannot be imported as asked, or a database that is unsafe to open (hard-linked,
 * damaged, of a later data format), is a usage error (exit 2), a database in use a failure
 * (exit 1).
 */
async function refusing<T>(command: string, job: () => Promise<T>): Promise<T> {
  try {
    return await job();
  } catch (error) {
    if (
      error instanceof ImportError || error instanceof UnsafeDatabaseError ||
      error instanceof StoreFormatError
    ) {
      throw new UsageError(`cannot ${command}: ${error.message}`, "");
    }
    if (error instanceof DatabaseInUseError) {
      throw new CommandFailure(`cannot ${command}: ${error.message}`);
    }
    throw error;
  }
}

/**
 * `relay export`: the backup to `--out` or stdout.
 *
 * @returns 0.
 * @throws {UsageError} for a database unsafe to open; {@linkcode CommandFailure} for one in use.
 */
export async function runExport(args: Args, io: CommandIo): Promise<number> {
  const config = await relayConfig(args, io);
  const includeSecrets = args.flag("include-secrets");
  const backup = await refusing("export", () => exportRelay(config, { includeSecrets }));
  const text = JSON.stringify(backup, null, 2) + "\n";
  const out = args.string("out");
  if (out === undefined) io.write(text);
  else {
    writePrivateFile(out, text);
    io.err(`relay: exported ${describeBackup(backup)} to ${out}`);
  }
  return 0;
}

/**
 * `relay import <F|->`: restores the backup into the database.
 *
 * @returns 0.
 * @throws {UsageError} for a bad command line, a backup that cannot be imported as asked or a
 *   database unsafe to open; {@linkcode CommandFailure} for one in use.
 */
export async function runImport(args: Args, io: CommandIo): Promise<number> {
  if (args.positionals.length !== 1) throw args.needs("exactly one backup file");
  const config = await relayConfig(args, io);
  const force = args.flag("force");
  await refusing("import", async () => {
    const backup = parseBackup(await readInput(args.positionals[0]!, io, args));
    await importRelay(config, backup, { force });
    io.err(`relay: imported ${describeBackup(backup)} into ${config.db}`);
  });
  return 0;
}

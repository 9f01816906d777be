/**
 * `relay export` and `relay import`: a backup of the relay's data as one JSON document,
 * made and restored on the relay's own machine while the relay is stopped.
 *
 * @module
 */

import { type Backup, exportRelay, ImportError, importRelay, parseBackup } from "../backup.ts";
import { commandDbPath, type Config, loadConfig } from "../config/config.ts";
import { writePrivateFile } from "../util/files.ts";
import { DatabaseInUseError } from "../store/lock.ts";
import { UnsafeDatabaseError } from "../store/database.ts";
import { StoreFormatError } from "../store/store.ts";
import { describePublished } from "../builtin/archive.ts";
import type { Args, Command } from "./command.ts";
import { DB_OPTION } from "./client_config.ts";
import { CommandFailure, type CommandIo, UsageError } from "./io.ts";
import { readInput } from "./text_input.ts";

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
function relayConfig(args: Args, io: CommandIo): Config {
  return loadConfig({ db: commandDbPath(args.string("db"), io.env, io.systemDataDir) }, io.env);
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

const exportCommand: Command = {
  name: "export",
  synopsis: "[--out F] [--include-secrets] [--db F]",
  summary: "write queues, results, cursor mark and named keys as JSON (relay stopped)",
  help: "Named keys (names, scopes, dates) are always in the backup; the main API key only\n" +
    "with --include-secrets. The file is written 0600.",
  options: [
    { name: "out", type: "string", value: "F", help: "write to F instead of stdout" },
    { name: "include-secrets", type: "boolean", help: "include the main API key" },
    DB_OPTION,
  ],
  async run(args, io) {
    const config = relayConfig(args, io);
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
  },
};

const importCommand: Command = {
  name: "import",
  synopsis: "<F|-> [--force] [--db F]",
  summary: "restore a backup into an empty relay (relay stopped)",
  help: "Refuses a relay that holds items, results, named keys or another main key unless\n" +
    "--force, which replaces them. Missing folders are created 0700.",
  options: [
    { name: "force", type: "boolean", help: "replace what the database holds" },
    DB_OPTION,
  ],
  positionals: true,
  async run(args, io) {
    if (args.positionals.length !== 1) throw args.needs("exactly one backup file");
    const config = relayConfig(args, io);
    const force = args.flag("force");
    await refusing("import", async () => {
      const backup = parseBackup(await readInput(args.positionals[0]!, io, args));
      await importRelay(config, backup, { force });
      io.err(`relay: imported ${describeBackup(backup)} into ${config.db}`);
    });
    return 0;
  },
};

/** The backup commands. */
export const BACKUP_COMMANDS: readonly Command[] = [exportCommand, importCommand];

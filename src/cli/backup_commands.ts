/**
 * `relay export` and `relay import`: a backup of the relay's data as one JSON document,
 * made and restored on the relay's own machine while the relay is stopped.
 *
 * @module
 */

import { type Backup, exportStore, ImportError, importStore, parseBackup } from "../backup.ts";
import { commandDbPath } from "../config.ts";
import { DatabaseInUseError } from "../lock.ts";
import { withStore } from "../server.ts";
import type { Command } from "./command.ts";
import { DB_OPTION } from "./client_config.ts";
import { CommandFailure } from "./io.ts";
import { readInput } from "./publish_commands.ts";

function describeBackup(backup: Backup): string {
  const queued = Object.values(backup.queues).reduce((n, items) => n + items.length, 0);
  return `${queued} queued items and ${backup.results.length} results`;
}

/** Runs `job`, turning the refusals of a backup into one line naming the command. */
async function refusing<T>(command: string, job: () => Promise<T>): Promise<T> {
  try {
    return await job();
  } catch (error) {
    if (error instanceof ImportError || error instanceof DatabaseInUseError) {
      throw new CommandFailure(`cannot ${command}: ${error.message}`);
    }
    throw error;
  }
}

const exportCommand: Command = {
  name: "export",
  synopsis: "[--out F] [--include-secrets] [--db F]",
  summary: "write queues, results and the cursor mark as JSON (relay stopped)",
  help: "Named keys (names, scopes, dates) are always in the backup; the main API key only\n" +
    "with --include-secrets. The file is written 0600.",
  options: [
    { name: "out", type: "string", value: "F", help: "write to F instead of stdout" },
    { name: "include-secrets", type: "boolean", help: "include the main API key" },
    DB_OPTION,
  ],
  async run(args, io) {
    const db = commandDbPath(args.string("db"), io.env);
    const includeSecrets = args.flag("include-secrets");
    const backup = await refusing(
      "export",
      () => withStore(db, (store) => exportStore(store, { includeSecrets })),
    );
    const text = JSON.stringify(backup, null, 2) + "\n";
    const out = args.string("out");
    if (out === undefined) io.write(text);
    else {
      await Deno.writeTextFile(`${out}.tmp`, text, { mode: 0o600 });
      await Deno.rename(`${out}.tmp`, out);
      io.err(`relay: exported ${describeBackup(backup)} from ${db} to ${out}`);
    }
    return 0;
  },
};

const importCommand: Command = {
  name: "import",
  synopsis: "<F|-> [--force] [--db F]",
  summary: "restore a backup into an empty database (relay stopped)",
  help: "Refuses a database that holds items or results unless --force, which replaces them.",
  options: [
    { name: "force", type: "boolean", help: "replace what the database holds" },
    DB_OPTION,
  ],
  positionals: true,
  async run(args, io) {
    if (args.positionals.length !== 1) throw args.usage("needs exactly one backup file");
    const db = commandDbPath(args.string("db"), io.env);
    const force = args.flag("force");
    await refusing("import", async () => {
      const backup = parseBackup(await readInput(args.positionals[0]!, io, args));
      await withStore(db, (store) => importStore(store, backup, { force }));
      io.err(`relay: imported ${describeBackup(backup)} into ${db}`);
    });
    return 0;
  },
};

/** The backup commands. */
export const BACKUP_COMMANDS: readonly Command[] = [exportCommand, importCommand];

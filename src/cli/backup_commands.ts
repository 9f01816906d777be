/**
 * `relay export` and `relay import`: a backup of the relay's data as one JSON document,
 * made and restored on the relay's own machine while the relay is stopped. This is their
 * entry in the command table; what they do is in `backup_run.ts`, loaded when they run.
 *
 * @module
 */

import type { Command } from "./command.ts";
import { DB_OPTION } from "./client_config.ts";

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
    const { runExport } = await import("./backup_run.ts");
    return await runExport(args, io);
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
    const { runImport } = await import("./backup_run.ts");
    return await runImport(args, io);
  },
};

/** The backup commands. */
export const BACKUP_COMMANDS: readonly Command[] = [exportCommand, importCommand];

/**
 * `relay serve` (also `relay` with no command, or with only server options): loads the
 * configuration, starts the relay, and stops it gracefully on SIGINT/SIGTERM.
 *
 * @module
 */

import { ConfigError, loadCheckedConfig, SECRET_ENV, SERVER_OPTIONS } from "../config/config.ts";
import { errorMessage } from "../errors.ts";
import { DatabaseInUseError } from "../store/lock.ts";
import type { Store } from "../store/store.ts";
import type { Logger } from "../server/log.ts";
import type { BackgroundJob, StartOptions } from "../server/start.ts";
import type { Command, OptionSpec } from "./command.ts";
import { type CommandIo, EXIT_FAILURE, EXIT_USAGE } from "./io.ts";

/** What a server option's value is, for its help line; `VALUE` when not listed. */
function placeholder(flag: string): string {
  if (flag.endsWith("-url")) return "URL";
  if (flag.endsWith("-file") || flag.startsWith("tls-") || flag === "db") return "FILE";
  const named: Record<string, string> = {
    hostname: "ADDRESS",
    port: "PORT",
    "dedupe-window": "DURATION",
    "publish-timeout": "DURATION",
    "qa-hosts": "LIST",
    "max-body": "SIZE",
  };
  return named[flag] ?? "VALUE";
}

/** The server options as the command table shows them (flag = environment variable). */
const OPTIONS: readonly OptionSpec[] = SERVER_OPTIONS.map((o) => ({
  name: o.flag,
  type: "string",
  value: placeholder(o.flag),
  help: o.help,
  env: o.env,
  ...(o.default === undefined ? {} : { default: o.default }),
}));

/**
 * Runs the relay until SIGINT or SIGTERM.
 *
 * @returns 0 after a clean shutdown; 2 for a configuration error found while starting (a
 *   TLS file that cannot be used) or a database found damaged (at start or while serving),
 *   so that systemd does not restart it (the unit's `RestartPreventExitStatus=2`); 1 when it cannot start otherwise, or requests were still
 *   in flight when it stopped.
 * @throws {ConfigError} for a bad option (exit code 2).
 */
async function serve(
  flags: Record<string, string | undefined>,
  io: CommandIo,
  version: string,
  extra: Pick<StartOptions, "podcastPauseAt">,
) {
  const config = await loadCheckedConfig(flags, io.env);
  // The server's and the store's modules load here, not with the command line, so that the
  // other commands (a `relay submit` from a shell or a script) start without them.
  const [{ startRelay }, { UnsafeDatabaseError }] = await Promise.all([
    import("../server/start.ts"),
    import("../store/database.ts"),
  ]);
  let relay;
  try {
    const everyMs = config.backupEveryMs;
    const backups: Array<(store: Store, logger: Logger) => BackgroundJob> = [];
    if (everyMs !== undefined) {
      // Loaded only when backups are scheduled: idle memory holds every module loaded.
      const { scheduleBackups } = await import("../backup.ts");
      backups.push((store, logger) =>
        scheduleBackups(store, {
          db: config.db,
          keysFile: config.keysFile,
          everyMs,
          keep: config.backupKeep,
          info: logger.info,
          warn: logger.warn,
        })
      );
    }
    relay = await startRelay(config, {
      version,
      pairing: Deno.stdout.isTerminal(),
      jobs: backups,
      ...extra,
    });
  } catch (error) {
    // Restarting cannot fix a bad option or an unsafe database (hard-linked, damaged): exit
    // like a configuration error, which the unit does not restart (docs/faults.md).
    if (error instanceof ConfigError || error instanceof UnsafeDatabaseError) {
      io.err(`relay: ${error.message}`);
      return EXIT_USAGE;
    }
    if (error instanceof DatabaseInUseError) {
      io.err(`relay: ${error.message}`);
    } else if (error instanceof Deno.errors.AddrInUse) {
      io.err(
        `relay: cannot listen on ${config.hostname}:${config.port}: address in use (another ` +
          "program holds the port: stop it, or choose another with --port or RELAY_PORT)",
      );
    } else {
      io.err(`relay: cannot start: ${errorMessage(error)}`);
    }
    return EXIT_FAILURE;
  }
  const stopped = Promise.withResolvers<string>();
  const onSignal = (signal: Deno.Signal) => () => stopped.resolve(signal);
  const handlers = [
    ["SIGINT", onSignal("SIGINT")],
    ["SIGTERM", onSignal("SIGTERM")],
  ] as const;
  for (const [signal, handler] of handlers) Deno.addSignalListener(signal, handler);
  // A terminal closing or `kill -HUP` must not stop a service: there is nothing to reload.
  const ignoreHup = () => relay.logger.info("relay: SIGHUP ignored (nothing to reload)");
  Deno.addSignalListener("SIGHUP", ignoreHup);
  const ended = await Promise.race([stopped.promise, relay.failed]);
  if (typeof ended === "string") {
    relay.logger.info(`relay: ${ended}: finishing in-flight requests`);
  } else relay.logger.error(`relay: ${ended.message}`);
  const drained = await relay.shutdown();
  for (const [name, handler] of handlers) Deno.removeSignalListener(name, handler);
  Deno.removeSignalListener("SIGHUP", ignoreHup);
  const stoppedLine = drained ? "relay: stopped" : "relay: stopped with requests still in flight";
  relay.logger.info(stoppedLine);
  await relay.flushLog();
  // A damaged database stops the relay like one found at start: exit 2, not restarted.
  if (typeof ended !== "string") return EXIT_USAGE;
  return drained ? 0 : EXIT_FAILURE;
}

/**
 * The `serve` command.
 *
 * @param version The relay's version, for its start line.
 * @param extra Start options the command line never sets: a test's entry script passes them
 *   (tests/reliability/_paused_relay.ts), as it injects a clock elsewhere.
 */
export function serveCommand(
  version: string,
  extra: Pick<StartOptions, "podcastPauseAt"> = {},
): Command {
  return {
    name: "serve",
    synopsis: "[options]",
    summary: "run the relay (the default when no command is given)",
    help: [
      "Each option can also be set by its environment variable; a flag wins.",
      "Secrets come from the environment only, never from flags:",
      `  ${SECRET_ENV.apiKey}  the API key (else --api-key-file, else api-key beside --db)`,
      `  ${SECRET_ENV.appId}  the podcast service's X-App-ID`,
      `  ${SECRET_ENV.blogAccessCookie}  the blog's access cookie`,
    ].join("\n"),
    options: OPTIONS,
    async run(args, io) {
      const flags = Object.fromEntries(OPTIONS.map((o) => [o.name, args.string(o.name)]));
      return await serve(flags, io, version, extra);
    },
  };
}

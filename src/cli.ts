/**
 * The command line (contract C70): `relay [serve] [options]`, `--help`, `--version`.
 * Parses arguments, loads the configuration and runs the chosen command; returns the
 * exit code instead of exiting, so tests can call it.
 *
 * @module
 */

import { parseArgs } from "node:util";
import denoConfig from "../deno.json" with { type: "json" };
import {
  CLIENT_COMMANDS,
  EXIT_FAILURE,
  EXIT_USAGE,
  isClientCommand,
  runClientCommand,
} from "./commands.ts";
import { ConfigError, loadConfig, SECRET_ENV, SERVER_OPTIONS } from "./config.ts";
import { DatabaseInUseError } from "./lock.ts";
import { errorMessage } from "./errors.ts";
import { startRelay } from "./server/start.ts";
import { UnsafeDatabaseError } from "./store/database.ts";

/** The relay's version, from `deno.json`. */
export const VERSION: string = denoConfig.version;

/** The text of `relay --help`. */
function usage(): string {
  const width = Math.max(...SERVER_OPTIONS.map((o) => o.flag.length)) + 2;
  const lines = SERVER_OPTIONS.map((o) =>
    `  --${o.flag.padEnd(width)} ${o.help}\n  ${"".padEnd(width + 2)} env ${o.env}${
      o.default === undefined ? "" : `, default ${o.default}`
    }`
  );
  return [
    `relay ${VERSION}: a small HTTP relay for links, text and results`,
    "",
    "Usage: relay [serve] [options]",
    "       relay <command> [options]",
    "",
    "Server:",
    "  serve      run the relay (the default)",
    "",
    "Server options:",
    ...lines,
    `  --${"help".padEnd(width)} print this help`,
    `  --${"version".padEnd(width)} print the version`,
    "",
    "Secrets, from the environment only:",
    `  ${SECRET_ENV.apiKey}  the API key (else --api-key-file, else api-key beside --db)`,
    `  ${SECRET_ENV.appId}  the podcast service's X-App-ID`,
    `  ${SECRET_ENV.blogAccessCookie}  the blog's access cookie`,
    "",
    "Client commands (talk to a running relay):",
    ...CLIENT_COMMANDS.flatMap(([synopsis, help]) => [`  relay ${synopsis}`, `      ${help}`]),
    "",
    "Client options: --url URL (env RELAY_URL, default http://127.0.0.1:8787),",
    "  --api-key-file F (env RELAY_API_KEY_FILE; RELAY_API_KEY wins; default: the api-key",
    "  file beside --db on the relay's own machine), --json for machine-readable output.",
  ].join("\n");
}

function env(name: string): string | undefined {
  return Deno.env.get(name);
}

/**
 * Runs the command line.
 *
 * @param args The arguments after the program name.
 * @returns The process exit code: 0 after a clean shutdown, 2 for a bad command line or
 *   configuration, 1 for a failure at run time. Messages go to stdout and stderr.
 */
export async function main(args: string[]): Promise<number> {
  const [first, ...others] = args;
  if (first !== undefined && isClientCommand(first)) return await client(first, others);
  let parsed;
  try {
    parsed = parseArgs({
      args,
      allowPositionals: true,
      strict: true,
      options: {
        help: { type: "boolean", short: "h" },
        version: { type: "boolean", short: "V" },
        ...Object.fromEntries(SERVER_OPTIONS.map((o) => [o.flag, { type: "string" as const }])),
      },
    });
  } catch (error) {
    console.error(
      `relay: ${errorMessage(error)}; see relay --help`,
    );
    return EXIT_USAGE;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    console.log(usage());
    return 0;
  }
  if (values.version) {
    console.log(`relay ${VERSION} (deno ${Deno.version.deno})`);
    return 0;
  }
  const [command = "serve", ...rest] = positionals;
  if (command !== "serve" || rest.length > 0) {
    console.error(`relay: unknown command "${[command, ...rest].join(" ")}"; see relay --help`);
    return EXIT_USAGE;
  }
  const flags = Object.fromEntries(
    SERVER_OPTIONS.map((
      o,
    ) => [o.flag, values[o.flag as keyof typeof values] as string | undefined]),
  );
  return await serve(flags);
}

/** Runs a client command with the real stdin, stdout, stderr and signals. */
async function client(command: string, args: string[]): Promise<number> {
  const controller = new AbortController();
  const stop = () => controller.abort();
  for (const signal of ["SIGINT", "SIGTERM"] as const) Deno.addSignalListener(signal, stop);
  try {
    return await runClientCommand(command, args, {
      env,
      out: (line) => console.log(line),
      err: (line) => console.error(line),
      stdin: () => new Response(Deno.stdin.readable).text(),
      signal: controller.signal,
    });
  } finally {
    for (const signal of ["SIGINT", "SIGTERM"] as const) Deno.removeSignalListener(signal, stop);
  }
}

async function serve(flags: Record<string, string | undefined>): Promise<number> {
  let config;
  try {
    config = loadConfig(flags, env);
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(`relay: ${error.message}`);
      return EXIT_USAGE;
    }
    throw error;
  }
  let relay;
  try {
    relay = await startRelay(config, { version: VERSION, pairing: Deno.stdout.isTerminal() });
  } catch (error) {
    if (error instanceof UnsafeDatabaseError) {
      // Restarting cannot fix it: exit like a configuration error (docs/operations.md).
      console.error(`relay: ${error.message}`);
      return EXIT_USAGE;
    }
    if (error instanceof ConfigError || error instanceof DatabaseInUseError) {
      console.error(`relay: ${error.message}`);
    } else if (error instanceof Deno.errors.AddrInUse) {
      console.error(`relay: cannot listen on ${config.hostname}:${config.port}: address in use`);
    } else {
      console.error(
        `relay: cannot start: ${errorMessage(error)}`,
      );
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
  const ignoreHup = () => console.log("relay: SIGHUP ignored (nothing to reload)");
  Deno.addSignalListener("SIGHUP", ignoreHup);
  const signal = await stopped.promise;
  console.log(`relay: ${signal}: finishing in-flight requests`);
  const drained = await relay.shutdown();
  for (const [name, handler] of handlers) Deno.removeSignalListener(name, handler);
  Deno.removeSignalListener("SIGHUP", ignoreHup);
  console.log(drained ? "relay: stopped" : "relay: stopped with requests still in flight");
  return drained ? 0 : EXIT_FAILURE;
}

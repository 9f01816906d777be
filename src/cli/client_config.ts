/**
 * Where a client command finds the relay and its key (docs/cli/commands.md, "Finding the relay and the key"): a
 * flag, else the environment, else the config file that `relay login` writes, else the
 * default (the relay on this machine, and the key file it generated beside its database).
 *
 * The config file is `$XDG_CONFIG_HOME/relay/config` (else `~/.config/relay/config`),
 * mode 0600, with lines `RELAY_URL=…` and `RELAY_API_KEY=…`: the names of the environment
 * variables, so it reads like an env file.
 *
 * @module
 */

import { isAbsolute, join } from "node:path";
import { z } from "zod";
import { generatedKeyPath } from "../access/api_key.ts";
import { DEFAULT_RELAY_URL, type RelayClient } from "../client/client.ts";
import { addressFile, commandDbPath, ConfigError, readEnv } from "../config/config.ts";
import { errorMessage } from "../errors.ts";
import { writePrivateFile } from "../util/files.ts";
import type { Args, OptionSpec } from "./command.ts";
import { type CommandIo, UsageError } from "./io.ts";

/** `--url`: the relay's address. */
export const URL_OPTION: OptionSpec = {
  name: "url",
  type: "string",
  value: "URL",
  help: "the relay's address",
  env: "RELAY_URL",
  default: `the config file's RELAY_URL, else the address beside --db, else ${DEFAULT_RELAY_URL}`,
};

/** `--api-key-file`: a file holding the key. */
export const KEY_FILE_OPTION: OptionSpec = {
  name: "api-key-file",
  type: "string",
  value: "FILE",
  help: "file holding the API key (the key itself only ever comes from RELAY_API_KEY)",
  env: "RELAY_API_KEY_FILE",
  default: "RELAY_API_KEY, else the config file's key, else api-key beside --db",
};

/** `--db`: the relay's database, for commands run on the relay's own machine. */
export const DB_OPTION: OptionSpec = {
  name: "db",
  type: "string",
  value: "FILE",
  help: "the relay's database, on the relay's own machine",
  env: "RELAY_DB",
  default: "./data/relay.kv, else /var/lib/relay/relay.kv when that directory exists",
};

/** The options every command that talks to a relay takes. */
export const CLIENT_OPTIONS: readonly OptionSpec[] = [URL_OPTION, KEY_FILE_OPTION, DB_OPTION];

/** The variables the config file may set. */
export const CONFIG_NAMES = { url: "RELAY_URL", key: "RELAY_API_KEY" } as const;

/**
 * The config file's path: `$XDG_CONFIG_HOME/relay/config`, else `$HOME/.config/relay/config`
 * (a relative `XDG_CONFIG_HOME` is ignored, as the XDG specification says).
 *
 * @returns The path, or `undefined` when neither variable is set.
 */
export function configFilePath(env: (name: string) => string | undefined): string | undefined {
  const xdg = readEnv(env, "XDG_CONFIG_HOME");
  if (xdg !== undefined && isAbsolute(xdg)) return join(xdg, "relay", "config");
  const home = readEnv(env, "HOME");
  return home === undefined ? undefined : join(home, ".config", "relay", "config");
}

/** A config file's variables, and where it is. */
export interface ClientConfigFile {
  /** Its path, or `undefined` when there is no place for one. */
  readonly path: string | undefined;
  /** Its `NAME=value` lines; empty when the file does not exist. */
  readonly values: Readonly<Record<string, string>>;
}

/**
 * Reads the config file: `NAME=value` lines; blank lines and `#` comments are skipped, and
 * a value may be wrapped in single or double quotes.
 *
 * @returns Its values; none when it does not exist.
 * @throws {ConfigError} when it exists but cannot be read.
 */
export async function readConfigFile(
  env: (name: string) => string | undefined,
): Promise<ClientConfigFile> {
  const path = configFilePath(env);
  if (path === undefined) return { path, values: {} };
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return { path, values: {} };
    throw new ConfigError(`cannot read the config file "${path}": ${errorMessage(error)}`);
  }
  return { path, values: parseEnvLines(text) };
}

function parseEnvLines(text: string): Record<string, string> {
  const values: Record<string, string> = {};
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    const equals = line.indexOf("=");
    if (line === "" || line.startsWith("#") || equals < 1) continue;
    const value = line.slice(equals + 1).trim();
    const quoted = /^(["'])(.*)\1$/.exec(value);
    values[line.slice(0, equals).trim()] = quoted ? quoted[2]! : value;
  }
  return values;
}

/**
 * Writes `RELAY_URL` and `RELAY_API_KEY` into the config file, keeping its other lines.
 * Missing folders are created 0700 and the file is 0600 whatever the umask; the file is
 * replaced atomically (written beside it, then renamed).
 *
 * @throws {Error} when the folder or file cannot be written.
 */
export async function writeConfigFile(
  path: string,
  settings: { url: string; key: string },
): Promise<void> {
  let old = "";
  try {
    old = await Deno.readTextFile(path);
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
  const names: string[] = Object.values(CONFIG_NAMES);
  const kept = old.split("\n").filter((line) => {
    const name = line.split("=")[0]?.trim() ?? "";
    return line.trim() !== "" && !names.includes(name);
  });
  const text = [
    ...kept,
    `${CONFIG_NAMES.url}=${settings.url}`,
    `${CONFIG_NAMES.key}=${settings.key}`,
  ].join("\n") + "\n";
  writePrivateFile(path, text);
}

const urlSchema = z.url({ protocol: /^https?$/ });

/**
 * The relay's address: `--url`, else `RELAY_URL`, else the config file's, else the address
 * the relay on this machine last listened on (the address file it writes beside its
 * database, `--db` or the default one: a wildcard host read as loopback), else
 * `http://127.0.0.1:8787`.
 *
 * @param db The command's `--db` value, if any: whose address file is read.
 * @throws {UsageError} naming where a value that is not an http(s) URL came from.
 */
export function resolveUrl(
  flag: string | undefined,
  io: Pick<CommandIo, "env" | "systemDataDir">,
  file: ClientConfigFile,
  db?: string | undefined,
): string {
  const fromEnv = readEnv(io.env, "RELAY_URL");
  const fromFile = file.values[CONFIG_NAMES.url] || undefined;
  const [url, origin] = flag !== undefined
    ? [flag, "--url"]
    : fromEnv !== undefined
    ? [fromEnv, "RELAY_URL"]
    : fromFile !== undefined
    ? [fromFile, `RELAY_URL in ${file.path}`]
    : [listenedOn(commandDbPath(db, io.env, io.systemDataDir)) ?? DEFAULT_RELAY_URL, ""];
  if (!urlSchema.safeParse(url).success) {
    throw new UsageError(`invalid ${origin} "${url}": must be an http:// or https:// URL`);
  }
  return url;
}

/**
 * The address a relay with database `db` last listened on, from its address file, as this
 * machine reaches it: `http://0.0.0.0:9000` is `http://127.0.0.1:9000`, `http://[::]:9000`
 * is `http://[::1]:9000`. `undefined` when there is no such file or it holds no http(s) URL.
 */
function listenedOn(db: string): string | undefined {
  let text: string;
  try {
    text = Deno.readTextFileSync(addressFile(db)).trim();
  } catch {
    return undefined; // never started here, or not readable by this user
  }
  if (!urlSchema.safeParse(text).success) return undefined;
  const url = new URL(text);
  if (url.hostname === "0.0.0.0") url.hostname = "127.0.0.1";
  else if (url.hostname === "[::]") url.hostname = "[::1]";
  return url.origin;
}

/** The origin of an http(s) URL (scheme, host, port), for comparing two relays' addresses. */
function originOf(url: string): string {
  return new URL(url).origin;
}

/** Whether `url` points at this machine (a loopback address or `localhost`). */
function isLoopback(url: string): boolean {
  const host = new URL(url).hostname;
  return host === "localhost" || host === "[::1]" || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/**
 * The API key for the relay at `url`: the file named by `--api-key-file`, else
 * `RELAY_API_KEY`, else the file named by `RELAY_API_KEY_FILE`, else the config file's
 * `RELAY_API_KEY` (only when `url` is the config file's relay, so a key saved for one relay
 * is never sent to another), else the `api-key` file the relay generated beside its database
 * (only for a relay on this machine, a loopback `url`).
 *
 * @param url The relay's address, as {@linkcode resolveUrl} gave it.
 * @throws {UsageError} when a named key file cannot be read, or no key is found.
 */
export async function resolveKey(
  args: Args,
  io: Pick<CommandIo, "env" | "systemDataDir">,
  file: ClientConfigFile,
  url: string,
): Promise<string> {
  const flagFile = args.string("api-key-file");
  if (flagFile !== undefined) return await readKeyFile(flagFile, "--api-key-file");
  const fromEnv = readEnv(io.env, "RELAY_API_KEY");
  if (fromEnv !== undefined) return fromEnv;
  const envFile = readEnv(io.env, "RELAY_API_KEY_FILE");
  if (envFile !== undefined) return await readKeyFile(envFile, "RELAY_API_KEY_FILE");
  const fromFile = file.values[CONFIG_NAMES.key]?.trim();
  const fileUrl = file.values[CONFIG_NAMES.url] || DEFAULT_RELAY_URL;
  const fileRelay = urlSchema.safeParse(fileUrl).success ? originOf(fileUrl) : undefined;
  if (fromFile && fileRelay === originOf(url)) return fromFile;
  const notSent = fromFile
    ? ` (the key in ${file.path} is for ${fileUrl}, and is never sent to another relay)`
    : "";
  if (!isLoopback(url)) {
    throw new UsageError(
      `no API key for ${url}: run relay login, or set RELAY_API_KEY, or give --api-key-file` +
        notSent,
    );
  }
  const path = generatedKeyPath(commandDbPath(args.string("db"), io.env, io.systemDataDir));
  let key = "";
  try {
    key = (await Deno.readTextFile(path)).trim();
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) {
      throw new UsageError(`cannot read the API key file "${path}": ${errorMessage(error)}`);
    }
  }
  if (key !== "") return key;
  throw new UsageError(
    "no API key: run relay login, or set RELAY_API_KEY, or give --api-key-file, " +
      `or run this where the relay keeps ${path}${notSent}`,
  );
}

async function readKeyFile(path: string, origin: string): Promise<string> {
  let key: string;
  try {
    key = (await Deno.readTextFile(path)).trim();
  } catch (error) {
    throw new UsageError(`invalid ${origin} "${path}": cannot read it (${errorMessage(error)})`);
  }
  if (key === "") throw new UsageError(`invalid ${origin} "${path}": the file is empty`);
  return key;
}

/**
 * Where the relay is and the key to use, for a command declaring {@linkcode CLIENT_OPTIONS}
 * (each value: flag, else environment, else config file, else default).
 *
 * @throws {UsageError} as {@linkcode resolveUrl} and {@linkcode resolveKey}.
 * @throws {ConfigError} when the config file exists but cannot be read.
 */
export async function resolveClient(
  args: Args,
  io: Pick<CommandIo, "env" | "systemDataDir">,
): Promise<RelayClient> {
  const file = await readConfigFile(io.env);
  const url = resolveUrl(args.string("url"), io, file, args.string("db"));
  return { url, key: await resolveKey(args, io, file, url) };
}

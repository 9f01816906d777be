/**
 * The relay's configuration: command-line flags and environment variables, validated by
 * one zod schema.
 *
 * A flag wins over its environment variable; an empty environment variable counts as
 * unset. Secrets come only from the environment or files, never from flags.
 *
 * @module
 */

import { dirname, join } from "node:path";
import { pathExists } from "../util/files.ts";
import { commandWords } from "../util/command_words.ts";
import { z } from "zod";
import {
  LOG_FORMATS,
  LOG_LEVELS,
  type LogFormat,
  type LogLevel,
  MAX_BODY_LIMIT_BYTES,
} from "../constants.ts";
import { SECRET_ENV, SERVER_OPTIONS } from "./options.ts";

export { type OptionSpec, SECRET_ENV, SERVER_OPTIONS } from "./options.ts";

/** The validated configuration of `relay serve`. Units: ms and bytes. */
export interface Config {
  /** Address to listen on. */
  readonly hostname: string;
  /** TCP port, 0–65535; 0 picks a free port. */
  readonly port: number;
  /** Path of the Deno KV file. */
  readonly db: string;
  /** Duplicate window, ms, > 0. */
  readonly dedupeWindowMs: number;
  /** Lower-case Q&A domains. */
  readonly qaHosts: readonly string[];
  /** Body limit, bytes, 1 … 768 KiB. */
  readonly maxBodyBytes: number;
  /**
   * Connections open at once, ≥ 1; keep it below the open-file limit less about 64
   * (docs/faults.md, "Connections and file descriptors").
   */
  readonly maxConnections: number;
  /** A connection with no request in progress is closed after this, ms, > 0. */
  readonly idleTimeoutMs: number;
  /** Results streams open at once, ≥ 1. */
  readonly maxStreams: number;
  /** Results streams one key may have open at once, ≥ 1. */
  readonly maxStreamsPerKey: number;
  /**
   * Origins (`scheme://host[:port]`, as a browser sends them in `Origin`) allowed besides
   * the relay's own; empty by default.
   */
  readonly allowedOrigins: readonly string[];
  /** Base URL of the downstream services, when publishing is configured. */
  readonly publishUrl: string | undefined;
  /** Base URL of the notes store; overrides `publishUrl` for that target. */
  readonly notesUrl: string | undefined;
  /** Base URL of the blog; overrides `publishUrl` for that target. */
  readonly blogUrl: string | undefined;
  /** Base URL of the podcast queue; overrides `publishUrl` for that target. */
  readonly podcastUrl: string | undefined;
  /** The targets file (docs/publishing-targets.md), and whether it was named (then it must exist). */
  readonly targetsFile: { readonly path: string; readonly required: boolean };
  /** Timeout of one downstream call, ms, > 0. */
  readonly publishTimeoutMs: number;
  /** Origin phones reach the relay at, for absolute URLs in feeds and pages; no trailing `/`. */
  readonly publicUrl: string | undefined;
  /** The built-in blog needs a key with the read scope. */
  readonly privateBlog: boolean;
  /** The built-in podcast's feed and audio need a key with the read scope. */
  readonly privatePodcast: boolean;
  /**
   * The household's speech engine, run per chunk instead of the built-in one: a command line
   * (`{lang}` in it becomes the chunk's language), split into words without a shell; its
   * words are checked by {@linkcode loadCheckedConfig}, not by {@linkcode loadConfig}.
   */
  readonly speechCommand: string | undefined;
  /** Podcast episodes kept, ≥ 1. */
  readonly podcastKeep: number;
  /** Disk space for podcast audio, bytes, ≥ 1 MiB. */
  readonly podcastMaxDiskBytes: number;
  /** The podcast feed's language, a BCP 47 tag (`en`, `zh-cn`); default the first episode's. */
  readonly podcastLanguage: string | undefined;
  /** The podcast owner's email, for the feed's `itunes:owner`. */
  readonly podcastEmail: string | undefined;
  /** File holding the API key, when given. */
  readonly apiKeyFile: string | undefined;
  /** The named keys with scopes; may not exist yet. */
  readonly keysFile: string;
  /** PEM certificate chain and private key files for HTTPS, both or neither. */
  readonly tls: { readonly certFile: string; readonly keyFile: string } | undefined;
  /** Interval of the automatic backups, ms (≥ 1 s), or `undefined` for none. */
  readonly backupEveryMs: number | undefined;
  /** Automatic backups kept, 1–1000; older ones are removed. */
  readonly backupKeep: number;
  /** `text` or `json`: how log lines are written. */
  readonly logFormat: LogFormat;
  /** The least severe log level written; access lines are `info`. */
  readonly logLevel: LogLevel;
  /** Secrets from the environment; each `undefined` when unset or empty. */
  readonly secrets: {
    readonly apiKey: string | undefined;
    readonly appId: string | undefined;
    readonly blogAccessCookie: string | undefined;
  };
}

/** A configuration problem; its message is the one line the relay prints before exiting. */
export class ConfigError extends Error {
  /** @param message One line naming the bad option, e.g. `invalid --port "x": …`. */
  constructor(message: string) {
    super(message);
    this.name = "ConfigError";
  }
}

const DURATION = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/;
const DURATION_UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/**
 * Parses a duration: a number with `ms`, `s`, `m` or `h`, e.g. `1500ms`, `2s`, `5m`.
 *
 * @returns Whole milliseconds, or `undefined` when the text is not a duration.
 */
export function parseDuration(text: string): number | undefined {
  const match = DURATION.exec(text.trim());
  if (match === null) return undefined;
  return Math.round(Number(match[1]) * (DURATION_UNIT_MS[match[2] ?? ""] ?? NaN));
}

const SIZE = /^(\d+(?:\.\d+)?)\s*(KiB|MiB|GiB)?$/;

/**
 * Parses a size: bytes, or a number with `KiB`, `MiB` or `GiB`, e.g. `524288`, `512KiB`.
 *
 * @returns Whole bytes, or `undefined` when the text is not a size.
 */
export function parseSize(text: string): number | undefined {
  const match = SIZE.exec(text.trim());
  if (match === null) return undefined;
  const unit = match[2] === "GiB"
    ? 1024 ** 3
    : match[2] === "MiB"
    ? 1024 * 1024
    : match[2] === "KiB"
    ? 1024
    : 1;
  const bytes = Number(match[1]) * unit;
  return Number.isInteger(bytes) ? bytes : undefined;
}

/**
 * Longest duration an option takes, ms: 30 days. Timers in Deno hold at most 2^31 − 1 ms
 * (24.8 days) and nothing the relay waits for needs more.
 */
const MAX_DURATION_MS = 720 * 3_600_000;

/** An IPv4 or IPv6 address or a host name that `Deno.serve` can listen on. */
function isListenAddress(text: string): boolean {
  if (text.includes(":")) {
    try {
      return new URL(`http://[${text}]/`).hostname !== "";
    } catch {
      return false;
    }
  }
  return HOST_NAME.test(text.toLowerCase());
}

const HOST_NAME = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/;

const httpUrl = z
  .url({ protocol: /^https?$/, error: "must be an http:// or https:// URL" })
  .optional();

const yesNo = z
  .string()
  .transform((text) => text.trim().toLowerCase())
  .refine((text) => ["yes", "no", "true", "false", "on", "off", "1", "0"].includes(text), {
    error: "must be yes or no",
  })
  .transform((text) => ["yes", "true", "on", "1"].includes(text));
const count = (what: string) =>
  z
    .string()
    .regex(/^\d+$/, { error: `must be a whole number of ${what}, at least 1` })
    .transform(Number)
    .refine((n) => n >= 1 && n <= 1_000_000, {
      error: `must be a whole number of ${what}, from 1 to 1000000`,
    });

/** An origin as a browser sends it: `http` or `https`, a host, maybe a port, nothing else. */
function parseOrigin(text: string): string | undefined {
  if (!/^https?:\/\/[^/?#@]+\/?$/i.test(text)) return undefined;
  try {
    return new URL(text).origin;
  } catch {
    return undefined;
  }
}

const configSchema = z.object({
  hostname: z.string().min(1, { error: "must not be empty" }).refine(isListenAddress, {
    error: "must be an IP address or a host name, e.g. 0.0.0.0, 127.0.0.1, :: or localhost",
  }),
  port: z
    .string()
    .regex(/^\d+$/, { error: "must be a whole number from 0 to 65535" })
    .transform(Number)
    .refine((n) => n <= 65535, { error: "must be a whole number from 0 to 65535" }),
  db: z.string().min(1, { error: "must not be empty" }),
  "dedupe-window": z
    .string()
    .transform((text) => parseDuration(text) ?? -1)
    .refine((ms) => ms > 0 && ms <= MAX_DURATION_MS, {
      error: "must be a duration from 1ms to 720h: a number with ms, s, m or h (e.g. 5m)",
    }),
  "qa-hosts": z
    .string()
    .transform((text) =>
      text.split(",").map((host) => host.trim().toLowerCase()).filter((h) => h !== "")
    )
    .refine((hosts) => hosts.every((host) => HOST_NAME.test(host)), {
      error: "must be comma-separated domain names, e.g. stackoverflow.com,zhihu.com",
    }),
  "max-body": z
    .string()
    .transform((text) => parseSize(text) ?? -1)
    .refine((bytes) => bytes >= 1 && bytes <= MAX_BODY_LIMIT_BYTES, {
      error: `must be a size from 1 byte to 768KiB (${MAX_BODY_LIMIT_BYTES} bytes)`,
    }),
  "max-connections": count("connections"),
  "idle-timeout": z
    .string()
    .transform((text) => parseDuration(text) ?? -1)
    .refine((ms) => ms >= 100 && ms <= MAX_DURATION_MS, {
      error: "must be a duration from 100ms to 720h: a number with ms, s, m or h (e.g. 30s)",
    }),
  "max-streams": count("streams"),
  "max-streams-per-key": count("streams"),
  "allow-origin": z
    .string()
    .transform((text) => text.split(",").map((o) => o.trim()).filter((o) => o !== ""))
    .refine((origins) => origins.every((o) => parseOrigin(o) !== undefined), {
      error: "must be comma-separated origins such as https://relay.example or http://nas:8787",
    })
    .transform((origins) => origins.map((o) => parseOrigin(o)!))
    .optional(),
  "publish-url": httpUrl,
  "notes-url": httpUrl,
  "blog-url": httpUrl,
  "podcast-url": httpUrl,
  "targets-file": z.string().min(1, { error: "must not be empty" }).optional(),
  "publish-timeout": z
    .string()
    .transform((text) => parseDuration(text) ?? -1)
    .refine((ms) => ms > 0 && ms <= MAX_DURATION_MS, {
      error: "must be a duration from 1ms to 720h: a number with ms, s, m or h (e.g. 15s)",
    }),
  "public-url": z
    .url({ protocol: /^https?$/, error: "must be an http:// or https:// URL" })
    .refine((url) => !/[?#]/.test(url), { error: "must not have a query or fragment" })
    .transform((url) => url.replace(/\/+$/, ""))
    .optional(),
  "private-blog": yesNo,
  "private-podcast": yesNo,
  // Its words are checked by loadCheckedConfig, which has the parser loaded for them.
  "speech-command": z.string().trim().min(1, { error: "must not be empty" }).optional(),
  "podcast-keep": z
    .string()
    .regex(/^\d+$/, { error: "must be a whole number from 1" })
    .transform(Number)
    .refine((n) => n >= 1 && n <= 1_000_000, { error: "must be a whole number from 1" }),
  "podcast-max-disk": z
    .string()
    .transform((text) => parseSize(text) ?? -1)
    .refine((bytes) => bytes >= 1024 * 1024, {
      error: "must be a size of at least 1MiB (bytes, KiB, MiB or GiB)",
    }),
  "podcast-language": z
    .string()
    .regex(/^[a-z]{2,3}(-[a-z0-9]{1,8})*$/i, {
      error: "must be a language tag such as en, en-gb or zh-cn",
    })
    .transform((tag) => tag.toLowerCase())
    .optional(),
  "podcast-email": z.email({ error: "must be an email address" }).optional(),
  "api-key-file": z.string().min(1, { error: "must not be empty" }).optional(),
  "keys-file": z.string().min(1, { error: "must not be empty" }).optional(),
  "tls-cert": z.string().min(1, { error: "must not be empty" }).optional(),
  "tls-key": z.string().min(1, { error: "must not be empty" }).optional(),
  "backup-every": z
    .string()
    .transform((text) => parseDuration(text) ?? -1)
    .refine((ms) => ms >= 1000 && ms <= MAX_DURATION_MS, {
      error: "must be a duration from 1s to 720h: a number with ms, s, m or h (e.g. 24h)",
    })
    .optional(),
  "backup-keep": z
    .string()
    .regex(/^\d+$/, { error: "must be a whole number from 1 to 1000" })
    .transform(Number)
    .refine((n) => n >= 1 && n <= 1000, { error: "must be a whole number from 1 to 1000" }),
  "log-format": z.enum(LOG_FORMATS, { error: `must be ${LOG_FORMATS.join(" or ")}` }),
  "log-level": z.enum(LOG_LEVELS, { error: `must be one of ${LOG_LEVELS.join(", ")}` }),
});

/**
 * The default database path: `$STATE_DIRECTORY/relay.kv` under systemd (the first
 * directory when systemd lists several), else `./data/relay.kv`.
 */
export function defaultDbPath(stateDirectory: string | undefined): string {
  const first = stateDirectory?.split(":")[0];
  return first ? join(first, "relay.kv") : join(".", "data", "relay.kv");
}

/**
 * The relay's data directory under systemd (the unit's `StateDirectory=relay`), where client
 * commands run on the relay's machine look when `./data` has no database.
 */
export const SYSTEM_DATA_DIR = "/var/lib/relay";

/**
 * The database a command on the relay's machine means: `--db` when given, else
 * `RELAY_DB`, else `$STATE_DIRECTORY/relay.kv` under systemd; else `./data/relay.kv` when
 * it exists; else `/var/lib/relay/relay.kv` when `/var/lib/relay` exists (the service's
 * data on a NAS, found without flags); else `./data/relay.kv`.
 *
 * @param flag The command's `--db` value, if any.
 * @param env Reads an environment variable; an empty value counts as unset.
 * @param systemDataDir The service's data directory; default {@linkcode SYSTEM_DATA_DIR}.
 */
export function commandDbPath(
  flag: string | undefined,
  env: (name: string) => string | undefined,
  systemDataDir: string = SYSTEM_DATA_DIR,
): string {
  const chosen = flag ?? readEnv(env, "RELAY_DB");
  if (chosen !== undefined) return chosen;
  const state = readEnv(env, "STATE_DIRECTORY");
  const local = defaultDbPath(state);
  if (state !== undefined || pathExists(local)) return local;
  return isDirectory(systemDataDir) ? join(systemDataDir, "relay.kv") : local;
}

function isDirectory(path: string): boolean {
  try {
    return Deno.statSync(path).isDirectory;
  } catch {
    return false;
  }
}

/**
 * Where a relay writes the address it listens on, e.g. `http://0.0.0.0:9000`, once it
 * listens: `<db>.address`. It stays after the relay stops (the address it last had), and
 * `relay pair` reads it to give a phone the port the relay really uses.
 */
export function addressFile(db: string): string {
  return `${db}.address`;
}

/** The default keys file: `keys.json` in the database's directory. */
export function defaultKeysFile(db: string): string {
  return join(dirname(db), "keys.json");
}

/**
 * Reads an environment variable the way every option does: an empty value counts as unset.
 *
 * @param env Reads a variable, e.g. `Deno.env.get`.
 */
export function readEnv(
  env: (name: string) => string | undefined,
  name: string,
): string | undefined {
  const value = env(name);
  return value === undefined || value === "" ? undefined : value;
}

/**
 * Each server option's text, before checking: its flag, else its environment variable,
 * else its default; and where it came from (`--port`, `RELAY_PORT`), for errors.
 */
function rawOptions(
  flags: Readonly<Record<string, string | undefined>>,
  read: (name: string) => string | undefined,
): { raw: Record<string, string | undefined>; origin: Record<string, string> } {
  const raw: Record<string, string | undefined> = {};
  const origin: Record<string, string> = {};
  for (const option of SERVER_OPTIONS) {
    const flag = flags[option.flag];
    const fromEnv = read(option.env);
    if (flag !== undefined) {
      raw[option.flag] = flag;
      origin[option.flag] = `--${option.flag}`;
    } else if (fromEnv !== undefined) {
      raw[option.flag] = fromEnv;
      origin[option.flag] = option.env;
    } else {
      raw[option.flag] = option.flag === "db"
        ? defaultDbPath(read("STATE_DIRECTORY"))
        : option.default;
      origin[option.flag] = `--${option.flag}`;
    }
  }
  return { raw, origin };
}

/**
 * The configuration as the relay's commands read it: {@linkcode loadConfig}, and then the
 * speech command split into its words as the relay will run it (`util/command_words.ts`,
 * whose parser loads only when there is a command to split, so a relay without one never
 * loads it). The speech command is therefore checked after every other option.
 *
 * @param flags Flag values by flag name, as for {@linkcode loadConfig}.
 * @param env Reads an environment variable, as for {@linkcode loadConfig}.
 * @returns The validated configuration.
 * @throws {ConfigError} naming the first bad option, its value and where it came from; for
 *   the speech command, also when it is empty of words or holds shell syntax.
 */
export async function loadCheckedConfig(
  flags: Readonly<Record<string, string | undefined>>,
  env: (name: string) => string | undefined,
): Promise<Config> {
  const config = loadConfig(flags, env);
  if (config.speechCommand !== undefined) {
    try {
      await commandWords(config.speechCommand);
    } catch (error) {
      const { raw, origin } = rawOptions(flags, (name) => readEnv(env, name));
      const message = error instanceof Error ? error.message : String(error);
      throw new ConfigError(
        `invalid ${origin["speech-command"]} "${raw["speech-command"]}": ${message}`,
      );
    }
  }
  return config;
}

/**
 * Builds and validates the configuration.
 *
 * @param flags Flag values by flag name (`{"port": "9000"}`); absent flags are `undefined`.
 * @param env Reads an environment variable; an empty value counts as unset.
 * @returns The validated configuration.
 * @throws {ConfigError} naming the first bad option, its value and where it came from.
 */
export function loadConfig(
  flags: Readonly<Record<string, string | undefined>>,
  env: (name: string) => string | undefined,
): Config {
  const read = (name: string) => readEnv(env, name);
  const { raw, origin } = rawOptions(flags, read);
  const parsed = configSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const field = String(issue?.path[0] ?? "");
    const where = origin[field] ?? field;
    throw new ConfigError(`invalid ${where} "${raw[field] ?? ""}": ${issue?.message ?? "invalid"}`);
  }
  const value = parsed.data;
  const certFile = value["tls-cert"];
  const tlsKeyFile = value["tls-key"];
  if ((certFile === undefined) !== (tlsKeyFile === undefined)) {
    throw new ConfigError(
      certFile === undefined
        ? `invalid ${origin["tls-key"]}: HTTPS needs --tls-cert too`
        : `invalid ${origin["tls-cert"]}: HTTPS needs --tls-key too`,
    );
  }
  return {
    hostname: value.hostname,
    port: value.port,
    db: value.db,
    dedupeWindowMs: value["dedupe-window"],
    qaHosts: value["qa-hosts"],
    maxBodyBytes: value["max-body"],
    maxConnections: value["max-connections"],
    idleTimeoutMs: value["idle-timeout"],
    maxStreams: value["max-streams"],
    maxStreamsPerKey: value["max-streams-per-key"],
    allowedOrigins: value["allow-origin"] ?? [],
    publishUrl: value["publish-url"],
    notesUrl: value["notes-url"],
    blogUrl: value["blog-url"],
    podcastUrl: value["podcast-url"],
    targetsFile: value["targets-file"] === undefined
      ? { path: join(dirname(value.db), "targets.json"), required: false }
      : { path: value["targets-file"], required: true },
    publishTimeoutMs: value["publish-timeout"],
    publicUrl: value["public-url"],
    privateBlog: value["private-blog"],
    privatePodcast: value["private-podcast"],
    speechCommand: value["speech-command"],
    podcastKeep: value["podcast-keep"],
    podcastMaxDiskBytes: value["podcast-max-disk"],
    podcastLanguage: value["podcast-language"],
    podcastEmail: value["podcast-email"],
    apiKeyFile: value["api-key-file"],
    keysFile: value["keys-file"] ?? defaultKeysFile(value.db),
    tls: certFile === undefined || tlsKeyFile === undefined
      ? undefined
      : { certFile, keyFile: tlsKeyFile },
    backupEveryMs: value["backup-every"],
    backupKeep: value["backup-keep"],
    logFormat: value["log-format"],
    logLevel: value["log-level"],
    secrets: {
      apiKey: read(SECRET_ENV.apiKey),
      appId: read(SECRET_ENV.appId),
      blogAccessCookie: read(SECRET_ENV.blogAccessCookie),
    },
  };
}

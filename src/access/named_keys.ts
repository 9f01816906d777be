/**
 * Named API keys with scopes, besides the single key, which keeps
 * full access. They live in a JSON keys file (`--keys-file`, `RELAY_KEYS_FILE`, default
 * `keys.json` beside the database: `defaultKeysFile` in config.ts) that holds only SHA-256
 * digests: the secret is printed once by `relay keys add` and never stored. The relay
 * re-reads the file when it changes, so a key added or removed takes effect without a
 * restart, and records when each key was last used in a second file beside it
 * (`<keys file>.last-used`), written within a minute of a use.
 *
 * @module
 */

import { createHash } from "node:crypto";
import { z } from "zod";
import { newKey } from "./api_key.ts";
import { ConfigError } from "../config/config.ts";
import { errorMessage } from "../errors.ts";
import { writePrivateFile } from "../util/files.ts";

/**
 * What a key may do, each naming the endpoints it opens: `submit` (`/submit`),
 * `consume` (`/pull`, `/ack`, `/qa-hosts`), `push` (`/push`), `read` (`/peek`, `/results`,
 * `/results/stream`), `publish` (`/publish`), `admin` (`/clear`, `/stats`, `/metrics`).
 */
export const SCOPES = ["submit", "consume", "push", "read", "publish", "admin"] as const;

/** One of {@linkcode SCOPES}. */
export type Scope = typeof SCOPES[number];

/** How often the relay writes last-use times, ms, and checks the keys file, ms. */
const LAST_USED_FLUSH_MS = 60_000;
const RELOAD_CHECK_MS = 1_000;

const nameSchema = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, {
    error: "a key name is 1–64 letters, digits, '.', '_' or '-', starting with a letter or digit",
  });

const scopeSchema = z.enum(SCOPES, { error: `a scope is one of ${SCOPES.join(", ")}` });

/** A named key as the keys file stores it. */
export interface NamedKey {
  /** Who holds it, e.g. `phone`; unique in the file. */
  readonly name: string;
  /** Lower-case hex SHA-256 of the key's UTF-8 bytes. */
  readonly sha256: string;
  /** What it may do; at least one. */
  readonly scopes: readonly Scope[];
  /** When it was added, epoch ms. */
  readonly created_at: number;
}

/** One entry of the keys file (a {@linkcode NamedKey}); backups carry the same fields. */
export const namedKeySchema = z.object({
  name: nameSchema,
  sha256: z.string().regex(/^[0-9a-f]{64}$/, { error: "sha256 must be 64 hex digits" }),
  scopes: z.array(scopeSchema).min(1),
  created_at: z.number().int().nonnegative(),
});

/** Whether no two of `keys` have the same name. */
export function namesUnique(keys: readonly { name: string }[]): boolean {
  return new Set(keys.map((k) => k.name)).size === keys.length;
}

/** The keys file: `{"keys": [NamedKey, …]}`, names unique. */
const keysFileSchema = z.object({
  keys: z.array(namedKeySchema).refine(namesUnique, { error: "two keys have the same name" }),
});

/** The last-use file: key name → epoch ms. */
const lastUsedSchema = z.record(z.string(), z.number());

/** The file beside `keysFile` where the relay records each key's last use. */
export function lastUsedFile(keysFile: string): string {
  return `${keysFile}.last-used`;
}

/** Lower-case hex SHA-256 of a key. */
function digest(key: string): string {
  return createHash("sha256").update(key, "utf8").digest("hex");
}

/**
 * Reads and validates a keys file.
 *
 * @returns Its keys; none when the file does not exist.
 * @throws {ConfigError} when it cannot be read or is not a valid keys file.
 */
export function readKeysFile(path: string): NamedKey[] {
  let text: string;
  try {
    text = Deno.readTextFileSync(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return [];
    throw new ConfigError(`invalid keys file "${path}": cannot read it (${errorMessage(error)})`);
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw new ConfigError(`invalid keys file "${path}": not JSON`);
  }
  const parsed = keysFileSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new ConfigError(
      `invalid keys file "${path}": ${issue?.path.join(".") ?? ""} ${issue?.message ?? ""}`.trim(),
    );
  }
  return parsed.data.keys;
}

/**
 * Adds a named key to the keys file, creating the file when missing (mode 0600, in a
 * directory created 0700 when missing, as every file of the relay's: see
 * {@linkcode writePrivateFile}).
 *
 * @param path The keys file.
 * @param name The key's name, unique in the file.
 * @param scopes What it may do; at least one, each one of {@linkcode SCOPES}.
 * @param now The time to record, epoch ms.
 * @returns The new key: 256 random bits, base64url, as {@linkcode newKey} makes the main
 *   key. It is not stored; show it once.
 * @throws {ConfigError} for a bad name or scope, a name already present, or a file that
 *   cannot be read or written.
 */
export function addKey(
  path: string,
  name: string,
  scopes: readonly string[],
  now: number,
): string {
  const checkedName = nameSchema.safeParse(name);
  if (!checkedName.success) {
    throw new ConfigError(`invalid key name "${name}": ${checkedName.error.issues[0]?.message}`);
  }
  if (scopes.length === 0) {
    throw new ConfigError(`a key needs at least one --scope: ${SCOPES.join(", ")}`);
  }
  const checked = scopes.map((scope) => {
    const result = scopeSchema.safeParse(scope);
    if (!result.success) {
      throw new ConfigError(`invalid scope "${scope}": use ${SCOPES.join(", ")}`);
    }
    return result.data;
  });
  const keys = readKeysFile(path);
  if (keys.some((key) => key.name === name)) {
    throw new ConfigError(`a key named "${name}" exists already: remove it first`);
  }
  const secret = newKey();
  keys.push({ name, sha256: digest(secret), scopes: [...new Set(checked)], created_at: now });
  writeKeys(path, keys);
  return secret;
}

/**
 * Removes a named key from the keys file.
 *
 * @returns `false` when no key has that name (nothing is written).
 * @throws {ConfigError} when the file cannot be read or written.
 */
export function removeKey(path: string, name: string): boolean {
  const keys = readKeysFile(path);
  const kept = keys.filter((key) => key.name !== name);
  if (kept.length === keys.length) return false;
  writeKeys(path, kept);
  return true;
}

/**
 * Replaces the keys file with `keys` in one step (mode 0600, see {@linkcode writePrivateFile}).
 *
 * @param keys The keys, names unique (not checked here).
 * @throws {ConfigError} when the file cannot be written.
 */
export function writeKeys(path: string, keys: readonly NamedKey[]): void {
  try {
    writePrivateFile(path, `${JSON.stringify({ keys }, null, 2)}\n`);
  } catch (error) {
    throw new ConfigError(`cannot write the keys file "${path}": ${errorMessage(error)}`);
  }
}

/**
 * Replaces the last-use file beside `keysFile` (mode 0600), e.g. when a backup is imported.
 *
 * @param lastUsed Key name → epoch ms.
 * @throws {ConfigError} when the file cannot be written.
 */
export function writeLastUsed(keysFile: string, lastUsed: Readonly<Record<string, number>>): void {
  const path = lastUsedFile(keysFile);
  try {
    writePrivateFile(path, `${JSON.stringify(lastUsed)}\n`);
  } catch (error) {
    throw new ConfigError(`cannot write "${path}": ${errorMessage(error)}`);
  }
}

/**
 * When each key was last used, as the relay last recorded it (at most a minute behind).
 *
 * @returns Key name → epoch ms; empty when nothing was recorded or the file is unreadable.
 */
export function readLastUsed(keysFile: string): Record<string, number> {
  try {
    const parsed = lastUsedSchema.safeParse(
      JSON.parse(Deno.readTextFileSync(lastUsedFile(keysFile))),
    );
    return parsed.success ? parsed.data : {};
  } catch {
    return {};
  }
}

/**
 * The named keys the relay accepts, kept current with the keys file: at most once a second
 * a lookup checks whether the file changed (modification time, size, inode) and reloads
 * it. A file that turns invalid while the relay runs is reported once and the keys read
 * before stay in force. Lookups are synchronous and cost one SHA-256.
 */
export class KeyRing {
  readonly #path: string;
  readonly #clock: () => number;
  readonly #warn: (line: string) => void;
  #byDigest = new Map<string, NamedKey>();
  #stamp = "";
  #checkedAt = -Infinity;
  #lastUsed: Record<string, number>;
  #dirty = false;
  #flushedAt: number;
  #warnedWrite = false;

  /**
   * Loads the keys file.
   *
   * @param path The keys file; a missing file means no named keys (yet).
   * @param clock Source of time, epoch ms.
   * @param warn Where problems found while running go, one line each.
   * @throws {ConfigError} when the file exists but is not a valid keys file.
   */
  constructor(path: string, clock: () => number, warn: (line: string) => void) {
    this.#path = path;
    this.#clock = clock;
    this.#warn = warn;
    this.#reload(true);
    this.#lastUsed = readLastUsed(path);
    this.#flushedAt = clock();
  }

  /** How many named keys are in force. */
  get size(): number {
    return this.#byDigest.size;
  }

  /**
   * Whether `given` is one of the named keys in force, without recording a use (for the
   * access log, which hides keys wherever they appear).
   */
  readonly isKey = (given: string): boolean => this.#byDigest.has(digest(given));

  /**
   * The named key equal to `given`, recording its use.
   *
   * @returns The key, or `undefined` when no named key matches.
   */
  find(given: string): NamedKey | undefined {
    const now = this.#clock();
    if (due(now, this.#checkedAt, RELOAD_CHECK_MS)) {
      this.#checkedAt = now;
      this.#reload(false);
    }
    const key = this.#byDigest.get(digest(given));
    if (key !== undefined) {
      this.#lastUsed[key.name] = now;
      this.#dirty = true;
      if (due(now, this.#flushedAt, LAST_USED_FLUSH_MS)) this.flush();
    }
    return key;
  }

  /**
   * Writes the last-use times now, when any changed. A use also writes them once a minute
   * has passed since the last write; the relay calls this every minute and on shutdown, so
   * the file is at most a minute behind.
   */
  flush(): void {
    if (!this.#dirty) return;
    this.#flushedAt = this.#clock();
    this.#dirty = false;
    try {
      writePrivateFile(lastUsedFile(this.#path), `${JSON.stringify(this.#lastUsed)}\n`);
    } catch (error) {
      if (!this.#warnedWrite) {
        this.#warnedWrite = true;
        this.#warn(`relay: cannot record when keys were last used: ${errorMessage(error)}`);
      }
    }
  }

  #reload(atStart: boolean): void {
    let stamp = "missing";
    try {
      const info = Deno.statSync(this.#path);
      stamp = `${info.mtime?.getTime()}:${info.size}:${info.ino}`;
    } catch (error) {
      if (!(error instanceof Deno.errors.NotFound)) stamp = `error:${errorMessage(error)}`;
    }
    if (stamp === this.#stamp) return;
    try {
      const keys = readKeysFile(this.#path);
      this.#byDigest = new Map(keys.map((key) => [key.sha256, key]));
      this.#stamp = stamp;
      if (!atStart) this.#warn(`relay: keys file reloaded: ${keys.length} named key(s)`);
    } catch (error) {
      if (atStart) throw error;
      // Report each bad version once, and keep the keys read before.
      this.#stamp = stamp;
      this.#warn(`relay: ${errorMessage(error)}; keeping the keys read before`);
    }
  }
}

/**
 * Whether `interval` ms have passed since `since`; also when the clock went back (a
 * Raspberry Pi without a real-time clock steps its clock when NTP answers), so that
 * reloading and recording never stop until the clock catches up.
 */
function due(now: number, since: number, interval: number): boolean {
  return now - since >= interval || now < since;
}

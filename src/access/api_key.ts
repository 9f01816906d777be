/**
 * Where the API key comes from: `RELAY_API_KEY`, else the file named
 * by `--api-key-file`, else the file `api-key` beside the database, generated on the
 * first start.
 *
 * @module
 */

import { Buffer } from "node:buffer";
import { dirname, join } from "node:path";
import { ConfigError } from "../config/config.ts";
import { errorMessage } from "../errors.ts";
import { writePrivateFile } from "../util/files.ts";

/** Random bytes in a generated key: 256 bits, above the 128 bits a key needs at the least. */
const GENERATED_KEY_BYTES = 32;

/** The API key and where it was found. */
export interface ApiKey {
  /** The secret itself. */
  readonly key: string;
  /** Where it came from, for the start-up message; never the key. */
  readonly source: "environment" | "file" | "generated";
  /** The file it was read from or written to, for `file` and `generated`. */
  readonly path: string | undefined;
}

/** A new random key: {@linkcode GENERATED_KEY_BYTES} random bytes, base64url (43 characters). */
export function newKey(): string {
  return Buffer.from(crypto.getRandomValues(new Uint8Array(GENERATED_KEY_BYTES)))
    .toString("base64url");
}

/** The path of the generated key file: `api-key` in the database's directory. */
export function generatedKeyPath(db: string): string {
  return join(dirname(db), "api-key");
}

/**
 * Finds the API key: `fromEnv` when set, else the trimmed contents of `keyFile`,
 * else `api-key` beside `db`, which is created when missing (mode 0600, 256 random bits,
 * base64url; fsynced with its directory before it is used) and reused on later starts.
 *
 * @param options.fromEnv `RELAY_API_KEY`, when set and non-empty.
 * @param options.keyFile `--api-key-file`, when given.
 * @param options.db The database path; its directory must exist.
 * @throws {ConfigError} when the key file cannot be read or is empty.
 */
export async function resolveApiKey(options: {
  fromEnv: string | undefined;
  keyFile: string | undefined;
  db: string;
}): Promise<ApiKey> {
  const found = await findApiKey(options);
  if (found !== undefined) return found;
  const path = generatedKeyPath(options.db);
  const { secret: key, created } = await createOrReadSecret(path, "the API key file");
  return { key, source: created ? "generated" : "file", path };
}

/**
 * A secret kept in a file of its own (the API key, the app id): created at `path` with a
 * new random key ({@linkcode newKey}; mode 0600) when there is none, else read (trimmed).
 * Creating is exclusive, so two relays starting at once end up with the same secret.
 *
 * @param path The file.
 * @param what What it is, for errors: e.g. `the API key file`.
 * @returns The secret, and whether it was created now.
 * @throws {ConfigError} when the file cannot be created or read, or is empty.
 */
export async function createOrReadSecret(
  path: string,
  what: string,
): Promise<{ secret: string; created: boolean }> {
  const secret = newKey();
  try {
    // Durable before the secret is shown: a phone paired with a key lost in a power cut is cut
    // off.
    writePrivateFile(path, `${secret}\n`, { createNew: true });
    return { secret, created: true };
  } catch (error) {
    if (!(error instanceof Deno.errors.AlreadyExists)) {
      throw new ConfigError(`cannot create ${what} "${path}": ${errorMessage(error)}`);
    }
  }
  return { secret: await readKeyFile(path, what), created: false };
}

/**
 * Finds the API key as {@linkcode resolveApiKey} does, without creating one (for
 * `relay export --include-secrets`).
 *
 * @returns The key; `undefined` when neither `fromEnv` nor `keyFile` is given and `db`'s
 *   directory holds no `api-key` file.
 * @throws {ConfigError} when the key file cannot be read or is empty.
 */
export async function findApiKey(options: {
  fromEnv: string | undefined;
  keyFile: string | undefined;
  db: string;
}): Promise<ApiKey | undefined> {
  if (options.fromEnv !== undefined) {
    return { key: options.fromEnv, source: "environment", path: undefined };
  }
  if (options.keyFile !== undefined) {
    return {
      key: await readKeyFile(options.keyFile, "--api-key-file"),
      source: "file",
      path: options.keyFile,
    };
  }
  const path = generatedKeyPath(options.db);
  try {
    await Deno.lstat(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return undefined;
  }
  return { key: await readKeyFile(path, "the API key file"), source: "file", path };
}

async function readKeyFile(path: string, what: string): Promise<string> {
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (error) {
    throw new ConfigError(`invalid ${what} "${path}": cannot read it (${errorMessage(error)})`);
  }
  const key = text.trim();
  if (key === "") throw new ConfigError(`invalid ${what} "${path}": the file is empty`);
  return key;
}

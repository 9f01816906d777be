/**
 * The relay's app id: the secret that outside callers of the built-in services' API send
 * in `X-App-ID` instead of a key (docs/publishing-builtin.md). `RELAY_APP_ID` when set,
 * else a file generated on the first start like the API key, and reused after.
 *
 * @module
 */

import { join } from "node:path";
import { createOrReadSecret } from "./api_key.ts";

/** The app id and where it came from (never the id itself in a log). */
export interface AppId {
  /** The app id itself: a secret, never logged. */
  readonly appId: string;
  /** `RELAY_APP_ID`, the existing `app-id` file, or a file generated now. */
  readonly source: "environment" | "file" | "generated";
  /** The file it was read from or written to. */
  readonly path: string | undefined;
}

/**
 * Finds the app id: `fromEnv` (`RELAY_APP_ID`) when set, else the file `app-id` in the
 * data directory, created on the first start (256 random bits, base64url, mode 0600) and
 * reused after.
 *
 * @param fromEnv `RELAY_APP_ID`, when set.
 * @param dataDir The data directory; it must exist.
 * @throws {ConfigError} when the file cannot be written or read, or is empty.
 */
export async function resolveAppId(fromEnv: string | undefined, dataDir: string): Promise<AppId> {
  if (fromEnv !== undefined) return { appId: fromEnv, source: "environment", path: undefined };
  const path = join(dataDir, "app-id");
  const { secret, created } = await createOrReadSecret(path, "the app id file");
  return { appId: secret, source: created ? "generated" : "file", path };
}

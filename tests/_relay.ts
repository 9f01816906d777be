/**
 * The test entry script: main.ts as the tests run it, with the service's data directory
 * (where commands on the relay's machine look for its database and key) pointed away from
 * the machine's `/var/lib/relay`, so that a relay installed where the tests run is never read
 * or changed. `--system-data-dir=DIR` as the first argument chooses another (a test of that
 * lookup); the rest are the relay's own arguments. Run like main.ts, with the relay's
 * permission set.
 *
 * @module
 */

import { main } from "../src/cli/main.ts";

/** The service's data directory the tests' relays see unless told otherwise: none there. */
export const NO_SUCH_DIR = "/nonexistent/relay-tests";

if (import.meta.main) {
  const [first, ...rest] = Deno.args;
  const chosen = first?.startsWith("--system-data-dir=")
    ? first.slice("--system-data-dir=".length)
    : undefined;
  const args = chosen === undefined ? Deno.args : rest;
  Deno.exit(await main(args, undefined, { systemDataDir: chosen ?? NO_SUCH_DIR }));
}

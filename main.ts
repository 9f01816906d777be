/**
 * Entry point of the relay's command line and compiled binary (contract C70).
 * Everything else lives in `src/`; see `src/cli.ts`.
 *
 * @module
 */

import { main } from "./src/cli.ts";

if (import.meta.main) {
  Deno.exit(await main(Deno.args));
}

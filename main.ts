/**
 * Entry point of the relay's command line and compiled binary.
 * Everything else lives in `src/`; the command line is `src/cli/main.ts`.
 *
 * @module
 */

import { main } from "./src/cli/main.ts";

if (import.meta.main) {
  Deno.exit(await main(Deno.args));
}

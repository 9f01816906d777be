#!/bin/sh
# The relay program when it runs from source instead of the single binary that
# `deno task compile` writes: /usr/bin/relay from the package, or /usr/local/bin/relay when
# installed by hand. The pinned Deno and the source live in lib/relay beside this script's bin
# folder (/usr/lib/relay, /usr/local/lib/relay). Deno runs main.ts with exactly the permission
# flags the compile task bakes into the binary (tests/package_test.ts keeps them in step) and,
# like a compiled binary, never prompts. Every module and npm package comes from lib/relay/deno-dir,
# filled when the layout was built (deploy/stage-program.sh), so it starts without network
# access. See docs/install.md.
self=$(readlink -f "$0")
lib=${self%/bin/*}/lib/relay
DENO_DIR=$lib/deno-dir
DENO_NO_UPDATE_CHECK=1
export DENO_DIR DENO_NO_UPDATE_CHECK
exec "$lib/deno" run --allow-net --allow-read --allow-write \
  '--allow-env=RELAY_*,STATE_DIRECTORY,HOME,XDG_CONFIG_HOME' --allow-run \
  --allow-sys=networkInterfaces,statfs --no-prompt --cached-only --frozen --quiet \
  --config "$lib/app/deno.json" "$lib/app/main.ts" "$@"

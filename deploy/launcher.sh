#!/bin/sh
# /usr/local/bin/relay when the relay runs from source instead of the single binary that
# `deno task compile` writes: the pinned Deno at /opt/relay/deno runs /opt/relay/app/main.ts
# with the compile task's permission set (-P=relay) and, like a compiled binary, never prompts.
# Every module and npm package comes from /opt/relay/deno-dir, filled when the layout was built
# (deploy/stage-program.sh), so it starts without network access. See docs/operations.md.
DENO_DIR=/opt/relay/deno-dir
DENO_NO_UPDATE_CHECK=1
export DENO_DIR DENO_NO_UPDATE_CHECK
exec /opt/relay/deno run -P=relay --no-prompt --cached-only --frozen --quiet \
  --config /opt/relay/app/deno.json /opt/relay/app/main.ts "$@"

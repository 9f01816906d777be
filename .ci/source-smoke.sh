#!/usr/bin/env bash
# From source, with Deno, as docs/install.md tells it: a copy of the checkout (the files
# the relay needs) and an empty Deno cache; `deno task start` fetches the relay's npm packages
# and serves, its data in ./data. Runs the HTTP smoke test (the same as .ci/package-smoke.sh),
# stops it with SIGTERM, starts it again and checks the data and the key were kept.
#
#   .ci/source-smoke.sh        (.ci/run runs it after the tests)
#
# Needs npx (for the pinned Deno, denoVersion in deno.json), curl and the npm registry. Exit 1 when a check fails.
set -euo pipefail
name=source-smoke
# shellcheck source=.ci/nspawn-lib.sh
. "$(dirname "$0")/nspawn-lib.sh"

command -v curl >/dev/null 2>&1 || skip "no curl here (apt-get install curl)"
grep -qF -- "deno task start" "$repo/docs/install.md" || fail "not in docs/install.md: deno task start"
deno_version=$("$repo/deploy/deno-version.sh")
deno=$(npx -y "deno@$deno_version" eval 'console.log(Deno.execPath())')
check "Deno" "deno $deno_version" "$("$deno" --version | head -n 1 | cut -d' ' -f1,2)"

checkout=$work/relay
mkdir -p "$checkout"
cp -R "$repo/main.ts" "$repo/deno.json" "$repo/deno.lock" "$repo/src" "$repo/webapp" "$checkout/"
mkdir -p "$checkout/docs" && cp "$repo/docs/problems.md" "$checkout/docs/"
export DENO_DIR=$work/deno-dir DENO_NO_UPDATE_CHECK=1

ms() { date +%s%3N; }
# start_relay: `deno task start` in the checkout on a free port of 127.0.0.1, in its own
# process group; sets group, base and start_ms (from the spawn to the first /health answer).
start_relay() {
  local t0 line
  t0=$(ms)
  (cd "$checkout" && export NO_COLOR=1 RELAY_HOSTNAME=127.0.0.1 RELAY_PORT=0 &&
    exec setsid "$deno" task start) >"$work/start.log" 2>&1 &
  group=$!
  base=""
  for _ in $(seq 480); do
    line=$(grep -m 1 -o 'relay listening on http://[0-9.:]*' "$work/start.log" || true)
    if [ -n "$line" ]; then
      base=${line#relay listening on }
      curl -sf -o /dev/null "$base/health" && break
    fi
    kill -0 "$group" 2>/dev/null || break
    sleep 0.25
  done
  start_ms=$(($(ms) - t0))
  if [ -z "$base" ]; then
    tail -n 5 "$work/start.log"
    fail "deno task start did not serve within 120 s"
    finish
  fi
}
stop_relay() {
  kill -TERM -- "-$group" 2>/dev/null || true
  for _ in $(seq 80); do
    kill -0 -- "-$group" 2>/dev/null || return 0
    sleep 0.25
  done
  fail "the relay did not stop within 20 s of SIGTERM"
  kill -KILL -- "-$group" 2>/dev/null || true
}
group=""
trap '[ -z "$group" ] || stop_relay >/dev/null 2>&1 || true; cleanup' EXIT
snapshot_here() {
  curl -s -H "X-Auth-Key: $1" "$base/peek"
  echo
  curl -s -H "X-Auth-Key: $1" "$base/results"
  echo
  curl -s -H "X-Auth-Key: $1" "$base/notes/"
}

say "deno task start, on an empty Deno cache"
start_relay
sed -n 1,3p "$work/start.log"
first_ms=$start_ms
key=$(cat "$checkout/data/api-key")
check_match "main key made on the first start, in ./data" '^[A-Za-z0-9_-]{20,}$' "$key"
smoke_http curl "$base" "$key" source
state=$(snapshot_here "$key")
stop_relay

say "deno task start again (the packages are cached now)"
start_relay
check "main key after the restart" "$key" "$(cat "$checkout/data/api-key")"
check "data after the restart" "$state" "$(snapshot_here "$key")"
stop_relay
echo "from source: first start ${first_ms} ms (fetching the npm packages), second ${start_ms} ms"
finish

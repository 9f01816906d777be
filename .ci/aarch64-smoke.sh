#!/usr/bin/env bash
# The arm64 package's program (a Raspberry Pi's) on this machine, under qemu-aarch64-static
# user-mode emulation with Debian 12's arm64 libraries: takes the program out of
# dist/relay_<version>_arm64.deb, runs `relay --version`, serves, runs the HTTP smoke test
# (the same as .ci/package-smoke.sh: submit, peek, pull, push, results, the web app, publish
# when configured), stops and starts it again with the data kept, and checks that a bad setting
# stops it with exit code 2. Reports the start times and the memory (RSS) it took: emulated
# figures, several times what a Pi needs.
#
# The package's /usr/bin/relay is run with "qemu-aarch64-static" put before the Deno it starts
# (this machine cannot hand arm64 programs to qemu on its own); nothing else changes.
#
#   .ci/aarch64-smoke.sh        (as root; .ci/run runs it after the tests)
#
# Needs root (for apt-get and debootstrap), qemu-user-static (installed here when missing),
# debootstrap and curl. The arm64 libraries come from a Debian 12 arm64 tree unpacked by
# `debootstrap --foreign` (about 20 s, no emulation) and cached in $RELAY_CI_CACHE (default
# /var/cache/relay-ci). Skips with one line, exit 0, when they cannot be had.
set -euo pipefail
name=aarch64-smoke
# shellcheck source=.ci/nspawn-lib.sh
. "$(dirname "$0")/nspawn-lib.sh"

[ "$(id -u)" -eq 0 ] || skip "needs root (apt-get install qemu-user-static, debootstrap)"
if ! command -v qemu-aarch64-static >/dev/null 2>&1; then
  say "installing qemu-user-static"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    qemu-user-static; } >/dev/null 2>&1 || skip "cannot install qemu-user-static"
fi
command -v debootstrap >/dev/null 2>&1 || skip "no debootstrap here (apt-get install debootstrap)"
command -v curl >/dev/null 2>&1 || skip "no curl here (apt-get install curl)"

# --- Debian 12's arm64 libraries, cached -----------------------------------------------------

sysroot=$cache/bookworm-arm64-foreign
if ! [ -e "$sysroot/.relay-ci" ]; then
  say "unpacking Debian 12 arm64 in $sysroot (debootstrap --foreign)"
  rm -rf "$sysroot" "$sysroot.tmp"
  mkdir -p "$cache"
  debootstrap --arch=arm64 --foreign --variant=minbase bookworm "$sysroot.tmp" \
    "$(debian_mirror)" >"$cache/debootstrap-arm64.log" 2>&1 || {
    tail -n 5 "$cache/debootstrap-arm64.log"
    skip "debootstrap --arch=arm64 failed (log: $cache/debootstrap-arm64.log)"
  }
  rm -rf "$sysroot.tmp/debootstrap" "$sysroot.tmp"/var/cache/apt/archives/*.deb
  touch "$sysroot.tmp/.relay-ci"
  mv "$sysroot.tmp" "$sysroot"
else
  say "reusing Debian 12 arm64 in $sysroot"
fi
export QEMU_LD_PREFIX=$sysroot

# --- The program ------------------------------------------------------------------------------

semver=$(sed -nE 's/^  "version": "([^"]+)",?$/\1/p' "$repo/deno.json")
version=${semver//-/\~}
deb=$repo/dist/relay_${version}_arm64.deb
if ! [ -f "$deb" ]; then
  say "building dist/relay_${version}_arm64.deb (deploy/package.sh)"
  "$repo/deploy/package.sh" --arch arm64
fi
root=$work/arm64
dpkg-deb -x "$deb" "$root"
check "the package's program is an arm64 one" AArch64 \
  "$(LC_ALL=C readelf -h "$root/usr/lib/relay/deno" | sed -nE 's/^ *Machine: *//p')"
# The package's launcher, with the emulator before the Deno it starts.
sed 's|^exec "\$lib/deno"|exec qemu-aarch64-static "$lib/deno"|' "$root/usr/bin/relay" \
  >"$root/usr/bin/relay-qemu"
chmod 0755 "$root/usr/bin/relay-qemu"
grep -q '^exec qemu-aarch64-static "\$lib/deno" run ' "$root/usr/bin/relay-qemu" ||
  fail "the launcher's exec line did not take the emulator"
relay=$root/usr/bin/relay-qemu

ms() { date +%s%3N; }

started=$(ms)
check "relay --version (emulated arm64)" "relay $semver" "$("$relay" --version | cut -d' ' -f1,2)"
say "relay --version took $(($(ms) - started)) ms (emulated, the first start of this program)"

# serve_relay: starts the relay on a free port with its data in $work/data, sets pid, base,
# start_ms (from the spawn to the first /health answer).
data=$work/data
mkdir -p "$data"
serve_relay() {
  local t0 line
  t0=$(ms)
  "$relay" serve --hostname 127.0.0.1 --port 0 --db "$data/relay.kv" >"$work/serve.log" 2>&1 &
  pid=$!
  base=""
  for _ in $(seq 240); do
    line=$(grep -m 1 -o 'relay listening on http://[0-9.:]*' "$work/serve.log" || true)
    if [ -n "$line" ]; then
      base=${line#relay listening on }
      curl -sf -o /dev/null "$base/health" && break
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.25
  done
  start_ms=$(($(ms) - t0))
  if [ -z "$base" ]; then
    tail -n 5 "$work/serve.log"
    fail "the emulated relay did not start within 60 s"
    finish
  fi
}
# rss: "VmRSS now, VmHWM peak" of the emulated relay, MB.
rss() {
  awk '/^VmRSS/ {r = $2} /^VmHWM/ {h = $2}
    END {printf "%d MB now, %d MB peak", r / 1024, h / 1024}' \
    "/proc/$pid/status"
}
stop_relay() {
  local code=0
  kill -TERM "$pid"
  wait "$pid" || code=$?
  check "the emulated relay stops on SIGTERM with exit code 0" 0 "$code"
}
snapshot_here() {
  curl -s -H "X-Auth-Key: $1" "$base/peek"
  echo
  curl -s -H "X-Auth-Key: $1" "$base/results"
  echo
  curl -s -H "X-Auth-Key: $1" "$base/notes/"
}

serve_relay
cold_ms=$start_ms
cold_rss=$(rss)
say "serving at $base: started in $cold_ms ms, $cold_rss (emulated)"
key=$(cat "$data/api-key")
check_match "main key made on the first start" '^[A-Za-z0-9_-]{20,}$' "$key"

say "the HTTP smoke test (emulated arm64)"
t0=$(ms)
smoke_audio_wait=300 smoke_http curl "$base" "$key" arm64
smoke_ms=$(($(ms) - t0))
smoke_rss=$(rss)
state=$(snapshot_here "$key")
stop_relay

serve_relay
warm_ms=$start_ms
warm_rss=$(rss)
say "started again in $warm_ms ms, $warm_rss (emulated)"
check "data after the restart (emulated arm64)" "$state" "$(snapshot_here "$key")"
stop_relay

code=0
RELAY_PORT=abc "$relay" serve --db "$data/relay.kv" >"$work/bad.log" 2>&1 || code=$?
check "RELAY_PORT=abc: exit code (emulated arm64)" 2 "$code"
check_match "RELAY_PORT=abc: the message" 'invalid RELAY_PORT "abc"' "$(cat "$work/bad.log")"

echo "aarch64 figures (emulated by qemu-aarch64-static on $(uname -m), not a Pi's):" \
  "first start ${cold_ms} ms, second start ${warm_ms} ms;" \
  "RSS after the first start ${cold_rss}; after the smoke test ${smoke_rss};" \
  "the smoke test (publishing and speaking one episode included) took ${smoke_ms} ms"
finish

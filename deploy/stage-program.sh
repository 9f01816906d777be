#!/usr/bin/env bash
# Builds the stand-in for the single binary: the relay run from source by the pinned Deno,
# laid out as it is installed on a machine, under OUT:
#   OUT/opt/relay/deno          the Deno executable (from the npm package @deno/linux-*-glibc)
#   OUT/opt/relay/app/          main.ts, src/, webapp/, deno.json, deno.lock
#   OUT/opt/relay/deno-dir/     DENO_DIR with every module and npm package the relay loads
#   OUT/usr/local/bin/relay     deploy/launcher.sh
# The relay then starts without network access. Use it where `deno task compile` cannot run
# (its runtime download is out of reach) and as the layout a package installs.
#
#   deploy/stage-program.sh OUT [x86_64|aarch64]     (default: this machine's architecture)
#
# Needs npm (for the Deno package and, on another architecture, for `npx deno`) and the npm
# registry, or an npm cache that already holds both.
set -euo pipefail

DENO_VERSION=2.9.5
repo=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: deploy/stage-program.sh OUT [x86_64|aarch64]}
arch=${2:-$(uname -m)}
case "$arch" in
x86_64 | amd64) package=@deno/linux-x64-glibc ;;
aarch64 | arm64) package=@deno/linux-arm64-glibc ;;
*)
  echo "stage-program: no Deno build for $arch (64-bit x86 and ARM only)" >&2
  exit 2
  ;;
esac

umask 022
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The Deno executable, from the same npm package `npx deno@VERSION` uses.
(cd "$work" && npm pack --silent "$package@$DENO_VERSION" >/dev/null)
tar -xzf "$work"/*.tgz -C "$work"
rm -rf "$out/opt/relay"
mkdir -p "$out/opt/relay/app" "$out/usr/local/bin"
install -m 0755 "$work/package/deno" "$out/opt/relay/deno"

# The program: what `deno task compile` bakes into the binary.
cp -R "$repo/main.ts" "$repo/deno.json" "$repo/deno.lock" "$repo/src" "$repo/webapp" \
  "$out/opt/relay/app/"

# The modules main.ts loads and every npm package deno.lock names: Deno checks the whole
# lock's package set on start, so the test tools (playwright-core, fast-check) come too.
if "$out/opt/relay/deno" --version >/dev/null 2>&1; then
  deno=("$out/opt/relay/deno")
else
  deno=(npx -y "deno@$DENO_VERSION")
fi
DENO_DIR="$out/opt/relay/deno-dir" DENO_NO_UPDATE_CHECK=1 "${deno[@]}" cache --quiet --frozen \
  --config "$out/opt/relay/app/deno.json" "$out/opt/relay/app/main.ts"

install -m 0755 "$repo/deploy/launcher.sh" "$out/usr/local/bin/relay"
chmod -R u=rwX,go=rX "$out/opt/relay"
chmod 0755 "$out/opt/relay/deno"
echo "stage-program: $("$out/opt/relay/deno" --version 2>/dev/null | head -n 1 || echo "deno $DENO_VERSION ($arch)") in $out"

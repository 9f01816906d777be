#!/usr/bin/env bash
# Builds the stand-in for the single binary: the relay run from source by the pinned Deno,
# laid out as the package installs it, under OUT:
#   OUT/usr/lib/relay/deno          the Deno executable (from the npm package @deno/linux-*-glibc)
#   OUT/usr/lib/relay/app/          main.ts, src/, webapp/, deno.json, deno.lock
#   OUT/usr/lib/relay/deno-dir/     DENO_DIR with every module and npm package the relay loads
#   OUT/usr/bin/relay               deploy/launcher.sh
# The relay then starts without network access. By hand, the same two pieces go to
# /usr/local/lib/relay and /usr/local/bin/relay (the launcher finds lib/relay beside its own bin
# folder). deploy/package.sh packages this layout where `deno task compile` cannot run (its
# runtime download is out of reach).
#
#   deploy/stage-program.sh OUT [x86_64|aarch64]     (default: this machine's architecture)
#
# Needs npm (for the Deno package and, on another architecture, for `npx deno`) and the npm
# registry, or an npm cache that already holds both.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
DENO_VERSION=$("$repo/deploy/deno-version.sh")
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
lib=$out/usr/lib/relay
rm -rf "$lib"
mkdir -p "$lib/app" "$out/usr/bin"
install -m 0755 "$work/package/deno" "$lib/deno"

# The program: what `deno task compile` bakes into the binary.
cp -R "$repo/main.ts" "$repo/deno.json" "$repo/deno.lock" "$repo/src" "$repo/webapp" \
  "$lib/app/"

# The modules main.ts loads and every npm package deno.lock names (Deno checks the whole
# lock's package set on start; the tests' own packages are in tests/deno.lock, not here).
if "$lib/deno" --version >/dev/null 2>&1; then
  deno=("$lib/deno")
else
  deno=(npx -y "deno@$DENO_VERSION")
fi
# Modules the relay loads by URL (a worker) are --include'd by the compile task: cached too.
entries=("$lib/app/main.ts")
for module in $(grep -oE '"compile": "[^"]*"' "$repo/deno.json" | grep -oE -- '--include [^ ]+\.ts' |
  cut -d' ' -f2); do
  entries+=("$lib/app/$module")
done
DENO_DIR="$lib/deno-dir" DENO_NO_UPDATE_CHECK=1 "${deno[@]}" cache --quiet --frozen \
  --config "$lib/app/deno.json" "${entries[@]}"
# Keep the downloads (npm/, remote/) only: Deno's other caches (emitted JavaScript, analyses,
# V8 code) are keyed by the files' paths here, useless once installed elsewhere.
find "$lib/deno-dir" -mindepth 1 -maxdepth 1 ! -name npm ! -name remote -exec rm -rf {} +

install -m 0755 "$repo/deploy/launcher.sh" "$out/usr/bin/relay"
chmod -R u=rwX,go=rX "$lib"
chmod 0755 "$lib/deno"
echo "stage-program: $("$lib/deno" --version 2>/dev/null | head -n 1 || echo "deno $DENO_VERSION ($arch)") in $out"

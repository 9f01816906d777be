#!/usr/bin/env bash
# Builds the Debian packages dist/relay_<version>_<arch>.deb (amd64 and arm64) with dpkg-deb.
# The version comes from deno.json ("1.2.0-rc.1" becomes "1.2.0~rc.1", which Debian sorts
# before 1.2.0, as semver does). Each package holds:
#   /usr/bin/relay                     the program
#   /lib/systemd/system/relay.service  deploy/relay.service, ExecStart=/usr/bin/relay serve
#   /lib/systemd/system/relay-reader.service  deploy/relay-reader.service (the reader; disabled)
#   /etc/relay/env                     the settings (a conffile, mode 0600 in a 0700 folder)
#   /etc/relay/reader.env              the reader's settings and key (a conffile, mode 0600)
#   /usr/share/doc/relay/              README.md and docs/ (its .md pages)
# and the maintainer scripts of deploy/debian/ (enable without starting, stop on remove, delete
# the data on purge). The program is the single binary of `deno task compile` when one is given
# for that architecture; otherwise the stand-in deploy/stage-program.sh lays out (the pinned Deno
# from npm, the source and a filled module cache under /usr/lib/relay, deploy/launcher.sh as
# /usr/bin/relay). See docs/install.md.
#
#   deploy/package.sh [--arch amd64|arm64|all] [--binary-amd64 FILE] [--binary-arm64 FILE]
#                     [--out DIR] [--compression xz|gzip|zstd|none]
#
# Defaults: --arch all, --out dist, --compression xz. The binaries can also come from the
# environment: RELAY_BINARY_AMD64, RELAY_BINARY_ARM64. Needs dpkg-deb and readelf (binutils);
# the stand-in needs npm and the npm registry (or an npm cache that holds the Deno packages).
# Exit code 2 for a usage error, 1 when a build fails.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
usage() {
  echo "usage: deploy/package.sh [--arch amd64|arm64|all] [--binary-amd64 FILE]" \
    "[--binary-arm64 FILE] [--out DIR] [--compression xz|gzip|zstd|none]" >&2
  exit 2
}
die() {
  echo "package: $*" >&2
  exit 1
}

arches="amd64 arm64"
out=$repo/dist
compression=xz
declare -A binary=([amd64]=${RELAY_BINARY_AMD64:-} [arm64]=${RELAY_BINARY_ARM64:-})
while [ $# -gt 0 ]; do
  case "$1" in
  -h | --help)
    sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
    exit 0
    ;;
  --arch)
    case "${2:-}" in
    amd64 | arm64) arches=$2 ;;
    all) arches="amd64 arm64" ;;
    *) usage ;;
    esac
    shift 2
    ;;
  --binary-amd64 | --binary-arm64)
    [ -n "${2:-}" ] || usage
    binary[${1#--binary-}]=$2
    shift 2
    ;;
  --out)
    [ -n "${2:-}" ] || usage
    out=$2
    shift 2
    ;;
  --compression)
    case "${2:-}" in xz | gzip | zstd | none) compression=$2 ;; *) usage ;; esac
    shift 2
    ;;
  *) usage ;;
  esac
done

for tool in dpkg-deb readelf; do
  command -v "$tool" >/dev/null 2>&1 || die "needs $tool (apt-get install dpkg binutils)"
done

# The version: deno.json's, as Debian spells it.
version=$(sed -nE 's/^  "version": "([^"]+)",?$/\1/p' "$repo/deno.json")
[ -n "$version" ] || die "no version in deno.json"
debversion=${version//-/\~}
[[ $debversion =~ ^[0-9][A-Za-z0-9.+~]*$ ]] ||
  die "version \"$version\" in deno.json cannot be a Debian version"

# elf_machine FILE: the ELF header's machine, e.g. "AArch64".
elf_machine() { LC_ALL=C readelf -h "$1" 2>/dev/null | sed -nE 's/^ *Machine: *(.*)$/\1/p'; }

# depends FILE: the Depends line for an executable built against glibc: libc6 at least the
# newest GLIBC_ symbol version it asks for, libgcc-s1 when it links libgcc_s. Any other
# library is an error: the package would not say it needs it.
depends() {
  local file=$1 lib glibc deps=()
  glibc=$(LC_ALL=C readelf -V "$file" | grep -oE 'GLIBC_[0-9]+(\.[0-9]+)+' | sed 's/GLIBC_//' |
    sort -uV | tail -n 1)
  [ -n "$glibc" ] || die "$file: no glibc symbol versions (not a glibc program?)"
  deps+=("libc6 (>= $glibc)")
  for lib in $(LC_ALL=C readelf -d "$file" | sed -nE 's/.*\(NEEDED\).*\[(.*)\]$/\1/p'); do
    case "$lib" in
    libc.so.6 | libm.so.6 | libdl.so.2 | libpthread.so.0 | librt.so.1 | ld-linux-*.so.*) ;;
    libgcc_s.so.1) deps+=("libgcc-s1 (>= 3.0)") ;;
    *) die "$file needs $lib, which this script does not know a Debian package for" ;;
    esac
  done
  local IFS=,
  echo "${deps[*]}" | sed 's/,/, /g'
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
umask 022

for arch in $arches; do
  case "$arch" in
  amd64) machine="Advanced Micro Devices X86-64" deno_arch=x86_64 ;;
  arm64) machine="AArch64" deno_arch=aarch64 ;;
  esac
  root=$work/$arch
  mkdir -p "$root/DEBIAN"

  # The program.
  if [ -n "${binary[$arch]}" ]; then
    [ -f "${binary[$arch]}" ] || die "no such file: ${binary[$arch]}"
    got=$(elf_machine "${binary[$arch]}")
    [ "$got" = "$machine" ] ||
      die "${binary[$arch]} is not an $arch program (its ELF machine: ${got:-none})"
    install -D -m 0755 "${binary[$arch]}" "$root/usr/bin/relay"
    main=$root/usr/bin/relay
    program="the single binary ${binary[$arch]}"
  else
    "$repo/deploy/stage-program.sh" "$root" "$deno_arch" >/dev/null
    main=$root/usr/lib/relay/deno
    program="the stand-in (Deno $(sed -nE 's/^DENO_VERSION=(.*)$/\1/p' \
      "$repo/deploy/stage-program.sh") and the source)"
  fi

  # The unit, pointed at the installed program.
  install -d -m 0755 "$root/lib/systemd/system"
  sed -e 's|/usr/local/bin/relay|/usr/bin/relay|g' "$repo/deploy/relay.service" \
    >"$root/lib/systemd/system/relay.service"
  chmod 0644 "$root/lib/systemd/system/relay.service"
  grep -q '^ExecStart=/usr/bin/relay serve$' "$root/lib/systemd/system/relay.service" ||
    die "deploy/relay.service: no ExecStart=/usr/local/bin/relay serve to point at /usr/bin/relay"
  sed -e 's|/usr/local/bin/relay|/usr/bin/relay|g' "$repo/deploy/relay-reader.service" \
    >"$root/lib/systemd/system/relay-reader.service"
  chmod 0644 "$root/lib/systemd/system/relay-reader.service"

  # The settings: only root may read them (they may hold the key).
  install -d -m 0700 "$root/etc/relay"
  install -m 0600 "$repo/deploy/debian/env" "$root/etc/relay/env"
  install -m 0600 "$repo/deploy/debian/reader.env" "$root/etc/relay/reader.env"
  printf '%s\n' /etc/relay/env /etc/relay/reader.env >"$root/DEBIAN/conffiles"

  # The documentation.
  install -d -m 0755 "$root/usr/share/doc/relay/docs"
  install -m 0644 "$repo/README.md" "$root/usr/share/doc/relay/"
  install -m 0644 "$repo"/docs/*.md "$root/usr/share/doc/relay/docs/"
  # The long references are an index page and a folder of pages of the same name.
  for dir in api cli publishing-builtin; do
    install -d -m 0755 "$root/usr/share/doc/relay/docs/$dir"
    install -m 0644 "$repo/docs/$dir"/*.md "$root/usr/share/doc/relay/docs/$dir/"
  done

  for script in postinst prerm postrm; do
    sed "s/@VERSION@/$debversion/g" "$repo/deploy/debian/$script" >"$root/DEBIAN/$script"
    chmod 0755 "$root/DEBIAN/$script"
  done

  size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
  cat >"$root/DEBIAN/control" <<EOF
Package: relay
Version: $debversion
Architecture: $arch
Maintainer: ${RELAY_MAINTAINER:-Content Relay <relay@localhost>}
Installed-Size: $size
Depends: $(depends "$main")
Section: net
Priority: optional
Description: household content relay (queues, results feed, publishing)
 Content Relay is a small self-hosted HTTP service for a household: phones
 and scripts submit links and notes to three queues, workers pull them and
 push results to a feed, and finished articles can be published onward.
 It keeps its data in one SQLite file under /var/lib/relay and runs as a
 systemd service with its own throwaway user.
 .
 This package holds $program.
EOF
  (cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z |
    xargs -0 md5sum >DEBIAN/md5sums)

  deb=$out/relay_${debversion}_$arch.deb
  dpkg-deb --root-owner-group -Z"$compression" --build "$root" "$deb" >/dev/null
  echo "package: ${deb#"$PWD"/} ($(du -h "$deb" | cut -f1), installs $((size / 1024)) MB: $program)"
  rm -rf "$root"
done

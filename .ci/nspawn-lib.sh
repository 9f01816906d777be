# shellcheck shell=bash
# Shared by .ci/package-smoke.sh, .ci/nspawn-smoke.sh and .ci/aarch64-smoke.sh (sourced, not
# run): the cached Debian 12 tree, booting it with systemd in systemd-nspawn, running commands
# in a machine, steps that must match the operations pages in docs/, checks and the HTTP smoke
# test.
#
# The sourcing script sets `name` (its name in messages) before sourcing, and calls finish at
# the end. Exit 0 with one "skipped" line when the machine cannot do it at all.

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# The pages whose commands CI runs (docs/operations.md is their index): a documented step must
# appear verbatim in one of them.
docs=("$repo/docs/install.md" "$repo/docs/upgrade.md" "$repo/docs/backup.md" "$repo/docs/faults.md")
cache=${RELAY_CI_CACHE:-/var/cache/relay-ci}
tree_packages=systemd,systemd-sysv,dbus,curl,ca-certificates,procps,sudo
# The versions the docs show in their commands: a step line writes {V} and {NEXT} for the
# package versions under test and is looked up in the docs with these in their place.
doc_version=0.1.0
doc_next=0.2.0

skip() {
  echo "$name: skipped: $*"
  exit 0
}
say() { echo "== $*"; }

failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
# check TITLE WANT GOT: compares a fact with what it should be.
check() {
  if [ "$2" = "$3" ]; then echo "ok: $1: $3"; else fail "$1: want $2, got $3"; fi
}
# check_match TITLE REGEX TEXT
check_match() {
  if [[ $3 =~ $2 ]]; then echo "ok: $1"; else fail "$1: /$2/ not in: $3"; fi
}
# check_has TITLE STRING TEXT: TEXT holds STRING.
check_has() {
  if [[ $3 == *"$2"* ]]; then echo "ok: $1"; else fail "$1: \"$2\" not in: $3"; fi
}
# note TEXT: one line of the summary finish prints (also printed now).
summary=()
note() {
  summary+=("$*")
  echo "note: $*"
}
# kept A B: "kept" when the two are the same, else "CHANGED".
kept() { if [ "$1" = "$2" ]; then echo kept; else echo CHANGED; fi; }
# now_ms: the clock in milliseconds.
now_ms() { date +%s%3N; }

# stop_if_failed: finishes now when a check has failed (the steps after it need it).
stop_if_failed() {
  [ "$failures" -eq 0 ] || finish
}

# finish: the summary, the verdict line and the exit code.
finish() {
  if [ ${#summary[@]} -gt 0 ]; then
    echo "== $name: summary"
    printf '  %s\n' "${summary[@]}"
  fi
  if [ "$failures" -gt 0 ]; then
    echo "$name: $failures failure(s)"
    exit 1
  fi
  echo "$name: all steps passed ($((SECONDS - stage_started)) s)"
}
stage_started=$SECONDS

# needs_nspawn: skips unless this machine can build and boot a container.
needs_nspawn() {
  [ "$(id -u)" -eq 0 ] || skip "needs root (debootstrap and systemd-nspawn)"
  local tool
  for tool in systemd-nspawn debootstrap nsenter; do
    command -v "$tool" >/dev/null 2>&1 ||
      skip "no $tool here (apt-get install systemd-container debootstrap util-linux)"
  done
  local page
  for page in "${docs[@]}"; do [ -f "$page" ] || skip "no ${page#"$repo"/} to follow"; done
}

# The Debian mirror this machine's apt uses (deb822 or one-line sources), else deb.debian.org.
debian_mirror() {
  local mirror=${RELAY_CI_MIRROR:-$(
    cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources \
      2>/dev/null | grep -v '^#' | grep -Eo 'https?://[^ ]+/debian/?( |$)' | head -n 1 |
      tr -d ' ' || true
  )}
  echo "${mirror:-http://deb.debian.org/debian}"
}

# ensure_tree: the Debian 12 tree in $tree, built once (about a minute) and cached outside the
# repository in $cache; delete it to rebuild. Skips when debootstrap cannot build it.
ensure_tree() {
  local arch started
  arch=$(dpkg --print-architecture 2>/dev/null || uname -m)
  tree="$cache/bookworm-$arch"
  if [ "$(cat "$tree/.relay-ci" 2>/dev/null)" = "$tree_packages" ]; then
    say "reusing the Debian 12 tree in $tree"
    return
  fi
  local mirror
  mirror=$(debian_mirror)
  say "building the Debian 12 tree in $tree from $mirror"
  rm -rf "$tree" "$tree.tmp"
  mkdir -p "$cache"
  started=$SECONDS
  debootstrap --variant=minbase --include="$tree_packages" bookworm "$tree.tmp" "$mirror" \
    >"$cache/debootstrap.log" 2>&1 || {
    tail -n 5 "$cache/debootstrap.log"
    skip "debootstrap failed (log: $cache/debootstrap.log)"
  }
  # The person following the docs: an ordinary user with sudo, uid 1000.
  chroot "$tree.tmp" useradd -m -s /bin/bash -G sudo admin
  echo 'admin ALL=(ALL) NOPASSWD: ALL' >"$tree.tmp/etc/sudoers.d/admin"
  chmod 0440 "$tree.tmp/etc/sudoers.d/admin"
  echo "$tree_packages" >"$tree.tmp/.relay-ci"
  mv "$tree.tmp" "$tree"
  say "tree built in $((SECONDS - started)) s"
}

# The work folder and the machines, removed on exit.
work=$(mktemp -d /var/tmp/relay-ci.XXXXXX)
declare -A nspawn_pid=() leader=()
cleanup() {
  local m
  for m in "${!nspawn_pid[@]}"; do kill "${nspawn_pid[$m]}" 2>/dev/null || true; done
  for m in "${!nspawn_pid[@]}"; do
    for _ in $(seq 60); do
      kill -0 "${nspawn_pid[$m]}" 2>/dev/null || break
      sleep 0.5
    done
  done
  rm -rf "$work"
}
trap cleanup EXIT

# in_m M CMD…: runs CMD as root inside machine M.
in_m() {
  local m=$1
  shift
  nsenter -t "${leader[$m]}" -a env -i LANG=C.UTF-8 HOME=/root \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"
}

# boot M [NSPAWN-OPTION…]: copies the tree, boots it without network (with the options, e.g.
# --bind-ro=…) and waits until systemd is up.
boot() {
  local m=$1 dir="$work/$1" started=$SECONDS state=""
  shift
  cp -a "$tree" "$dir"
  echo "$m" >"$dir/etc/hostname"
  printf '127.0.1.1 %s\n' "$m" >>"$dir/etc/hosts"
  systemd-nspawn --boot -D "$dir" -M "$m" --register=no --keep-unit --private-network \
    --console=passive "$@" >"$work/$m.log" 2>&1 &
  nspawn_pid[$m]=$!
  # The container's init: the child of systemd-nspawn once it runs systemd (nspawn's own
  # helper children come and go before that).
  leader[$m]=""
  for _ in $(seq 300); do
    local pid
    for pid in $(pgrep -P "${nspawn_pid[$m]}" || true); do
      [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = systemd ] && leader[$m]=$pid
    done
    [ -n "${leader[$m]}" ] && break
    kill -0 "${nspawn_pid[$m]}" 2>/dev/null || break
    sleep 0.2
  done
  if [ -z "${leader[$m]}" ]; then
    tail -n 5 "$work/$m.log"
    cannot_boot "systemd-nspawn cannot boot a container on this machine"
  fi
  for _ in $(seq 240); do
    state=$(in_m "$m" systemctl is-system-running 2>/dev/null || true)
    case "$state" in running | degraded) break ;; esac
    sleep 0.5
  done
  case "$state" in
  running | degraded) say "$m booted in $((SECONDS - started)) s (systemd: $state)" ;;
  *)
    tail -n 5 "$work/$m.log"
    cannot_boot "the container's systemd did not come up within 2 minutes (state: ${state:-none})"
    ;;
  esac
  booted=yes
}
# cannot_boot REASON: the first container that cannot boot means this machine cannot run them
# (skip); once one has booted, a later one that cannot is a failure.
booted=no
cannot_boot() {
  [ "$booted" = yes ] || skip "$1"
  fail "$1"
  finish
}

# shutdown_m M: powers machine M off and waits for it (up to 30 s).
shutdown_m() {
  local m=$1
  in_m "$m" systemctl poweroff >/dev/null 2>&1 || true
  for _ in $(seq 60); do
    kill -0 "${nspawn_pid[$m]}" 2>/dev/null || break
    sleep 0.5
  done
  kill "${nspawn_pid[$m]}" 2>/dev/null || true
  unset "nspawn_pid[$m]"
}

# step M TITLE <<'EOF' … EOF: runs the lines as the user admin in one bash, stopping at the
# first failing line, each echoed with "$ " before its output; the output also goes to
# $work/step.out. A line must be in the docs, with {V} and {NEXT} written as the docs' example
# versions ($doc_version, $doc_next) and run as $version and $next; unless it starts with @ (a
# stand-in for a download or the binary). A line starting with ! must fail; one starting with ?
# asks a question (apt's "Do you want to continue?"), answered with y.
step() {
  local m=$1 title=$2 line shown must_fail input doc_line script='cd; out=$(mktemp)'
  say "$m: $title"
  while IFS= read -r line; do
    [ -n "$line" ] || continue
    must_fail=no input=/dev/null
    if [[ $line == \?* ]]; then
      line=${line#\?}
      input=' <(yes)'
    fi
    if [[ $line == @* ]]; then
      line=${line#@}
      line=${line//\{V\}/${version:-}}
      line=${line//\{NEXT\}/${next:-}}
      shown="$line    # stand-in"
    else
      [[ $line == !* ]] && must_fail=yes
      line=${line#!}
      doc_line=${line//\{V\}/$doc_version}
      doc_line=${doc_line//\{NEXT\}/$doc_next}
      grep -qF -- "$doc_line" "${docs[@]}" || fail "not in the operations pages: $doc_line"
      line=${line//\{V\}/${version:-}}
      line=${line//\{NEXT\}/${next:-}}
      shown=$line
    fi
    # Output that lacks a final newline (curl's) gets one, so the next "$ " starts a line.
    script+=$'\n'"echo $(printf %q "\$ $shown")"
    script+=$'\n'"{ $line"$'\n'"} <$input >\"\$out\" 2>&1 && rc=0 || rc=\$?"
    script+=$'\n'"sed -e '\$a\\' \"\$out\""
    if [ "$must_fail" = yes ]; then
      script+=$'\n''if [ $rc -eq 0 ]; then echo "expected a failure"; exit 1; fi; echo "(exit code $rc)"'
    else
      script+=$'\n''[ $rc -eq 0 ] || exit $rc'
    fi
  done
  in_m "$m" runuser -l admin -c "$script" </dev/null >"$work/step.out" 2>&1 ||
    fail "$m: $title"
  cat "$work/step.out"
}

# run M CMD: one documented command as admin; prints its output.
run() {
  local m=$1 cmd=$2
  grep -qF -- "$cmd" "${docs[@]}" || fail "not in the operations pages: $cmd"
  in_m "$m" runuser -l admin -c "$cmd"
}

unit() { in_m "$1" systemctl show -p "$2" --value relay; }

# wait_settled M: waits up to 60 s until the unit is active, failed or inactive, and not about
# to restart.
wait_settled() {
  local state
  for _ in $(seq 120); do
    state=$(unit "$1" ActiveState)
    case "$state" in active | failed | inactive)
      [ "$(unit "$1" SubState)" != auto-restart ] && return 0
      ;;
    esac
    sleep 0.5
  done
}

# wait_listening M: waits up to 60 s until the relay answers /health (after "active", a start
# takes a second or two more).
wait_listening() {
  for _ in $(seq 120); do
    in_m "$1" curl -sf -o /dev/null http://localhost:8787/health && return 0
    sleep 0.5
  done
  fail "$1: the relay did not answer /health within 60 s"
}

key_of() { in_m "$1" cat /var/lib/relay/api-key || true; }
peek() { in_m "$1" curl -s -H "X-Auth-Key: $2" http://localhost:8787/peek; }
# snapshot M KEY: what the relay holds, as its answers show it: the queues, the feed, the notes
# and the podcast's episode titles.
snapshot() {
  in_m "$1" curl -s -H "X-Auth-Key: $2" http://localhost:8787/peek
  echo
  in_m "$1" curl -s -H "X-Auth-Key: $2" http://localhost:8787/results
  echo
  in_m "$1" curl -s -H "X-Auth-Key: $2" http://localhost:8787/notes/
  echo
  # The episodes' titles, not their chapters' (an episode gains chapters once it is spoken).
  in_m "$1" curl -s http://localhost:8787/podcast/episodes | sed -E 's/"chapters":\[[^]]*\],?//g' |
    grep -o '"title":"[^"]*"' | tr '\n' ' '
}

# smoke_http CURL BASE KEY TAG: the HTTP smoke test, through CURL (a command that runs curl,
# e.g. "in_m m1 curl" or "curl") against the relay at BASE with the main key. Submits to two
# queues, peeks, pulls one queue, pushes a result and reads it, loads the web app, and publishes
# one article to the built-in notes store, blog and podcast: the note and the post must be
# listed, and the episode spoken to an MP3 within $smoke_audio_wait seconds (default 60). When
# publishing is not configured (a 503 "not configured"), that part is skipped with a line.
# Leaves one item (in general), one result, one note, one post and one episode behind; TAG keeps
# its items apart from other runs.
smoke_http() {
  local -a c
  read -r -a c <<<"$1"
  local base=$2 key=$3 tag=$4 got status episode audio
  local qa="https://stackoverflow.com/questions/1/smoke-$tag" note="smoke note $tag"
  check "smoke: submit a question link" "OK (qa)" \
    "$("${c[@]}" -s -H "X-Auth-Key: $key" -d "$qa" "$base/submit")"
  check "smoke: submit a note" "OK (general)" \
    "$("${c[@]}" -s -H "X-Auth-Key: $key" -d "$note" "$base/submit")"
  got=$("${c[@]}" -s -H "X-Auth-Key: $key" "$base/peek")
  check_match "smoke: peek shows the link" "\"content\":\"$qa\"" "$got"
  check_match "smoke: peek shows the note" "\"content\":\"$note\"" "$got"
  got=$("${c[@]}" -s -H "X-Auth-Key: $key" "$base/pull?queue=qa")
  check "smoke: pull qa hands out the link" "[\"$qa\"]" "$got"
  got=$("${c[@]}" -s -o /dev/null -w '%{http_code}' -H "X-Auth-Key: $key" "$base/pull?queue=qa")
  check "smoke: pull qa again finds it empty" 204 "$got"
  check "smoke: push a result" OK \
    "$("${c[@]}" -s -H "X-Auth-Key: $key" -d "# smoke result $tag" "$base/push")"
  got=$("${c[@]}" -s -H "X-Auth-Key: $key" "$base/results")
  check_match "smoke: results hold it" "\"c\":\"# smoke result $tag\"" "$got"
  got=$("${c[@]}" -s -w '\n%{http_code} %{content_type}' "$base/app/")
  check_match "smoke: the web app's page" $'<html[^\n]*\n.*200 text/html' "$got"
  got=$("${c[@]}" -s -o /dev/null -w '%{http_code}' "$base/app/app.js")
  check "smoke: the web app's script" 200 "$got"

  got=$("${c[@]}" -s -w '\n%{http_code}' -H "X-Auth-Key: $key" -H "Content-Type: application/json" \
    -d "{\"title\": \"Smoke $tag\", \"content\": \"A smoke test, read aloud.\",
      \"content_md\": \"# Smoke\\n\\nA *smoke* test.\", \"targets\": [\"notes\", \"blog\", \"nas\"],
      \"transform\": \"read\"}" "$base/publish")
  status=${got##*$'\n'}
  if [ "$status" = 503 ] && [[ $got =~ not\ configured|has\ no\ URL ]]; then
    echo "skipped: smoke: publish: no downstream service configured (503: ${got%$'\n'*})"
    return
  fi
  check "smoke: publish to notes, blog and podcast" 200 "$status"
  check_match "smoke: every target succeeded" '^\{"status":"ok"' "$got"
  check_match "smoke: the note is listed" "\"title\":\"Smoke $tag\"" \
    "$("${c[@]}" -s -H "X-Auth-Key: $key" "$base/notes/")"
  check_match "smoke: the post is on the blog" "Smoke $tag" "$("${c[@]}" -s "$base/blog/")"
  for _ in $(seq $((${smoke_audio_wait:-60} * 2))); do
    # Each episode's chapters are objects in an array: left out, so an episode is one {…}.
    episode=$("${c[@]}" -s "$base/podcast/episodes" | sed -E 's/"chapters":\[[^]]*\],?//g' |
      grep -o "{[^{}]*\"title\":\"Smoke $tag\"[^{}]*}" || true)
    [[ $episode =~ \"state\":\"(ready|failed)\" ]] && break
    sleep 0.5
  done
  check_match "smoke: the episode is spoken" '"state":"ready"' "$episode"
  audio=$(sed -nE 's/.*"audio_url":"([^"]+)".*/\1/p' <<<"$episode")
  got=$("${c[@]}" -s -o /dev/null -w '%{http_code} %{content_type} %{size_download}' \
    "$base/${audio#http*://*/}")
  check_match "smoke: its MP3" '^200 audio/mpeg [1-9][0-9]{3,}$' "$got"
}

# ci_packages: sets semver and semver_next (deno.json's spelling), version and next (Debian's)
# and debs, a folder with relay_<version>_amd64.deb (dist/'s, built here when missing) and
# relay_<next>_amd64.deb, a rebuild of the same source with "+ci.1" added to deno.json's
# version: the upgrade. With RELAY_CI_DEBS set, that folder is used and filled once for every
# script of the stage.
ci_packages() {
  local arch=amd64
  semver=$(sed -nE 's/^  "version": "([^"]+)",?$/\1/p' "$repo/deno.json")
  semver_next="$semver+ci.1"
  version=${semver//-/\~}
  next=${semver_next//-/\~}
  debs=${RELAY_CI_DEBS:-$work/debs}
  mkdir -p "$debs"
  chmod 0755 "$debs" # the containers' admin reads it
  if ! [ -f "$debs/relay_${version}_$arch.deb" ]; then
    if ! [ -f "$repo/dist/relay_${version}_$arch.deb" ]; then
      say "building dist/relay_${version}_$arch.deb (deploy/package.sh)"
      "$repo/deploy/package.sh" --arch "$arch"
    fi
    cp "$repo/dist/relay_${version}_$arch.deb" "$debs/"
  fi
  if ! [ -f "$debs/relay_${next}_$arch.deb" ]; then
    say "building relay_${next}_$arch.deb: the same source as version $semver_next"
    local src=$work/src-next
    mkdir -p "$src"
    cp -R "$repo/main.ts" "$repo/deno.json" "$repo/deno.lock" "$repo/src" "$repo/webapp" \
      "$repo/deploy" "$repo/README.md" "$repo/docs" "$src/"
    sed -i -E "s/^  \"version\": \"[^\"]+\"/  \"version\": \"$semver_next\"/" "$src/deno.json"
    "$src/deploy/package.sh" --arch "$arch" --compression gzip --out "$debs" >/dev/null
    rm -rf "$src"
  fi
  ls -l "$debs"
}

#!/usr/bin/env bash
# Runs docs/operations.md for real: boots Debian 12 with systemd in systemd-nspawn containers
# and follows the install, key, backup, upgrade, rollback, configuration-error and move steps as
# a user with sudo, checking what each step leaves behind (unit state, restarts, items, keys,
# file modes). Every command it runs as a documented step must appear verbatim in
# docs/operations.md; lines marked @ are the stand-in's install (see deploy/stage-program.sh)
# and stand for the single binary, which cannot be built here.
#
#   .ci/nspawn-smoke.sh            (as root; not part of .ci/run yet)
#
# Needs root, systemd-nspawn (systemd-container), debootstrap, nsenter and npm. Skips with one
# line, exit 0, when any is missing or a container cannot boot on this machine. The Debian tree
# is built once (about a minute) and cached outside the repository in $RELAY_CI_CACHE
# (default /var/cache/relay-ci); delete it to rebuild. Exit 1 when a step or check fails.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
doc="$repo/docs/operations.md"
cache=${RELAY_CI_CACHE:-/var/cache/relay-ci}
packages=systemd,systemd-sysv,dbus,curl,ca-certificates,procps,sudo

skip() {
  echo "nspawn-smoke: skipped: $*"
  exit 0
}
say() { echo "== $*"; }

[ "$(id -u)" -eq 0 ] || skip "needs root (debootstrap and systemd-nspawn)"
for tool in systemd-nspawn debootstrap nsenter npm; do
  command -v "$tool" >/dev/null 2>&1 ||
    skip "no $tool here (apt-get install systemd-container debootstrap; npm for Deno)"
done
[ -f "$doc" ] || skip "no docs/operations.md to follow"
arch=$(dpkg --print-architecture 2>/dev/null || uname -m)
tree="$cache/bookworm-$arch"

# --- The Debian 12 tree, cached ------------------------------------------------------------

# The Debian mirror this machine's apt uses (deb822 or one-line sources), else deb.debian.org.
mirror=${RELAY_CI_MIRROR:-$(
  cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources \
    2>/dev/null | grep -v '^#' | grep -Eo 'https?://[^ ]+/debian/?( |$)' | head -n 1 | tr -d ' ' ||
    true
)}
mirror=${mirror:-http://deb.debian.org/debian}

if [ "$(cat "$tree/.relay-ci" 2>/dev/null)" != "$packages" ]; then
  say "building the Debian 12 tree in $tree from $mirror"
  rm -rf "$tree" "$tree.tmp"
  mkdir -p "$cache"
  started=$SECONDS
  debootstrap --variant=minbase --include="$packages" bookworm "$tree.tmp" "$mirror" \
    >"$cache/debootstrap.log" 2>&1 || {
    tail -n 5 "$cache/debootstrap.log"
    skip "debootstrap failed (log: $cache/debootstrap.log)"
  }
  # The person following the docs: an ordinary user with sudo, uid 1000.
  chroot "$tree.tmp" useradd -m -s /bin/bash -G sudo admin
  echo 'admin ALL=(ALL) NOPASSWD: ALL' >"$tree.tmp/etc/sudoers.d/admin"
  chmod 0440 "$tree.tmp/etc/sudoers.d/admin"
  echo "$packages" >"$tree.tmp/.relay-ci"
  mv "$tree.tmp" "$tree"
  say "tree built in $((SECONDS - started)) s"
else
  say "reusing the Debian 12 tree in $tree"
fi

# --- The program: two versions of the stand-in -------------------------------------------------

work=$(mktemp -d /var/tmp/relay-smoke.XXXXXX)
declare -A nspawn_pid=() leader=()
cleanup() {
  for m in "${!nspawn_pid[@]}"; do kill "${nspawn_pid[$m]}" 2>/dev/null || true; done
  for m in "${!nspawn_pid[@]}"; do
    for _ in $(seq 60); do kill -0 "${nspawn_pid[$m]}" 2>/dev/null || break; sleep 0.5; done
  done
  rm -rf "$work"
}
trap cleanup EXIT

version=$(sed -nE 's/^  "version": "([^"]+)".*/\1/p' "$repo/deno.json")
say "staging relay $version and $version-next (deploy/stage-program.sh)"
"$repo/deploy/stage-program.sh" "$work/relay-a" >/dev/null
mkdir -p "$work/src-b"
cp -R "$repo/main.ts" "$repo/deno.json" "$repo/deno.lock" "$repo/src" "$repo/webapp" \
  "$repo/deploy" "$work/src-b/"
sed -i "s/^  \"version\": \"$version\"/  \"version\": \"$version-next\"/" "$work/src-b/deno.json"
"$work/src-b/deploy/stage-program.sh" "$work/relay-b" >/dev/null

# --- Machines ------------------------------------------------------------------------------

# in_m M CMD…: runs CMD as root inside machine M.
in_m() {
  local m=$1
  shift
  nsenter -t "${leader[$m]}" -a env -i LANG=C.UTF-8 HOME=/root \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"
}

# boot M: copies the tree, boots it without network and waits until systemd is up.
boot() {
  local m=$1 dir="$work/$1" started=$SECONDS state=""
  cp -a "$tree" "$dir"
  echo "$m" >"$dir/etc/hostname"
  printf '127.0.1.1 %s\n' "$m" >>"$dir/etc/hosts"
  install -o 1000 -g 1000 -m 0644 "$repo/deploy/relay.service" "$dir/home/admin/relay.service"
  systemd-nspawn --boot -D "$dir" -M "$m" --register=no --keep-unit --private-network \
    --console=passive --bind-ro="$work/relay-a:/srv/relay-a" \
    --bind-ro="$work/relay-b:/srv/relay-b" >"$work/$m.log" 2>&1 &
  nspawn_pid[$m]=$!
  for _ in $(seq 100); do
    leader[$m]=$(pgrep -P "${nspawn_pid[$m]}" || true)
    [ -n "${leader[$m]}" ] && break
    kill -0 "${nspawn_pid[$m]}" 2>/dev/null || break
    sleep 0.2
  done
  if [ -z "${leader[$m]}" ]; then
    tail -n 5 "$work/$m.log"
    skip "systemd-nspawn cannot boot a container on this machine"
  fi
  for _ in $(seq 120); do
    state=$(in_m "$m" systemctl is-system-running 2>/dev/null || true)
    case "$state" in running | degraded) break ;; esac
    sleep 0.5
  done
  case "$state" in
  running | degraded) say "$m booted in $((SECONDS - started)) s (systemd: $state)" ;;
  *)
    tail -n 5 "$work/$m.log"
    skip "the container's systemd did not come up (state: ${state:-none})"
    ;;
  esac
}

failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# step M TITLE <<'EOF' … EOF: runs the lines as the user admin in one bash, stopping at the
# first failing line, each echoed with "$ " before its output. A line must be in the docs,
# unless it starts with @ (the stand-in's install); a line starting with ! must fail.
step() {
  local m=$1 title=$2 line shown must_fail script='cd; out=$(mktemp)'
  say "$m: $title"
  while IFS= read -r line; do
    [ -n "$line" ] || continue
    must_fail=no
    if [[ $line == @* ]]; then
      line=${line#@}
      shown="$line    # stand-in for the binary"
    else
      [[ $line == !* ]] && must_fail=yes
      line=${line#!}
      shown=$line
      grep -qF -- "$line" "$doc" || fail "not in docs/operations.md: $line"
    fi
    # Output that lacks a final newline (curl's) gets one, so the next "$ " starts a line.
    script+=$'\n'"echo $(printf %q "\$ $shown")"
    script+=$'\n'"{ $line"$'\n'"} >\"\$out\" 2>&1 && rc=0 || rc=\$?"
    script+=$'\n'"sed -e '\$a\\' \"\$out\""
    if [ "$must_fail" = yes ]; then
      script+=$'\n''if [ $rc -eq 0 ]; then echo "expected a failure"; exit 1; fi; echo "(exit code $rc)"'
    else
      script+=$'\n''[ $rc -eq 0 ] || exit $rc'
    fi
  done
  in_m "$m" runuser -l admin -c "$script" </dev/null || fail "$m: $title"
}

# run M CMD: one documented command as admin; prints its output. Fails the step on non-zero.
run() {
  local m=$1 cmd=$2
  grep -qF -- "$cmd" "$doc" || fail "not in docs/operations.md: $cmd"
  in_m "$m" runuser -l admin -c "$cmd"
}

# check TITLE WANT GOT: compares a fact with what it should be.
check() {
  if [ "$2" = "$3" ]; then echo "ok: $1: $3"; else fail "$1: want $2, got $3"; fi
}
# check_match TITLE REGEX TEXT
check_match() {
  if [[ $3 =~ $2 ]]; then echo "ok: $1"; else fail "$1: /$2/ not in: $3"; fi
}

unit() { in_m "$1" systemctl show -p "$2" --value relay; }

# wait_settled M: waits up to 60 s until the unit is active or failed, and not about to restart.
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

# --- The first machine: install, use, back up, upgrade, roll back, break it ----------------------

boot m1
step m1 "install" <<'EOF'
@sudo cp -R /srv/relay-a/opt/relay /opt/relay && sudo install -m 0755 /srv/relay-a/usr/local/bin/relay /usr/local/bin/relay
relay --version
sudo install -d -m 0700 /etc/relay
printf 'RELAY_PORT=8787\n' | sudo tee /etc/relay/env
sudo install -m 0644 relay.service /etc/systemd/system/relay.service
sudo systemctl daemon-reload
sudo systemctl enable --now relay
systemctl is-active relay
EOF
wait_settled m1
check "m1 unit after enable --now" active "$(unit m1 ActiveState)"
wait_listening m1
check_match "m1 health" '"ok":true' "$(in_m m1 curl -s http://localhost:8787/health)"

step m1 "read the key, submit and peek" <<'EOF'
curl -s http://localhost:8787/health
sudo ls -l /var/lib/relay/
KEY=$(sudo cat /var/lib/relay/api-key)
curl -s -H "X-Auth-Key: $KEY" -d "https://example.com/long-read" http://localhost:8787/submit
curl -s -H "X-Auth-Key: $KEY" -d "Remember to water the plants" http://localhost:8787/submit
curl -s -H "X-Auth-Key: $KEY" -d "# Summary of the long read" http://localhost:8787/push
curl -s -H "X-Auth-Key: $KEY" http://localhost:8787/peek
EOF
say "m1: a named key"
phone=$(run m1 "sudo relay keys add phone --scope submit --db /var/lib/relay/relay.kv" | tail -n 1)
echo "$phone"
check "m1 submit with the named key" "OK (general)" "$(in_m m1 curl -s -H "X-Auth-Key: $phone" \
  -d "sent with the phone's key" http://localhost:8787/submit)"
key1=$(key_of m1)
peek1=$(peek m1 "$key1")
check_match "m1 holds 3 items" '"total":3' "$peek1"
modes=$(in_m m1 stat -c '%a %n' /var/lib/private/relay /var/lib/private/relay/relay.kv \
  /var/lib/private/relay/api-key /var/lib/private/relay/keys.json | tr '\n' ' ' || true)
check "m1 data modes" "700 /var/lib/private/relay 600 /var/lib/private/relay/relay.kv 600 /var/lib/private/relay/api-key 600 /var/lib/private/relay/keys.json " "$modes"
check "m1 data files all owned by the relay's user" 1 \
  "$(in_m m1 sh -c 'stat -c %u /var/lib/private/relay /var/lib/private/relay/*' | sort -u | wc -l)"

step m1 "export while running is refused" <<'EOF'
!sudo relay export --db /var/lib/relay/relay.kv --out relay-backup.json
EOF
step m1 "back up" <<'EOF'
sudo systemctl stop relay
sudo relay export --include-secrets --db /var/lib/relay/relay.kv --out relay-backup.json
sudo systemctl start relay
ls -l relay-backup.json
EOF
check "m1 backup holds the main key" 1 "$(in_m m1 grep -cF -- "$key1" /home/admin/relay-backup.json || true)"

step m1 "upgrade" <<'EOF'
@sudo cp -a /opt/relay /opt/relay.previous
@sudo rm -rf /opt/relay && sudo cp -R /srv/relay-b/opt/relay /opt/relay && sudo install -m 0755 /srv/relay-b/usr/local/bin/relay /usr/local/bin/relay
relay --version
sudo systemctl restart relay
EOF
wait_settled m1
check "m1 unit after upgrade" active "$(unit m1 ActiveState)"
wait_listening m1
check_match "m1 version after upgrade" "^relay $version-next " "$(in_m m1 relay --version)"
check "m1 items after upgrade" "$peek1" "$(peek m1 "$key1")"

step m1 "roll back" <<'EOF'
@sudo rm -rf /opt/relay && sudo mv /opt/relay.previous /opt/relay
relay --version
sudo systemctl restart relay
EOF
wait_settled m1
check "m1 unit after rollback" active "$(unit m1 ActiveState)"
wait_listening m1
check_match "m1 version after rollback" "^relay $version " "$(in_m m1 relay --version)"
check "m1 items after rollback" "$peek1" "$(peek m1 "$key1")"

step m1 "restore the backup over the database" <<'EOF'
sudo systemctl stop relay
sudo relay import --force relay-backup.json --db /var/lib/relay/relay.kv
sudo systemctl start relay
EOF
wait_settled m1
check "m1 unit after the restore" active "$(unit m1 ActiveState)"
wait_listening m1
check "m1 items after the restore" "$peek1" "$(peek m1 "$key1")"

step m1 "a configuration error" <<'EOF'
printf 'RELAY_PORT=abc\n' | sudo tee /etc/relay/env
sudo systemctl restart relay
EOF
sleep 5 # a restart would come after RestartSec=2s
wait_settled m1
step m1 "its state" <<'EOF'
systemctl show -p ActiveState,Result,ExecMainStatus,NRestarts relay
sudo journalctl -u relay -n 4 -o cat --no-pager
EOF
check "m1 unit after RELAY_PORT=abc" failed "$(unit m1 ActiveState)"
check "m1 exit status after RELAY_PORT=abc" 2 "$(unit m1 ExecMainStatus)"
check "m1 restarts after RELAY_PORT=abc" 0 "$(unit m1 NRestarts)"
step m1 "fix it" <<'EOF'
printf 'RELAY_PORT=8787\n' | sudo tee /etc/relay/env
sudo systemctl restart relay
EOF
wait_settled m1
check "m1 unit after the fix" active "$(unit m1 ActiveState)"
wait_listening m1

say "m1: a failure at run time (another process holds port 8787)"
in_m m1 systemctl stop relay
blocker=$(in_m m1 sh -c 'RELAY_API_KEY=blocker-0123456789 relay serve --port 8787 \
  --db /root/blocker/relay.kv >/root/blocker.log 2>&1 & echo $!')
for _ in $(seq 40); do in_m m1 curl -s -o /dev/null http://localhost:8787/health && break; sleep 0.5; done
in_m m1 systemctl reset-failed relay 2>/dev/null || true
in_m m1 systemctl start relay || true
started=$SECONDS
for _ in $(seq 240); do
  [ "$(unit m1 ActiveState)" = failed ] && [ "$(unit m1 SubState)" != auto-restart ] && break
  sleep 0.5
done
echo "the unit gave up after $((SECONDS - started)) s"
step m1 "its state" <<'EOF'
systemctl show -p ActiveState,Result,ExecMainStatus,NRestarts relay
sudo journalctl -u relay -n 4 -o cat --no-pager
EOF
check "m1 unit after 10 failed starts" failed "$(unit m1 ActiveState)"
check "m1 exit status after 10 failed starts" 1 "$(unit m1 ExecMainStatus)"
check_match "m1 restarts after 10 failed starts" "^(9|10)$" "$(unit m1 NRestarts)"
check_match "m1 start limit in the journal" "Start request repeated too quickly" \
  "$(in_m m1 journalctl -u relay -n 5 -o cat --no-pager)"
in_m m1 kill "$blocker"
step m1 "start again after the start limit" <<'EOF'
sudo systemctl reset-failed relay
sudo systemctl start relay
EOF
wait_settled m1
check "m1 unit after reset-failed" active "$(unit m1 ActiveState)"
wait_listening m1

step m1 "back up for the move" <<'EOF'
sudo systemctl stop relay
sudo relay export --include-secrets --db /var/lib/relay/relay.kv --out relay-backup.json
sudo chown "$USER": relay-backup.json
EOF

# --- The second machine: the move ------------------------------------------------------------

boot m2
say "copying relay-backup.json and /etc/relay/env from m1 to m2 (scp on real machines)"
install -o 1000 -g 1000 -m 0600 "$work/m1/home/admin/relay-backup.json" "$work/m2/home/admin/" ||
  fail "no relay-backup.json on m1"
install -o 1000 -g 1000 -m 0600 "$work/m1/etc/relay/env" "$work/m2/home/admin/env"

step m2 "install without starting, import, start" <<'EOF'
@sudo cp -R /srv/relay-a/opt/relay /opt/relay && sudo install -m 0755 /srv/relay-a/usr/local/bin/relay /usr/local/bin/relay
sudo install -d -m 0700 /etc/relay
sudo install -m 0600 env /etc/relay/env
sudo install -m 0644 relay.service /etc/systemd/system/relay.service
sudo systemctl daemon-reload
sudo relay import relay-backup.json --db /var/lib/relay/relay.kv
sudo systemctl enable --now relay
EOF
wait_settled m2
check "m2 unit after import and enable --now" active "$(unit m2 ActiveState)"
wait_listening m2
check "m2 restarts" 0 "$(unit m2 NRestarts)"
check "m2 main key" "$key1" "$(key_of m2)"
check "m2 items" "$peek1" "$(peek m2 "$key1")"
check "m2 items, read with m2's main key" "$peek1" "$(peek m2 "$(key_of m2)")"
check_match "m2 results" '# Summary of the long read' \
  "$(in_m m2 curl -s -H "X-Auth-Key: $key1" http://localhost:8787/results)"
check "m2 named key" "OK (general)" "$(in_m m2 curl -s -H "X-Auth-Key: $phone" \
  -d "sent after the move" http://localhost:8787/submit)"
modes=$(in_m m2 stat -c '%a %n' /var/lib/private /var/lib/private/relay \
  /var/lib/private/relay/relay.kv | tr '\n' ' ' || true)
check "m2 data modes" "700 /var/lib/private 700 /var/lib/private/relay 600 /var/lib/private/relay/relay.kv " "$modes"

step m2 "import refuses a database that holds items" <<'EOF'
sudo systemctl stop relay
!sudo relay import relay-backup.json --db /var/lib/relay/relay.kv
sudo systemctl start relay
EOF

if [ "$failures" -gt 0 ]; then
  echo "nspawn-smoke: $failures failure(s)"
  exit 1
fi
echo "nspawn-smoke: all steps passed"

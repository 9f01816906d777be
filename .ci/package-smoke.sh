#!/usr/bin/env bash
# The Debian package on a real systemd: boots Debian 12 in systemd-nspawn containers and, as a
# user with sudo following docs/install.md, installs dist/relay_<version>_amd64.deb (enabled,
# not started), starts it, runs the HTTP smoke test (submit, peek, pull, push, results, the web
# app, publish when configured), restarts it, breaks the settings (RELAY_PORT=abc: the unit must
# fail without restarting), upgrades to a rebuilt package and downgrades back on the same data,
# exports with the main key and imports on a second machine (the move), then removes the package
# (data kept, and found again by a reinstall) and purges it (data gone). Every documented
# command must appear verbatim in docs/install.md, upgrade.md, backup.md or faults.md.
#
#   .ci/package-smoke.sh        (as root; .ci/run runs it after the tests)
#
# Needs root, systemd-nspawn (systemd-container), debootstrap, nsenter, dpkg-deb and, to build
# the packages, npm. Skips with one line, exit 0, when the machine cannot run a container at
# all. The Debian tree is cached in $RELAY_CI_CACHE (default /var/cache/relay-ci). Exit 1 when
# a step or check fails.
set -euo pipefail
name=package-smoke
# shellcheck source=.ci/nspawn-lib.sh
. "$(dirname "$0")/nspawn-lib.sh"

needs_nspawn
ensure_tree
ci_packages

binds=(--bind-ro="$debs:/srv/debs")
# keys_work M MAIN PHONE READER WHEN: each key still does what it may, and no more; sets
# keys_state to "work" or "FAIL".
keys_work() {
  local m=$1 main=$2 phone=$3 reader=$4 when=$5 before=$failures
  check "$m $when: the main key reads" 200 "$(in_m "$m" curl -s -o /dev/null -w '%{http_code}' \
    -H "X-Auth-Key: $main" http://localhost:8787/stats)"
  check "$m $when: the phone's key submits" "OK (general)" "$(in_m "$m" curl -s \
    -H "X-Auth-Key: $phone" -d "sent with the phone's key $when" http://localhost:8787/submit)"
  check "$m $when: the phone's key may not read" 403 "$(in_m "$m" curl -s -o /dev/null \
    -w '%{http_code}' -H "X-Auth-Key: $phone" http://localhost:8787/peek)"
  check "$m $when: the reader's key reads" 200 "$(in_m "$m" curl -s -o /dev/null \
    -w '%{http_code}' -H "X-Auth-Key: $reader" http://localhost:8787/results)"
  if [ "$failures" -eq "$before" ]; then keys_state=work; else keys_state=FAIL; fi
}

# --- The first machine: install, use, restart, break, upgrade, downgrade ---------------------

# state_line M: the unit's state in one line.
state_line() {
  in_m "$1" systemctl show -p ActiveState,SubState,UnitFileState,Result,ExecMainStatus,NRestarts \
    relay | sort | tr '\n' ' ' | sed 's/ $//'
}
# count_in LINE TEXT STRING: how often STRING occurs in line LINE of TEXT.
count_in() { sed -n "$1p" <<<"$2" | grep -o "$3" | wc -l; }
# counts SNAPSHOT: "N items, N results, N notes, N episodes" in what snapshot printed.
counts() {
  echo "$(grep -o '"total":[0-9]*' <<<"$1" | cut -d: -f2) items," \
    "$(count_in 2 "$1" '"t":') results, $(count_in 3 "$1" '"doc_id":') notes," \
    "$(count_in 4 "$1" '"title":') episodes"
}

boot m1 "${binds[@]}"
t0=$(now_ms)
step m1 "install the package" <<'EOF'
@cp /srv/debs/relay_{V}_amd64.deb /srv/debs/relay_{NEXT}_amd64.deb .
sudo apt install ./relay_{V}_amd64.deb
systemctl is-enabled relay
EOF
check_has "m1 postinst says where the key will be" "/var/lib/relay/api-key" \
  "$(cat "$work/step.out")"
install_ms=$(($(now_ms) - t0))
check "m1 unit after install (enabled, not started)" "inactive enabled" \
  "$(unit m1 ActiveState) $(unit m1 UnitFileState)"
note "install relay_${version}_amd64.deb ($(du -h "$debs/relay_${version}_amd64.deb" | cut -f1)):" \
  "${install_ms} ms; then: $(state_line m1)"
check "m1 unit file" "/lib/systemd/system/relay.service" "$(unit m1 FragmentPath)"
check_match "m1 ExecStart" "path=/usr/bin/relay ; argv\[\]=/usr/bin/relay serve" \
  "$(unit m1 ExecStart)"
check "m1 settings file" "700 root /etc/relay 600 root /etc/relay/env " \
  "$(in_m m1 stat -c '%a %U %n' /etc/relay /etc/relay/env | tr '\n' ' ')"
check "m1 no data before the first start" no \
  "$(in_m m1 sh -c 'test -e /var/lib/relay && echo yes || echo no')"
stop_if_failed

t0=$(now_ms)
step m1 "start it" <<'EOF'
sudo systemctl start relay
systemctl is-active relay
EOF
wait_settled m1
wait_listening m1
note "first start: /health answered $(($(now_ms) - t0)) ms after systemctl start;" \
  "$(state_line m1)"
step m1 "read the key" <<'EOF'
sudo ls -l /var/lib/relay/
KEY=$(sudo cat /var/lib/relay/api-key)
curl -s -H "X-Auth-Key: $KEY" -d "https://example.com/long-read" http://localhost:8787/submit
EOF
check "m1 unit after start" active "$(unit m1 ActiveState)"
key1=$(key_of m1)
check_match "m1 main key made on the first start" '^[A-Za-z0-9_-]{20,}$' "$key1"
stop_if_failed

say "m1: the HTTP smoke test"
smoke_http "in_m m1 curl" http://localhost:8787 "$key1" m1
say "m1: named keys"
phone=$(run m1 "sudo relay keys add phone --scope submit --db /var/lib/relay/relay.kv" | tail -n 1)
reader=$(in_m m1 relay keys add reader --scope read --db /var/lib/relay/relay.kv | tail -n 1)
keys_work m1 "$key1" "$phone" "$reader" "installed"
state1=$(snapshot m1 "$key1")
echo "$state1"
rss=$(in_m m1 sh -c 'ps -o rss= -p "$(systemctl show -p MainPID --value relay)"')
note "after the smoke test: $(counts "$state1"); the relay's RSS $((rss / 1024)) MB (amd64, native)"

t0=$(now_ms)
step m1 "restart" <<'EOF'
sudo systemctl restart relay
EOF
wait_settled m1
wait_listening m1
restart_ms=$(($(now_ms) - t0))
check "m1 unit after restart" active "$(unit m1 ActiveState)"
after=$(snapshot m1 "$key1")
check "m1 data after restart" "$state1" "$after"
check "m1 main key after restart" "$key1" "$(key_of m1)"
note "restart: back in ${restart_ms} ms; data $(kept "$state1" "$after")" \
  "($(counts "$after")), main key $(kept "$key1" "$(key_of m1)")"

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
note "RELAY_PORT=abc, 5 s after the restart: $(state_line m1)"
step m1 "fix it" <<'EOF'
printf 'RELAY_PORT=8787\n' | sudo tee /etc/relay/env
sudo systemctl restart relay
EOF
wait_settled m1
wait_listening m1
check "m1 unit after the fix" active "$(unit m1 ActiveState)"
check "m1 data after the fix" "$state1" "$(snapshot m1 "$key1")"

t0=$(now_ms)
step m1 "upgrade" <<'EOF'
sudo apt install ./relay_{NEXT}_amd64.deb
relay --version
EOF
check_has "m1 postinst restarted the relay" "relay: restarted with version $next (was $version)" \
  "$(cat "$work/step.out")"
wait_settled m1
wait_listening m1
up_ms=$(($(now_ms) - t0))
check "m1 unit after upgrade" "active 0" "$(unit m1 ActiveState) $(unit m1 NRestarts)"
check "m1 version after upgrade" "relay $semver_next" "$(in_m m1 relay --version | cut -d' ' -f1,2)"
after=$(snapshot m1 "$key1")
check "m1 data after upgrade" "$state1" "$after"
check "m1 main key after upgrade" "$key1" "$(key_of m1)"
check "m1 settings kept by the upgrade" "RELAY_PORT=8787" "$(in_m m1 cat /etc/relay/env)"
keys_work m1 "$key1" "$phone" "$reader" "after upgrade"
note "upgrade $version -> $next: serving again ${up_ms} ms after apt install began;" \
  "$(in_m m1 relay --version); data $(kept "$state1" "$after")" \
  "($(counts "$after")), main key $(kept "$key1" "$(key_of m1)"), named keys $keys_state," \
  "settings $(kept "RELAY_PORT=8787" "$(in_m m1 cat /etc/relay/env)"); $(state_line m1)"
state1=$(snapshot m1 "$key1")

t0=$(now_ms)
step m1 "downgrade to the previous package" <<'EOF'
?sudo apt install --allow-downgrades ./relay_{V}_amd64.deb
relay --version
EOF
wait_settled m1
wait_listening m1
up_ms=$(($(now_ms) - t0))
check "m1 unit after downgrade" active "$(unit m1 ActiveState)"
check "m1 version after downgrade" "relay $semver" "$(in_m m1 relay --version | cut -d' ' -f1,2)"
after=$(snapshot m1 "$key1")
check "m1 data after downgrade" "$state1" "$after"
check "m1 main key after downgrade" "$key1" "$(key_of m1)"
keys_work m1 "$key1" "$phone" "$reader" "after downgrade"
note "downgrade $next -> $version on the same data: serving again ${up_ms} ms after" \
  "apt install began; $(in_m m1 relay --version); data $(kept "$state1" "$after")" \
  "($(counts "$after")), main key $(kept "$key1" "$(key_of m1)"), named keys $keys_state;" \
  "$(state_line m1)"
state1=$(snapshot m1 "$key1")

step m1 "back up for the move" <<'EOF'
sudo systemctl stop relay
sudo relay export --include-secrets --db /var/lib/relay/relay.kv --out relay-backup.json
sudo chown "$USER": relay-backup.json
EOF

# --- The second machine: the move --------------------------------------------------------

boot m2 "${binds[@]}"
say "copying relay-backup.json and /etc/relay/env from m1 to m2 (scp on real machines)"
install -o 1000 -g 1000 -m 0600 "$work/m1/home/admin/relay-backup.json" "$work/m2/home/admin/" ||
  fail "no relay-backup.json on m1"
install -o 1000 -g 1000 -m 0600 "$work/m1/etc/relay/env" "$work/m2/home/admin/env"
step m2 "install, import, start" <<'EOF'
@cp /srv/debs/relay_{V}_amd64.deb .
sudo apt install ./relay_{V}_amd64.deb
sudo install -m 0600 env /etc/relay/env
sudo relay import relay-backup.json --db /var/lib/relay/relay.kv
sudo systemctl start relay
EOF
wait_settled m2
wait_listening m2
check "m2 unit after the move" "active 0" "$(unit m2 ActiveState) $(unit m2 NRestarts)"
check "m2 main key" "$key1" "$(key_of m2)"
after=$(snapshot m2 "$key1")
check "m2 data after the move" "$state1" "$after"
keys_work m2 "$key1" "$phone" "$reader" "after the move"
note "move (export --include-secrets on m1, import on m2 before the first start): data" \
  "$(kept "$state1" "$after") ($(counts "$after")), main key" \
  "$(kept "$key1" "$(key_of m2)"), named keys phone (submit) and reader (read) $keys_state;" \
  "$(state_line m2)"
smoke_http "in_m m2 curl" http://localhost:8787 "$key1" m2
check "m2 data files owned by the relay's user" 1 \
  "$(in_m m2 sh -c 'stat -c %u /var/lib/private/relay /var/lib/private/relay/*' | sort -u | wc -l)"
shutdown_m m2

# --- Back on the first machine: remove keeps the data, purge deletes it ------------------

step m1 "remove the package" <<'EOF'
?sudo apt remove relay
EOF
check "m1 unit after remove" inactive "$(unit m1 ActiveState)"
check "m1 relay process after remove" none "$(in_m m1 pgrep -f /usr/lib/relay/deno || echo none)"
check "m1 data kept by remove" "api-key keys.json relay.kv" \
  "$(in_m m1 sh -c 'cd /var/lib/private/relay && ls api-key keys.json relay.kv' | tr '\n' ' ' |
    sed 's/ $//')"
check "m1 settings kept by remove" "RELAY_PORT=8787" "$(in_m m1 cat /etc/relay/env)"
note "remove: $(state_line m1); $(in_m m1 sh -c 'ls /var/lib/private/relay' | tr '\n' ' ')" \
  "still in /var/lib/private/relay"
step m1 "install again: the data is still there" <<'EOF'
sudo apt install ./relay_{V}_amd64.deb
sudo systemctl start relay
EOF
wait_settled m1
wait_listening m1
check "m1 unit after reinstall (enabled)" "active enabled" \
  "$(unit m1 ActiveState) $(unit m1 UnitFileState)"
after=$(snapshot m1 "$key1")
check "m1 data after remove and reinstall" "$state1" "$after"
note "install again after remove: data $(kept "$state1" "$after")" \
  "($(counts "$after")); $(state_line m1)"
step m1 "purge" <<'EOF'
?sudo apt purge relay
EOF
check "m1 unit after purge" "inactive not-found" "$(unit m1 ActiveState) $(unit m1 LoadState)"
left=$(in_m m1 sh -c 'ls -d /var/lib/private/relay /var/lib/relay /etc/relay /usr/bin/relay \
  /usr/lib/relay /lib/systemd/system/relay.service \
  /etc/systemd/system/multi-user.target.wants/relay.service 2>/dev/null; true')
check "m1 left after purge" "" "$left"
check "m1 package state after purge" not-installed \
  "$(in_m m1 dpkg-query -W -f='${db:Status-Status}' relay 2>/dev/null || echo not-installed)"
note "purge: left of the data (/var/lib/private/relay, /var/lib/relay), /etc/relay, the program," \
  "the unit and its boot link: ${left:-nothing}"

finish

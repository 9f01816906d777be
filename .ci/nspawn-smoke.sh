#!/usr/bin/env bash
# The single program plus the unit, installed by hand: boots Debian 12 with systemd in
# systemd-nspawn containers and follows docs/install.md's by-hand install, key, backup,
# upgrade, rollback, restore, configuration-error and move steps as a user with sudo, checking
# what each step leaves behind (unit state, restarts, items, keys, file modes). Every command
# it runs as a documented step must appear verbatim in docs/install.md, upgrade.md, backup.md
# or faults.md; lines marked @ are the stand-in's install and stand for the single binary,
# which cannot be built here: the stand-in is the program of the amd64 package
# (deploy/stage-program.sh's layout), taken out of dist/relay_<version>_amd64.deb, and of the
# rebuilt package for the upgrade.
#
#   .ci/nspawn-smoke.sh            (as root; .ci/run runs it after .ci/package-smoke.sh)
#
# Needs root, systemd-nspawn (systemd-container), debootstrap, nsenter, dpkg-deb and, to build
# the packages, npm. Skips with one line, exit 0, when the machine cannot run a container at
# all. The Debian tree is cached in $RELAY_CI_CACHE (default /var/cache/relay-ci). Exit 1 when
# a step or check fails.
set -euo pipefail
name=nspawn-smoke
# shellcheck source=.ci/nspawn-lib.sh
. "$(dirname "$0")/nspawn-lib.sh"

needs_nspawn
ensure_tree
ci_packages
# The program of each package: /usr/lib/relay and the launcher /usr/bin/relay.
dpkg-deb -x "$debs/relay_${version}_amd64.deb" "$work/relay-a"
dpkg-deb -x "$debs/relay_${next}_amd64.deb" "$work/relay-b"
binds=(--bind-ro="$work/relay-a:/srv/relay-a" --bind-ro="$work/relay-b:/srv/relay-b")
# The unit as the repository has it, in the admin's home: what they copied to the machine.
put_unit() {
  install -o 1000 -g 1000 -m 0644 "$repo/deploy/relay.service" "$work/$1/home/admin/relay.service"
}

# --- The first machine: install, use, back up, upgrade, roll back, break it ----------------------

boot m1 "${binds[@]}"
put_unit m1
step m1 "install" <<'EOF'
@sudo cp -R /srv/relay-a/usr/lib/relay /usr/local/lib/relay && sudo install -m 0755 /srv/relay-a/usr/bin/relay /usr/local/bin/relay
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
stop_if_failed

step m1 "read the key, submit and peek" <<'EOF'
curl -s http://localhost:8787/health
sudo ls -l /var/lib/relay/
KEY=$(sudo cat /var/lib/relay/api-key)
curl -s -H "X-Auth-Key: $KEY" -d "https://example.com/long-read" http://localhost:8787/submit
curl -s -H "X-Auth-Key: $KEY" -d "Remember to water the plants" http://localhost:8787/submit
curl -s -H "X-Auth-Key: $KEY" -d "# Summary of the long read" http://localhost:8787/push
curl -s -H "X-Auth-Key: $KEY" http://localhost:8787/peek
EOF
say "m1: the HTTP smoke test"
smoke_http "in_m m1 curl" http://localhost:8787 "$(key_of m1)" hand
say "m1: a named key"
phone=$(run m1 "sudo relay keys add phone --scope submit --db /var/lib/relay/relay.kv" | tail -n 1)
echo "$phone"
check "m1 submit with the named key" "OK (general)" "$(in_m m1 curl -s -H "X-Auth-Key: $phone" \
  -d "sent with the phone's key" http://localhost:8787/submit)"
key1=$(key_of m1)
peek1=$(peek m1 "$key1")
check_match "m1 holds 4 items" '"total":4' "$peek1"
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
@sudo cp -a /usr/local/lib/relay /usr/local/lib/relay.previous
@sudo rm -rf /usr/local/lib/relay && sudo cp -R /srv/relay-b/usr/lib/relay /usr/local/lib/relay && sudo install -m 0755 /srv/relay-b/usr/bin/relay /usr/local/bin/relay
relay --version
sudo systemctl restart relay
EOF
wait_settled m1
check "m1 unit after upgrade" active "$(unit m1 ActiveState)"
wait_listening m1
check "m1 version after upgrade" "relay $semver_next" "$(in_m m1 relay --version | cut -d' ' -f1,2)"
check "m1 items after upgrade" "$peek1" "$(peek m1 "$key1")"
note "upgrade by hand to $semver_next: items $(kept "$peek1" "$(peek m1 "$key1")"), main key" \
  "$(kept "$key1" "$(key_of m1)"); $(unit m1 ActiveState), NRestarts $(unit m1 NRestarts)"

step m1 "roll back" <<'EOF'
@sudo rm -rf /usr/local/lib/relay && sudo mv /usr/local/lib/relay.previous /usr/local/lib/relay
relay --version
sudo systemctl restart relay
EOF
wait_settled m1
check "m1 unit after rollback" active "$(unit m1 ActiveState)"
wait_listening m1
check "m1 version after rollback" "relay $semver" "$(in_m m1 relay --version | cut -d' ' -f1,2)"
check "m1 items after rollback" "$peek1" "$(peek m1 "$key1")"
note "roll back by hand to $semver: items $(kept "$peek1" "$(peek m1 "$key1")"), main key" \
  "$(kept "$key1" "$(key_of m1)"); $(unit m1 ActiveState), NRestarts $(unit m1 NRestarts)"

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
note "RELAY_PORT=abc: $(unit m1 ActiveState), exit status $(unit m1 ExecMainStatus)," \
  "NRestarts $(unit m1 NRestarts)"
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
gave_up=$((SECONDS - started))
echo "the unit gave up after $gave_up s"
step m1 "its state" <<'EOF'
systemctl show -p ActiveState,Result,ExecMainStatus,NRestarts relay
sudo journalctl -u relay -n 4 -o cat --no-pager
EOF
check "m1 unit after 10 failed starts" failed "$(unit m1 ActiveState)"
note "port taken: gave up after $gave_up s; $(unit m1 ActiveState), exit status" \
  "$(unit m1 ExecMainStatus), NRestarts $(unit m1 NRestarts)"
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

boot m2 "${binds[@]}"
put_unit m2
say "copying relay-backup.json and /etc/relay/env from m1 to m2 (scp on real machines)"
install -o 1000 -g 1000 -m 0600 "$work/m1/home/admin/relay-backup.json" "$work/m2/home/admin/" ||
  fail "no relay-backup.json on m1"
install -o 1000 -g 1000 -m 0600 "$work/m1/etc/relay/env" "$work/m2/home/admin/env"

step m2 "install without starting, import, start" <<'EOF'
@sudo cp -R /srv/relay-a/usr/lib/relay /usr/local/lib/relay && sudo install -m 0755 /srv/relay-a/usr/bin/relay /usr/local/bin/relay
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
note "move by hand: items $(kept "$peek1" "$(peek m2 "$key1")"), main key $(kept "$key1" \
  "$(key_of m2)"); $(unit m2 ActiveState), NRestarts $(unit m2 NRestarts)"
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

finish

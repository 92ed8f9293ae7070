#!/usr/bin/env bats
# base-image/mount-watch.sh against a fake mountinfo and a fake /proc, with setpriv
# stubbed (it logs the kill it would run as node); sandbox-exec's refusal and
# doctor.sh's mount rows on the same kind of fakes.

load test_helper

bats_require_minimum_version 1.5.0

SCRIPT="$ROOT/base-image/mount-watch.sh"

setup() {
  common_setup
  export AGENT_SANDBOX_STATE_DIR="$TEST_TMP/state"
  export AGENT_SANDBOX_MOUNTINFO="$TEST_TMP/mountinfo"
  export AGENT_SANDBOX_PROC_DIR="$TEST_TMP/proc"
  export AGENT_SANDBOX_WATCH_INTERVAL=0.01
  # Polling only; the event helpers have cases of their own below.
  export AGENT_SANDBOX_WATCH_EVENTS=0
  export AGENT_SANDBOX_PROTECTED_MOUNTS=$'/workspace/my repo/.husky\n/workspace/my repo/.agent-precommit/user-context.json'
  mkdir -p "$AGENT_SANDBOX_STATE_DIR" "$AGENT_SANDBOX_PROC_DIR"
  mountinfo husky ctx
  stub id 'echo 1234'
  stub setpriv
  WATCH_PID=""
}

teardown() {
  if [ -n "$WATCH_PID" ]; then kill "$WATCH_PID" 2> /dev/null || true; fi
  common_teardown
}

# mountinfo [husky] [ctx] [rw]: write the fake mountinfo (atomically, as the
# kernel's view changes at once), with the named protected mounts present.
mountinfo() {
  local opts=ro f="$TEST_TMP/mountinfo.new"
  printf '%s\n' '81 1 0:50 / / rw,relatime master:1 - overlay overlay rw' \
    '98 81 254:0 /home/me/my\040repo /workspace/my\040repo rw,relatime - ext4 /dev/vda rw' > "$f"
  for m in "$@"; do [ "$m" != rw ] || opts=rw; done
  for m in "$@"; do
    case "$m" in
      husky) echo "99 98 254:0 /home/me/my\\040repo/.husky /workspace/my\\040repo/.husky $opts,relatime - ext4 /dev/vda rw" >> "$f" ;;
      ctx) echo "104 98 254:0 /home/me/my\\040repo/.agent-precommit/user-context.json /workspace/my\\040repo/.agent-precommit/user-context.json $opts,relatime - ext4 /dev/vda rw" >> "$f" ;;
    esac
  done
  mv "$f" "$TEST_TMP/mountinfo"
}

# proc PID UID ARGV...: a fake /proc entry.
proc() {
  local pid="$1" uid="$2"
  shift 2
  mkdir -p "$AGENT_SANDBOX_PROC_DIR/$pid"
  printf 'Name:\tx\nUmask:\t0022\nUid:\t%s\t%s\t%s\t%s\n' "$uid" "$uid" "$uid" "$uid" > "$AGENT_SANDBOX_PROC_DIR/$pid/status"
  printf '%s\0' "$@" > "$AGENT_SANDBOX_PROC_DIR/$pid/cmdline"
}

# watch_bg [ARG...]: start the watcher; its first line goes to $TEST_TMP/out.
watch_bg() {
  "$SCRIPT" "$@" > "$TEST_TMP/out" 2> "$TEST_TMP/err" &
  WATCH_PID=$!
  wait_for "$TEST_TMP/state/mount-watch.pid"
}

# dns_setup [BODY]: a resolv.conf of the firewall's, and a firewall script that runs
# BODY (by default, writes resolv.conf back as init-firewall does), then logs "firewall".
dns_setup() {
  export AGENT_SANDBOX_RESOLV_CONF="$TEST_TMP/resolv.conf"
  export AGENT_SANDBOX_FIREWALL_SCRIPT="$TEST_TMP/init-firewall.sh"
  printf '# Written by agent-sandbox\nnameserver 127.0.0.1\n' > "$AGENT_SANDBOX_RESOLV_CONF"
  cat > "$AGENT_SANDBOX_FIREWALL_SCRIPT" << EOF
#!/usr/bin/env bash
( ${1:-printf 'nameserver 127.0.0.1\\n' > "\$AGENT_SANDBOX_RESOLV_CONF"} )
rc=\$?
echo firewall >> "\$STUB_LOG"
exit "\$rc"
EOF
  chmod +x "$AGENT_SANDBOX_FIREWALL_SCRIPT"
}

# engine_writes TEXT: rewrite resolv.conf in place, as Docker and Podman do.
engine_writes() {
  printf '%s' "$1" > "$AGENT_SANDBOX_RESOLV_CONF"
}

# reloads: how many times the firewall script ran.
reloads() {
  grep -c '^firewall$' "$STUB_LOG" || true
}

# wait_reloads N: up to 5 s for the firewall script to have run N times.
wait_reloads() {
  local i
  for ((i = 0; i < 500; i++)); do
    [ "$(reloads)" -lt "$1" ] || return 0
    sleep 0.01
  done
  return 1
}

# wait_for FILE: up to 5 s.
wait_for() {
  local i
  for ((i = 0; i < 500; i++)); do
    [ ! -e "$1" ] || return 0
    sleep 0.01
  done
  return 1
}

@test "decodes mountinfo's octal escapes: a workspace path with a space, a tab and a backslash" {
  export AGENT_SANDBOX_PROTECTED_MOUNTS=$'/w/a b\tc\\d/.husky'
  printf '%s\n' '99 98 254:0 /x /w/a\040b\011c\134d/.husky ro,relatime - ext4 /dev/vda rw' > "$TEST_TMP/mountinfo"
  run "$SCRIPT" --check
  assert_success
  # Not decoded twice: \134 followed by digits is a backslash and the digits.
  export AGENT_SANDBOX_PROTECTED_MOUNTS=$'/w/x\\040y'
  printf '%s\n' '99 98 254:0 /x /w/x\134040y ro,relatime - ext4 /dev/vda rw' > "$TEST_TMP/mountinfo"
  run "$SCRIPT" --check
  assert_success
  printf '%s\n' '99 98 254:0 /x /w/x\040y ro,relatime - ext4 /dev/vda rw' > "$TEST_TMP/mountinfo"
  run "$SCRIPT" --check
  assert_failure 1
  assert_output 'fail: protected path /w/x\040y is not mounted'
}

@test "start: all mounts in place and read-only: says 'watching', writes its pid, keeps running" {
  watch_bg
  run cat "$TEST_TMP/out"
  assert_output watching
  kill -0 "$WATCH_PID"
  [ "$(cat "$TEST_TMP/state/mount-watch.pid")" = "$WATCH_PID" ]
  # Its private fifo is unlinked once opened.
  run ls -A "$TEST_TMP/state"
  assert_output mount-watch.pid
  [ ! -s "$STUB_LOG" ] || grep -v '^id ' "$STUB_LOG" | { ! grep .; }
}

@test "start: a mount missing or read-write fails at once, naming it" {
  mountinfo husky
  run "$SCRIPT"
  assert_failure 1
  assert_output 'fail: protected path /workspace/my repo/.agent-precommit/user-context.json is not mounted'
  mountinfo husky ctx rw
  run "$SCRIPT"
  assert_failure 1
  assert_output --regexp '^fail: protected path /workspace/my repo/.* is mounted read-write$'
  [ ! -e "$TEST_TMP/state/compromised" ]
  run grep setpriv "$STUB_LOG"
  assert_failure
}

@test "a mount vanishing: one kill(-1) as node, the marker, a line in the log, then any new node process is killed" {
  proc 40 1234 sleep 300
  proc 41 0 /usr/sbin/dnsmasq
  proc 42 1234 bash /usr/local/bin/sandbox-exec sh -c 'echo x'
  proc 43 1234 /usr/bin/env bash /usr/local/bin/sandbox-exec true
  proc 44 1234 runc init
  watch_bg
  mountinfo ctx
  wait_for "$TEST_TMP/state/compromised"
  run cat "$TEST_TMP/state/compromised"
  assert_output 'protected path /workspace/my repo/.husky was unmounted (changed on the host)'
  sleep 0.1
  run grep -m 1 '^setpriv' "$STUB_LOG"
  assert_output 'setpriv --reuid=node --regid=node --clear-groups kill -s KILL -- -1'
  # Then, on every poll, the agent's processes that are not on their way into sandbox-exec.
  run bash -c 'grep "^setpriv" "$STUB_LOG" | sort -u'
  assert_output 'setpriv --reuid=node --regid=node --clear-groups kill -s KILL -- -1
setpriv --reuid=node --regid=node --clear-groups kill -s KILL -- 40'
  run cat "$TEST_TMP/err"
  assert_output --partial 'mount-watch: protected path /workspace/my repo/.husky was unmounted (changed on the host): processes of node killed'
  kill -0 "$WATCH_PID"
}

@test "setpriv failing (pids limit full): root kills the agent's processes one by one" {
  stub setpriv 'exit 1'
  stub kill 'exit 0'
  proc 40 1234 sleep 300
  proc 41 0 /usr/sbin/dnsmasq
  sleep_pid=""
  sleep 300 &
  sleep_pid=$!
  # The fallback kills with bash's builtin kill, so check with a real process of "node".
  proc "$sleep_pid" 1234 sleep 300
  watch_bg
  mountinfo husky
  wait_for "$TEST_TMP/state/compromised"
  for ((i = 0; i < 100; i++)); do kill -0 "$sleep_pid" 2> /dev/null || break; sleep 0.01; done
  run kill -0 "$sleep_pid"
  assert_failure
}

@test "unreadable mountinfo counts as every mount gone (fails closed)" {
  watch_bg
  rm "$TEST_TMP/mountinfo"
  wait_for "$TEST_TMP/state/compromised"
  run grep -c 'kill -s KILL -- -1' "$STUB_LOG"
  assert_output 1
}

@test "no fork per poll: 100 polls in its own pid namespace start no process (with --dns, ready, resolv.conf ours)" {
  [ "$EUID" = 0 ] && command -v unshare > /dev/null || fail "needs root and unshare(1) (CI runs the bats suite as root)"
  dns_setup
  : > "$TEST_TMP/state/ready"
  # Inside a new pid namespace, ns_last_pid counts every process started there.
  run unshare --pid --fork bash -c '
    "$0" --dns > /dev/null 2>&1 &
    while [ ! -e "$AGENT_SANDBOX_STATE_DIR/mount-watch.pid" ]; do read -r -t 0.01 _ <> <(:) || :; done
    before=$(< /proc/sys/kernel/ns_last_pid)
    read -r -t 1 _ <> <(:) || :
    after=$(< /proc/sys/kernel/ns_last_pid)
    echo "$before $after"' "$SCRIPT"
  assert_success
  read -r before after <<< "$output"
  # One pid for the second <(:) of the caller itself; none from the watcher's ~100 polls.
  (( after - before <= 1 ))
}

@test "--dns: once ready, a resolv.conf naming another nameserver reloads the firewall once; ours never does" {
  dns_setup
  watch_bg --dns
  # Before ready (set-up writes resolv.conf itself): not looked at.
  engine_writes $'nameserver 127.0.0.11\noptions ndots:0\n'
  sleep 0.1
  run reloads
  assert_output 0
  : > "$TEST_TMP/state/ready"
  wait_reloads 1
  run cat "$AGENT_SANDBOX_RESOLV_CONF"
  assert_output 'nameserver 127.0.0.1'
  # The file it wrote back is its own: no second reload.
  sleep 0.1
  run reloads
  assert_output 1
  # Podman puts a new network's DNS in front of ours.
  engine_writes $'nameserver 10.89.1.1\nnameserver 127.0.0.1\n'
  wait_reloads 2
  # A change that keeps 127.0.0.1 the only nameserver (search, options): left alone.
  engine_writes $'search corp.example\n  nameserver\t127.0.0.1\n'
  sleep 0.1
  run reloads
  assert_output 2
  run grep -c 'dns-watch: ' "$TEST_TMP/state/firewall.log"
  assert_output 4
  run grep -o 'dns-watch: .*' "$TEST_TMP/state/firewall.log"
  assert_line --index 0 'dns-watch: resolv.conf rewritten (nameservers: 127.0.0.11): reloading the firewall for them (seen by the check every 0.01 s)'
  assert_line --index 1 'dns-watch: resolv.conf points at 127.0.0.1 again'
  assert_line --index 2 'dns-watch: resolv.conf rewritten (nameservers: 10.89.1.1 127.0.0.1): reloading the firewall for them (seen by the check every 0.01 s)'
  kill -0 "$WATCH_PID"
}

@test "--dns: a resolv.conf with no nameserver at all reloads too; without --dns resolv.conf is never read" {
  dns_setup
  watch_bg
  : > "$TEST_TMP/state/ready"
  engine_writes $'nameserver 127.0.0.11\n'
  sleep 0.15
  run reloads
  assert_output 0
  kill "$WATCH_PID"
  wait "$WATCH_PID" || true
  rm -f "$TEST_TMP/state/mount-watch.pid"
  watch_bg --dns
  wait_reloads 1
  engine_writes $'options ndots:0\n'
  wait_reloads 2
}

@test "--dns: a failed reload is tried twice more, a second apart, then not until resolv.conf changes again" {
  dns_setup 'echo "init-firewall: cannot load IPv4 rules" >&2; exit 1'
  watch_bg --dns
  : > "$TEST_TMP/state/ready"
  engine_writes $'nameserver 127.0.0.11\n'
  wait_reloads 1
  sleep 0.5
  run reloads
  assert_output 1
  wait_reloads 3
  sleep 1.5
  run reloads
  assert_output 3
  run grep -c '^init-firewall: cannot load IPv4 rules$' "$TEST_TMP/state/firewall.log"
  assert_output 3
  run grep -c 'dns-watch: reloading the firewall failed; trying again in 1 s$' "$TEST_TMP/state/firewall.log"
  assert_output 2
  run cat "$TEST_TMP/state/firewall.log"
  assert_line --regexp 'dns-watch: reloading the firewall failed; names do not resolve until resolv.conf changes again or the sandbox restarts$'
  run cat "$TEST_TMP/err"
  assert_output --partial 'mount-watch: resolv.conf was rewritten and reloading the firewall failed'
  engine_writes $'nameserver 127.0.0.11\nnameserver 10.89.1.1\n'
  wait_reloads 4
  kill -0 "$WATCH_PID"
}

@test "--dns: a reload that fails once (a concurrent firewall allow) succeeds on the retry" {
  dns_setup 'if [ ! -e "$TEST_TMP/failed-once" ]; then : > "$TEST_TMP/failed-once"; exit 1; fi; printf "nameserver 127.0.0.1\\n" > "$AGENT_SANDBOX_RESOLV_CONF"'
  watch_bg --dns
  : > "$TEST_TMP/state/ready"
  engine_writes $'nameserver 127.0.0.11\n'
  wait_reloads 2
  run cat "$AGENT_SANDBOX_RESOLV_CONF"
  assert_output 'nameserver 127.0.0.1'
  sleep 0.2
  run reloads
  assert_output 2
}

@test "--dns without protected paths: keeps running (says watching, writes its pid)" {
  unset AGENT_SANDBOX_PROTECTED_MOUNTS
  dns_setup
  watch_bg --dns
  run cat "$TEST_TMP/out"
  assert_output watching
  kill -0 "$WATCH_PID"
  : > "$TEST_TMP/state/ready"
  engine_writes $'nameserver 127.0.0.11\n'
  wait_reloads 1
  # The control: without --dns and without paths, there is nothing to watch.
  run "$SCRIPT"
  assert_success
  assert_output watching
}

@test "--dns: a mount vanishing is still caught" {
  dns_setup
  watch_bg --dns
  : > "$TEST_TMP/state/ready"
  mountinfo ctx
  wait_for "$TEST_TMP/state/compromised"
  run grep -c 'kill -s KILL -- -1' "$STUB_LOG"
  assert_output 1
}

# events_setup [FINDMNT_BODY]: the event helpers as stubs. findmnt prints each line
# appended to $TEST_TMP/mnt-events, inotifywait each line of $TEST_TMP/ino-events
# (after its "Watches established."); setpriv --pdeathsig runs its command. Each
# writes its pid to $TEST_TMP/NAME.pid.
events_setup() {
  export AGENT_SANDBOX_WATCH_EVENTS=1 AGENT_SANDBOX_WATCH_IDLE=30
  : > "$TEST_TMP/mnt-events"
  : > "$TEST_TMP/ino-events"
  stub setpriv 'if [ "$1" = --pdeathsig ]; then shift 3; exec "$@"; fi'
  # Each stub follows its events file from the line after those already there when it
  # wrote its pid: a line the test appends once it has seen the pid is never missed, however
  # late the stub's tail opens the file.
  stub findmnt "${1:-n=\$(wc -l < \"\$TEST_TMP/mnt-events\"); echo \$\$ > \"\$TEST_TMP/findmnt.pid\"; exec tail -n +\$((n + 1)) -f \"\$TEST_TMP/mnt-events\"}"
  stub inotifywait 'n=$(wc -l < "$TEST_TMP/ino-events"); echo $$ > "$TEST_TMP/inotifywait.pid"; echo "Setting up watches." >&2; echo "Watches established." >&2; exec tail -n +$((n + 1)) -f "$TEST_TMP/ino-events"'
}

# running PID: the process exists and is not a zombie (killed, and not reaped yet by its parent, which a
# disowned helper's shell does at its next wake-up).
running() {
  local stat
  stat="$(cat "/proc/$1/stat" 2> /dev/null)" || return 1
  stat="${stat##*) }"
  [[ "${stat%% *}" != Z ]]
}

# settled: started, ready, and past the second of polling after the helpers' start.
settled() {
  : > "$TEST_TMP/state/ready"
  watch_bg "$@"
  wait_for "$TEST_TMP/findmnt.pid"
  sleep 1.3
}

@test "events: idle, a lost mount is not polled for; a mount-table event checks at once and the log says so" {
  events_setup
  settled
  mountinfo ctx
  sleep 0.3
  [ ! -e "$TEST_TMP/state/compromised" ]
  echo umount >> "$TEST_TMP/mnt-events"
  wait_for "$TEST_TMP/state/compromised"
  run cat "$TEST_TMP/state/mount-watch.log"
  assert_output --regexp '^[0-9T:-]+Z protected path /workspace/my repo/.husky was unmounted: seen by an event \(umount\)$'
  run grep -c '^setpriv --reuid=node --regid=node --clear-groups kill -s KILL -- -1$' "$STUB_LOG"
  assert_output 1
}

@test "events: inotifywait watches every mount point, its parent and resolv.conf; an inotify line checks at once" {
  events_setup
  dns_setup
  settled --dns
  run grep '^inotifywait ' "$STUB_LOG"
  assert_output "inotifywait -m -e close_write,attrib,move,create,delete,delete_self,move_self,unmount --format %e -- $(printf '%s ' '/workspace/my repo/.husky' '/workspace/my repo' '/workspace/my repo/.agent-precommit/user-context.json' '/workspace/my repo/.agent-precommit' "$AGENT_SANDBOX_RESOLV_CONF" | sed 's/ $//')"
  engine_writes $'nameserver 127.0.0.11\n'
  sleep 0.3
  run reloads
  assert_output 0
  echo CLOSE_WRITE,CLOSE >> "$TEST_TMP/ino-events"
  wait_reloads 1
  run grep -o 'dns-watch: .*' "$TEST_TMP/state/firewall.log"
  assert_line --index 0 'dns-watch: resolv.conf rewritten (nameservers: 127.0.0.11): reloading the firewall for them (seen by an event (CLOSE_WRITE,CLOSE))'
}

@test "events: a watched inode gone (DELETE_SELF, MOVE_SELF, IGNORED) starts inotifywait again; other events do not" {
  events_setup
  settled
  # The watcher starts inotifywait after findmnt: on a loaded machine, after settled's pause.
  wait_for "$TEST_TMP/inotifywait.pid"
  for ((i = 0; i < 1000; i++)); do grep -q '^inotifywait ' "$STUB_LOG" && break; sleep 0.01; done
  first="$(cat "$TEST_TMP/inotifywait.pid")"
  echo ATTRIB >> "$TEST_TMP/ino-events"
  echo CREATE,ISDIR >> "$TEST_TMP/ino-events"
  sleep 0.3
  run grep -c '^inotifywait ' "$STUB_LOG"
  assert_output 1
  for ev in DELETE_SELF MOVE_SELF IGNORED; do
    echo "$ev" >> "$TEST_TMP/ino-events"
    for ((i = 0; i < 500; i++)); do [ "$(cat "$TEST_TMP/inotifywait.pid")" = "$first" ] || break; sleep 0.01; done
    second="$(cat "$TEST_TMP/inotifywait.pid")"
    [ "$second" != "$first" ]
    # The old one is gone.
    for ((i = 0; i < 1000; i++)); do running "$first" || break; sleep 0.01; done
    run running "$first"
    assert_failure
    first="$second"
  done
}

@test "events: helpers that cannot run: polls at the interval and tries to start them again every second" {
  events_setup 'echo "${EPOCHREALTIME/[.,]/}" >> "$TEST_TMP/findmnt-starts"; exit 1'
  # inotifywait down too: a start of it announces itself with a line that wakes a check, which
  # would then see the loss before the poll does.
  stub inotifywait 'exit 1'
  : > "$TEST_TMP/state/ready"
  watch_bg
  # Three attempts to start the helper, however long the machine takes to get there.
  for ((i = 0; i < 1000; i++)); do (( $(wc -l 2> /dev/null < "$TEST_TMP/findmnt-starts" || echo 0) >= 3 )) && break; sleep 0.01; done
  mountinfo ctx
  wait_for "$TEST_TMP/state/compromised"
  run cat "$TEST_TMP/state/mount-watch.log"
  assert_output --partial 'was unmounted: seen by the check every 0.01 s'
  # Polling every 0.01 s, it tried again about once a second, never at each poll: no two
  # attempts under 0.8 s apart (the stub's own start adds a little jitter to each time).
  mapfile -t starts < "$TEST_TMP/findmnt-starts"
  (( ${#starts[@]} >= 3 ))
  for ((i = 1; i < ${#starts[@]}; i++)); do
    gap=$((starts[i] - starts[i - 1]))
    echo "attempt $i: ${gap} us after the one before"
    (( gap >= 800000 ))
  done
}

@test "events: a helper killed is noticed at the next check and started again" {
  events_setup
  export AGENT_SANDBOX_WATCH_IDLE=0.5
  settled
  first="$(cat "$TEST_TMP/findmnt.pid")"
  kill -s KILL "$first"
  for ((i = 0; i < 300; i++)); do [ "$(cat "$TEST_TMP/findmnt.pid")" = "$first" ] || break; sleep 0.01; done
  [ "$(cat "$TEST_TMP/findmnt.pid")" != "$first" ]
  run grep -c '^findmnt --poll --noheadings --raw --output ACTION$' "$STUB_LOG"
  assert_output 2
  run cat "$TEST_TMP/state/mount-watch.log"
  assert_output --regexp 'Z findmnt is not running: starting it again, polling meanwhile$'
}

@test "events: before the sandbox is ready it polls, events or not" {
  events_setup
  watch_bg
  wait_for "$TEST_TMP/findmnt.pid"
  sleep 1.3
  mountinfo husky
  wait_for "$TEST_TMP/state/compromised"
  run cat "$TEST_TMP/state/mount-watch.log"
  assert_output --partial 'seen by the check every 0.01 s'
}

@test "events: stopped with TERM, it takes its helpers with it" {
  events_setup
  settled
  kill "$WATCH_PID"
  wait "$WATCH_PID" || true
  WATCH_PID=""
  for name in findmnt inotifywait; do
    pid="$(cat "$TEST_TMP/$name.pid")"
    for ((i = 0; i < 1000; i++)); do running "$pid" || break; sleep 0.01; done
    run running "$pid"
    assert_failure
  done
}

@test "events: idle, it starts no process and does not wake (own pid namespace, with --dns, ready)" {
  [ "$EUID" = 0 ] && command -v unshare > /dev/null || fail "needs root and unshare(1) (CI runs the bats suite as root)"
  events_setup
  dns_setup
  : > "$TEST_TMP/state/ready"
  run unshare --pid --fork bash -c '
    "$0" --dns > /dev/null 2>&1 &
    w=$!
    while [ ! -e "$AGENT_SANDBOX_STATE_DIR/mount-watch.pid" ]; do read -r -t 0.01 _ <> <(:) || :; done
    read -r -t 1.5 _ <> <(:) || :
    before=$(< /proc/sys/kernel/ns_last_pid)
    ctx0=$(grep -h voluntary_ctxt_switches /proc/$w/status | grep -v non | grep -o "[0-9]*")
    read -r -t 1 _ <> <(:) || :
    after=$(< /proc/sys/kernel/ns_last_pid)
    ctx1=$(grep -h voluntary_ctxt_switches /proc/$w/status | grep -v non | grep -o "[0-9]*")
    echo "$before $after $ctx0 $ctx1"' "$SCRIPT"
  assert_success
  read -r before after ctx0 ctx1 <<< "$output"
  # Pids: the caller'"'"'s own <(:), ctx0's pipeline (3) and the grep pipeline for ctx1 come after "after".
  (( after - before <= 5 ))
  # Asleep in read(2): at most a wake-up or two, where polling makes 100.
  (( ctx1 - ctx0 <= 2 ))
}

@test "sandbox-exec refuses with 125 once compromised, in one line naming the path; quietly for the CLI" {
  : > "$TEST_TMP/state/ready"
  echo 'protected path /workspace/my repo/.husky was unmounted (changed on the host)' > "$TEST_TMP/state/compromised"
  run --separate-stderr "$ROOT/base-image/sandbox-exec.sh" sh -c 'echo ran'
  assert_equal "$status" 125
  assert_output ''
  assert_equal "$stderr" 'agent-sandbox: refused: protected path /workspace/my repo/.husky was unmounted (changed on the host); the sandbox must be restarted (agent-sandbox exec or start restarts it)'
  AGENT_SANDBOX_QUIET_REFUSAL=compromised run --separate-stderr "$ROOT/base-image/sandbox-exec.sh" sh -c 'echo ran'
  assert_equal "$status" 125
  assert_equal "$stderr" ''
  rm "$TEST_TMP/state/compromised"
  AGENT_SANDBOX_QUIET_REFUSAL=compromised run "$ROOT/base-image/sandbox-exec.sh" sh -c 'echo "ran ${AGENT_SANDBOX_QUIET_REFUSAL:-unset}"'
  assert_success
  assert_output 'ran unset'
}

@test "doctor --mounts: a row per mount, failing when missing or read-write, and the marker" {
  export AGENT_SANDBOX_DOCTOR_MOUNTINFO="$TEST_TMP/mountinfo"
  mountinfo husky ctx
  run bash "$ROOT/base-image/doctor.sh" --mounts
  assert_success
  assert_line --partial $'pass\tcompromised\t'
  assert_line $'pass\tmount:/workspace/my repo/.husky\tread-only mount in place'
  assert_line $'pass\tmount:/workspace/my repo/.agent-precommit/user-context.json\tread-only mount in place'
  mountinfo ctx rw
  echo 'protected path /workspace/my repo/.husky was unmounted (changed on the host)' > "$TEST_TMP/state/compromised"
  run bash "$ROOT/base-image/doctor.sh" --mounts
  assert_failure 1
  assert_line --partial $'fail\tcompromised\tprotected path /workspace/my repo/.husky was unmounted'
  assert_line --partial $'fail\tmount:/workspace/my repo/.husky\tnot mounted'
  assert_line --partial $'fail\tmount:/workspace/my repo/.agent-precommit/user-context.json\tmounted read-write'
}

@test "doctor --mounts as root: mount-watch must be running" {
  [ "$EUID" = 0 ] || fail "the liveness row is root's: run the bats suite as root"
  export AGENT_SANDBOX_DOCTOR_MOUNTINFO="$TEST_TMP/mountinfo" AGENT_SANDBOX_NETWORK=none
  stub id 'echo 0'
  echo 999999 > "$TEST_TMP/state/mount-watch.pid"
  run bash "$ROOT/base-image/doctor.sh" --mounts
  assert_failure 1
  assert_line --partial $'fail\tmount-watch\tnot running'
  echo $$ > "$TEST_TMP/state/mount-watch.pid"
  run bash "$ROOT/base-image/doctor.sh" --mounts
  assert_success
  assert_line --partial $'pass\tmount-watch\trunning'
}

@test "doctor --mounts as root, with the firewall: mount-watch must run with --dns (dns-watch)" {
  [ "$EUID" = 0 ] || fail "the liveness row is root's: run the bats suite as root"
  export AGENT_SANDBOX_DOCTOR_MOUNTINFO="$TEST_TMP/mountinfo" AGENT_SANDBOX_NETWORK=firewall
  stub id 'echo 0'
  bash -c 'sleep 30; :' mount-watch --dns &
  local with=$!
  bash -c 'sleep 30; :' mount-watch &
  local without=$!
  echo "$with" > "$TEST_TMP/state/mount-watch.pid"
  run bash "$ROOT/base-image/doctor.sh" --mounts
  assert_success
  assert_line --partial $'pass\tdns-watch\tmount-watch --dns running'
  echo "$without" > "$TEST_TMP/state/mount-watch.pid"
  run bash "$ROOT/base-image/doctor.sh" --mounts
  assert_failure 1
  assert_line --partial $'fail\tdns-watch\tmount-watch --dns is not running'
  AGENT_SANDBOX_NETWORK=none run bash "$ROOT/base-image/doctor.sh" --mounts
  refute_line --partial dns-watch
  kill "$with" "$without"
}

@test "usage errors and a bad interval exit 2" {
  run "$SCRIPT" --bogus
  assert_failure 2
  run "$SCRIPT" --dns --check
  assert_failure 2
  AGENT_SANDBOX_WATCH_INTERVAL=soon run "$SCRIPT"
  assert_failure 2
}

@test "is shellcheck-clean" {
  command -v shellcheck > /dev/null || fail "shellcheck is not installed: scripts/setup-engine.sh installs it"
  cd "$ROOT" && shellcheck "$SCRIPT" base-image/mount-lib.sh
}

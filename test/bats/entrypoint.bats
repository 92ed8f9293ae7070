#!/usr/bin/env bats
# base-image/entrypoint.sh with the user-management and privilege tools stubbed,
# the firewall replaced by a stub script, and every path in a temp directory.

load test_helper

bats_require_minimum_version 1.5.0

SCRIPT="$ROOT/base-image/entrypoint.sh"

setup() {
  common_setup
  unset AGENT_SANDBOX_UID AGENT_SANDBOX_GID AGENT_SANDBOX_GIT_NAME AGENT_SANDBOX_GIT_EMAIL AGENT_SANDBOX_NETWORK AGENT_SANDBOX_USER
  export AGENT_SANDBOX_STATE_DIR="$TEST_TMP/state"
  export AGENT_SANDBOX_FIREWALL_SCRIPT="$TEST_TMP/init-firewall.sh"
  export AGENT_SANDBOX_HISTORY_DIR="$TEST_TMP/commandhistory"
  export AGENT_SANDBOX_USER_HOME="$TEST_TMP/home-node"
  export AGENT_SANDBOX_SHELF="$TEST_TMP/repo-shelf"
  mkdir -p "$AGENT_SANDBOX_HISTORY_DIR"
  : > "$AGENT_SANDBOX_HISTORY_DIR/.bash_history"
  firewall 'exit 0'
  export AGENT_SANDBOX_MOUNT_WATCH="$TEST_TMP/mount-watch"
  mount_watch 'echo watching'
  # node is uid/gid 1000, and every directory already belongs to it, unless a test says otherwise.
  stub id "$(id_body '-u*) echo "${STUB_NODE_UID:-1000}" ;;')"
  stat_as '${STUB_OWNER_UID:-1000}' '${STUB_OWNER_GID:-1000}'
  stub groupmod
  stub usermod
  # No other user of the image holds a uid, unless a test says otherwise.
  stub getent 'exit 2'
  stub chown
  stub install
  # Each setpriv call's argv, one word a line, in setpriv.1, setpriv.2, ...
  stub setpriv 'n=$(( $(cat "$TEST_TMP/setpriv.n" 2>/dev/null || echo 0) + 1 )); echo "$n" > "$TEST_TMP/setpriv.n"
printf "%s\n" "$@" > "$TEST_TMP/setpriv.$n"
printf "%s\n" "$HOME" > "$TEST_TMP/setpriv.$n.home"
if [ -e "$AGENT_SANDBOX_STATE_DIR/ready" ]; then echo "setpriv: ready exists" >> "$STUB_LOG"; fi
exit "${STUB_SETPRIV_EXIT:-0}"'
  stub sleep '[ ! -e "$AGENT_SANDBOX_STATE_DIR/ready" ] || echo "sleep: ready exists" >> "$STUB_LOG"'
}

teardown() {
  common_teardown
}

# firewall BODY: the firewall script logs "firewall" (and whether ready/failed exist yet), then runs BODY.
firewall() {
  cat > "$AGENT_SANDBOX_FIREWALL_SCRIPT" <<EOF
#!/usr/bin/env bash
echo firewall >> "\$STUB_LOG"
for f in ready failed; do [ ! -e "\$AGENT_SANDBOX_STATE_DIR/\$f" ] || echo "firewall: \$f exists" >> "\$STUB_LOG"; done
$1
EOF
  chmod +x "$AGENT_SANDBOX_FIREWALL_SCRIPT"
}

# mount_watch BODY: the watcher logs "mount-watch ARGS...", then runs BODY (its first
# stdout line is its verdict).
mount_watch() {
  cat > "$AGENT_SANDBOX_MOUNT_WATCH" <<EOF
#!/usr/bin/env bash
echo "mount-watch \$*" >> "\$STUB_LOG"
$1
EOF
  chmod +x "$AGENT_SANDBOX_MOUNT_WATCH"
}

# argv_of N: the argv of the Nth setpriv call, one word a line.
argv_of() { cat "$TEST_TMP/setpriv.$1"; }

# id_body CASES: an `id` stub answering `id node` (uid=... gid=... as id prints it,
# from STUB_NODE_UID/GID, default 1000) and, before that, the given case arms.
id_body() {
  printf '%s\n' 'case "$*" in' "$1" \
    'node) echo "uid=${STUB_NODE_UID:-1000}(node) gid=${STUB_NODE_GID:-1000}(node) groups=${STUB_NODE_GID:-1000}(node)" ;;' \
    '*) exit 1 ;;' 'esac'
}

# stat_as UID GID: `stat -c "%u %g %n" PATH...` answers UID and GID for every PATH
# (each may be a shell expression such as ${VAR:-1000}, expanded when stat runs).
stat_as() {
  stub stat "[ \"\$1\" = -c ] && [ \"\$2\" = '%u %g %n' ] && [ \"\$3\" = -- ] || exit 1
shift 3
for p in \"\$@\"; do echo \"$1 $2 \$p\"; done"
}

@test "firewall mode: runs the firewall, then writes ready, then execs sleep infinity" {
  run --separate-stderr "$SCRIPT"
  assert_success
  assert_output 'agent-sandbox: ready'
  [ -e "$AGENT_SANDBOX_STATE_DIR/ready" ]
  [ ! -e "$AGENT_SANDBOX_STATE_DIR/failed" ]
  run grep -E '^(firewall|sleep)' "$STUB_LOG"
  assert_output "firewall
sleep infinity
sleep: ready exists"
}

@test "firewall mode: the exit code of sleep is the entrypoint's (it is exec'd)" {
  stub sleep 'exit 42'
  run "$SCRIPT"
  assert_equal "$status" 42
}

@test "firewall mode: the firewall's warnings on stderr are relayed" {
  firewall 'echo "init-firewall: warning: no IPv6" >&2'
  run --separate-stderr "$SCRIPT"
  assert_success
  assert_equal "$stderr" 'init-firewall: warning: no IPv6'
}

@test "a failing firewall: exit 1, its last stderr line in failed, no ready, no sleep" {
  firewall 'printf "resolving github.com\nipset: cannot create set\n\n" >&2; echo "stdout noise"; exit 3'
  run --separate-stderr "$SCRIPT"
  assert_failure 1
  assert_output ''
  assert_equal "$stderr" 'agent-sandbox: firewall set-up failed: ipset: cannot create set'
  run cat "$AGENT_SANDBOX_STATE_DIR/failed"
  assert_output 'firewall set-up failed: ipset: cannot create set'
  [ ! -e "$AGENT_SANDBOX_STATE_DIR/ready" ]
  run grep -c '^sleep' "$STUB_LOG"
  assert_output 0
}

@test "network none: no firewall, ready" {
  AGENT_SANDBOX_NETWORK=none run --separate-stderr "$SCRIPT"
  assert_success
  assert_output 'agent-sandbox: ready'
  assert_equal "$stderr" ''
  [ -e "$AGENT_SANDBOX_STATE_DIR/ready" ]
  run grep -c '^firewall' "$STUB_LOG"
  assert_output 0
}

@test "network open: no firewall, a loud warning on stderr, ready" {
  AGENT_SANDBOX_NETWORK=open run --separate-stderr "$SCRIPT"
  assert_success
  assert_equal "$stderr" 'agent-sandbox: WARNING: network mode "open": egress is NOT filtered in this sandbox'
  [ -e "$AGENT_SANDBOX_STATE_DIR/ready" ]
  run grep -c '^firewall' "$STUB_LOG"
  assert_output 0
}

@test "mount-watch: with the firewall it always runs and watches resolv.conf (--dns); without, only for protected paths" {
  unset AGENT_SANDBOX_PROTECTED_MOUNTS
  run "$SCRIPT"
  assert_success
  run grep '^mount-watch' "$STUB_LOG"
  assert_output 'mount-watch --dns'
  : > "$STUB_LOG"
  AGENT_SANDBOX_PROTECTED_MOUNTS=/workspace/.husky AGENT_SANDBOX_NETWORK=firewall run "$SCRIPT"
  assert_success
  run grep '^mount-watch' "$STUB_LOG"
  assert_output 'mount-watch --dns'
  for mode in none open; do
    : > "$STUB_LOG"
    AGENT_SANDBOX_NETWORK="$mode" run "$SCRIPT"
    assert_success
    run grep -c '^mount-watch' "$STUB_LOG"
    assert_output 0
    : > "$STUB_LOG"
    AGENT_SANDBOX_PROTECTED_MOUNTS=/workspace/.husky AGENT_SANDBOX_NETWORK="$mode" run "$SCRIPT"
    assert_success
    run grep '^mount-watch' "$STUB_LOG"
    assert_output 'mount-watch '
  done
}

@test "mount-watch: a verdict other than watching fails set-up, and the sandbox is never ready" {
  mount_watch 'echo "fail: protected path /workspace/.husky is not mounted"'
  run --separate-stderr "$SCRIPT"
  assert_failure 1
  assert_equal "$stderr" 'agent-sandbox: protected path /workspace/.husky is not mounted'
  [ ! -e "$AGENT_SANDBOX_STATE_DIR/ready" ]
}

@test "an unknown network mode fails before anything is ready" {
  AGENT_SANDBOX_NETWORK=bogus run --separate-stderr "$SCRIPT"
  assert_failure 1
  assert_equal "$stderr" 'agent-sandbox: unknown AGENT_SANDBOX_NETWORK: bogus'
  run cat "$AGENT_SANDBOX_STATE_DIR/failed"
  assert_output 'unknown AGENT_SANDBOX_NETWORK: bogus'
  [ ! -e "$AGENT_SANDBOX_STATE_DIR/ready" ]
  run grep -cE '^(firewall|sleep)' "$STUB_LOG"
  assert_output 0
}

@test "ready and failed from an earlier run are removed at start" {
  mkdir -p "$AGENT_SANDBOX_STATE_DIR"
  echo 'old failure' > "$AGENT_SANDBOX_STATE_DIR/failed"
  : > "$AGENT_SANDBOX_STATE_DIR/ready"
  run "$SCRIPT"
  assert_success
  run grep -c '^firewall: ' "$STUB_LOG"
  assert_output 0
  [ -e "$AGENT_SANDBOX_STATE_DIR/ready" ]
  [ ! -e "$AGENT_SANDBOX_STATE_DIR/failed" ]
}

@test "a stale ready does not survive a failing start" {
  mkdir -p "$AGENT_SANDBOX_STATE_DIR"
  : > "$AGENT_SANDBOX_STATE_DIR/ready"
  firewall 'echo "boom" >&2; exit 1'
  run "$SCRIPT"
  assert_failure 1
  [ ! -e "$AGENT_SANDBOX_STATE_DIR/ready" ]
  run cat "$AGENT_SANDBOX_STATE_DIR/failed"
  assert_output 'firewall set-up failed: boom'
}

@test "renumbering: node (1000) becomes 1234:1234" {
  AGENT_SANDBOX_UID=1234 AGENT_SANDBOX_GID=1234 run "$SCRIPT"
  assert_success
  run grep -E '^(groupmod|usermod)' "$STUB_LOG"
  assert_output "groupmod --non-unique --gid 1234 node
usermod --non-unique --uid 1234 node"
}

@test "renumbering: an empty GID takes the UID" {
  AGENT_SANDBOX_UID=1234 run "$SCRIPT"
  assert_success
  run grep -E '^(groupmod|usermod)' "$STUB_LOG"
  assert_output "groupmod --non-unique --gid 1234 node
usermod --non-unique --uid 1234 node"
}

@test "renumbering: only what differs changes" {
  AGENT_SANDBOX_UID=1000 AGENT_SANDBOX_GID=20 run "$SCRIPT"
  assert_success
  run grep -E '^(groupmod|usermod)' "$STUB_LOG"
  assert_output "groupmod --non-unique --gid 20 node"
}

@test "renumbering: UID 0 or empty leaves node alone" {
  AGENT_SANDBOX_UID=0 AGENT_SANDBOX_GID=0 run "$SCRIPT"
  assert_success
  AGENT_SANDBOX_UID='' AGENT_SANDBOX_GID=1234 run "$SCRIPT"
  assert_success
  run grep -cE '^(groupmod|usermod)' "$STUB_LOG"
  assert_output 0
}

@test "renumbering: a non-numeric UID fails" {
  AGENT_SANDBOX_UID='1000; rm -rf /' run --separate-stderr "$SCRIPT"
  assert_failure 1
  assert_equal "$stderr" 'agent-sandbox: AGENT_SANDBOX_UID is not a number: 1000; rm -rf /'
  [ ! -e "$AGENT_SANDBOX_STATE_DIR/ready" ]
  run grep -cE '^(groupmod|usermod|firewall)' "$STUB_LOG"
  assert_output 0
}

@test "renumbering: a non-numeric GID fails" {
  AGENT_SANDBOX_UID=1234 AGENT_SANDBOX_GID=staff run --separate-stderr "$SCRIPT"
  assert_failure 1
  assert_equal "$stderr" 'agent-sandbox: AGENT_SANDBOX_GID is not a number: staff'
  [ ! -e "$AGENT_SANDBOX_STATE_DIR/ready" ]
}

@test "renumbering: the resolver's user (dnsmasq) holding the owner's uid moves to a free system uid first" {
  stub id "$(id_body '"-u dnsmasq") echo 999 ;;')"
  stub getent 'case "$*" in "passwd 999") echo "dnsmasq:x:999:999::/var/lib/misc:/usr/sbin/nologin" ;; "passwd 998") echo "other:x:998:998::/:/usr/sbin/nologin" ;; *) exit 2 ;; esac'
  AGENT_SANDBOX_UID=999 run "$SCRIPT"
  assert_success
  run grep -E '^(groupmod|usermod)' "$STUB_LOG"
  assert_output "groupmod --non-unique --gid 999 node
usermod --uid 997 dnsmasq
usermod --non-unique --uid 999 node"
}

@test "renumbering: another entry with the owner's uid (rootless Podman's keep-id adds one for you) is left alone" {
  stub id "$(id_body '"-u dnsmasq") echo 999 ;;')"
  stub getent 'case "$*" in "passwd 899") echo "me:x:899:899::/home/me:/bin/sh" ;; *) exit 2 ;; esac'
  AGENT_SANDBOX_UID=899 run "$SCRIPT"
  assert_success
  run grep -E '^usermod' "$STUB_LOG"
  assert_output "usermod --non-unique --uid 899 node"
}

@test "renumbering: failing to move the resolver's user fails the start before node is renumbered" {
  stub id "$(id_body '"-u dnsmasq") echo 999 ;;')"
  stub usermod '[ "$2" = 998 ] && exit 3; exit 0'
  AGENT_SANDBOX_UID=999 run --separate-stderr "$SCRIPT"
  assert_failure 1
  assert_equal "$stderr" "agent-sandbox: cannot move user dnsmasq from uid 999 (the workspace owner's) to 998"
  run grep -c 'usermod --non-unique' "$STUB_LOG"
  assert_output 0
  [ ! -e "$AGENT_SANDBOX_STATE_DIR/ready" ]
}

@test "renumbering: a failing usermod fails the start" {
  stub usermod 'exit 4'
  AGENT_SANDBOX_UID=1234 run --separate-stderr "$SCRIPT"
  assert_failure 1
  assert_equal "$stderr" 'agent-sandbox: cannot set the uid of node to 1234'
  [ ! -e "$AGENT_SANDBOX_STATE_DIR/ready" ]
}

@test "volumes owned by another uid are handed to node; the shelf only at its top" {
  mkdir -p "$AGENT_SANDBOX_USER_HOME/.claude" "$AGENT_SANDBOX_SHELF"
  STUB_OWNER_UID=0 run "$SCRIPT"
  assert_success
  run grep '^chown' "$STUB_LOG"
  assert_output "chown -R node:node $AGENT_SANDBOX_HISTORY_DIR
chown -R node:node $AGENT_SANDBOX_USER_HOME
chown -R node:node $AGENT_SANDBOX_USER_HOME/.claude
chown node:node $AGENT_SANDBOX_SHELF"
}

@test "volumes already node's are left alone" {
  mkdir -p "$AGENT_SANDBOX_USER_HOME/.codex" "$AGENT_SANDBOX_SHELF"
  run "$SCRIPT"
  assert_success
  run grep -c '^chown' "$STUB_LOG"
  assert_output 0
}

@test "a missing bash history is created for node, mode 0600" {
  rm "$AGENT_SANDBOX_HISTORY_DIR/.bash_history"
  run "$SCRIPT"
  assert_success
  run grep '^install' "$STUB_LOG"
  assert_output "install -o node -g node -m 0600 /dev/null $AGENT_SANDBOX_HISTORY_DIR/.bash_history"
}

@test "git identity: set as node, each value one argv word" {
  cd "$TEST_TMP"
  AGENT_SANDBOX_GIT_NAME='Ada $(touch pwned) Lovelace' AGENT_SANDBOX_GIT_EMAIL='ada@example.com' run "$SCRIPT"
  assert_success
  run argv_of 1
  assert_output "--reuid=node
--regid=node
--init-groups
/usr/bin/git
config
--global
user.name
Ada \$(touch pwned) Lovelace"
  run argv_of 2
  assert_output "--reuid=node
--regid=node
--init-groups
/usr/bin/git
config
--global
user.email
ada@example.com"
  # git (through setpriv) runs with node's HOME
  [ "$(cat "$TEST_TMP/setpriv.1.home")" = "$AGENT_SANDBOX_USER_HOME" ]
  [ "$(cat "$TEST_TMP/setpriv.2.home")" = "$AGENT_SANDBOX_USER_HOME" ]
  [ ! -e "$TEST_TMP/pwned" ]
  # Set before the sandbox is ready.
  run grep -c '^setpriv: ready exists' "$STUB_LOG"
  assert_output 0
}

@test "git identity: nothing set when neither is given" {
  run "$SCRIPT"
  assert_success
  [ ! -e "$TEST_TMP/setpriv.1" ]
}

@test "git identity: a failing git config fails the start" {
  AGENT_SANDBOX_GIT_EMAIL='ada@example.com' STUB_SETPRIV_EXIT=1 run --separate-stderr "$SCRIPT"
  assert_failure 1
  assert_equal "$stderr" 'agent-sandbox: cannot set git user.email'
  [ ! -e "$AGENT_SANDBOX_STATE_DIR/ready" ]
}

@test "with a CMD: after ready, runs it as node with node's HOME and no inherited caps; its exit code is ours" {
  unset AGENT_SANDBOX_USER_HOME
  STUB_SETPRIV_EXIT=42 AGENT_TEST_SETTING='from the sandbox settings' run --separate-stderr "$SCRIPT" codex exec 'two words' '$(x)'
  assert_equal "$status" 42
  # stdout and stderr are the command's alone
  assert_output ''
  assert_equal "$stderr" ''
  run argv_of 1
  # setpriv, then env -i with the container's environment as it came (setpriv itself
  # runs with root's, see root-env.sh), node's HOME, USER, LOGNAME, and the command.
  assert_line --index 0 -- --reuid=node
  assert_line --index 4 env
  assert_line --index 5 -- -i
  assert_line 'AGENT_TEST_SETTING=from the sandbox settings'
  local -a argv
  mapfile -t argv < <(argv_of 1)
  assert_equal "$(printf '%s\n' "${argv[@]: -7}")" "HOME=/home/node
USER=node
LOGNAME=node
codex
exec
two words
\$(x)"
  run grep -E '^(setpriv: ready exists|sleep)' "$STUB_LOG"
  assert_output 'setpriv: ready exists'
}

@test "with a CMD: a set-up failure exits 125 (not a code the command could have returned)" {
  firewall 'echo "ipset: cannot create set" >&2; exit 1'
  run --separate-stderr "$SCRIPT" codex exec
  assert_failure 125
  assert_equal "$stderr" 'agent-sandbox: firewall set-up failed: ipset: cannot create set'
  [ ! -e "$AGENT_SANDBOX_STATE_DIR/ready" ]
  [ ! -e "$TEST_TMP/setpriv.1" ]
}

# A free loopback port, and a listener on it that says "up" once it accepts (what the gateway does once it holds its secrets).
free_port() { node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close() })'; }
start_listener() {
  node -e 'require("net").createServer((c) => c.destroy()).listen(Number(process.argv[1]), "127.0.0.1", () => console.log("up"))' "$1" > "$TEST_TMP/listener.out" &
  echo $! > "$TEST_TMP/listener.pid"
  until [ -s "$TEST_TMP/listener.out" ]; do /bin/sleep 0.02; done
}
stop_listener() { if [ -e "$TEST_TMP/listener.pid" ]; then kill "$(cat "$TEST_TMP/listener.pid")" 2> /dev/null || true; fi; }

@test "with a CMD and an egress gateway: the command waits until the gateway's TLS port accepts, then starts" {
  port=$(free_port)
  export -f start_listener
  export TEST_PORT=$port
  # The third wait starts the listener, as the gateway starts listening once the CLI has handed it its secrets.
  stub sleep 'n=$(( $(cat "$TEST_TMP/sleep.n" 2>/dev/null || echo 0) + 1 )); echo "$n" > "$TEST_TMP/sleep.n"
[ "$n" -ne 3 ] || start_listener "$TEST_PORT"'
  stub setpriv '(: < "/dev/tcp/127.0.0.1/$TEST_PORT") 2> /dev/null && echo "setpriv: gateway ready" >> "$STUB_LOG"; exit 0'
  AGENT_SANDBOX_RUN_GATEWAY=1 AGENT_SANDBOX_GATEWAY_PORTS="19080,$port" AGENT_SANDBOX_GATEWAY_UID=65532 run --separate-stderr "$SCRIPT" curl https://example.test
  stop_listener
  assert_success
  assert_equal "$(cat "$TEST_TMP/sleep.n")" 3
  run grep -c '^setpriv: gateway ready$' "$STUB_LOG"
  assert_output 1
  run grep -c '^sleep 0.02$' "$STUB_LOG"
  assert_output 3
}

@test "with a CMD and an egress gateway: no gateway listening in time fails set-up (125), the command never starts" {
  port=$(free_port)
  AGENT_SANDBOX_RUN_GATEWAY=1 AGENT_SANDBOX_GATEWAY_PORTS="19080,$port" AGENT_SANDBOX_GATEWAY_UID=65532 AGENT_SANDBOX_GATEWAY_WAIT=1 run --separate-stderr "$SCRIPT" curl https://example.test
  assert_failure 125
  assert_equal "$stderr" 'agent-sandbox: the egress gateway did not come up within 1s'
  [ ! -e "$AGENT_SANDBOX_STATE_DIR/ready" ]
  [ ! -e "$TEST_TMP/setpriv.1" ]
}

@test "with a CMD and an egress gateway: a gateway already listening lets the command start without waiting" {
  port=$(free_port)
  start_listener "$port"
  AGENT_SANDBOX_RUN_GATEWAY=1 AGENT_SANDBOX_GATEWAY_PORTS="19080,$port" AGENT_SANDBOX_GATEWAY_UID=65532 run --separate-stderr "$SCRIPT" true
  stop_listener
  assert_success
  [ -e "$TEST_TMP/setpriv.1" ]
  run grep -c '^sleep 0.02$' "$STUB_LOG"
  assert_output 0
}

@test "with a CMD and an egress gateway: bad AGENT_SANDBOX_GATEWAY_PORTS fails set-up (125) and names the variable" {
  AGENT_SANDBOX_RUN_GATEWAY=1 AGENT_SANDBOX_GATEWAY_PORTS='19080;x' AGENT_SANDBOX_GATEWAY_UID=65532 run --separate-stderr "$SCRIPT" true
  assert_failure 125
  assert_equal "$stderr" "agent-sandbox: AGENT_SANDBOX_GATEWAY_PORTS must be two ports, HTTP,TLS: '19080;x'"
  [ ! -e "$TEST_TMP/setpriv.1" ]
}

@test "with a CMD and no gateway announced (no AGENT_SANDBOX_RUN_GATEWAY, even with a gateway uid): the command starts at once" {
  stub sleep 'echo "sleep $*" >> "$STUB_LOG"'
  AGENT_SANDBOX_GATEWAY_UID=65532 AGENT_SANDBOX_GATEWAY_WAIT=1 run --separate-stderr "$SCRIPT" curl https://example.test
  assert_success
  [ -e "$AGENT_SANDBOX_STATE_DIR/ready" ]
  [ -e "$TEST_TMP/setpriv.1" ]
  run grep -c '^sleep 0.02$' "$STUB_LOG"
  assert_output 0
}

@test "with a CMD: set-up warnings go to the state dir's setup.log, not the command's stderr" {
  firewall 'echo "init-firewall: warning: no IPv6" >&2'
  AGENT_SANDBOX_NETWORK=firewall run --separate-stderr "$SCRIPT" true
  assert_success
  assert_equal "$stderr" ''
  run cat "$AGENT_SANDBOX_STATE_DIR/setup.log"
  assert_output 'init-firewall: warning: no IPv6'
}

@test "agent config volumes: one file inside that is not node's hands that volume to node" {
  mkdir -p "$AGENT_SANDBOX_USER_HOME/.codex" "$AGENT_SANDBOX_USER_HOME/.claude"
  : > "$AGENT_SANDBOX_USER_HOME/.claude/settings.json"
  : > "$AGENT_SANDBOX_USER_HOME/.codex/auth.json"
  # node is not the test's own uid, which owns the files; the top directories look node's.
  stat_as $((UID + 1)) 1000
  STUB_NODE_UID=$((UID + 1)) run "$SCRIPT"
  assert_success
  run grep '^chown' "$STUB_LOG"
  assert_output "chown -R node:node $AGENT_SANDBOX_USER_HOME/.claude
chown -R node:node $AGENT_SANDBOX_USER_HOME/.codex"
}

@test "agent config volumes: a file of another group hands that volume to node" {
  local gid
  gid="$(PATH=/usr/bin:/bin id -g)"
  mkdir -p "$AGENT_SANDBOX_USER_HOME/.codex"
  : > "$AGENT_SANDBOX_USER_HOME/.codex/auth.json"
  stat_as "$UID" $((gid + 1))
  STUB_NODE_UID=$UID STUB_NODE_GID=$((gid + 1)) run "$SCRIPT"
  assert_success
  run grep '^chown' "$STUB_LOG"
  assert_output "chown -R node:node $AGENT_SANDBOX_USER_HOME/.codex"
}

@test "agent config volumes: a top directory of another group (left by usermod) is handed to node" {
  mkdir -p "$AGENT_SANDBOX_USER_HOME/.claude"
  stat_as 1000 1234
  run "$SCRIPT"
  assert_success
  run grep '^chown' "$STUB_LOG"
  assert_output "chown -R node:node $AGENT_SANDBOX_USER_HOME/.claude"
}

@test "agent config volumes whose files are all node's are left alone" {
  local gid
  gid="$(PATH=/usr/bin:/bin id -g)"
  mkdir -p "$AGENT_SANDBOX_USER_HOME/.codex/sessions" "$AGENT_SANDBOX_USER_HOME/.claude"
  : > "$AGENT_SANDBOX_USER_HOME/.codex/sessions/auth.json"
  stat_as "$UID" "$gid"
  STUB_NODE_UID=$UID STUB_NODE_GID=$gid run "$SCRIPT"
  assert_success
  run grep -c '^chown' "$STUB_LOG"
  assert_output 0
}

@test "with a CMD: forks refused and OOM kills during the command are reported (cgroup v1 and v2 files)" {
  export AGENT_SANDBOX_CGROUP_DIR="$TEST_TMP/cgroup"
  mkdir -p "$AGENT_SANDBOX_CGROUP_DIR/pids"
  printf 'max 2\n' > "$AGENT_SANDBOX_CGROUP_DIR/pids/pids.events"
  printf 'low 0\noom 1\noom_kill 1\n' > "$AGENT_SANDBOX_CGROUP_DIR/memory.events"
  # The "command" hits both limits while it runs, then fails as a killed process would.
  stub setpriv "printf 'max 9\n' > '$AGENT_SANDBOX_CGROUP_DIR/pids/pids.events'; printf 'oom_kill 3\n' > '$AGENT_SANDBOX_CGROUP_DIR/memory.events'; exit 137"
  run --separate-stderr "$SCRIPT" make
  assert_equal "$status" 137
  assert_equal "$stderr" 'agent-sandbox: out of memory: 2 processes killed
agent-sandbox: pids limit reached: 7 forks refused'
}

@test "with a CMD: nothing is reported when no limit was hit, or no cgroup file is readable" {
  export AGENT_SANDBOX_CGROUP_DIR="$TEST_TMP/no-cgroup"
  run --separate-stderr "$SCRIPT" true
  assert_success
  assert_equal "$stderr" ''
}

@test "with a CMD: cgroup v2 pids.events and v1 memory.oom_control; a last line without a newline; a missing key counts as 0" {
  export AGENT_SANDBOX_CGROUP_DIR="$TEST_TMP/cgroup"
  mkdir -p "$AGENT_SANDBOX_CGROUP_DIR/memory" "$AGENT_SANDBOX_CGROUP_DIR/pids"
  printf 'other 5\n' > "$AGENT_SANDBOX_CGROUP_DIR/pids.events"
  # v2 first: the v1 file is not read while the v2 one is readable
  printf 'max 100\n' > "$AGENT_SANDBOX_CGROUP_DIR/pids/pids.events"
  printf 'oom_kill_disable 0\nunder_oom 0\noom_kill 4' > "$AGENT_SANDBOX_CGROUP_DIR/memory/memory.oom_control"
  stub setpriv "printf 'max 3\n' > '$AGENT_SANDBOX_CGROUP_DIR/pids.events'; printf 'oom_kill_disable 0\nunder_oom 1\noom_kill 5' > '$AGENT_SANDBOX_CGROUP_DIR/memory/memory.oom_control'"
  run --separate-stderr "$SCRIPT" make
  assert_success
  assert_equal "$stderr" 'agent-sandbox: out of memory: 1 processes killed
agent-sandbox: pids limit reached: 3 forks refused'
}

@test "start-up forks: node is looked up once, the volumes' owners come from one stat, clean volumes from one find" {
  local gid
  gid="$(PATH=/usr/bin:/bin id -g)"
  mkdir -p "$AGENT_SANDBOX_USER_HOME/.codex/sessions" "$AGENT_SANDBOX_USER_HOME/.claude" "$AGENT_SANDBOX_SHELF"
  : > "$AGENT_SANDBOX_USER_HOME/.codex/sessions/auth.json"
  : > "$AGENT_SANDBOX_USER_HOME/.claude/settings.json"
  stat_as "$UID" "$gid"
  stub find 'exec /usr/bin/find "$@"'
  STUB_NODE_UID=$UID STUB_NODE_GID=$gid run "$SCRIPT"
  assert_success
  run grep -E '^(id|stat|find|chown|rm|mkdir|awk)( |$)' "$STUB_LOG"
  assert_output "id node
stat -c %u %g %n -- $AGENT_SANDBOX_HISTORY_DIR $AGENT_SANDBOX_USER_HOME $AGENT_SANDBOX_USER_HOME/.claude $AGENT_SANDBOX_USER_HOME/.codex $AGENT_SANDBOX_SHELF
find $AGENT_SANDBOX_USER_HOME/.claude $AGENT_SANDBOX_USER_HOME/.codex -mindepth 1 ( ! -uid $UID -o ! -gid $gid ) -printf %H -quit"
}

@test "renumbering: node is looked up again after usermod, once if nothing changed" {
  AGENT_SANDBOX_UID=1234 run "$SCRIPT"
  assert_success
  run grep -c '^id node$' "$STUB_LOG"
  assert_output 2
  : > "$STUB_LOG"
  AGENT_SANDBOX_UID=1000 AGENT_SANDBOX_GID=1000 run "$SCRIPT"
  assert_success
  run grep -c '^id node$' "$STUB_LOG"
  assert_output 1
}

@test "agent config volumes: only the volume holding a file not node's is handed over, either way round" {
  mkdir -p "$AGENT_SANDBOX_USER_HOME/.codex" "$AGENT_SANDBOX_USER_HOME/.claude"
  stub find 'exec /usr/bin/find "$@"'
  # node is not the test's own uid, which owns the files; the top directories look node's.
  stat_as $((UID + 1)) 1000
  : > "$AGENT_SANDBOX_USER_HOME/.codex/auth.json"
  STUB_NODE_UID=$((UID + 1)) run "$SCRIPT"
  assert_success
  run grep '^chown' "$STUB_LOG"
  assert_output "chown -R node:node $AGENT_SANDBOX_USER_HOME/.codex"
  run grep -c '^find' "$STUB_LOG"
  assert_output 1
  rm "$AGENT_SANDBOX_USER_HOME/.codex/auth.json"
  : > "$AGENT_SANDBOX_USER_HOME/.claude/settings.json"
  : > "$STUB_LOG"
  STUB_NODE_UID=$((UID + 1)) run "$SCRIPT"
  assert_success
  run grep '^chown' "$STUB_LOG"
  assert_output "chown -R node:node $AGENT_SANDBOX_USER_HOME/.claude"
  # .codex searched on its own after .claude was found wanting
  run grep '^find' "$STUB_LOG"
  assert_line --index 1 --partial "find $AGENT_SANDBOX_USER_HOME/.codex -mindepth 1"
}

@test "no stale ready/failed: nothing is removed; a stale one is" {
  stub rm 'exec /bin/rm "$@"'
  run "$SCRIPT"
  assert_success
  run grep -c '^rm' "$STUB_LOG"
  assert_output 0
  echo old > "$AGENT_SANDBOX_STATE_DIR/failed"
  rm -f "$AGENT_SANDBOX_STATE_DIR/ready"
  : > "$STUB_LOG"
  run "$SCRIPT"
  assert_success
  run grep '^rm' "$STUB_LOG"
  assert_output "rm -f $AGENT_SANDBOX_STATE_DIR/failed"
  [ ! -e "$AGENT_SANDBOX_STATE_DIR/failed" ]
  /bin/rm "$STUB_BIN/rm" && hash -r # teardown's rm must be the real one
}

@test "is shellcheck-clean" {
  command -v shellcheck > /dev/null || fail "shellcheck is not installed: scripts/setup-engine.sh installs it"
  cd "$ROOT" && run shellcheck "$ROOT/base-image/entrypoint.sh" base-image/root-env.sh
  assert_success
}

# nested BODY: the nested-podman script logs "nested", then runs BODY.
nested() {
  export AGENT_SANDBOX_NESTED_SCRIPT="$TEST_TMP/nested-podman"
  printf '#!/usr/bin/env bash\necho nested >> "$STUB_LOG"\n%s\n' "$1" > "$AGENT_SANDBOX_NESTED_SCRIPT"
  chmod +x "$AGENT_SANDBOX_NESTED_SCRIPT"
}

@test "nested containers: set up after the firewall and before ready; not at all when off" {
  nested 'exit 0'
  run "$SCRIPT"
  assert_success
  run grep -c '^nested' "$STUB_LOG"
  assert_output 0
  : > "$STUB_LOG"
  AGENT_SANDBOX_NESTED=1 run "$SCRIPT"
  assert_success
  run grep -E '^(firewall|nested|sleep)' "$STUB_LOG"
  assert_output "firewall
nested
sleep infinity
sleep: ready exists"
}

@test "nested containers: a failing set-up is the sandbox's, with its last line; no ready" {
  nested 'echo "nested-podman: device /dev/fuse is missing" >&2; exit 1'
  AGENT_SANDBOX_NESTED=1 run --separate-stderr "$SCRIPT"
  assert_failure 1
  assert_equal "$stderr" 'agent-sandbox: nested containers set-up failed: nested-podman: device /dev/fuse is missing'
  [ ! -e "$AGENT_SANDBOX_STATE_DIR/ready" ]
}

@test "gateway CA: added to the bundle as PEM once (a restart keeps one copy); ready after" {
  export AGENT_SANDBOX_CA_BUNDLE="$TEST_TMP/bundle.crt"
  printf 'existing\n' > "$AGENT_SANDBOX_CA_BUNDLE"
  line=$(openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=t -keyout /dev/null 2>/dev/null | sed '/-----/d' | tr -d '\n')
  AGENT_SANDBOX_GATEWAY_CA="$line" run --separate-stderr "$SCRIPT"
  assert_success
  [ -e "$AGENT_SANDBOX_STATE_DIR/ready" ]
  run openssl x509 -noout -subject -in <(sed 1d "$AGENT_SANDBOX_CA_BUNDLE")
  assert_output --partial 'CN = t'
  [ "$(head -n 1 "$AGENT_SANDBOX_CA_BUNDLE")" = existing ]
  AGENT_SANDBOX_GATEWAY_CA="$line" run --separate-stderr "$SCRIPT"
  assert_success
  run grep -c BEGIN "$AGENT_SANDBOX_CA_BUNDLE"
  assert_output 1
}

@test "gateway CA: a value that is not base64 fails set-up, never ready, the bundle untouched" {
  export AGENT_SANDBOX_CA_BUNDLE="$TEST_TMP/bundle.crt"
  printf 'existing\n' > "$AGENT_SANDBOX_CA_BUNDLE"
  AGENT_SANDBOX_GATEWAY_CA=$'AAAA\n-----BEGIN CERTIFICATE-----' run --separate-stderr "$SCRIPT"
  assert_failure 1
  assert_equal "$stderr" 'agent-sandbox: AGENT_SANDBOX_GATEWAY_CA is not base64'
  [ ! -e "$AGENT_SANDBOX_STATE_DIR/ready" ]
  [ "$(cat "$AGENT_SANDBOX_CA_BUNDLE")" = existing ]
}

@test "gateway CA: without it the bundle is not touched" {
  export AGENT_SANDBOX_CA_BUNDLE="$TEST_TMP/bundle.crt"
  printf 'existing\n' > "$AGENT_SANDBOX_CA_BUNDLE"
  run --separate-stderr "$SCRIPT"
  assert_success
  [ "$(cat "$AGENT_SANDBOX_CA_BUNDLE")" = existing ]
}

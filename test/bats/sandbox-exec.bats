#!/usr/bin/env bats
# base-image/sandbox-exec.sh: waits for the entrypoint's ready/failed files in a temp state dir.

load test_helper

SCRIPT="$ROOT/base-image/sandbox-exec.sh"

setup() {
  common_setup
  export AGENT_SANDBOX_STATE_DIR="$TEST_TMP/state"
  mkdir -p "$AGENT_SANDBOX_STATE_DIR"
  # The sync runs only for the agent's commands, never root's; these tests run as root.
  export AGENT_SANDBOX_SYNC_AS_ROOT=1
}

teardown() {
  common_teardown
}

# args_cmd NAME: a command NAME that writes each of its arguments on its own line to $TEST_TMP/args.
args_cmd() {
  cat > "$STUB_BIN/$1" <<'EOF'
#!/usr/bin/env bash
printf '%s\n' "$@" > "$TEST_TMP/args"
exit "${EXIT_WITH:-0}"
EOF
  chmod +x "$STUB_BIN/$1"
}

@test "ready: runs the command at once and passes its exit code through" {
  : > "$AGENT_SANDBOX_STATE_DIR/ready"
  run "$SCRIPT" bash -c 'echo "ran $1"; exit 7' _ arg
  assert_equal "$status" 7
  assert_output 'ran arg'
}

@test "ready: argv with spaces and \$(…) arrives untouched" {
  : > "$AGENT_SANDBOX_STATE_DIR/ready"
  args_cmd show-args
  cd "$TEST_TMP"
  run "$SCRIPT" show-args 'two words' '$(touch pwned)' '' '*'
  assert_success
  run cat "$TEST_TMP/args"
  assert_output "two words
\$(touch pwned)

*"
  [ ! -e "$TEST_TMP/pwned" ]
}

@test "ready with no command: exit 0" {
  : > "$AGENT_SANDBOX_STATE_DIR/ready"
  run "$SCRIPT"
  assert_success
  assert_output ''
}

@test "not ready: waits, then runs the command once ready appears" {
  ( sleep 0.3; : > "$AGENT_SANDBOX_STATE_DIR/ready" ) &
  AGENT_SANDBOX_READY_TIMEOUT=20 run "$SCRIPT" sh -c 'test -e "$AGENT_SANDBOX_STATE_DIR/ready" && echo "ran after ready"'
  wait
  assert_success
  assert_output 'ran after ready'
}

@test "failed: exits 125 with the first line of the reason" {
  printf 'firewall set-up failed: no iptables\nmore detail\n' > "$AGENT_SANDBOX_STATE_DIR/failed"
  run "$SCRIPT" touch "$TEST_TMP/ran"
  assert_equal "$status" 125
  assert_output 'agent-sandbox: sandbox set-up failed: firewall set-up failed: no iptables'
  [ ! -e "$TEST_TMP/ran" ]
}

@test "failed appearing while waiting: exits 125" {
  ( sleep 0.3; echo 'cannot set git user.name' > "$AGENT_SANDBOX_STATE_DIR/failed" ) &
  AGENT_SANDBOX_READY_TIMEOUT=20 run "$SCRIPT" touch "$TEST_TMP/ran"
  wait
  assert_equal "$status" 125
  assert_output 'agent-sandbox: sandbox set-up failed: cannot set git user.name'
  [ ! -e "$TEST_TMP/ran" ]
}

@test "never ready: exits 125 after AGENT_SANDBOX_READY_TIMEOUT" {
  AGENT_SANDBOX_READY_TIMEOUT=1 run "$SCRIPT" touch "$TEST_TMP/ran"
  assert_equal "$status" 125
  assert_output 'agent-sandbox: sandbox not ready after 1s (see: docker logs)'
  [ ! -e "$TEST_TMP/ran" ]
}

@test "no state directory at all: times out rather than running" {
  AGENT_SANDBOX_STATE_DIR="$TEST_TMP/missing" AGENT_SANDBOX_READY_TIMEOUT=1 run "$SCRIPT" touch "$TEST_TMP/ran"
  assert_equal "$status" 125
  [ ! -e "$TEST_TMP/ran" ]
}

# ------------------------------------------------------------ bind mode: agent-git --sync when a host ref is newer

# run --separate-stderr below (read when the file is loaded, so it holds for every test).
bats_require_minimum_version 1.5.0

# sync_fixture: a provisioned agent git directory on feat, synced at 2020-01-01,
# and the host's .git whose feat and packed-refs are older still; a stub
# agent-git that logs its call.
sync_fixture() {
  : > "$AGENT_SANDBOX_STATE_DIR/ready"
  export AGENT_SANDBOX_GIT_WORKTREE="$TEST_TMP/ws"
  export AGENT_SANDBOX_HOST_GIT="$TEST_TMP/host-git"
  export AGENT_SANDBOX_AGENT_GIT_SCRIPT="$STUB_BIN/agent-git"
  stub agent-git
  GD="$AGENT_SANDBOX_GIT_WORKTREE/.git"
  mkdir -p "$GD" "$AGENT_SANDBOX_HOST_GIT/refs/heads"
  printf 'ref: refs/heads/feat\n' > "$GD/HEAD"
  echo 0123456789abcdef0123456789abcdef01234567 > "$AGENT_SANDBOX_HOST_GIT/refs/heads/feat"
  printf '# pack-refs with: peeled fully-peeled sorted\n' > "$AGENT_SANDBOX_HOST_GIT/packed-refs"
  touch -d '2019-06-01 00:00:00' "$AGENT_SANDBOX_HOST_GIT/refs/heads/feat" "$AGENT_SANDBOX_HOST_GIT/packed-refs"
  touch -d '2020-01-01 00:00:00' "$GD/agent-sandbox-synced"
}

@test "sync: the host's checked-out ref newer than the stamp: agent-git --sync runs, then the command" {
  sync_fixture
  touch -d '2021-01-01 00:00:00' "$AGENT_SANDBOX_HOST_GIT/refs/heads/feat"
  run --separate-stderr "$SCRIPT" echo ran
  assert_success
  assert_output ran
  assert_equal "$(cat "$STUB_LOG")" "agent-git --sync $AGENT_SANDBOX_GIT_WORKTREE $AGENT_SANDBOX_HOST_GIT"
}

@test "sync: packed-refs newer than the stamp: agent-git --sync runs" {
  sync_fixture
  rm "$AGENT_SANDBOX_HOST_GIT/refs/heads/feat" # packed by the host's git gc
  touch -d '2021-01-01 00:00:00' "$AGENT_SANDBOX_HOST_GIT/packed-refs"
  run --separate-stderr "$SCRIPT" echo ran
  assert_success
  assert_output ran
  assert_equal "$(cat "$STUB_LOG")" "agent-git --sync $AGENT_SANDBOX_GIT_WORKTREE $AGENT_SANDBOX_HOST_GIT"
}

@test "sync: a detached HEAD: only packed-refs counts" {
  sync_fixture
  echo 0123456789abcdef0123456789abcdef01234567 > "$GD/HEAD"
  touch -d '2021-01-01 00:00:00' "$AGENT_SANDBOX_HOST_GIT/refs/heads/feat"
  run --separate-stderr "$SCRIPT" echo ran
  assert_success
  assert_equal "$(cat "$STUB_LOG")" ''
  touch -d '2021-01-01 00:00:00' "$AGENT_SANDBOX_HOST_GIT/packed-refs"
  run --separate-stderr "$SCRIPT" echo ran
  assert_success
  assert_equal "$(cat "$STUB_LOG")" "agent-git --sync $AGENT_SANDBOX_GIT_WORKTREE $AGENT_SANDBOX_HOST_GIT"
}

@test "sync: never when the stamp is newer than the host's refs" {
  sync_fixture
  touch -d '2021-01-01 00:00:00' "$AGENT_SANDBOX_HOST_GIT/refs/heads/feat" "$AGENT_SANDBOX_HOST_GIT/packed-refs"
  touch -d '2022-01-01 00:00:00' "$GD/agent-sandbox-synced"
  run --separate-stderr "$SCRIPT" echo ran
  assert_success
  assert_output ran
  assert_equal "$(cat "$STUB_LOG")" ''
}

@test "sync: a host ref of another branch being newer does not count" {
  sync_fixture
  echo 0123456789abcdef0123456789abcdef01234567 > "$AGENT_SANDBOX_HOST_GIT/refs/heads/main"
  touch -d '2021-01-01 00:00:00' "$AGENT_SANDBOX_HOST_GIT/refs/heads/main"
  run --separate-stderr "$SCRIPT" echo ran
  assert_success
  assert_equal "$(cat "$STUB_LOG")" ''
}

@test "sync: never without AGENT_SANDBOX_HOST_GIT and AGENT_SANDBOX_GIT_WORKTREE, nor before the first sync" {
  sync_fixture
  touch -d '2021-01-01 00:00:00' "$AGENT_SANDBOX_HOST_GIT/refs/heads/feat"
  AGENT_SANDBOX_HOST_GIT='' run --separate-stderr "$SCRIPT" echo ran
  assert_success
  assert_output ran
  env -u AGENT_SANDBOX_GIT_WORKTREE "$SCRIPT" true
  assert_equal "$(cat "$STUB_LOG")" ''
  # Control: with both, it runs.
  run --separate-stderr "$SCRIPT" true
  assert_equal "$(cat "$STUB_LOG")" "agent-git --sync $AGENT_SANDBOX_GIT_WORKTREE $AGENT_SANDBOX_HOST_GIT"
  : > "$STUB_LOG"
  rm "$GD/agent-sandbox-synced"
  run --separate-stderr "$SCRIPT" echo ran
  assert_success
  assert_output ran
  assert_equal "$(cat "$STUB_LOG")" ''
}

@test "sync: a failing sync does not stop the command, and its output goes to stderr" {
  sync_fixture
  stub agent-git 'echo "agent-git: sync output"; echo "agent-git: it broke" >&2; exit 3'
  touch -d '2021-01-01 00:00:00' "$AGENT_SANDBOX_HOST_GIT/refs/heads/feat"
  run --separate-stderr "$SCRIPT" bash -c 'echo ran; exit 7'
  assert_equal "$status" 7
  assert_output ran
  assert_equal "$stderr" 'agent-git: sync output
agent-git: it broke'
  assert_equal "$(cat "$STUB_LOG")" "agent-git --sync $AGENT_SANDBOX_GIT_WORKTREE $AGENT_SANDBOX_HOST_GIT"
}

@test "sync: never when set-up failed" {
  sync_fixture
  rm "$AGENT_SANDBOX_STATE_DIR/ready"
  echo 'firewall set-up failed' > "$AGENT_SANDBOX_STATE_DIR/failed"
  touch -d '2021-01-01 00:00:00' "$AGENT_SANDBOX_HOST_GIT/refs/heads/feat"
  run "$SCRIPT" touch "$TEST_TMP/ran"
  assert_equal "$status" 125
  assert_equal "$(cat "$STUB_LOG")" ''
  [ ! -e "$TEST_TMP/ran" ]
}

@test "sync: never for root's own commands (no root-owned files in the agent's .git)" {
  unset AGENT_SANDBOX_SYNC_AS_ROOT
  [ "$EUID" -eq 0 ] || fail "this test runs as root"
  mkdir -p "$TEST_TMP/wt/.git" "$TEST_TMP/host/refs/heads"
  printf 'ref: refs/heads/main\n' > "$TEST_TMP/wt/.git/HEAD"
  touch -d '2020-01-01' "$TEST_TMP/wt/.git/agent-sandbox-synced"
  touch "$TEST_TMP/host/refs/heads/main"
  stub agent-git-stub
  : > "$AGENT_SANDBOX_STATE_DIR/ready"
  run env AGENT_SANDBOX_HOST_GIT="$TEST_TMP/host" AGENT_SANDBOX_GIT_WORKTREE="$TEST_TMP/wt" AGENT_SANDBOX_AGENT_GIT_SCRIPT="$STUB_BIN/agent-git-stub" "$SCRIPT" true
  assert_success
  [ ! -s "$STUB_LOG" ] || fail "the sync ran as root: $(cat "$STUB_LOG")"
}

# listen PORT: a TCP listener on 127.0.0.1:PORT (the gateway's stand-in) until teardown; its pid in $LISTENER.
listen() {
  node -e "require('net').createServer((s) => s.destroy()).listen($1, '127.0.0.1', () => console.log('up'))" > "$TEST_TMP/listener.out" &
  LISTENER=$!
  for _ in $(seq 100); do grep -q up "$TEST_TMP/listener.out" 2> /dev/null && return 0; sleep 0.05; done
  return 1
}
free_port() { node -e "const s = require('net').createServer().listen(0, '127.0.0.1', () => { console.log(s.address().port); s.close() })"; }

@test "gateway check: runs the command when the gateway's port listens (the control)" {
  : > "$AGENT_SANDBOX_STATE_DIR/ready"
  port=$(free_port)
  listen "$port"
  AGENT_SANDBOX_GATEWAY_UID=65532 AGENT_SANDBOX_CHECK_GATEWAY=$port run "$SCRIPT" bash -c 'echo "ran ${AGENT_SANDBOX_CHECK_GATEWAY-unset}"'
  kill "$LISTENER"
  assert_success
  assert_output 'ran unset'
}

@test "gateway check: refuses (125, nothing run) when nothing listens; quietly for the CLI" {
  : > "$AGENT_SANDBOX_STATE_DIR/ready"
  port=$(free_port)
  AGENT_SANDBOX_GATEWAY_UID=65532 AGENT_SANDBOX_CHECK_GATEWAY=$port run "$SCRIPT" touch "$TEST_TMP/ran"
  assert_equal "$status" 125
  assert_output --partial 'the egress gateway does not serve this sandbox'
  [ ! -e "$TEST_TMP/ran" ]
  AGENT_SANDBOX_GATEWAY_UID=65532 AGENT_SANDBOX_CHECK_GATEWAY=$port AGENT_SANDBOX_QUIET_REFUSAL=compromised run "$SCRIPT" touch "$TEST_TMP/ran"
  assert_equal "$status" 125
  assert_output ''
  [ ! -e "$TEST_TMP/ran" ]
}

@test "gateway check: not asked, or a sandbox without a gateway: the command runs" {
  : > "$AGENT_SANDBOX_STATE_DIR/ready"
  port=$(free_port)
  AGENT_SANDBOX_GATEWAY_UID=65532 run "$SCRIPT" echo ran
  assert_output 'ran'
  AGENT_SANDBOX_CHECK_GATEWAY=$port run "$SCRIPT" echo ran
  assert_output 'ran'
}

@test "gate check: refuses (125, nothing run) when the push gate's port does not listen; quietly for the CLI" {
  : > "$AGENT_SANDBOX_STATE_DIR/ready"
  gw=$(free_port)
  listen "$gw"
  gate=$(free_port)
  AGENT_SANDBOX_GATEWAY_UID=65532 AGENT_SANDBOX_GATE_PORT=$gate AGENT_SANDBOX_CHECK_GATEWAY=$gw run "$SCRIPT" touch "$TEST_TMP/ran"
  assert_equal "$status" 125
  assert_output 'agent-sandbox: refused: the push gate does not serve this sandbox (no git push host); agent-sandbox exec or start makes it anew'
  [ ! -e "$TEST_TMP/ran" ]
  AGENT_SANDBOX_GATE_PORT=$gate AGENT_SANDBOX_CHECK_GATEWAY=$gw AGENT_SANDBOX_QUIET_REFUSAL=compromised run "$SCRIPT" touch "$TEST_TMP/ran"
  kill "$LISTENER"
  assert_equal "$status" 125
  assert_output ''
  [ ! -e "$TEST_TMP/ran" ]
}

@test "gate check: runs the command when the gate's port listens (the control), and when no check is asked" {
  : > "$AGENT_SANDBOX_STATE_DIR/ready"
  gate=$(free_port)
  AGENT_SANDBOX_GATE_PORT=$gate run "$SCRIPT" echo ran
  assert_success
  assert_output 'ran'
  listen "$gate"
  AGENT_SANDBOX_GATE_PORT=$gate AGENT_SANDBOX_CHECK_GATEWAY=1 run "$SCRIPT" echo ran
  kill "$LISTENER"
  assert_success
  assert_output 'ran'
}

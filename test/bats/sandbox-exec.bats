#!/usr/bin/env bats
# base-image/sandbox-exec.sh: waits for the entrypoint's ready/failed files in a temp state dir.

load test_helper

SCRIPT="$ROOT/base-image/sandbox-exec.sh"

setup() {
  common_setup
  export AGENT_SANDBOX_STATE_DIR="$TEST_TMP/state"
  mkdir -p "$AGENT_SANDBOX_STATE_DIR"
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

#!/usr/bin/env bats
# templates/agents/volume-helper.sh (run by codex-init-config, claude-init-config
# and codex-logout in a helper container) against a temporary directory, with
# chown and stat stubbed so that it runs as any user.

load test_helper

bats_require_minimum_version 1.5.0

SCRIPT="$ROOT/templates/agents/volume-helper.sh"

setup() {
  common_setup
  export AGENT_SANDBOX_HELPER_DIR="$TEST_TMP/volume"
  mkdir -p "$AGENT_SANDBOX_HELPER_DIR" "$TEST_TMP/src"
  # The volume's top directory belongs to STUB_OWNER ("uid gid"), 1234 by default.
  stub stat 'echo "${STUB_OWNER:-1234 1234}"'
  stub chown
}

teardown() {
  common_teardown
}

# payload NAME=CONTENT...: the base64 tar archive the CLI sends on stdin.
payload() {
  local pair names=()
  for pair in "$@"; do
    printf '%s' "${pair#*=}" > "$TEST_TMP/src/${pair%%=*}"
    names+=("${pair%%=*}")
  done
  if [[ ${#names[@]} -eq 0 ]]; then
    tar -c -f - -T /dev/null | base64 -w0
  else
    tar -c -f - -C "$TEST_TMP/src" "${names[@]}" | base64 -w0
  fi
}

helper() {
  run --separate-stderr bash "$SCRIPT" "$@" < "$TEST_TMP/stdin"
}

mode_of() { stat_real -c %a "$AGENT_SANDBOX_HELPER_DIR/$1"; }
stat_real() { /usr/bin/stat "$@"; }

@test "creates files with their mode and the volume owner, and says so" {
  payload auth.json='{"token":"t"}' config.toml='a = 1' > "$TEST_TMP/stdin"
  helper create:0600:auth.json create:0644:config.toml
  assert_success
  assert_output "owner 1234:1234
created auth.json
created config.toml"
  assert_equal "$(cat "$AGENT_SANDBOX_HELPER_DIR/auth.json")" '{"token":"t"}'
  assert_equal "$(mode_of auth.json)" 600
  assert_equal "$(mode_of config.toml)" 644
  run grep '^chown' "$STUB_LOG"
  assert_output --regexp "^chown 1234:1234 $TEST_TMP/volume/\.agent-sandbox-import\.[A-Za-z0-9]+/auth\.json
chown 1234:1234 $TEST_TMP/volume/\.agent-sandbox-import\.[A-Za-z0-9]+/config\.toml$"
}

@test "create keeps an existing file; replace overwrites it" {
  printf 'mine' > "$AGENT_SANDBOX_HELPER_DIR/config.toml"
  printf 'old' > "$AGENT_SANDBOX_HELPER_DIR/auth.json"
  payload config.toml='template' auth.json='new' > "$TEST_TMP/stdin"
  helper create:0644:config.toml replace:0600:auth.json
  assert_success
  assert_output "owner 1234:1234
kept config.toml
replaced auth.json"
  assert_equal "$(cat "$AGENT_SANDBOX_HELPER_DIR/config.toml")" mine
  assert_equal "$(cat "$AGENT_SANDBOX_HELPER_DIR/auth.json")" new
}

@test "a new root-owned volume is given to the image's node (1000) first" {
  payload AGENTS.md='x' > "$TEST_TMP/stdin"
  STUB_OWNER='0 0' helper create:0644:AGENTS.md
  assert_success
  assert_line --index 0 'owner 1000:1000'
  run grep "^chown 1000:1000 $AGENT_SANDBOX_HELPER_DIR\$" "$STUB_LOG"
  assert_success
}

@test "remove deletes what exists and reports what did not" {
  : > "$AGENT_SANDBOX_HELPER_DIR/auth.json"
  : > "$AGENT_SANDBOX_HELPER_DIR/config.toml"
  payload > "$TEST_TMP/stdin"
  helper remove::auth.json remove::profile.json
  assert_success
  assert_output "owner 1234:1234
removed auth.json
absent profile.json"
  [ ! -e "$AGENT_SANDBOX_HELPER_DIR/auth.json" ]
  [ -e "$AGENT_SANDBOX_HELPER_DIR/config.toml" ]
}

@test "a name with a slash is refused" {
  payload auth.json='x' > "$TEST_TMP/stdin"
  helper create:0600:../auth.json
  assert_failure
  assert_equal "$stderr" 'volume-helper: bad file name: ../auth.json'
  [ ! -e "$TEST_TMP/auth.json" ]
}

@test "a directory where a file should go is an error, and nothing is left staged" {
  mkdir "$AGENT_SANDBOX_HELPER_DIR/config.toml"
  payload config.toml='x' > "$TEST_TMP/stdin"
  helper replace:0644:config.toml
  assert_failure
  assert_equal "$stderr" 'volume-helper: config.toml is a directory in the volume'
  run ls -A "$AGENT_SANDBOX_HELPER_DIR"
  assert_output config.toml
}

@test "stdin that is not an archive fails before anything changes" {
  printf 'not base64 at all!' > "$TEST_TMP/stdin"
  helper create:0644:config.toml
  assert_failure
  assert_output ''
  [[ "$stderr" == *'volume-helper: cannot unpack the files sent on stdin' ]]
  run ls -A "$AGENT_SANDBOX_HELPER_DIR"
  assert_output ''
}

@test "staging left behind by a killed run is cleaned up" {
  mkdir "$AGENT_SANDBOX_HELPER_DIR/.agent-sandbox-import.OLD123"
  : > "$AGENT_SANDBOX_HELPER_DIR/.agent-sandbox-import.OLD123/auth.json"
  payload > "$TEST_TMP/stdin"
  helper remove::auth.json
  assert_success
  run ls -A "$AGENT_SANDBOX_HELPER_DIR"
  assert_output ''
}

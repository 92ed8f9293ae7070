#!/usr/bin/env bats
# base-image/gh-wrapper.sh: the real gh (a stub here) gets the App token for that
# one exec, read from the file on every call; everything else passes through.
bats_require_minimum_version 1.5.0

load test_helper

SCRIPT="$ROOT/base-image/gh-wrapper.sh"

setup() {
  common_setup
  export AGENT_SANDBOX_GHAPP_TOKEN_FILE="$TEST_TMP/ghapp_token"
  export AGENT_SANDBOX_REAL_GH="$STUB_BIN/real-gh"
  unset GH_TOKEN GITHUB_TOKEN GH_ENTERPRISE_TOKEN GITHUB_ENTERPRISE_TOKEN GH_HOST AGENT_SANDBOX_GHAPP_GH_HOST
  printf 'ghs_first\n' > "$AGENT_SANDBOX_GHAPP_TOKEN_FILE"
  # The stub prints what gh would see: its token variables, then its argv one per line.
  stub real-gh 'printf "GH_TOKEN=%s\nGH_ENTERPRISE_TOKEN=%s\nGH_HOST=%s\n" "${GH_TOKEN:-}" "${GH_ENTERPRISE_TOKEN:-}" "${GH_HOST:-}"; printf "arg=%s\n" "$@"; if [ -n "${STUB_STDIN:-}" ]; then printf "stdin=%s\n" "$(cat)"; fi; exit "${STUB_EXIT:-0}"'
}

teardown() {
  common_teardown
}

@test "exports GH_TOKEN from the file for github.com" {
  run "$SCRIPT" pr list
  assert_success
  assert_line GH_TOKEN=ghs_first
  assert_line GH_ENTERPRISE_TOKEN=
  assert_line arg=pr
  assert_line arg=list
}

@test "reads the file on every call" {
  run "$SCRIPT" api user
  assert_line GH_TOKEN=ghs_first
  printf 'ghs_second\n' > "$TEST_TMP/t" && mv "$TEST_TMP/t" "$AGENT_SANDBOX_GHAPP_TOKEN_FILE"
  run "$SCRIPT" api user
  assert_line GH_TOKEN=ghs_second
}

@test "passes arguments, stdin and the exit status through untouched" {
  STUB_EXIT=3 run "$SCRIPT" issue create --title "a b 'c' \$(id)" --body ''
  assert_failure 3
  assert_line "arg=a b 'c' \$(id)"
  assert_line "arg="
  run bash -c "printf 'from-stdin' | STUB_STDIN=1 '$SCRIPT' x"
  assert_success
  assert_line stdin=from-stdin
}

@test "leaves gh alone when there is no token file" {
  rm "$AGENT_SANDBOX_GHAPP_TOKEN_FILE"
  run "$SCRIPT" auth status
  assert_success
  assert_line GH_TOKEN=
  assert_line arg=auth
}

@test "keeps a token the caller set itself" {
  GH_TOKEN=mine run "$SCRIPT" api user
  assert_line GH_TOKEN=mine
}

@test "uses GH_ENTERPRISE_TOKEN and GH_HOST for GitHub Enterprise Server" {
  AGENT_SANDBOX_GHAPP_GH_HOST=ghe.example run "$SCRIPT" repo view
  assert_success
  assert_line GH_TOKEN=
  assert_line GH_ENTERPRISE_TOKEN=ghs_first
  assert_line GH_HOST=ghe.example
}

@test "the token is not in the real gh's argv" {
  run "$SCRIPT" api user
  assert_success
  run grep -c ghs_first "$STUB_LOG"
  assert_output 0
}

@test "fails with one line when the real gh is missing" {
  AGENT_SANDBOX_REAL_GH="$TEST_TMP/nope" run --separate-stderr "$SCRIPT" version
  assert_failure 1
  [[ "$stderr" == *"the real gh is not at $TEST_TMP/nope"* ]]
}

#!/usr/bin/env bats
# Every shell script we ship or run (the image's scripts and gate hooks, the set-up
# scripts, CI, the launcher) is shellcheck-clean. shellcheck is a dependency of the
# test run (scripts/setup-engine.sh installs it): a missing one fails, never skips.

load test_helper

@test "shellcheck is installed" {
  command -v shellcheck > /dev/null || fail "shellcheck is not installed: scripts/setup-engine.sh installs it"
}

@test "every shipped shell script is shellcheck-clean" {
  command -v shellcheck > /dev/null || fail "shellcheck is not installed: scripts/setup-engine.sh installs it"
  run shellcheck "$ROOT"/base-image/*.sh "$ROOT"/base-image/gate-hooks/* "$ROOT"/scripts/*.sh "$ROOT/.ci/run" "$ROOT/bin/agent-sandbox"
  assert_success
}

@test "control: shellcheck does fail on a script with a quoting bug" {
  command -v shellcheck > /dev/null || fail "shellcheck is not installed: scripts/setup-engine.sh installs it"
  printf '#!/usr/bin/env bash\nrm -rf $1/tmp\n' > "$BATS_TEST_TMPDIR/bad.sh"
  run shellcheck "$BATS_TEST_TMPDIR/bad.sh"
  assert_failure
}

#!/usr/bin/env bats
# base-image/docker-shim.sh (the sandbox's `docker`): Podman with nested
# containers on, a one-line refusal without them.

load test_helper

SCRIPT="$ROOT/base-image/docker-shim.sh"

setup() {
  common_setup
  unset AGENT_SANDBOX_NESTED
  stub podman 'echo "PODMAN_IGNORE_CGROUPSV1_WARNING=$PODMAN_IGNORE_CGROUPSV1_WARNING"'
}

teardown() {
  common_teardown
}

@test "with nested containers: podman, with the same arguments" {
  AGENT_SANDBOX_NESTED=1 run "$SCRIPT" run --rm 'img name' true
  assert_success
  assert_output 'PODMAN_IGNORE_CGROUPSV1_WARNING=1'
  run cat "$STUB_LOG"
  assert_output 'podman --log-level=error run --rm img name true'
}

@test "without: exit 125 and how to turn them on; podman is not run" {
  run "$SCRIPT" ps
  assert_failure 125
  assert_output --partial 'nested containers are off in this sandbox; start it with --nested'
  run cat "$STUB_LOG"
  assert_output ''
}

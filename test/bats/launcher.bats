#!/usr/bin/env bats
# bin/agent-sandbox, the launcher: it finds run.cjs through any symlinks, passes
# every argument through untouched, and starts node without NODE_EXTRA_CA_CERTS
# (handing the value over in AGENT_SANDBOX_DEFERRED_CA_CERTS). `node` is a stub
# that records its arguments and those two variables.

load test_helper

LAUNCHER="$ROOT/bin/agent-sandbox"

setup() {
  common_setup
  unset NODE_EXTRA_CA_CERTS AGENT_SANDBOX_DEFERRED_CA_CERTS
  # One line per argument, then the two variables ("<unset>" when absent).
  stub node '
out="$TEST_TMP/node.out"
: > "$out"
for a in "$@"; do printf "arg=%s\n" "$a" >> "$out"; done
printf "extra=%s\n" "${NODE_EXTRA_CA_CERTS-<unset>}" >> "$out"
printf "deferred=%s\n" "${AGENT_SANDBOX_DEFERRED_CA_CERTS-<unset>}" >> "$out"
exit "${NODE_STUB_EXIT:-0}"'
}

teardown() {
  common_teardown
}

# entry: the run.cjs path node was given, resolved.
entry() {
  realpath "$(sed -n 's/^arg=//p' "$TEST_TMP/node.out" | head -n 1)"
}

@test "starts node on run.cjs next to it, with every argument as given" {
  run "$LAUNCHER" exec '/w s' -- sh -c 'echo "$(id)" `x` $HOME' '' "it's"
  assert_success
  [ "$(entry)" = "$ROOT/bin/run.cjs" ]
  run sed -n 's/^arg=//p' "$TEST_TMP/node.out"
  assert_output "$ROOT/bin/run.cjs
exec
/w s
--
sh
-c
echo \"\$(id)\" \`x\` \$HOME

it's"
}

@test "moves NODE_EXTRA_CA_CERTS aside, keeping its value exactly" {
  NODE_EXTRA_CA_CERTS='/etc/my certs/corp $(ca).pem' run "$LAUNCHER" list
  assert_success
  run grep -E '^(extra|deferred)=' "$TEST_TMP/node.out"
  assert_output 'extra=<unset>
deferred=/etc/my certs/corp $(ca).pem'
}

@test "leaves the environment alone when NODE_EXTRA_CA_CERTS is unset or empty" {
  run "$LAUNCHER" list
  assert_success
  run grep -E '^(extra|deferred)=' "$TEST_TMP/node.out"
  assert_output 'extra=<unset>
deferred=<unset>'
  NODE_EXTRA_CA_CERTS= run "$LAUNCHER" list
  assert_success
  run grep -E '^(extra|deferred)=' "$TEST_TMP/node.out"
  assert_output 'extra=
deferred=<unset>'
}

@test "passes node's exit code through" {
  NODE_STUB_EXIT=7 run "$LAUNCHER" exec -- false
  assert_equal "$status" 7
}

@test "finds run.cjs through an absolute symlink found on PATH (npm's global install)" {
  mkdir -p "$TEST_TMP/prefix/bin"
  ln -s "$LAUNCHER" "$TEST_TMP/prefix/bin/agent-sandbox"
  PATH="$TEST_TMP/prefix/bin:$PATH" run agent-sandbox --version
  assert_success
  [ "$(entry)" = "$ROOT/bin/run.cjs" ]
}

@test "finds run.cjs through a chain of relative symlinks in other directories" {
  mkdir -p "$TEST_TMP/pkg/node_modules/agent-sandbox" "$TEST_TMP/pkg/node_modules/.bin" "$TEST_TMP/elsewhere"
  cp -R "$ROOT/bin" "$TEST_TMP/pkg/node_modules/agent-sandbox/bin"
  # node_modules/.bin/agent-sandbox -> ../agent-sandbox/bin/agent-sandbox, and a link to that link.
  ln -s ../agent-sandbox/bin/agent-sandbox "$TEST_TMP/pkg/node_modules/.bin/agent-sandbox"
  ln -s ../pkg/node_modules/.bin/agent-sandbox "$TEST_TMP/elsewhere/asb"
  run "$TEST_TMP/elsewhere/asb" list
  assert_success
  [ "$(entry)" = "$(realpath "$TEST_TMP/pkg/node_modules/agent-sandbox/bin/run.cjs")" ]
}

@test "works when run as 'sh agent-sandbox' from its own directory" {
  cd "$ROOT/bin"
  run sh agent-sandbox list
  assert_success
  [ "$(entry)" = "$ROOT/bin/run.cjs" ]
}

@test "finds run.cjs through a relative symlink run as 'sh NAME' from the link's directory (no slash in \$0)" {
  mkdir -p "$TEST_TMP/pkg/node_modules/.bin"
  cp -R "$ROOT/bin" "$TEST_TMP/pkg/node_modules/agent-sandbox-bin"
  ln -s ../agent-sandbox-bin/agent-sandbox "$TEST_TMP/pkg/node_modules/.bin/agent-sandbox"
  cd "$TEST_TMP/pkg/node_modules/.bin"
  run sh agent-sandbox list
  assert_success
  [ "$(entry)" = "$(realpath "$TEST_TMP/pkg/node_modules/agent-sandbox-bin/run.cjs")" ]
}

@test "finds run.cjs through a link to a name in the same directory" {
  mkdir -p "$TEST_TMP/prefix"
  cp -R "$ROOT/bin" "$TEST_TMP/prefix/bin"
  ln -s agent-sandbox "$TEST_TMP/prefix/bin/asb"
  run "$TEST_TMP/prefix/bin/asb" list
  assert_success
  [ "$(entry)" = "$(realpath "$TEST_TMP/prefix/bin/run.cjs")" ]
}

@test "leaves NODE_EXTRA_CA_CERTS to node when NODE_OPTIONS asks for the system's CA store" {
  for opt in --use-openssl-ca --use-system-ca; do
    NODE_OPTIONS="--max-old-space-size=512 $opt" NODE_EXTRA_CA_CERTS=/corp.pem run "$LAUNCHER" list
    assert_success
    run grep -E '^(extra|deferred)=' "$TEST_TMP/node.out"
    assert_output 'extra=/corp.pem
deferred=<unset>'
  done
  # A flag that merely starts the same way is not one of them.
  NODE_OPTIONS=--use-openssl-ca-bundle NODE_EXTRA_CA_CERTS=/corp.pem run "$LAUNCHER" list
  run grep -E '^(extra|deferred)=' "$TEST_TMP/node.out"
  assert_output 'extra=<unset>
deferred=/corp.pem'
}

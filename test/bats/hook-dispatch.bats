#!/usr/bin/env bats
# base-image/hook-dispatch.sh (with hook-head-config.cjs), as git runs it in a
# sandbox: through a link named after the hook in a dispatcher directory whose
# .hooks-dir names the real hooks directory, as the agent (uid 65534 here, so
# that read-only files are really read-only), from the work tree, with real git.

load test_helper

bats_require_minimum_version 1.5.0

AGENT=65534

setup() {
  common_setup
  [ "$(id -u)" = 0 ] || fail "these tests switch to an unprivileged uid, so they must run as root"
  chmod 0755 "$TEST_TMP"
  WS="$TEST_TMP/ws"
  LINKS="$TEST_TMP/links"
  REAL="$TEST_TMP/real-hooks"
  mkdir -p "$WS" "$LINKS" "$REAL"
  for h in pre-commit commit-msg post-commit; do ln -s "$ROOT/base-image/hook-dispatch.sh" "$LINKS/$h"; done
  printf '%s\n' "$REAL" > "$LINKS/.hooks-dir"
  export AGENT_SANDBOX_HEAD_CONFIG="$ROOT/base-image/hook-head-config.cjs"
  export GIT_AUTHOR_NAME=T GIT_AUTHOR_EMAIL=t@example.com GIT_COMMITTER_NAME=T GIT_COMMITTER_EMAIL=t@example.com
  git init -q -b main "$WS"
  printf '{\n  "name": "app",\n  "lint-staged": {\n    "*.js": "false"\n  }\n}\n' > "$WS/package.json"
  git -C "$WS" add package.json
  git -C "$WS" commit -q -m init
  chown -R "$AGENT:$AGENT" "$WS" "$REAL"
  # For root's own git on the fixture, which is the agent's.
  printf '[safe]\n\tdirectory = *\n' > "$HOME/.gitconfig"
}

teardown() {
  common_teardown
}

# hook NAME BODY: a real hook (as the repository's owner wrote it).
hook() {
  printf '#!/bin/sh\n%s\n' "$2" > "$REAL/$1"
  chmod 0755 "$REAL/$1"
}
# dispatch NAME [ARGS...]: what git does for hook NAME: run the link, as the agent, from the work tree.
dispatch() {
  local name="$1"
  shift
  run --separate-stderr setpriv --reuid="$AGENT" --regid="$AGENT" --clear-groups \
    env -C "$WS" HOME=/nonexistent GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=safe.directory GIT_CONFIG_VALUE_0='*' \
    "$LINKS/$name" "$@"
}

@test "no real hook of that name: exits 0 at once, says nothing" {
  dispatch pre-commit
  assert_success
  assert_output ''
  assert_equal "$stderr" ''
}

@test "runs the real hook with its arguments, stdin and \$0, and returns its status" {
  hook commit-msg 'printf "%s|%s|%s\n" "$0" "$1" "$(cat)"; exit 7'
  run --separate-stderr sh -c "printf 'from stdin' | setpriv --reuid=$AGENT --regid=$AGENT --clear-groups env -C '$WS' GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=safe.directory GIT_CONFIG_VALUE_0='*' '$LINKS/commit-msg' .git/COMMIT_EDITMSG"
  assert_equal "$status" 7
  assert_output "$REAL/commit-msg|.git/COMMIT_EDITMSG|from stdin"
}

@test "a real hook that is not executable is not run (as git would not)" {
  hook pre-commit 'echo ran'
  chmod 0644 "$REAL/pre-commit"
  dispatch pre-commit
  assert_success
  assert_output ''
}

@test "package.json's hook keys are HEAD's for the hook's run; the working copy comes back byte for byte" {
  hook pre-commit 'cat package.json; exit 1'
  # The agent weakens lint-staged and adds commitlint, in its own formatting.
  printf '{"name":"app","lint-staged":{"*.js":"true"},"commitlint":{"rules":{}},"scripts":{"x":"y"}}' > "$WS/package.json"
  cp "$WS/package.json" "$TEST_TMP/before"
  dispatch pre-commit
  assert_failure 1
  assert_output --partial '"*.js": "false"'
  refute_output --partial '"*.js": "true"'
  refute_output --partial commitlint
  assert_output --partial '"x": "y"'
  [[ "$stderr" == *'package.json "lint-staged", "commitlint" as committed in HEAD'* ]] || fail "stderr: $stderr"
  cmp "$WS/package.json" "$TEST_TMP/before"
  assert_equal "$(find /tmp -maxdepth 1 -name 'agent-sandbox-package.json.*' | wc -l)" 0
}

@test "package.json whose hook keys are HEAD's is left alone (not rewritten), and so is one without any" {
  hook pre-commit 'echo ok'
  printf '{"lint-staged":{"*.js":"false"},"name":"app","version":"2"}' > "$WS/package.json"
  touch -d '2001-01-01' "$WS/package.json"
  dispatch pre-commit
  assert_success
  assert_output ok
  assert_equal "$stderr" ''
  assert_equal "$(stat -c %Y "$WS/package.json")" "$(date -d 2001-01-01 +%s)"
}

@test "a hook killed by a signal still gets package.json back" {
  hook pre-commit 'kill -TERM $PPID; sleep 5'
  printf '{"lint-staged":{"*.js":"true"}}' > "$WS/package.json"
  cp "$WS/package.json" "$TEST_TMP/before"
  dispatch pre-commit
  assert_failure
  cmp "$WS/package.json" "$TEST_TMP/before"
}

@test "hook configuration that is writable here (created inside) is refused; read-only (protected) is used" {
  hook pre-commit 'echo ran'
  printf 'pre-commit:\n  skip: true\n' > "$WS/lefthook-local.yml"
  chown "$AGENT" "$WS/lefthook-local.yml"
  dispatch pre-commit
  assert_failure 1
  refute_output ran
  [[ "$stderr" == *'lefthook-local.yml is hook configuration that is not the repository'* ]] || fail "stderr: $stderr"
  # What a read-only mount looks like to the agent: not writable.
  chown root:root "$WS/lefthook-local.yml"
  chmod 0444 "$WS/lefthook-local.yml"
  dispatch pre-commit
  assert_success
  assert_output ran
  # And a directory of lefthook scripts.
  mkdir "$WS/.lefthook"
  chown "$AGENT" "$WS/.lefthook"
  dispatch pre-commit
  assert_failure 1
}

@test "protectHookConfig false (.protect-off): the working copy's configuration, as is" {
  : > "$LINKS/.protect-off"
  hook pre-commit 'cat package.json'
  printf '{"lint-staged":{"*.js":"true"}}' > "$WS/package.json"
  : > "$WS/.lintstagedrc"
  chown "$AGENT" "$WS/.lintstagedrc"
  dispatch pre-commit
  assert_success
  assert_output '{"lint-staged":{"*.js":"true"}}'
}

@test "through git itself: a commit runs the real pre-commit with HEAD's keys and fails" {
  hook pre-commit 'grep -q "\"false\"" package.json && { echo "lint-staged would run false" >&2; exit 1; }; exit 0'
  printf '{"name":"app","lint-staged":{}}\n' > "$WS/package.json"
  chown "$AGENT" "$WS/package.json"
  run --separate-stderr setpriv --reuid="$AGENT" --regid="$AGENT" --clear-groups env HOME=/nonexistent GIT_CONFIG_GLOBAL=/dev/null \
    git -c safe.directory='*' -c core.hooksPath="$LINKS" -C "$WS" commit -q -am weaken
  assert_failure
  [[ "$stderr" == *'lint-staged would run false'* ]] || fail "stderr: $stderr"
  assert_equal "$(cat "$WS/package.json")" '{"name":"app","lint-staged":{}}'
  # Control: with the real hooks directory itself, the weakened key wins.
  run setpriv --reuid="$AGENT" --regid="$AGENT" --clear-groups env HOME=/nonexistent GIT_CONFIG_GLOBAL=/dev/null \
    git -c safe.directory='*' -c core.hooksPath="$REAL" -C "$WS" commit -q -am weaken
  assert_success
}

@test "package.json as HEAD has it, or without hook keys on either side: node is not even started" {
  hook pre-commit 'echo ok'
  stub fake-node 'exit 1'
  chmod 0755 "$STUB_BIN" "$STUB_BIN/fake-node" "$TEST_TMP"
  chmod 0666 "$STUB_LOG"
  export AGENT_SANDBOX_NODE="$STUB_BIN/fake-node"
  dispatch pre-commit
  assert_success
  printf '{"name":"app","lint-staged":{"*.js":"false"},"version":"3"}' > "$WS/package.json"
  git -C "$WS" commit -q -am 'no keys changed'
  printf '{"name":"app"}' > "$WS/package.json"
  git -C "$WS" commit -q -am 'no keys at all'
  printf '{"name":"app","version":"4"}' > "$WS/package.json"
  dispatch pre-commit
  assert_success
  assert_output ok
  assert_equal "$(cat "$STUB_LOG")" ''
}

@test "a hook key HEAD does not have is removed for the hook's run (HEAD without package.json too)" {
  git -C "$WS" rm -q package.json
  git -C "$WS" commit -q -m 'no package.json'
  hook pre-commit 'cat package.json'
  printf '{"name":"app","commitlint":{"rules":{}}}' > "$WS/package.json"
  chown "$AGENT" "$WS/package.json"
  dispatch pre-commit
  assert_success
  assert_output '{
  "name": "app"
}'
  assert_equal "$(cat "$WS/package.json")" '{"name":"app","commitlint":{"rules":{}}}'
}

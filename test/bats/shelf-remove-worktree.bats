#!/usr/bin/env bats
# base-image/shelf-remove-worktree.sh on a real shelf made by provision-shelf.sh in a
# temp dir, with the real git and setpriv, run as root like the CLI runs it. The
# agent (uid/gid 4242) owns the host repository and does its work in the worktree.

load test_helper

bats_require_minimum_version 1.5.0

SCRIPT="$ROOT/base-image/shelf-remove-worktree.sh"
PROVISION="$ROOT/base-image/provision-shelf.sh"
AGENT=4242

setup() {
  common_setup
  [ "$(id -u)" = 0 ] || fail "these tests run the scripts' root-only steps, so they must run as root"
  chmod 0755 "$TEST_TMP"
  export GIT_AUTHOR_NAME=Tester GIT_AUTHOR_EMAIL=tester@example.com GIT_COMMITTER_NAME=Tester GIT_COMMITTER_EMAIL=tester@example.com
  export AGENT_SANDBOX_SHELF="$TEST_TMP/shelf"
  export AGENT_SANDBOX_WORKSPACE_ROOT="$TEST_TMP/workspace"
  export AGENT_SANDBOX_REAL_GIT=/usr/bin/git
  HOST="$AGENT_SANDBOX_WORKSPACE_ROOT/proj"
  # The host repository stands in for the push gate (git-gate.sh, not running here).
  export AGENT_SANDBOX_GATE_URL="file://$HOST"
  REPO="$AGENT_SANDBOX_SHELF/repo"
  WT="$AGENT_SANDBOX_SHELF/worktrees/feat"
  mkdir -p "$AGENT_SANDBOX_SHELF" "$HOST"
  git -C "$HOST" init -q -b main
  echo hello > "$HOST/README.md"
  git -C "$HOST" add README.md
  git -C "$HOST" commit -q -m initial
  chown -R "$AGENT:$AGENT" "$AGENT_SANDBOX_WORKSPACE_ROOT"
  "$PROVISION" proj feat feat '' /workspace/proj/.git/hooks "$AGENT" "$AGENT" >/dev/null 2>&1 || fail "provision-shelf.sh failed"
}

teardown() {
  common_teardown
}

sgit() { git -c safe.directory='*' -C "$REPO" "$@"; }
# agent CMD...: CMD as the agent uid in the worktree, like a process in the sandbox.
agent() { (cd "$WT" && setpriv --reuid="$AGENT" --regid="$AGENT" --clear-groups env HOME="$TEST_TMP/agent-home" "$@"); }
agit() { agent git -c safe.directory='*' "$@"; }

# remove [FORCE [BRANCH [DIR]]]
remove() { run --separate-stderr "$SCRIPT" "${2:-feat}" "${3:-feat}" "${1:-0}" "$AGENT" "$AGENT"; }

assert_removed() {
  assert_success
  assert_output 'worktree: removed'
  [ ! -e "$WT" ]
  assert_equal "$(sgit worktree list --porcelain | grep -c '^worktree ')" 1
  [ ! -e "$REPO/.git/worktrees/feat" ]
}

@test "an absent worktree: worktree: absent, exit 0" {
  remove 0 other other
  assert_success
  assert_output 'worktree: absent'
  [ -d "$WT" ]
}

@test "a clean worktree whose branch has no commits of its own: removed, the branch kept" {
  local sha
  sha="$(sgit rev-parse refs/heads/feat)"
  remove
  assert_removed
  assert_equal "$(sgit rev-parse refs/heads/feat)" "$sha"
}

@test "an untracked file: exit 3, lost: uncommitted, nothing removed" {
  agent sh -c 'echo draft > notes.txt'
  remove
  assert_failure 3
  assert_output 'lost: uncommitted ?? notes.txt'
  assert_equal "$(cat "$WT/notes.txt")" draft
}

@test "a modified tracked file: exit 3" {
  agent sh -c 'echo changed > README.md'
  remove
  assert_failure 3
  assert_output 'lost: uncommitted  M README.md'
  [ -d "$WT" ]
}

@test "an unpushed commit: exit 3 with its sha and subject" {
  agit commit -q --allow-empty -m 'agent work, not pushed'
  remove
  assert_failure 3
  assert_output "lost: unpushed $(sgit rev-parse --short refs/heads/feat) agent work, not pushed"
  [ -d "$WT" ]
}

@test "dirt and unpushed commits are all listed" {
  agit commit -q --allow-empty -m one
  agit commit -q --allow-empty -m two
  agent sh -c 'echo x > a.txt'
  remove
  assert_failure 3
  assert_output "lost: uncommitted ?? a.txt
lost: unpushed $(sgit rev-parse --short feat) two
lost: unpushed $(sgit rev-parse --short feat~1) one"
}

@test "a commit pushed to the host: removed, and the branch ref survives" {
  agit commit -q --allow-empty -m 'agent work'
  agit push -q host feat
  local sha
  sha="$(sgit rev-parse refs/heads/feat)"
  remove
  assert_removed
  assert_equal "$(sgit rev-parse refs/heads/feat)" "$sha"
  assert_equal "$(git -c safe.directory='*' -C "$HOST" rev-parse feat)" "$sha"
}

@test "a commit made on a detached HEAD is not lost silently" {
  agit checkout -q --detach
  agit commit -q --allow-empty -m 'detached work'
  remove
  assert_failure 3
  assert_output "lost: unpushed $(agit rev-parse --short HEAD) detached work"
  [ -d "$WT" ]
}

@test "a worktree git cannot read is refused, not removed" {
  agent sh -c 'echo draft > notes.txt'
  echo garbage > "$REPO/.git/worktrees/feat/index"
  remove
  assert_failure 1
  assert_output ''
  assert_equal "${stderr##*$'\n'}" "shelf-remove-worktree: cannot check $WT for uncommitted changes; use --force to remove it anyway"
  assert_equal "$(cat "$WT/notes.txt")" draft
}

@test "FORCE=1: removed despite dirt and unpushed commits; the branch keeps the commits" {
  agit commit -q --allow-empty -m 'unpushed but kept on the branch'
  agent sh -c 'echo draft > notes.txt'
  local sha
  sha="$(sgit rev-parse refs/heads/feat)"
  remove 1
  assert_removed
  assert_equal "$(sgit rev-parse refs/heads/feat)" "$sha"
  assert_equal "$(sgit log -1 --format=%s feat)" 'unpushed but kept on the branch'
}

@test "after removal, provisioning again restores the worktree from the kept branch" {
  agit commit -q --allow-empty -m 'kept'
  remove 1
  assert_success
  run "$PROVISION" proj feat feat '' /workspace/proj/.git/hooks "$AGENT" "$AGENT"
  assert_success
  assert_line 'shelf: source=local branch'
  assert_equal "$(git -c safe.directory='*' -C "$WT" log -1 --format=%s)" kept
}

@test "an unsafe worktree directory name or wrong argument count is refused" {
  remove 1 feat ../feat
  assert_failure 1
  assert_equal "$stderr" 'shelf-remove-worktree: unsafe worktree directory name: ../feat'
  run --separate-stderr "$SCRIPT" feat feat 1
  assert_failure 1
  assert_equal "$stderr" 'shelf-remove-worktree: usage: shelf-remove-worktree.sh BRANCH BRANCH_DIR FORCE UID GID'
  [ -d "$WT" ]
}

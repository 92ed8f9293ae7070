#!/usr/bin/env bats
# base-image/agent-git.sh with the real git, chown, chmod and setpriv, run as
# root (as the entrypoint runs it). The host's .git is a directory of its own
# (HOST_GIT, as mounted at /host-git); the work tree WS is shared, and WS/.git
# is an empty directory standing in for the sandbox's git volume. The agent is
# uid/gid 4242 and owns the host repository, as the workspace owner does.
# The script wants a user NAME with a group of the same name, so a throwaway
# one (agentbats) is made if uid 4242 has none.

load test_helper

bats_require_minimum_version 1.5.0

SCRIPT="$ROOT/base-image/agent-git.sh"
AGENT=4242
GATE=git://127.0.0.1:9418/ws

setup_file() {
  [ "$(id -u)" = 0 ] || return 0 # setup fails with the reason
  # Made once and kept: deleting it after the run would pull it from under a
  # concurrent run of this file. Creation tolerates such a run's making it first.
  if ! getent passwd "$AGENT" >/dev/null; then
    getent group "$AGENT" >/dev/null || groupadd -g "$AGENT" agentbats 2>/dev/null || true
    useradd -u "$AGENT" -g "$AGENT" -M -N -d /nonexistent -s /usr/sbin/nologin agentbats 2>/dev/null || true
  fi
  AGENT_NAME="$(getent passwd "$AGENT" | cut -d: -f1)"
  export AGENT_NAME
}

setup() {
  common_setup
  [ "$(id -u)" = 0 ] || fail "these tests run the script's root-only steps, so they must run as root"
  [ "$(getent group "$AGENT_NAME" | cut -d: -f3)" = "$AGENT" ] \
    || fail "uid $AGENT is $AGENT_NAME, which has no group of the same name with gid $AGENT"
  chmod 0755 "$TEST_TMP" # the agent uid must reach the work tree and the host's .git
  export GIT_AUTHOR_NAME=Tester GIT_AUTHOR_EMAIL=tester@example.com GIT_COMMITTER_NAME=Tester GIT_COMMITTER_EMAIL=tester@example.com
  # Never /etc/gitconfig.
  export AGENT_SANDBOX_SYSTEM_GITCONFIG="$TEST_TMP/system.gitconfig"
  export AGENT_SANDBOX_REAL_GIT=/usr/bin/git
  # The hooks go through the dispatcher (hook-dispatch.sh): its links are made here.
  DISPATCH="$TEST_TMP/dispatch"
  export AGENT_SANDBOX_HOOK_DISPATCH_DIR="$DISPATCH" AGENT_SANDBOX_HOOK_DISPATCHER="$ROOT/base-image/hook-dispatch.sh"
  # For root's own git on the fixtures, which belong to the agent.
  printf '[safe]\n\tdirectory = *\n' > "$HOME/.gitconfig"
  WS="$TEST_TMP/ws"
  HG="$TEST_TMP/host-git"
  GD="$WS/.git"
  MARK="$TEST_TMP/mark" # planted commands touch files here, so a file appears only if one ran
  mkdir -p "$MARK"
  chmod 0777 "$MARK"
  make_host
}

teardown() {
  common_teardown
}

# as_agent CMD...: CMD as the agent uid, like a process in the sandbox.
as_agent() { setpriv --reuid="$AGENT" --regid="$AGENT" --clear-groups env HOME="$TEST_TMP/agent-home" "$@"; }
# agit ARGS: the agent's git in the work tree, with the system config the script writes.
agit() { as_agent env GIT_CONFIG_SYSTEM="$AGENT_SANDBOX_SYSTEM_GITCONFIG" GIT_CONFIG_GLOBAL=/dev/null git -C "$WS" "$@"; }
# hgit ARGS: the user's git on the host (the host's .git, the shared work tree), as the workspace owner.
hgit() {
  setpriv --reuid="$AGENT" --regid="$AGENT" --clear-groups env HOME="$TEST_TMP/host-home" GIT_CONFIG_NOSYSTEM=1 \
    git -c core.fsmonitor=false -C "$WS" --git-dir="$HG" --work-tree="$WS" "$@"
}
# ggit ARGS: root's look at the agent's git directory.
ggit() { git -c core.fsmonitor=false --git-dir="$GD" "$@"; }
# refs_of GIT_DIR [PATTERN...]: "<sha> <ref>" lines.
refs_of() { git --git-dir="$1" for-each-ref --format='%(objectname) %(refname)' "${@:2}"; }
# write_file PATH CONTENT: a file in the shared work tree, the agent's (and the user's).
write_file() {
  mkdir -p "$(dirname "$WS/$1")"
  printf '%s\n' "$2" > "$WS/$1"
  chown "$AGENT:$AGENT" "$WS/$1"
}

# make_host: main (README.md, src/a.txt, tag v1) and feat (one more commit, an
# annotated tag v2, checked out), a remote origin with a remote-tracking ref,
# feat's upstream, and a refs/remotes/host/* of the host's own; then the .git
# moves out of the work tree and WS/.git is an empty directory.
make_host() {
  mkdir -p "$WS"
  git -C "$WS" init -q -b main
  write_file README.md hello
  write_file src/a.txt one
  git -C "$WS" add -A
  git -C "$WS" commit -q -m initial
  git -C "$WS" tag v1
  git -C "$WS" checkout -q -b feat
  write_file src/a.txt two
  git -C "$WS" commit -q -am 'feat work'
  git -C "$WS" tag -a -m annotated v2
  git -C "$WS" remote add origin https://example.invalid/proj.git
  git -C "$WS" update-ref refs/remotes/origin/main main
  git -C "$WS" update-ref refs/remotes/host/stale main
  git -C "$WS" config branch.feat.remote origin
  git -C "$WS" config branch.feat.merge refs/heads/feat
  mv "$WS/.git" "$HG"
  mkdir "$GD"
  chown -R "$AGENT:$AGENT" "$WS" "$HG"
}

# provision: the entrypoint's call.
provision() { run --separate-stderr bash "$SCRIPT" "$WS" "$HG" "$GATE" "$AGENT_NAME"; }

# host_commit FILE CONTENT MESSAGE: the user changes FILE and commits on the host's checked-out branch.
host_commit() {
  write_file "$1" "$2"
  hgit add -- "$1"
  hgit commit -q -m "$3"
}

assert_stderr_has() { [[ "$stderr" == *"$1"* ]] || fail "stderr lacks: $1"$'\n'"stderr: $stderr"; }

# ------------------------------------------------------------ arguments

@test "wrong argument count: usage errors, and nothing is written" {
  local args
  for args in '' "$WS" "$WS $HG $GATE" "$WS $HG $GATE $AGENT_NAME extra"; do
    # shellcheck disable=SC2086 # word splitting on purpose
    run --separate-stderr bash "$SCRIPT" $args
    assert_failure 1
    assert_equal "$stderr" 'agent-git: usage: agent-git.sh WORKTREE HOST_GIT GATE_URL USER'
  done
  for args in '' "$WS" "$WS $HG $GATE"; do
    # shellcheck disable=SC2086
    run --separate-stderr bash "$SCRIPT" --sync $args
    assert_failure 1
    assert_equal "$stderr" 'agent-git: usage: agent-git.sh --sync WORKTREE HOST_GIT'
  done
  assert_equal "$(ls -A "$GD")" ''
}

@test "no git volume at WORKTREE/.git (missing, or a symlink): refused" {
  rmdir "$GD"
  provision
  assert_failure 1
  assert_equal "$stderr" "agent-git: $GD is not a directory (the sandbox's git volume is not mounted)"
  [ ! -e "$GD" ]
  # A symlink to a real directory would let the agent's git directory live elsewhere.
  mkdir "$TEST_TMP/elsewhere"
  ln -s "$TEST_TMP/elsewhere" "$GD"
  provision
  assert_failure 1
  assert_equal "$stderr" "agent-git: $GD is not a directory (the sandbox's git volume is not mounted)"
  assert_equal "$(ls -A "$TEST_TMP/elsewhere")" ''
}

@test "HOST_GIT that is not a git directory: refused, and nothing is written" {
  run --separate-stderr bash "$SCRIPT" "$WS" "$TEST_TMP/nope" "$GATE" "$AGENT_NAME"
  assert_failure 1
  assert_equal "$stderr" "agent-git: $TEST_TMP/nope is not a git directory"
  mkdir "$TEST_TMP/not-git"
  run --separate-stderr bash "$SCRIPT" "$WS" "$TEST_TMP/not-git" "$GATE" "$AGENT_NAME"
  assert_failure 1
  assert_equal "$stderr" "agent-git: $TEST_TMP/not-git is not a git directory"
  assert_equal "$(ls -A "$GD")" ''
}

# ------------------------------------------------------------ first run

@test "first run: objects through alternates, the host's branches, tags and remote-tracking refs, its HEAD" {
  provision
  assert_success
  assert_equal "$stderr" ''
  assert_equal "$(cat "$GD/objects/info/alternates")" "$HG/objects"
  # Nothing copied: every object comes from the host's store.
  assert_equal "$(find "$GD/objects" -type f ! -path "$GD/objects/info/*")" ''
  run ggit fsck --no-progress --connectivity-only
  assert_success
  local main feat
  main="$(hgit rev-parse main)" feat="$(hgit rev-parse feat)"
  # The host's own refs/remotes/host/stale is not copied: refs/remotes/host/* are the host's branches.
  assert_equal "$(refs_of "$GD")" "$feat refs/heads/feat
$main refs/heads/main
$feat refs/remotes/host/feat
$main refs/remotes/host/main
$main refs/remotes/origin/main
$main refs/tags/v1
$(hgit rev-parse refs/tags/v2) refs/tags/v2"
  assert_equal "$(ggit cat-file -t refs/tags/v2)" tag
  assert_equal "$(ggit symbolic-ref HEAD)" refs/heads/feat
  [ -e "$GD/agent-sandbox-provisioned" ]
  [ -e "$GD/agent-sandbox-synced" ]
}

@test "first run: a detached host HEAD is detached for the agent too" {
  hgit checkout -q --detach main
  provision
  assert_success
  run ggit symbolic-ref -q HEAD
  assert_failure
  assert_equal "$(ggit rev-parse HEAD)" "$(hgit rev-parse main)"
}

@test "first run: the host's index is copied, so the agent's git status is clean at once and shows what the user staged" {
  write_file staged.txt 'staged by the user'
  hgit add staged.txt
  provision
  assert_success
  cmp "$HG/index" "$GD/index"
  run agit status --porcelain
  assert_success
  assert_output 'A  staged.txt'
  assert_equal "$(agit diff --cached --name-only)" staged.txt
}

@test "first run: the system config names WORKTREE safe; without it the agent's git refuses the root-owned .git" {
  provision
  assert_success
  assert_equal "$(git config --file "$AGENT_SANDBOX_SYSTEM_GITCONFIG" --get-all safe.directory)" "$WS"
  # Control: the same git without that system config.
  run as_agent env GIT_CONFIG_SYSTEM=/dev/null GIT_CONFIG_GLOBAL=/dev/null git -C "$WS" status --porcelain
  assert_failure
  assert_output --partial 'dubious ownership'
  run agit status --porcelain
  assert_success
  assert_output ''
}

@test "first run: remotes' URLs and fetch refspecs and branches' upstreams are copied, nothing else from the host's config" {
  local cfg="$HG/config"
  git config --file "$cfg" remote.origin.pushurl ssh://example.invalid/proj.git
  git config --file "$cfg" remote.origin.uploadpack "touch $MARK/uploadpack; :"
  git config --file "$cfg" remote.host.url /host/s/own/remote
  git config --file "$cfg" branch.feat.rebase true
  git config --file "$cfg" core.fsmonitor "touch $MARK/fsmonitor; :"
  git config --file "$cfg" core.editor "touch $MARK/editor; :"
  git config --file "$cfg" core.pager "touch $MARK/pager; :"
  git config --file "$cfg" alias.st status
  git config --file "$cfg" user.name 'Host User'
  printf '[core]\n\tsshCommand = touch %s/ssh\n' "$MARK" > "$HG/included.cfg"
  git config --file "$cfg" include.path "$HG/included.cfg"
  chown -R "$AGENT:$AGENT" "$HG"
  provision
  assert_success
  local own="$GD/config"
  assert_equal "$(git config --file "$own" --get-regexp '^(remote|branch)\.')" "remote.origin.url https://example.invalid/proj.git
remote.origin.fetch +refs/heads/*:refs/remotes/origin/*
remote.origin.pushurl ssh://example.invalid/proj.git
branch.feat.remote origin
branch.feat.merge refs/heads/feat
branch.feat.rebase true
remote.host.url $GATE
remote.host.fetch +refs/heads/*:refs/remotes/host/*"
  local key
  for key in core.fsmonitor core.editor core.pager core.sshCommand alias.st user.name include.path remote.origin.uploadpack; do
    run git config --file "$own" --get "$key"
    assert_failure 1
  done
  # The agent's git, with its pinned file, runs none of them either.
  run agit status --porcelain
  assert_success
  assert_equal "$(ls -A "$MARK")" ''
}

# ------------------------------------------------------------ the pinned config

@test "pinned: config.worktree is root's 0644 with the pinned keys, .git is root:agent 1775, worktreeConfig is on" {
  provision
  assert_success
  assert_equal "$(stat -c '%U:%G %a' "$GD/config.worktree")" 'root:root 644'
  assert_equal "$(stat -c '%U:%g %a' "$GD")" "root:$AGENT 1775"
  assert_equal "$(git config --file "$GD/config.worktree" --list)" "core.hookspath=$DISPATCH
core.fsmonitor=false
core.sshcommand=ssh
core.pager=less
agent-sandbox.hooksdir=$HG/hooks
agent-sandbox.pinned=true"
  assert_equal "$(git config --file "$GD/config" --get extensions.worktreeConfig)" true
  assert_equal "$(git config --file "$GD/config" --get core.repositoryformatversion)" 1
  # Everything else in .git but the config stays the agent's.
  assert_equal "$(find "$GD" -mindepth 1 ! -user "$AGENT" ! -path "$GD/config.worktree" ! -path "$GD/config")" ''
}

@test "pinned: the agent cannot change, move, delete or replace config.worktree (the sticky bit is what stops a replacement)" {
  provision
  assert_success
  local before
  before="$(cat "$GD/config.worktree")"
  run as_agent sh -c "echo '[core] hooksPath = /tmp/evil' >> '$GD/config.worktree'"
  assert_failure
  run as_agent mv "$GD/config.worktree" "$GD/config.worktree.old"
  assert_failure
  run as_agent rm -f "$GD/config.worktree"
  assert_failure
  as_agent sh -c "printf '[core]\n\thooksPath = /tmp/evil\n' > '$GD/evil.cfg'"
  run as_agent mv -f "$GD/evil.cfg" "$GD/config.worktree"
  assert_failure
  run agit config --worktree core.hooksPath /tmp/evil
  assert_failure
  assert_equal "$(cat "$GD/config.worktree")" "$before"
  assert_equal "$(stat -c '%U' "$GD/config.worktree")" root
  # Control: without the sticky bit the same replacement works.
  chmod 0775 "$GD"
  run as_agent mv -f "$GD/evil.cfg" "$GD/config.worktree"
  assert_success
  assert_equal "$(git config --file "$GD/config.worktree" --get core.hooksPath)" /tmp/evil
}

@test "pinned: the agent can still stage, commit and make branches, and the host's .git is untouched" {
  provision
  assert_success
  local host_refs
  host_refs="$(refs_of "$HG")"
  write_file agent.txt 'by the agent'
  run agit add agent.txt
  assert_success
  run agit commit -q -m 'agent commit'
  assert_success
  run agit branch agent-branch
  assert_success
  assert_equal "$(ggit log -1 --format=%s feat)" 'agent commit'
  assert_equal "$(ggit rev-parse agent-branch)" "$(ggit rev-parse feat)"
  assert_equal "$(refs_of "$HG")" "$host_refs"
  run hgit cat-file -e "$(ggit rev-parse feat)"
  assert_failure
}

@test "pinned: the agent's own core.hooksPath and core.fsmonitor lose to the pinned ones" {
  mkdir -p "$MARK/evil-hooks"
  printf '#!/bin/sh\ntouch %s/evil-hook\n' "$MARK" > "$MARK/evil-hooks/pre-commit"
  printf '#!/bin/sh\ntouch %s/host-hook\n' "$MARK" > "$HG/hooks/pre-commit"
  chmod 0755 "$MARK/evil-hooks/pre-commit" "$HG/hooks/pre-commit"
  # Control: in a repository of the agent's without a pinned file, both settings take effect.
  local scratch="$TEST_TMP/scratch"
  mkdir "$scratch"
  chown "$AGENT:$AGENT" "$scratch"
  as_agent git init -q "$scratch"
  as_agent git -C "$scratch" config core.hooksPath "$MARK/evil-hooks"
  as_agent git -C "$scratch" config core.fsmonitor "touch $MARK/evil-fsmonitor; :"
  as_agent git -C "$scratch" status --porcelain
  as_agent git -C "$scratch" commit -q --allow-empty -m x
  assert_equal "$(ls "$MARK")" 'evil-fsmonitor
evil-hook
evil-hooks'
  rm -f "$MARK/evil-fsmonitor" "$MARK/evil-hook"

  provision
  assert_success
  # Judged by the outcome: whether these writes succeed is not the point.
  run agit config core.hooksPath "$MARK/evil-hooks"
  run agit config core.fsmonitor "touch $MARK/evil-fsmonitor; :"
  assert_success
  assert_equal "$(agit config --get core.hooksPath)" "$DISPATCH"
  assert_equal "$(agit config --get core.fsmonitor)" false
  run agit status --porcelain
  assert_success
  run agit commit -q --allow-empty -m 'agent commit'
  assert_success
  assert_equal "$(ls "$MARK")" 'evil-hooks
host-hook'
}

@test "pinned (a guardrail): switched off by hand in the agent's own config, it is back before the agent's next command" {
  provision
  assert_success
  mkdir -p "$MARK/evil-hooks"
  printf '#!/bin/sh\ntouch %s/evil-hook\n' "$MARK" > "$MARK/evil-hooks/pre-commit"
  chmod 0755 "$MARK/evil-hooks/pre-commit"
  # Control: a plain write to the agent's own config (no wrapper sees it) switches the pinned file off.
  as_agent sh -c "printf '[extensions]\\n\\tworktreeConfig = false\\n[core]\\n\\thooksPath = %s\\n' '$MARK/evil-hooks' >> '$GD/config'"
  assert_equal "$(agit config --get core.hooksPath)" "$MARK/evil-hooks"
  # The agent's next command goes through sandbox-exec, which switches it back on first.
  mkdir -p "$TEST_TMP/state"
  : > "$TEST_TMP/state/ready"
  run --separate-stderr as_agent env AGENT_SANDBOX_STATE_DIR="$TEST_TMP/state" AGENT_SANDBOX_HOST_GIT="$HG" AGENT_SANDBOX_GIT_WORKTREE="$WS" \
    AGENT_SANDBOX_AGENT_GIT_SCRIPT=/bin/true GIT_CONFIG_SYSTEM="$AGENT_SANDBOX_SYSTEM_GITCONFIG" GIT_CONFIG_GLOBAL=/dev/null \
    "$ROOT/base-image/sandbox-exec.sh" git -C "$WS" commit -q --allow-empty -m 'agent commit'
  assert_success
  [[ "$stderr" == *"extensions.worktreeConfig was turned off"* ]] || fail "no notice on stderr: $stderr"
  [ ! -e "$MARK/evil-hook" ] || fail "the agent's core.hooksPath ran its hook: the pinned keys did not win"
  assert_equal "$(agit config --get core.hooksPath)" "$DISPATCH"
}

@test "a second run pins again what the agent changed in its config, and names WORKTREE safe once" {
  provision
  assert_success
  # Judged by the outcome: whether these writes succeed is not the point.
  run agit config extensions.worktreeConfig false
  run agit remote set-url host https://example.invalid/elsewhere.git
  run agit config --add remote.host.fetch '+refs/heads/*:refs/heads/*'
  provision
  assert_success
  assert_equal "$(git config --file "$GD/config" --get extensions.worktreeConfig)" true
  assert_equal "$(git config --file "$GD/config" --get-all remote.host.url)" "$GATE"
  assert_equal "$(git config --file "$GD/config" --get-all remote.host.fetch)" '+refs/heads/*:refs/remotes/host/*'
  assert_equal "$(git config --file "$AGENT_SANDBOX_SYSTEM_GITCONFIG" --get-all safe.directory)" "$WS"
  assert_equal "$(agit config --get core.hooksPath)" "$DISPATCH"
}

@test "hooks: root's dispatcher directory links the gating hooks and every hook the real directory has, nothing else" {
  printf '#!/bin/sh\nexit 0\n' > "$HG/hooks/reference-transaction"
  printf '#!/bin/sh\nexit 0\n' > "$HG/hooks/post-checkout"
  printf '#!/bin/sh\nexit 0\n' > "$HG/hooks/not-executable"
  chmod 0755 "$HG/hooks/reference-transaction" "$HG/hooks/post-checkout"
  provision
  assert_success
  assert_equal "$(stat -c '%U:%G %a' "$DISPATCH")" 'root:root 755'
  assert_equal "$(find "$DISPATCH" -mindepth 1 -type l -printf '%f\n' | sort | tr '\n' ' ')" \
    'applypatch-msg commit-msg post-checkout pre-applypatch pre-commit pre-merge-commit pre-push pre-rebase prepare-commit-msg reference-transaction '
  assert_equal "$(readlink "$DISPATCH/pre-commit")" "$AGENT_SANDBOX_HOOK_DISPATCHER"
  assert_equal "$(cat "$DISPATCH/.hooks-dir")" "$HG/hooks"
  assert_equal "$(stat -c '%U %a' "$DISPATCH/.hooks-dir")" 'root 644'
  [ ! -e "$DISPATCH/.protect-off" ]
  run as_agent touch "$DISPATCH/post-commit"
  assert_failure
  # A hook the real directory lost is gone from the links at the next start; protectHookConfig false is marked.
  rm "$HG/hooks/reference-transaction"
  AGENT_SANDBOX_PROTECT_HOOK_CONFIG=0 provision
  assert_success
  [ ! -e "$DISPATCH/reference-transaction" ]
  [ -e "$DISPATCH/.protect-off" ]
}

@test "core.hooksPath: unset, relative, ./relative, absolute inside and outside the workspace" {
  provision
  assert_success
  assert_equal "$(git config --file "$GD/config.worktree" --get agent-sandbox.hooksDir)" "$HG/hooks"
  local value want
  while IFS='|' read -r value want; do
    git config --file "$HG/config" core.hooksPath "$value"
    provision
    assert_success
    assert_equal "$stderr" ''
    assert_equal "$(git config --file "$GD/config.worktree" --get agent-sandbox.hooksDir)" "$want"
    assert_equal "$(agit config --get core.hooksPath)" "$DISPATCH"
    assert_equal "$(cat "$DISPATCH/.hooks-dir")" "$want"
  done <<EOF
.husky|$WS/.husky
./.husky|$WS/.husky
tools/git-hooks|$WS/tools/git-hooks
$WS/.githooks|$WS/.githooks
EOF
  git config --file "$HG/config" core.hooksPath /opt/hooks
  provision
  assert_success
  assert_equal "$stderr" "agent-git: warning: core.hooksPath /opt/hooks is outside the workspace; using the host's .git/hooks"
  assert_equal "$(git config --file "$GD/config.worktree" --get agent-sandbox.hooksDir)" "$HG/hooks"
  # A sibling whose name starts with the workspace's is outside it too.
  git config --file "$HG/config" core.hooksPath "$WS-other/hooks"
  provision
  assert_success
  assert_stderr_has "core.hooksPath $WS-other/hooks is outside the workspace"
  assert_equal "$(git config --file "$GD/config.worktree" --get agent-sandbox.hooksDir)" "$HG/hooks"
}

# ------------------------------------------------------------ crashed and repeated runs

@test "a half-made git directory (HEAD but no marker) is made again, with a warning" {
  printf 'ref: refs/heads/junk\n' > "$GD/HEAD"
  mkdir -p "$GD/refs/heads"
  echo 0123456789012345678901234567890123456789 > "$GD/refs/heads/junk"
  echo leftover > "$GD/leftover"
  provision
  assert_success
  assert_equal "$stderr" "agent-git: warning: the sandbox's git directory was left half-made; making it again"
  [ ! -e "$GD/leftover" ]
  run ggit rev-parse -q --verify refs/heads/junk
  assert_failure
  assert_equal "$(ggit symbolic-ref HEAD)" refs/heads/feat
  assert_equal "$(ggit rev-parse feat)" "$(hgit rev-parse feat)"
  [ -e "$GD/agent-sandbox-provisioned" ]
}

@test "a second run keeps the agent's git directory (no re-provisioning)" {
  provision
  assert_success
  write_file agent.txt 'by the agent'
  agit add agent.txt
  agit commit -q -m 'agent commit'
  agit tag agent-tag
  provision
  assert_success
  assert_equal "$stderr" ''
  assert_equal "$(ggit log -1 --format=%s feat)" 'agent commit'
  run ggit rev-parse -q --verify refs/tags/agent-tag
  assert_success
}

@test "a second run after the user committed on the checked-out branch: the agent's branch and index follow" {
  provision
  assert_success
  host_commit src/a.txt three 'host commit'
  write_file src/b.txt new
  hgit add src/b.txt
  hgit commit -q -m 'host adds b'
  # Control: the agent's git does not know the host's commits yet.
  run agit status --porcelain
  assert_output ' M src/a.txt
?? src/b.txt'
  provision
  assert_success
  assert_equal "$stderr" ''
  assert_equal "$(ggit rev-parse feat)" "$(hgit rev-parse feat)"
  assert_equal "$(ggit rev-parse refs/remotes/host/feat)" "$(hgit rev-parse feat)"
  run agit status --porcelain
  assert_success
  assert_output ''
  assert_equal "$(cat "$WS/src/a.txt")" three
}

@test "a second run: a branch the host moved that is not checked out is fast-forwarded, the index untouched" {
  provision
  assert_success
  local index_before
  index_before="$(agit ls-files -s)"
  hgit branch -q side main
  hgit update-ref refs/heads/main "$(hgit commit-tree -p main -m 'host on main' 'main^{tree}')"
  provision
  assert_success
  assert_equal "$(ggit rev-parse main)" "$(hgit rev-parse main)"
  assert_equal "$(ggit log -1 --format=%s main)" 'host on main'
  assert_equal "$(agit ls-files -s)" "$index_before"
  # A new host branch: a remote-tracking ref, no local branch.
  assert_equal "$(ggit rev-parse refs/remotes/host/side)" "$(hgit rev-parse side)"
  run ggit rev-parse -q --verify refs/heads/side
  assert_failure
}

@test "a second run never moves a branch where the agent has commits of its own (diverged)" {
  provision
  assert_success
  write_file agent.txt 'by the agent'
  agit add agent.txt
  agit commit -q -m 'agent commit'
  local mine
  mine="$(ggit rev-parse feat)"
  host_commit host.txt 'by the user' 'host commit'
  provision
  assert_success
  assert_equal "$(ggit rev-parse feat)" "$mine"
  assert_equal "$(ggit log -1 --format=%s feat)" 'agent commit'
  assert_equal "$(ggit rev-parse refs/remotes/host/feat)" "$(hgit rev-parse feat)"
  assert_equal "$(agit ls-files agent.txt host.txt)" agent.txt
}

@test "a second run: a staged change of the agent's that conflicts keeps the branch, with a warning" {
  provision
  assert_success
  local mine
  mine="$(ggit rev-parse feat)"
  write_file src/a.txt 'staged by the agent'
  agit add src/a.txt
  host_commit src/a.txt 'committed by the user' 'host commit'
  provision
  assert_success
  assert_equal "$stderr" "agent-git: warning: the index could not follow feat to the host's commit; left at ${mine:0:12}"
  assert_equal "$(ggit rev-parse feat)" "$mine"
  assert_equal "$(ggit rev-parse refs/remotes/host/feat)" "$(hgit rev-parse feat)"
  assert_equal "$(agit show :src/a.txt)" 'staged by the agent'
}

# ------------------------------------------------------------ --sync

@test "--sync, as the agent: fast-forwards and touches the stamp, pins nothing" {
  provision
  assert_success
  touch -d '2001-01-01 00:00:00' "$GD/agent-sandbox-synced"
  local pinned_before
  pinned_before="$(stat -c '%i %Y' "$GD/config.worktree")"
  host_commit src/a.txt three 'host commit'
  git config --file "$HG/config" core.hooksPath .husky
  run --separate-stderr as_agent bash "$SCRIPT" --sync "$WS" "$HG"
  assert_success
  assert_equal "$stderr" ''
  assert_equal "$(ggit rev-parse feat)" "$(hgit rev-parse feat)"
  run agit status --porcelain
  assert_output ''
  [ "$(stat -c %Y "$GD/agent-sandbox-synced")" -gt "$(date -d '2001-01-02' +%s)" ]
  assert_equal "$(stat -c '%i %Y' "$GD/config.worktree")" "$pinned_before"
  assert_equal "$(git config --file "$GD/config.worktree" --get agent-sandbox.hooksDir)" "$HG/hooks"
}

@test "--sync before the first run: refused, nothing written" {
  run --separate-stderr as_agent bash "$SCRIPT" --sync "$WS" "$HG"
  assert_failure 1
  assert_equal "$stderr" "agent-git: $GD is not provisioned yet"
  assert_equal "$(ls -A "$GD")" ''
}

@test "--sync never moves a diverged branch" {
  provision
  assert_success
  agit commit -q --allow-empty -m 'agent commit'
  local mine
  mine="$(ggit rev-parse feat)"
  host_commit host.txt 'by the user' 'host commit'
  run --separate-stderr as_agent bash "$SCRIPT" --sync "$WS" "$HG"
  assert_success
  assert_equal "$(ggit rev-parse feat)" "$mine"
  assert_equal "$(ggit rev-parse refs/remotes/host/feat)" "$(hgit rev-parse feat)"
}

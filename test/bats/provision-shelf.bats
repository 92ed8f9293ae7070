#!/usr/bin/env bats
# base-image/provision-shelf.sh with the real git, chown, chmod and setpriv, run
# as root (as the CLI runs it) on a shelf and a host repository in a temp dir.
# The agent is uid/gid 4242, which also owns the host repository, as the
# workspace owner does in real use.

load test_helper

bats_require_minimum_version 1.5.0

SCRIPT="$ROOT/base-image/provision-shelf.sh"
AGENT=4242
HOOKS=/workspace/proj/.husky

setup() {
  common_setup
  [ "$(id -u)" = 0 ] || fail "these tests run the script's root-only steps, so they must run as root"
  chmod 0755 "$TEST_TMP" # the agent uid must reach the shelf and the host repository
  export GIT_AUTHOR_NAME=Tester GIT_AUTHOR_EMAIL=tester@example.com GIT_COMMITTER_NAME=Tester GIT_COMMITTER_EMAIL=tester@example.com
  export AGENT_SANDBOX_SHELF="$TEST_TMP/shelf"
  export AGENT_SANDBOX_WORKSPACE_ROOT="$TEST_TMP/workspace"
  export AGENT_SANDBOX_REAL_GIT=/usr/bin/git
  export AGENT_SANDBOX_FETCH_TIMEOUT=20
  mkdir -p "$AGENT_SANDBOX_SHELF" # a fresh volume: empty and root's
  # For root's own git on the fixtures, which belong to the agent (the script brings its own).
  printf '[safe]\n\tdirectory = *\n' > "$HOME/.gitconfig"
  HOST="$AGENT_SANDBOX_WORKSPACE_ROOT/proj"
  # The remote `host` is the sandbox's push gate (git-gate.sh, not running here):
  # the host repository itself stands in for it, so that pushes land there.
  export AGENT_SANDBOX_GATE_URL="file://$HOST"
  REPO="$AGENT_SANDBOX_SHELF/repo"
  WT="$AGENT_SANDBOX_SHELF/worktrees"
  make_host main
}

teardown() {
  common_teardown
}

# hgit/sgit ARGS: root's git in the host repository / the shelf repository (both someone else's).
hgit() { git -c safe.directory='*' -C "$HOST" "$@"; }
sgit() { git -c safe.directory='*' -C "$REPO" "$@"; }
# as_agent CMD...: CMD as the agent uid, like a process in the sandbox.
as_agent() { setpriv --reuid="$AGENT" --regid="$AGENT" --clear-groups env HOME="$TEST_TMP/agent-home" "$@"; }

# make_host DEFAULT: the host repository, one commit on DEFAULT, owned by the agent.
make_host() {
  rm -rf "$HOST"
  mkdir -p "$HOST"
  git -C "$HOST" init -q -b "$1"
  echo hello > "$HOST/README.md"
  git -C "$HOST" add README.md
  git -C "$HOST" commit -q -m "initial on $1"
  chown -R "$AGENT:$AGENT" "$AGENT_SANDBOX_WORKSPACE_ROOT"
}

# host_commit BRANCH MESSAGE: one more commit on BRANCH (created from HEAD if new) in the host.
host_commit() {
  hgit show-ref --verify --quiet "refs/heads/$1" || hgit branch "$1"
  local cur
  cur="$(hgit symbolic-ref --short HEAD)"
  hgit checkout -q "$1"
  hgit commit -q --allow-empty -m "$2"
  hgit checkout -q "$cur"
  chown -R "$AGENT:$AGENT" "$HOST"
}

# provision BRANCH [DIR [ORIGIN [HOOKS]]]
provision() {
  local dir="$1"
  [ "$#" -lt 2 ] || dir="$2"
  run --separate-stderr "$SCRIPT" proj "$1" "$dir" "${3:-}" "${4:-$HOOKS}" "$AGENT" "$AGENT"
}

# The three result lines for a successful run.
assert_result() { # assert_result DIR SOURCE ORIGIN
  assert_success
  assert_output "shelf: worktree=$WT/$1
shelf: source=$2
shelf: origin=$3"
}

assert_stderr_has() { [[ "$stderr" == *"$1"* ]] || fail "stderr lacks: $1"$'\n'"stderr: $stderr"; }

# A bare origin made from the host, plus a branch that only it has.
make_origin() {
  ORIGIN="$TEST_TMP/origin.git"
  git -c safe.directory='*' clone -q --bare "$HOST" "$ORIGIN"
  git -C "$ORIGIN" branch only-on-origin main
  local clone="$TEST_TMP/origin-clone"
  git clone -q "$ORIGIN" "$clone"
  git -C "$clone" checkout -q only-on-origin
  git -C "$clone" commit -q --allow-empty -m 'origin work'
  git -C "$clone" push -q origin only-on-origin
  rm -rf "$clone"
}

@test "first run: a non-bare repo without checkout, remote host, a new branch from main in its worktree" {
  provision feat
  assert_result feat 'new from host/main' none
  assert_equal "$(sgit rev-parse --is-bare-repository)" false
  assert_equal "$(ls -A "$REPO")" .git
  assert_equal "$(sgit remote)" host
  assert_equal "$(sgit remote get-url host)" "$AGENT_SANDBOX_GATE_URL"
  assert_equal "$(git -c safe.directory='*' -C "$WT/feat" symbolic-ref --short HEAD)" feat
  assert_equal "$(sgit rev-parse refs/heads/feat)" "$(hgit rev-parse main)"
  # --no-track: the new branch does not follow main
  run sgit config --get branch.feat.merge
  assert_failure
  assert_equal "$(cat "$WT/feat/README.md")" hello
  # The agent owns its worktrees and the files in them; the shelf and repo
  # directories are root's and sticky (group-writable for the agent), so that
  # the repository cannot be moved aside and replaced.
  assert_equal "$(stat -c %u:%g "$WT" "$WT/feat" "$WT/feat/README.md" | sort -u)" "$AGENT:$AGENT"
  assert_equal "$(stat -c '%U:%g %a' "$AGENT_SANDBOX_SHELF" "$AGENT_SANDBOX_SHELF/repo" | sort -u)" "root:$AGENT 1775"
}

@test "the agent cannot move the shelf repository or its .git aside" {
  provision feat
  assert_success
  run setpriv --reuid="$AGENT" --regid="$AGENT" --clear-groups mv "$AGENT_SANDBOX_SHELF/repo/.git" "$AGENT_SANDBOX_SHELF/repo/.git-old"
  assert_failure
  run setpriv --reuid="$AGENT" --regid="$AGENT" --clear-groups mv "$AGENT_SANDBOX_SHELF/repo" "$AGENT_SANDBOX_SHELF/repo-old"
  assert_failure
  run setpriv --reuid="$AGENT" --regid="$AGENT" --clear-groups sh -c "echo x >> '$AGENT_SANDBOX_SHELF/repo/.git/config'"
  assert_failure
  [ -d "$AGENT_SANDBOX_SHELF/repo/.git" ]
}

@test "the remote host is the push gate by default; provisioning reads the host repository at its file:// path" {
  unset AGENT_SANDBOX_GATE_URL
  provision feat
  assert_result feat 'new from host/main' none
  assert_equal "$(sgit remote get-url host)" git://127.0.0.1:19418/ws/.git
  assert_equal "$(sgit config --get-all remote.host.fetch)" '+refs/heads/*:refs/remotes/host/*'
  assert_equal "$(sgit rev-parse refs/remotes/host/main)" "$(hgit rev-parse main)"
  # A second run (the gate is not there for provisioning) still fetches from the host.
  host_commit main 'second on main'
  provision feat
  assert_equal "$(sgit rev-parse refs/remotes/host/main)" "$(hgit rev-parse main)"
}

@test "first run: a host repository owned by someone else than the agent (a root-owned workspace)" {
  chown -R 0:0 "$HOST"
  provision feat
  assert_result feat 'new from host/main' none
  assert_equal "$(sgit rev-parse refs/heads/feat)" "$(hgit rev-parse main)"
}

@test "first run: a host whose default branch is master" {
  make_host master
  provision feat
  assert_result feat 'new from host/master' none
  assert_equal "$(sgit rev-parse refs/heads/feat)" "$(hgit rev-parse master)"
}

@test "first run: a host checked out on a feature branch still starts new branches from main" {
  host_commit wip 'work in progress'
  hgit checkout -q wip
  provision feat
  assert_result feat 'new from host/main' none
  assert_equal "$(sgit rev-parse refs/heads/feat)" "$(hgit rev-parse main)"
}

@test "first run: a host with neither main nor master starts from its HEAD" {
  make_host trunk
  provision feat
  assert_result feat 'new from host/trunk' none
}

@test "first run: a host without commits is refused" {
  rm -rf "$HOST"
  mkdir -p "$HOST"
  git -C "$HOST" init -q -b main
  chown -R "$AGENT:$AGENT" "$HOST"
  provision feat
  assert_failure 1
  assert_stderr_has 'provision-shelf: cannot find a default branch to start feat from'
  [ ! -e "$WT/feat" ]
}

@test "an existing host branch: source=host/<branch>" {
  host_commit feature/login 'login form'
  provision feature/login feature-login
  assert_result feature-login 'host/feature/login' none
  assert_equal "$(sgit rev-parse refs/heads/feature/login)" "$(hgit rev-parse feature/login)"
  assert_equal "$(git -c safe.directory='*' -C "$WT/feature-login" log -1 --format=%s)" 'login form'
}

@test "a reachable local origin: remotes origin and host, a branch only on origin comes from origin" {
  make_origin
  provision only-on-origin only-on-origin "$ORIGIN"
  assert_result only-on-origin 'origin/only-on-origin' reachable
  assert_equal "$(sgit remote | sort | tr '\n' ' ')" 'host origin '
  assert_equal "$(sgit remote get-url origin)" "$ORIGIN"
  assert_equal "$(sgit rev-parse refs/heads/only-on-origin)" "$(git -C "$ORIGIN" rev-parse only-on-origin)"
  assert_equal "$(git -c safe.directory='*' -C "$WT/only-on-origin" log -1 --format=%s)" 'origin work'
}

@test "a reachable origin: a new branch starts from origin's default branch" {
  make_origin
  git -C "$ORIGIN" symbolic-ref HEAD refs/heads/only-on-origin
  provision feat feat "$ORIGIN"
  assert_result feat 'new from origin/only-on-origin' reachable
}

@test "an unreachable origin: a warning, origin=unreachable, provisioned from the host" {
  provision feat feat http://127.0.0.1:9/x.git
  assert_result feat 'new from host/main' unreachable
  assert_stderr_has 'provision-shelf: warning: origin (http://127.0.0.1:9/x.git) cannot be reached; provisioning from the host repository'
  assert_equal "$(sgit remote get-url origin)" http://127.0.0.1:9/x.git
  assert_equal "$(sgit rev-parse refs/heads/feat)" "$(hgit rev-parse main)"
}

@test "a second run: source=existing, and the agent's work is untouched" {
  provision feat
  assert_success
  echo draft > "$WT/feat/draft.txt"
  as_agent git -c safe.directory='*' -C "$WT/feat" commit -q --allow-empty -m 'agent commit'
  host_commit main 'host moved on'
  before="$(sgit for-each-ref --format='%(refname) %(objectname)' refs/heads; sgit worktree list --porcelain)"
  provision feat
  assert_result feat existing none
  after="$(sgit for-each-ref --format='%(refname) %(objectname)' refs/heads; sgit worktree list --porcelain)"
  assert_equal "$after" "$before"
  assert_equal "$(cat "$WT/feat/draft.txt")" draft
  assert_equal "$(git -c safe.directory='*' -C "$WT/feat" log -1 --format=%s)" 'agent commit'
  # ...while the host remote did get fetched.
  assert_equal "$(sgit rev-parse refs/remotes/host/main)" "$(hgit rev-parse main)"
}

@test "a second run drops an origin the host no longer has" {
  make_origin
  provision feat feat "$ORIGIN"
  assert_success
  provision feat
  assert_result feat existing none
  assert_equal "$(sgit remote)" host
}

@test "a crashed first run: a leftover .repo.tmp is replaced" {
  mkdir -p "$AGENT_SANDBOX_SHELF/.repo.tmp/.git"
  echo junk > "$AGENT_SANDBOX_SHELF/.repo.tmp/.git/config"
  provision feat
  assert_result feat 'new from host/main' none
  [ ! -e "$AGENT_SANDBOX_SHELF/.repo.tmp" ]
  assert_equal "$(sgit remote)" host
}

@test "a crashed run: a registered worktree whose directory is gone is re-created from the local branch" {
  provision feat
  assert_success
  as_agent git -c safe.directory='*' -C "$WT/feat" commit -q --allow-empty -m 'kept on the branch'
  rm -rf "$WT/feat"
  provision feat
  assert_result feat 'local branch' none
  assert_equal "$(git -c safe.directory='*' -C "$WT/feat" log -1 --format=%s)" 'kept on the branch'
  assert_equal "$(sgit worktree list --porcelain | grep -c '^worktree ')" 2
}

@test "a crashed run: an empty directory at the worktree path is replaced, with a warning" {
  mkdir -p "$WT/feat"
  provision feat
  assert_result feat 'new from host/main' none
  assert_stderr_has "provision-shelf: warning: removing a broken worktree directory left by an earlier run: $WT/feat"
  assert_equal "$(git -c safe.directory='*' -C "$WT/feat" symbolic-ref --short HEAD)" feat
}

@test "a directory at the worktree path that git does not know is refused, not deleted" {
  provision feat
  assert_success
  rm -rf "$REPO/.git/worktrees/feat" # the registration is lost, the checkout (with its .git file) is not
  echo precious > "$WT/feat/precious.txt"
  provision feat
  assert_failure 1
  assert_equal "$(printf '%s\n' "$stderr" | grep -c .)" 1
  assert_equal "$stderr" "provision-shelf: $WT/feat exists but is not a usable worktree; remove it with: agent-sandbox rm --branch 'feat' --worktree --force"
  assert_equal "$(cat "$WT/feat/precious.txt")" precious
}

@test "an unsafe worktree directory name is refused and nothing is created" {
  local bad
  for bad in ../x a/b .hidden -rf; do
    provision feat "$bad"
    assert_failure 1
    assert_output ''
    assert_equal "$stderr" "provision-shelf: unsafe worktree directory name: $bad"
    assert_equal "$(ls -A "$AGENT_SANDBOX_SHELF")" ''
    [ ! -e "$TEST_TMP/x" ]
  done
}

@test "an invalid branch name is refused and nothing is created" {
  local bad
  for bad in a..b 'x y' '-b' 'refs/heads/../x' 'a:b'; do
    provision "$bad" ok-dir
    assert_failure 1
    assert_output ''
    assert_equal "$stderr" "provision-shelf: not a valid branch name: $bad"
    assert_equal "$(ls -A "$AGENT_SANDBOX_SHELF")" ''
  done
}

@test "shell syntax in a branch name is never evaluated" {
  cd "$TEST_TMP"
  # Refused by git (a space)...
  provision '$(touch pwned)' cmd-subst
  assert_failure 1
  assert_equal "$stderr" 'provision-shelf: not a valid branch name: $(touch pwned)'
  # ...and valid for git, so provisioned as plain data.
  provision '$(touch${IFS}pwned)' cmd-subst
  assert_result cmd-subst 'new from host/main' none
  assert_equal "$(git -c safe.directory='*' -C "$WT/cmd-subst" symbolic-ref --short HEAD)" '$(touch${IFS}pwned)'
  run find "$TEST_TMP" -name pwned
  assert_output ''
}

@test "wrong argument count or non-numeric UID/GID: usage errors" {
  run --separate-stderr "$SCRIPT" proj feat feat
  assert_failure 1
  assert_equal "$stderr" 'provision-shelf: usage: provision-shelf.sh REPO_NAME BRANCH BRANCH_DIR ORIGIN_URL HOOKS_PATH UID GID'
  run --separate-stderr "$SCRIPT" proj feat feat '' "$HOOKS" node node
  assert_failure 1
  assert_equal "$stderr" 'provision-shelf: UID and GID must be numbers'
  assert_equal "$(ls -A "$AGENT_SANDBOX_SHELF")" ''
}

@test "core.hooksPath is set to the given path, and follows it on a later run" {
  provision feat
  assert_success
  assert_equal "$(sgit config --get core.hooksPath)" "$HOOKS"
  provision feat feat '' /workspace/proj/.git/hooks
  assert_success
  assert_equal "$(sgit config --get core.hooksPath)" /workspace/proj/.git/hooks
}

@test "lock-down: the config is root's 0644 in a sticky .git; the agent can commit but not edit the config" {
  provision feat
  assert_success
  assert_equal "$(stat -c '%U:%G %a' "$REPO/.git/config")" 'root:root 644'
  assert_equal "$(stat -c '%U:%g %a' "$REPO/.git")" "root:$AGENT 1775"
  run as_agent git -c safe.directory='*' -C "$REPO" config core.hooksPath /tmp/evil
  assert_failure
  run as_agent rm -f "$REPO/.git/config"
  assert_failure
  assert_equal "$(sgit config --get core.hooksPath)" "$HOOKS"
  echo change > "$WT/feat/README.md"
  chown "$AGENT:$AGENT" "$WT/feat/README.md"
  run as_agent git -c safe.directory='*' -C "$WT/feat" commit -q -am 'agent commit'
  assert_success
  run as_agent git -c safe.directory='*' -C "$WT/feat" push -q host feat
  assert_success
  assert_equal "$(hgit rev-parse feat)" "$(sgit rev-parse feat)"
}

@test "first run: the shelf is seeded with copies of the host's packs, so the fetch only writes refs" {
  host_commit other 'on another branch'
  hgit repack -adq
  chown -R "$AGENT:$AGENT" "$HOST"
  host_pack="$(basename "$(ls "$HOST"/.git/objects/pack/pack-*.pack)")"
  provision feat
  assert_result feat 'new from host/main' none
  # The host's pack, copied as it is (a fetch would have written a pack of its own, or loose objects).
  assert_equal "$(ls "$REPO/.git/objects/pack" | grep -c '\.pack$')" 1
  assert [ -f "$REPO/.git/objects/pack/$host_pack" ]
  assert_equal "$(find "$REPO/.git/objects" -mindepth 1 -maxdepth 1 -name '??' | wc -l)" 0
  # Copies, owned by the agent, and a complete repository.
  assert_equal "$(stat -c %u "$REPO/.git/objects/pack/$host_pack")" "$AGENT"
  assert_equal "$(stat -c %h "$REPO/.git/objects/pack/$host_pack")" 1
  run sgit fsck --no-progress --connectivity-only
  assert_success
  assert_equal "$(sgit rev-parse refs/remotes/host/other)" "$(hgit rev-parse other)"
}

@test "first run: seeding copies loose objects too, and never follows a symlink in the host's objects" {
  # A blob no ref reaches: a fetch would never bring it, a copy of the objects does.
  blob="$(echo 'only in the object store' | hgit hash-object -w --stdin)"
  ln -s /etc/passwd "$HOST/.git/objects/pack/pack-0000000000000000000000000000000000000000.pack"
  ln -s /etc "$HOST/.git/objects/ee"
  chown -R "$AGENT:$AGENT" "$HOST"
  provision feat
  assert_result feat 'new from host/main' none
  assert [ -f "$REPO/.git/objects/${blob:0:2}/${blob:2}" ]
  assert [ ! -e "$REPO/.git/objects/pack/pack-0000000000000000000000000000000000000000.pack" ]
  assert [ ! -e "$REPO/.git/objects/ee" ]
  run sgit fsck --no-progress --connectivity-only
  assert_success
}

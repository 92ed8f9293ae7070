#!/usr/bin/env bats
# base-image/git-wrapper.sh against the real git and temporary repositories.
# Every bypass attempt is judged by its outcome: exit 1, one agent-sandbox line,
# and no ref, origin ref or config file changed. The fixture's hooks fail (so a
# hook-skipping bypass would move a ref) or pass (so a forced push would land).
bats_require_minimum_version 1.5.0

load test_helper
load git-wrapper-helper

setup_file() {
  FIXTURE=$(mktemp -d)
  export FIXTURE
  build_fixture "$FIXTURE"
}

teardown_file() {
  rm -rf "$FIXTURE"
}

setup() {
  wrapper_setup
}

teardown() {
  common_teardown
}

# ------------------------------------------------------------ controls: the fixture detects bypasses

@test "control: without the wrapper these bypasses really work" {
  local head
  stage_change
  head=$(real_git rev-parse HEAD)
  run real_git commit -qm x
  assert_failure
  run real_git commit -qnm x
  assert_success
  assert_moved HEAD "$head"

  stage_change
  head=$(real_git rev-parse HEAD)
  HUSKY=0 real_git commit -qm x
  assert_moved HEAD "$head"

  stage_change
  head=$(real_git rev-parse HEAD)
  real_git -c alias.sci='!git commit -n' sci -qm x
  assert_moved HEAD "$head"

  hooks_pass
  head=$(origin_rev diverged)
  real_git push -q --force origin diverged
  [[ $(origin_rev diverged) == $(real_git rev-parse diverged) && $head != $(origin_rev diverged) ]]
}

@test "control: relative core.hooksPath is skipped with another work tree" {
  cd ../husky
  echo x >x.txt && real_git add x.txt
  run real_git commit -qm x
  assert_failure
  local head
  head=$(real_git rev-parse HEAD)
  mkdir -p "$TEST_TMP/empty"
  real_git --work-tree="$TEST_TMP/empty" commit -qm x
  assert_moved HEAD "$head"
}

# ------------------------------------------------------------ skipping hooks: commit

@test "blocked: commit --no-verify prints the one-line message" {
  stage_change
  run --separate-stderr git commit --no-verify -m x
  assert_equal "$status" 1
  assert_equal "$stderr" "agent-sandbox: blocked 'git commit --no-verify': skipping hooks is not allowed in the sandbox. Fix what the hook reports, or stop and ask the user."
}

@test "blocked: commit -n in clusters and any position" {
  stage_change
  assert_blocked git commit -n -m x
  assert_blocked git commit -nm x
  assert_blocked git commit -anm x
  assert_blocked git commit -qn -m x
  assert_blocked git commit -sn -m x
  assert_blocked git commit -m x -n
  assert_blocked git commit -m x A.txt -n
  assert_blocked git commit -n -F ../s.patch
}

@test "blocked: commit --no-verify spellings and abbreviations" {
  stage_change
  assert_blocked git commit --no-verify -m x
  assert_blocked git commit -m x --no-verify
  assert_blocked git commit --no-verif -m x
  assert_blocked git commit --no-veri -m x
  assert_blocked git commit --no-v -m x
  assert_blocked git commit --verify --no-verify -m x
  assert_blocked git commit --amend --no-edit -n
}

@test "blocked: commit -n behind global options" {
  stage_change
  assert_blocked git -C "$PWD" commit -n -m x
  assert_blocked git -c color.ui=never commit -n -m x
  assert_blocked git --no-pager -P commit -n -m x
  assert_blocked git --git-dir=.git --work-tree=. commit -n -m x
  assert_blocked git --literal-pathspecs commit --no-verify -m x
}

# ------------------------------------------------------------ skipping hooks: merge, pull, push, am, rebase

@test "blocked: merge --no-verify" {
  assert_blocked git merge --no-verify side -m x
  assert_blocked git merge side --no-verify
  assert_blocked git merge --no-ff --no-verify side
  assert_blocked git merge --no-verif side
}

@test "blocked: pull --no-verify" {
  assert_blocked git pull --no-verify origin diverged
  assert_blocked git pull origin diverged --no-verify
  assert_blocked git pull --no-rebase -q --no-verify origin diverged
}

@test "blocked: push --no-verify and its abbreviations" {
  assert_blocked git push --no-verify origin main
  assert_blocked git push origin main --no-verify
  assert_blocked git push --no-verif origin main
  assert_blocked git push --no-veri origin main
  assert_blocked git push -u --no-verify origin main
}

@test "blocked: am -n / --no-verify" {
  assert_blocked git am -n ../s.patch
  assert_blocked git am --no-verify ../s.patch
  assert_blocked git am -3n ../s.patch
}

@test "blocked: rebase --no-verify" {
  real_git checkout -q topic
  assert_blocked git rebase --no-verify main
  assert_blocked git rebase main --no-verify
  assert_blocked git rebase --no-verify -q main
}

@test "blocked: rebase --exec running git with -n or -f" {
  echo pre-rebase pre-push >.git/hooks-mode
  real_git checkout -q topic
  assert_blocked git rebase -x 'git commit --amend --no-edit -n' main
  assert_blocked git rebase --exec='git push -f origin HEAD:diverged' main
}

# ------------------------------------------------------------ skipping hooks: environment

@test "blocked: hook managers' skip switches in the environment" {
  assert_blocked env HUSKY=0 git merge side -m x
  stage_change
  assert_blocked env HUSKY=0 git commit -m x
  assert_blocked env HUSKY=false git commit -m x
  assert_blocked env HUSKY_SKIP_HOOKS=1 git commit -m x
  assert_blocked env LEFTHOOK=0 git commit -m x
  assert_blocked env SKIP=lint git commit -m x
  assert_blocked env HUSKY=0 git push origin main
}

# ------------------------------------------------------------ core.hooksPath for one command

@test "blocked: -c / --config-env core.hooksPath" {
  stage_change
  mkdir -p "$TEST_TMP/nohooks"
  assert_blocked git -c core.hooksPath=/dev/null commit -m x
  assert_blocked git -c CORE.HOOKSPATH="$TEST_TMP/nohooks" commit -m x
  assert_blocked git -c Core.HooksPath= commit -m x
  assert_blocked git -c core.hooksPath=/dev/null push origin main
  assert_blocked env NOHOOKS="$TEST_TMP/nohooks" git --config-env=core.hooksPath=NOHOOKS commit -m x
  assert_blocked env NOHOOKS="$TEST_TMP/nohooks" git --config-env core.hooksPath=NOHOOKS commit -m x
  # even for commands that run no hooks, and even when equal to the repository's value
  assert_blocked git -c core.hooksPath=.git/hooks status
}

@test "blocked: core.hooksPath through GIT_CONFIG_COUNT and GIT_CONFIG_PARAMETERS" {
  stage_change
  assert_blocked env GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.hooksPath GIT_CONFIG_VALUE_0=/dev/null git commit -m x
  assert_blocked env GIT_CONFIG_COUNT=2 GIT_CONFIG_KEY_0=user.name GIT_CONFIG_VALUE_0=x \
    GIT_CONFIG_KEY_1=core.HooksPath GIT_CONFIG_VALUE_1=/dev/null git commit -m x
  assert_blocked env "GIT_CONFIG_PARAMETERS='core.hooksPath'='/dev/null'" git commit -m x
  assert_blocked env "GIT_CONFIG_PARAMETERS='core.hooksPath=/dev/null'" git push origin main
}

@test "blocked: core.hooksPath from a GIT_CONFIG_GLOBAL, GIT_CONFIG_SYSTEM or ~/.gitconfig file" {
  stage_change
  printf '[core]\n\thooksPath = /nonexistent\n' >"$TEST_TMP/evil.cfg"
  assert_blocked env GIT_CONFIG_GLOBAL="$TEST_TMP/evil.cfg" git commit -m x
  assert_blocked env GIT_CONFIG_SYSTEM="$TEST_TMP/evil.cfg" git commit -m x
  assert_blocked env GIT_CONFIG_GLOBAL="$TEST_TMP/evil.cfg" git push origin main
  cp "$TEST_TMP/evil.cfg" "$HOME/.gitconfig"
  assert_blocked git commit -m x
  real_git reset -q
  assert_blocked git merge side -m x
}

@test "blocked: include.path / includeIf pointing at a file that sets core.hooksPath" {
  stage_change
  printf '[core]\n\thooksPath = /nonexistent\n' >"$TEST_TMP/inc.cfg"
  assert_blocked git -c include.path="$TEST_TMP/inc.cfg" commit -m x
  assert_blocked git -c "includeIf.gitdir:$PWD/.path=$TEST_TMP/inc.cfg" commit -m x
  assert_blocked env GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=include.path GIT_CONFIG_VALUE_0="$TEST_TMP/inc.cfg" git commit -m x
  # an include in the (agent-writable) global config is seen through the real git
  printf '[include]\n\tpath = %s\n' "$TEST_TMP/inc.cfg" >"$HOME/.gitconfig"
  assert_blocked git commit -m x
}

@test "blocked: a relative core.hooksPath with another work tree or git dir" {
  cd ../husky
  echo x >x.txt && real_git add x.txt
  mkdir -p "$TEST_TMP/empty"
  assert_blocked git --work-tree="$TEST_TMP/empty" commit -m x
  assert_blocked git --work-tree "$TEST_TMP/empty" commit -m x
  assert_blocked env GIT_WORK_TREE="$TEST_TMP/empty" git commit -m x
  assert_blocked env GIT_DIR="$PWD/.git" git -C "$TEST_TMP/empty" commit -m x
}

# ------------------------------------------------------------ core.hooksPath and friends written to config

@test "blocked: writing core.hooksPath in any config file" {
  assert_blocked git config core.hooksPath /dev/null
  assert_blocked git config --global core.hooksPath /dev/null
  assert_blocked git config --local --add core.hooksPath /dev/null
  assert_blocked git config --replace-all core.hooksPath /dev/null
  assert_blocked git config --file "$HOME/.gitconfig" core.hooksPath /dev/null
  assert_blocked git config -f "$HOME/.gitconfig" CORE.hooksPATH /dev/null
  assert_blocked git config set core.hooksPath /dev/null
  assert_blocked git config set --global core.hooksPath /dev/null
  assert_blocked git config core.hooksPath --unset
  assert_blocked git config --glob core.hooksPath /dev/null
}

@test "blocked: switching off the pinned config (extensions.*, core.repositoryformatversion)" {
  assert_blocked git config extensions.worktreeConfig false
  assert_blocked git config --unset extensions.worktreeConfig
  assert_blocked git config set extensions.worktreeconfig no
  assert_blocked git config --remove-section extensions
  assert_blocked git config core.repositoryformatversion 0
  # control: the real git does switch it off
  real_git config extensions.worktreeConfig false
  assert_equal "$(real_git config extensions.worktreeConfig)" false
}

@test "blocked: unsetting the repository's core.hooksPath" {
  cd ../husky
  assert_blocked git config --unset core.hooksPath
  assert_blocked git config --unset-all core.hooksPath
  assert_blocked git config unset core.hooksPath
  assert_blocked git config --remove-section core
  assert_blocked git config --rename-section core old
}

@test "blocked: writing include.path / includeIf.*" {
  assert_blocked git config --global include.path "$TEST_TMP/inc.cfg"
  assert_blocked git config --global --add include.path "$TEST_TMP/inc.cfg"
  assert_blocked git config --global includeIf.gitdir:~/.path "$TEST_TMP/inc.cfg"
  assert_blocked git config --global --edit
  assert_blocked git config -e
}

@test "blocked: writing aliases whose expansion would be blocked" {
  assert_blocked git config alias.ci 'commit -n'
  assert_blocked git config --global alias.ci 'commit --no-verify'
  assert_blocked git config --global alias.pf 'push --force'
  assert_blocked git config alias.up 'update-ref'
  assert_blocked git config alias.sci '!git commit -n'
  assert_blocked git config alias.hp '-c core.hooksPath=/dev/null commit'
}

@test "blocked: writing forced / deleting push refspecs and mirror to remote config" {
  assert_blocked git config remote.origin.push '+refs/heads/*:refs/heads/*'
  assert_blocked git config --add remote.origin.push '+main:main'
  assert_blocked git config remote.origin.push ':refs/heads/feature'
  assert_blocked git config remote.origin.mirror true
  assert_blocked git config Remote.origin.MIRROR yes
  assert_blocked git config --rename-section remote.origin remote.other
}

# ------------------------------------------------------------ aliases

@test "blocked: aliases from config that skip hooks" {
  stage_change
  real_git config alias.ci 'commit --no-verify'
  real_git config alias.c2 ci
  real_git config alias.cn 'commit -n'
  assert_blocked git ci -m x
  assert_blocked git CI -m x
  assert_blocked git c2 -m x
  assert_blocked git cn -m x
}

@test "blocked: -c alias.x=... that skips hooks or rewrites history" {
  stage_change
  assert_blocked git -c alias.ci='commit -n' ci -m x
  assert_blocked git -c alias.ci='commit' ci -n -m x
  assert_blocked git -c 'alias.ci=commit "--no-verify"' ci -m x
  assert_blocked git -c alias.a=b -c alias.b='commit -n' a -m x
  hooks_pass
  assert_blocked git -c alias.fp='push --force' fp origin diverged
  assert_blocked git -c alias.del='push origin --delete' del feature
  assert_blocked git -c alias.ur='update-ref' ur refs/heads/main HEAD~1
}

@test "blocked: shell aliases that run git around the checks" {
  stage_change
  assert_blocked git -c alias.sci='!git commit -n' sci -m x
  assert_blocked git -c alias.run='!f() { git "$@"; }; f' run commit -n -m x
  assert_blocked git -c alias.sh2='!sh -c "git commit --no-verify -m x"' sh2
  real_git config alias.ci 'commit -n'
  assert_blocked git -c alias.via='!git ci' via -m x
  hooks_pass
  assert_blocked git -c alias.fp='!git push -f origin diverged' fp
  assert_blocked git -c alias.pp='!git push origin +diverged' pp
}

@test "blocked: for-each-repo and help.autocorrect cannot smuggle a command" {
  stage_change
  assert_blocked git -c my.repos="$PWD" for-each-repo --config=my.repos commit -n -m x
  assert_blocked git -c help.autocorrect=1 comit -n -m x
}

# ------------------------------------------------------------ rewriting or deleting shared history

@test "blocked: push --force / -f in any cluster" {
  hooks_pass
  assert_blocked git push --force origin diverged
  assert_blocked git push -f origin diverged
  assert_blocked git push -fu origin diverged
  assert_blocked git push -uf origin diverged
  assert_blocked git push -vf origin diverged
  assert_blocked git push origin diverged --force
  assert_blocked git push --forc origin diverged
  assert_blocked git push --repo=origin --force
  real_git checkout -q diverged
  assert_blocked git push -f
}

@test "blocked: --force-with-lease and --force-if-includes" {
  hooks_pass
  assert_blocked git push --force-with-lease origin diverged
  assert_blocked git push --force-w origin diverged
  assert_blocked git push --force-with-lease=diverged origin diverged
  assert_blocked git push --force-with-lease --force-if-includes origin diverged
  assert_blocked git push --force-if-includes origin diverged
}

@test "blocked: + refspecs" {
  hooks_pass
  assert_blocked git push origin +diverged
  assert_blocked git push origin +HEAD:diverged
  assert_blocked git push origin +refs/heads/diverged:refs/heads/diverged
  assert_blocked git push origin main +diverged
  assert_blocked git push origin -- +diverged
}

@test "blocked: + refspecs and mirror in the remote's config" {
  hooks_pass
  real_git config remote.origin.push '+refs/heads/diverged:refs/heads/diverged'
  assert_blocked git push origin
  assert_blocked git push
  real_git config --unset remote.origin.push
  assert_blocked git -c remote.origin.push='+refs/heads/*:refs/heads/*' push origin
  real_git config remote.origin.mirror true
  assert_blocked git push origin
}

@test "blocked: --mirror, --delete/-d, :branch and --prune" {
  hooks_pass
  assert_blocked git push --mirror origin
  assert_blocked git push --mirr origin
  assert_blocked git push --delete origin feature
  assert_blocked git push origin --delete feature
  assert_blocked git push -d origin feature
  assert_blocked git push origin :feature
  assert_blocked git push origin :refs/heads/feature
  assert_blocked git push --prune origin 'refs/heads/*:refs/heads/*'
}

@test "blocked: send-pack" {
  hooks_pass
  assert_blocked git send-pack --force "$ORIGIN" diverged
  assert_blocked git send-pack "$ORIGIN" +diverged
  assert_blocked git send-pack --mirror "$ORIGIN"
}

# ------------------------------------------------------------ writing refs around the porcelain

@test "blocked: update-ref in every form" {
  assert_blocked git update-ref refs/heads/main HEAD~1
  assert_blocked git update-ref -d refs/heads/side
  assert_blocked git update-ref --no-deref HEAD HEAD~1
  run --separate-stderr bash -c "echo 'update refs/heads/main $(real_git rev-parse HEAD~1)' | git update-ref --stdin"
  assert_equal "$status" 1
  assert_equal "$(real_git rev-parse main)" "$(real_git rev-parse HEAD)"
}

@test "blocked: commit-tree and symbolic-ref writes" {
  assert_blocked git commit-tree 'HEAD^{tree}' -p HEAD -m x
  assert_equal "$output" ""
  assert_blocked git symbolic-ref refs/heads/main refs/heads/side
  real_git symbolic-ref refs/heads/link refs/heads/side
  assert_blocked git symbolic-ref -d refs/heads/link
  assert_blocked git symbolic-ref --delete refs/heads/link
}

# ------------------------------------------------------------ honest work: commits

@test "allowed: commit messages that mention the blocked flags" {
  hooks_pass
  local msg
  for msg in "explain push --force and --no-verify" "-n" "--no-verify" "use +main and :feature"; do
    stage_change
    assert_allowed git commit -q -m "$msg"
    assert_equal "$(real_git log -1 --format=%B)" "$msg"
  done
  stage_change
  assert_allowed git commit -q -m-n
  assert_equal "$(real_git log -1 --format=%B)" "-n"
  stage_change
  assert_allowed git commit -q -mn
  assert_equal "$(real_git log -1 --format=%B)" "n"
  stage_change
  assert_allowed git commit -q --message=--no-verify
  assert_equal "$(real_git log -1 --format=%B)" "--no-verify"
  stage_change
  assert_allowed git commit -q --mess -n
  assert_equal "$(real_git log -1 --format=%B)" "-n"
  hook_ran pre-commit
  hook_ran commit-msg
}

@test "allowed: commit -F, -a, -u<mode>, --trailer, -c user.name" {
  hooks_pass
  printf 'from a file: git push -f\n' >"$TEST_TMP/msg"
  stage_change
  assert_allowed git commit -q -F "$TEST_TMP/msg"
  assert_equal "$(real_git log -1 --format=%s)" "from a file: git push -f"
  echo more >>B.txt
  assert_allowed git commit -q -am "all"
  assert_equal "$(real_git log -1 --format=%s)" "all"
  stage_change
  assert_allowed git commit -q -uno -m "untracked no"
  stage_change
  assert_allowed git commit -q --trailer "Note: -n" -m trailer
  assert_equal "$(real_git log -1 --format=%s)" "trailer"
  stage_change
  assert_allowed git -c user.name=Other commit -q -m other
  assert_equal "$(real_git log -1 --format=%an)" "Other"
}

@test "allowed: the last of -n / --verify wins, and hooks then run" {
  hooks_pass
  stage_change
  local head
  head=$(real_git rev-parse HEAD)
  assert_allowed git commit -q -n --verify -m x
  assert_moved HEAD "$head"
  hook_ran pre-commit
}

@test "allowed: a failing hook still fails the commit (the wrapper does not interfere)" {
  stage_change
  run --separate-stderr git commit -q -m x
  assert_failure
  [[ $stderr == *"hook pre-commit failed"* && $stderr != *agent-sandbox* ]]
}

@test "allowed: commit with the repository's own relative core.hooksPath runs its hooks" {
  cd ../husky
  echo pass >hooks-mode
  echo x >x.txt && real_git add x.txt
  assert_allowed git commit -q -m x
  assert_allowed git -C "$PWD" log -1 --format=%s
  assert_output x
  hook_ran pre-commit .
  assert_allowed git config --get core.hooksPath
  assert_output .husky
}

@test "allowed: HUSKY=1 and HUSKY=0 for commands that run no hooks" {
  hooks_pass
  stage_change
  assert_allowed env HUSKY=1 git commit -q -m x
  assert_allowed env HUSKY=0 git status --short
  assert_allowed env HUSKY=0 git log -1 --oneline
}

# ------------------------------------------------------------ honest work: -n of other commands

@test "allowed: log -n, tag -n, clean -n, fetch -f" {
  assert_allowed git log -n 3 --oneline
  assert_equal "${#lines[@]}" 3
  assert_allowed git log -n3 --oneline
  assert_equal "${#lines[@]}" 3
  assert_allowed git tag -n
  assert_output --partial v1
  touch untracked.txt
  assert_allowed git clean -n
  assert_output --partial untracked.txt
  [[ -e untracked.txt ]]
  assert_allowed git fetch -f origin
  assert_allowed git fetch --prune origin
  assert_allowed git log --grep=--no-verify --oneline
}

@test "allowed: push -n / --dry-run do not push" {
  hooks_pass
  local before
  before=$(origin_rev main)
  assert_allowed git push -n origin main
  assert_allowed git push --dry-run origin main
  assert_allowed git push -nu origin main
  assert_equal "$(origin_rev main)" "$before"
}

@test "allowed: merge -n makes the merge and runs the hooks" {
  hooks_pass
  assert_allowed git merge -n -q side -m "merge side"
  assert_equal "$(real_git log -1 --format=%s)" "merge side"
  real_git rev-parse -q --verify HEAD^2 >/dev/null
  hook_ran pre-merge-commit
}

@test "allowed: pull -n (no diffstat) merges and runs the hooks" {
  hooks_pass
  assert_allowed git pull -q -n origin diverged
  assert_equal "$(real_git rev-parse HEAD^2)" "$(origin_rev diverged)"
  hook_ran pre-merge-commit
}

@test "allowed: rebase -n (no diffstat) rebases and runs pre-rebase" {
  hooks_pass
  real_git checkout -q topic
  assert_allowed git rebase -q -n main
  real_git merge-base --is-ancestor main topic
  hook_ran pre-rebase
}

# ------------------------------------------------------------ honest work: pushes

@test "allowed: fast-forward push arrives and runs pre-push" {
  hooks_pass
  assert_allowed git push -q origin main
  assert_equal "$(origin_rev main)" "$(real_git rev-parse main)"
  hook_ran pre-push
}

@test "allowed: push without arguments, and push HEAD" {
  hooks_pass
  assert_allowed git push -q
  assert_equal "$(origin_rev main)" "$(real_git rev-parse main)"
  stage_change && real_git commit -qm more
  assert_allowed git push -q origin HEAD
  assert_equal "$(origin_rev main)" "$(real_git rev-parse main)"
}

@test "allowed: new branch with -u, and src:dst refspecs" {
  hooks_pass
  real_git branch feat main
  assert_allowed git push -q -u origin feat
  assert_equal "$(origin_rev feat)" "$(real_git rev-parse feat)"
  assert_equal "$(real_git config branch.feat.remote)" origin
  assert_allowed git push -q origin main:refs/heads/copy
  assert_equal "$(origin_rev copy)" "$(real_git rev-parse main)"
  assert_allowed git push -q --set-upstream origin side
  assert_equal "$(origin_rev side)" "$(real_git rev-parse side)"
}

@test "allowed: tags: push origin v1, --tags, --follow-tags" {
  hooks_pass
  assert_allowed git push -q origin v1
  assert_equal "$(real_git --git-dir="$ORIGIN" rev-parse refs/tags/v1)" "$(real_git rev-parse v1)"
  real_git tag v2 side
  real_git tag -a -m annotated v3 main
  assert_allowed git push -q --tags origin
  real_git --git-dir="$ORIGIN" rev-parse -q --verify refs/tags/v2 >/dev/null
  real_git tag -a -m annotated v4 main
  assert_allowed git push -q --follow-tags origin main
  real_git --git-dir="$ORIGIN" rev-parse -q --verify refs/tags/v4 >/dev/null
}

@test "allowed: a non-forced push of a diverged branch reaches git, which rejects it" {
  hooks_pass
  local before
  before=$(origin_rev diverged)
  run --separate-stderr git push origin diverged
  assert_failure
  [[ $stderr == *rejected* && $stderr != *agent-sandbox* ]]
  assert_equal "$(origin_rev diverged)" "$before"
}

@test "allowed: push with a plain refspec in the remote's config" {
  hooks_pass
  assert_allowed git config remote.origin.push refs/heads/main:refs/heads/main
  assert_equal "$(real_git config remote.origin.push)" refs/heads/main:refs/heads/main
  assert_allowed git push -q origin
  assert_equal "$(origin_rev main)" "$(real_git rev-parse main)"
  assert_allowed git config remote.origin.mirror false
}

# ------------------------------------------------------------ honest work: config, globals, local history

@test "allowed: config writes and reads" {
  assert_allowed git config --global user.name "New Name"
  assert_equal "$(real_git config --global user.name)" "New Name"
  assert_allowed git config user.email
  assert_output test@example.invalid
  run --separate-stderr git config --get core.hooksPath
  assert_equal "$status" 1
  [[ $stderr != *agent-sandbox* ]]
  run --separate-stderr git config --global core.hooksPath
  assert_equal "$status" 1
  assert_allowed git config --list
  assert_allowed git config --show-scope --get-regexp '^user\.'
  assert_allowed git config alias.st status
  assert_allowed git config --global alias.lg 'log -n 5 --oneline'
  assert_equal "$(real_git config alias.st)" status
  assert_allowed git config --global push.autoSetupRemote true
}

@test "allowed: global options -c, -C, --no-pager, --git-dir" {
  assert_allowed git -c color.ui=never status
  assert_allowed git -C "$TEST_TMP/work" status --short
  assert_allowed git -C .. -C work rev-parse --show-toplevel
  assert_output "$TEST_TMP/work"
  assert_allowed git --no-pager log -1 --oneline
  assert_allowed git --git-dir="$ORIGIN" log -1 --oneline main
  assert_allowed git --version
}

@test "allowed: honest aliases run and are expanded" {
  hooks_pass
  assert_allowed git -c alias.st=status st --short
  stage_change
  assert_allowed git -c alias.ci=commit ci -q -m "via alias"
  assert_equal "$(real_git log -1 --format=%s)" "via alias"
  hook_ran pre-commit
  assert_allowed git -c alias.hi='!echo hi' hi
  assert_output hi
  real_git config alias.lg 'log -n 1 --format=%s'
  assert_allowed git lg
  assert_output "via alias"
  assert_allowed git -c alias.pu='push -u' pu -q origin main
  assert_equal "$(origin_rev main)" "$(real_git rev-parse main)"
}

@test "allowed: local history: branch -f/-D, reset --hard, tag -f, symbolic-ref HEAD, cherry-pick, revert" {
  hooks_pass
  assert_allowed git branch -f side main
  assert_equal "$(real_git rev-parse side)" "$(real_git rev-parse main)"
  assert_allowed git branch -D side
  run real_git rev-parse -q --verify side
  assert_failure
  assert_allowed git reset -q --hard HEAD~1
  assert_equal "$(real_git rev-parse HEAD)" "$(origin_rev main)"
  assert_allowed git tag -f v1 HEAD
  assert_allowed git symbolic-ref HEAD
  assert_output refs/heads/main
  assert_allowed git symbolic-ref --short HEAD
  assert_allowed git cherry-pick topic
  assert_equal "$(real_git log -1 --format=%s)" T
  assert_allowed git revert --no-edit HEAD
  assert_allowed git switch -q -c newbranch
  assert_allowed git checkout -q main
  assert_allowed git stash list
}

# ------------------------------------------------------------ speed and argv

@test "the real git gets the original argv untouched, with no extra call on the fast path" {
  hooks_pass
  cat >"$STUB_BIN/realgit" <<STUB
#!/usr/bin/env bash
{ printf 'call'; printf ' [%s]' "\$@"; printf '\n'; } >>"$STUB_LOG"
exec $REAL_GIT "\$@"
STUB
  chmod +x "$STUB_BIN/realgit"
  export AGENT_SANDBOX_REAL_GIT=$STUB_BIN/realgit
  assert_allowed git log -1 --format='%s  two  spaces' -- 'a b' '*.txt'
  assert_equal "$(cat "$STUB_LOG")" "call [log] [-1] [--format=%s  two  spaces] [--] [a b] [*.txt]"
  : >"$STUB_LOG"
  assert_allowed git -c color.ui=never status --short
  assert_equal "$(cat "$STUB_LOG")" "call [-c] [color.ui=never] [status] [--short]"
  : >"$STUB_LOG"
  stage_change
  assert_allowed git commit -q -m "-n"
  assert_equal "$(wc -l <"$STUB_LOG")" 2
  assert_equal "$(tail -n1 "$STUB_LOG")" "call [commit] [-q] [-m] [-n]"
}

# ------------------------------------------------------------ git push host: kept for review

# host_gate: a remote `host` (a bare copy of origin) behind the gate's own hooks,
# with main protected, as git-gate.sh serves it.
host_gate() {
  real_git clone -q --bare "$ORIGIN" "$TEST_TMP/host.git"
  mkdir "$TEST_TMP/gate-hooks"
  cp "$ROOT/base-image/gate-hooks/pre-receive" "$TEST_TMP/gate-hooks/pre-receive"
  real_git --git-dir="$TEST_TMP/host.git" config core.hooksPath "$TEST_TMP/gate-hooks"
  real_git remote add host "$TEST_TMP/host.git"
  export AGENT_SANDBOX_PROTECTED_BRANCHES=main AGENT_SANDBOX_GATE_LOG=/dev/null
  hooks_pass
}
host_rev() { real_git --git-dir="$TEST_TMP/host.git" rev-parse -q --verify "$1" || echo missing; }

# free_port: a port on 127.0.0.1 that nothing listens on.
free_port() { node -e "const s = require('net').createServer().listen(0, '127.0.0.1', () => { console.log(s.address().port); s.close() })"; }

@test "push host: the gate down (nothing listens on its port): one line naming the repair, exit 128, nothing pushed" {
  host_gate
  local before
  before=$(host_rev refs/heads/feature)
  real_git commit -q --allow-empty -m ahead
  AGENT_SANDBOX_GATE_PORT=$(free_port) run --separate-stderr git push host HEAD:refs/heads/feature
  assert_equal "$status" 128
  assert_equal "$stderr" "agent-sandbox: git push host: the push gate is down, so nothing reaches the host; any agent-sandbox command on the host (e.g. agent-sandbox exec -- true) repairs it"
  assert_equal "$(host_rev refs/heads/feature)" "$before"
}

@test "push host: the gate listening on its port (the control): the push goes through" {
  host_gate
  local port pid
  port=$(free_port)
  node -e "require('net').createServer((s) => s.destroy()).listen($port, '127.0.0.1', () => console.log('up'))" > "$TEST_TMP/listener.out" &
  pid=$!
  for _ in $(seq 100); do grep -q up "$TEST_TMP/listener.out" 2> /dev/null && break; sleep 0.05; done
  AGENT_SANDBOX_GATE_PORT=$port run --separate-stderr git push host feature:refs/heads/newbranch
  kill "$pid"
  assert_success
  assert_equal "$(host_rev refs/heads/newbranch)" "$(real_git rev-parse feature)"
}

@test "push host: a protected branch is not updated, and the commit is kept as refs/sandbox/<branch> with one line" {
  host_gate
  local before
  before=$(host_rev refs/heads/main)
  run --separate-stderr git push host main
  assert_failure
  [[ $stderr == *"agent-sandbox gate: refused refs/heads/main: main is a protected branch"* ]] || fail "$stderr"
  [[ $stderr == *"agent-sandbox: main was not updated; your commit $(real_git rev-parse --short=12 main) is kept on the host as refs/sandbox/main for the user to review"* ]] || fail "$stderr"
  assert_equal "$(host_rev refs/heads/main)" "$before"
  assert_equal "$(host_rev refs/sandbox/main)" "$(real_git rev-parse main)"
}

@test "push host: a branch behind the host (non-fast-forward, seen by git) is kept as refs/sandbox/<branch>; a second proposal replaces it" {
  host_gate
  # diverged: origin has R on it, the work repo has L2 instead
  run --separate-stderr git push host diverged
  assert_failure
  [[ $stderr == *"kept on the host as refs/sandbox/diverged"* ]] || fail "$stderr"
  assert_equal "$(host_rev refs/sandbox/diverged)" "$(real_git rev-parse diverged)"
  assert_equal "$(host_rev refs/heads/diverged)" "$(real_git --git-dir="$ORIGIN" rev-parse diverged)"
  real_git checkout -q diverged
  real_git commit -q --allow-empty -m again
  run --separate-stderr git push host diverged
  assert_failure
  assert_equal "$(host_rev refs/sandbox/diverged)" "$(real_git rev-parse diverged)"
}

@test "push host: a fast-forward lands and keeps nothing; a refused delete or tag move keeps nothing" {
  host_gate
  run --separate-stderr git push host feature:refs/heads/newbranch
  assert_success
  [[ $stderr != *"kept on the host"* ]] || fail "$stderr"
  assert_equal "$(host_rev refs/sandbox/newbranch)" missing
  real_git push -q host v1
  real_git tag -f v1 side >/dev/null
  run --separate-stderr /usr/bin/git push host +v1
  assert_failure
  run --separate-stderr git push host v1
  assert_failure
  [[ $stderr != *"kept on the host"* ]] || fail "$stderr"
}

@test "control: pushing to another remote keeps nothing (only host goes through the gate)" {
  host_gate
  run --separate-stderr git push origin diverged
  assert_failure
  [[ $stderr != *"kept on the host"* ]] || fail "$stderr"
  assert_equal "$(host_rev refs/sandbox/diverged)" missing
}

# ------------------------------------------------------------ the build's git version check

fake_git_version() {
  printf '#!/bin/sh\necho "git version %s"\n' "$1" >"$TEST_TMP/fake-git"
  chmod +x "$TEST_TMP/fake-git"
}

@test "version check: a git of the tables' series (2.47.x) passes" {
  fake_git_version 2.47.3
  AGENT_SANDBOX_REAL_GIT=$TEST_TMP/fake-git run git --agent-sandbox-check-version
  assert_success
  assert_output "git-wrapper: git version 2.47.3 matches its option tables (git 2.47.x)"
}

@test "version check: another series is one error line naming both versions and the fix" {
  for v in 2.43.0 2.48.1 3.0.0 2.4 2.470.1; do
    fake_git_version "$v"
    AGENT_SANDBOX_REAL_GIT=$TEST_TMP/fake-git run --separate-stderr git --agent-sandbox-check-version
    assert_failure
    [ -z "$output" ]
    [ "$(printf '%s\n' "$stderr" | wc -l)" -eq 1 ]
    [[ $stderr == "git-wrapper: error: the image's git is git version $v, but the git wrapper's option tables are git 2.47.x's"* ]]
    [[ $stderr == *"update the tables in base-image/git-wrapper.sh" ]]
  done
}

@test "version check: a missing real git is an error too" {
  AGENT_SANDBOX_REAL_GIT=$TEST_TMP/no-such-git run --separate-stderr git --agent-sandbox-check-version
  assert_failure
  [[ $stderr == *"the image's git is missing ($TEST_TMP/no-such-git)"* ]]
}

# Fixture and assertions for git-wrapper.bats.
# shellcheck shell=bash
REAL_GIT=/usr/bin/git

real_git() { "$REAL_GIT" "$@"; }

# Hook used for every hook the fixture installs: logs its name, honours the
# hook managers' skip switches (so that those bypasses really work without the
# wrapper) and fails unless ../hooks-mode says "pass" or names the hook.
write_hook() {
  cat >"$1" <<'HOOK'
#!/bin/sh
d=${0%/*}
echo "${0##*/}" >>"$d/../hooks.log"
[ "$HUSKY" = 0 ] && exit 0
[ -n "$HUSKY_SKIP_HOOKS" ] && exit 0
[ "$LEFTHOOK" = 0 ] && exit 0
[ -n "$SKIP" ] && exit 0
case " $(cat "$d/../hooks-mode" 2>/dev/null) " in *" pass "* | *" ${0##*/} "*) exit 0 ;; esac
echo "hook ${0##*/} failed" >&2
exit 1
HOOK
  chmod +x "$1"
}

# Built once per file (setup_file), copied for every test:
#   origin.git  main=B feature=B diverged=R origin-only=O
#   work        main=B-L (ahead, upstream origin/main), diverged=B-L2 (upstream origin/diverged),
#               side=B-S, topic=A-T, feature=B, tag v1 (not pushed); hooks fail by default
#   husky       a repo with core.hooksPath=.husky (relative, like husky), hooks fail by default
#   s.patch     the side commit, for git am
build_fixture() {
  local tpl=$1 g=(-c init.defaultBranch=main -c advice.detachedHead=false -c core.logAllRefUpdates=false)
  mkdir -p "$tpl"
  (
    set -e
    cd "$tpl"
    "$REAL_GIT" "${g[@]}" init -q --template= --bare origin.git
    "$REAL_GIT" "${g[@]}" init -q --template= work
    cd work
    "$REAL_GIT" config user.name "Sandbox Test"
    "$REAL_GIT" config user.email test@example.invalid
    "$REAL_GIT" config pull.rebase false
    "$REAL_GIT" config commit.gpgsign false
    "$REAL_GIT" remote add origin ../origin.git # relative: the copies need no rewrite
    c() { echo "$1" >"$1.txt"; "$REAL_GIT" add "$1.txt"; "$REAL_GIT" commit -qm "$1"; }
    c A
    "$REAL_GIT" branch topic
    c B
    "$REAL_GIT" push -q origin main main:feature
    "$REAL_GIT" branch feature
    "$REAL_GIT" checkout -q -b diverged
    c R
    "$REAL_GIT" push -q -u origin diverged
    "$REAL_GIT" reset -q --hard main
    c L2
    "$REAL_GIT" checkout -q -b origin-only main
    c O
    "$REAL_GIT" push -q origin origin-only
    "$REAL_GIT" checkout -q -b side main
    c S
    "$REAL_GIT" checkout -q topic
    c T
    "$REAL_GIT" checkout -q main
    "$REAL_GIT" branch -q -D origin-only
    "$REAL_GIT" branch -q -u origin/main main
    c L
    "$REAL_GIT" tag v1
    "$REAL_GIT" format-patch -q -1 side --stdout >"$tpl/s.patch"
    mkdir .git/hooks
    for h in pre-commit commit-msg pre-merge-commit pre-push pre-rebase applypatch-msg pre-applypatch; do
      write_hook ".git/hooks/$h"
    done
    echo fail >.git/hooks-mode
    cd "$tpl"
    "$REAL_GIT" "${g[@]}" init -q --template= husky
    cd husky
    "$REAL_GIT" config user.name "Sandbox Test"
    "$REAL_GIT" config user.email test@example.invalid
    mkdir .husky
    write_hook .husky/pre-commit
    echo fail >hooks-mode
    printf 'hooks-mode\nhooks.log\n' >.gitignore
    "$REAL_GIT" add .gitignore .husky
    "$REAL_GIT" commit -qm init --no-verify
    "$REAL_GIT" config core.hooksPath .husky
    # Few files to copy per test: packed objects and refs, no reflogs.
    for r in "$tpl/origin.git" "$tpl/work/.git" "$tpl/husky/.git"; do
      "$REAL_GIT" --git-dir="$r" repack -adq
      "$REAL_GIT" --git-dir="$r" pack-refs --all
      "$REAL_GIT" --git-dir="$r" prune
      rm -rf "$r/logs"
    done
  )
}

# Per test: a fresh copy of the fixture, the wrapper first on PATH as `git`.
wrapper_setup() {
  common_setup
  cp -a "$FIXTURE/." "$TEST_TMP/"
  ln -s "$ROOT/base-image/git-wrapper.sh" "$STUB_BIN/git"
  ln -s "$ROOT/base-image/git-wrapper-parse.sh" "$ROOT/base-image/git-wrapper-policy.sh" "$STUB_BIN/"
  export AGENT_SANDBOX_REAL_GIT=$REAL_GIT
  unset HUSKY HUSKY_SKIP_HOOKS LEFTHOOK LEFTHOOK_EXCLUDE SKIP GIT_DIR GIT_WORK_TREE \
    GIT_CONFIG_PARAMETERS GIT_CONFIG_COUNT GIT_CONFIG_GLOBAL GIT_CONFIG_SYSTEM GIT_CONFIG
  ORIGIN=$TEST_TMP/origin.git
  cd "$TEST_TMP/work" || return 1
}

hooks_pass() { echo pass >"${1:-.}/.git/hooks-mode"; }
stage_change() { echo "change $RANDOM" >>A.txt && real_git add A.txt; }
origin_rev() { real_git --git-dir="$ORIGIN" rev-parse -q --verify "refs/heads/$1" || echo missing; }

# Everything a bypass could change, into SNAP: local refs and HEAD, the
# origin's refs, the repository and global config files. Read directly from
# the files (loose refs and packed-refs), so that it costs no process.
snap_files() { # DIR LABEL
  local f v
  for f in "$1"/refs/** "$1"/packed-refs "$1"/HEAD "$1"/config; do
    [[ -f $f ]] || continue
    v=""
    IFS= read -r -d '' v <"$f" || true
    SNAP+="$2 ${f#"$1"/}: $v"$'\n'
  done
}

snapshot() {
  SNAP=""
  shopt -s globstar nullglob
  snap_files .git local
  snap_files "$ORIGIN" origin
  shopt -u globstar nullglob
  if [[ -e $HOME/.gitconfig ]]; then
    local global=""
    IFS= read -r -d '' global <"$HOME/.gitconfig" || true
    SNAP+="global: $global"
  fi
}

# assert_blocked CMD...: exit 1, exactly one line on stderr from the wrapper
# that names the command and says to stop and ask the user, and nothing changed.
# (Runs CMD directly rather than with bats' `run`: it is called 160 times.)
assert_blocked() {
  local before
  snapshot
  before=$SNAP
  status=0
  "$@" >"$BATS_TEST_TMPDIR/out" 2>"$BATS_TEST_TMPDIR/err" </dev/null || status=$?
  output="" stderr=""
  IFS= read -r -d '' output <"$BATS_TEST_TMPDIR/out" || true
  IFS= read -r -d '' stderr <"$BATS_TEST_TMPDIR/err" || true
  stderr=${stderr%$'\n'}
  snapshot
  if [[ $status -ne 1 ]]; then
    fail "expected exit 1 from: $* (got $status)
stderr: $stderr"
  fi
  if [[ $stderr == *$'\n'* || $stderr != "agent-sandbox: blocked '"*"'"*": "*"top and ask the user." ]]; then
    fail "expected one agent-sandbox line from: $*
stderr: $stderr"
  fi
  if [[ $before != "$SNAP" ]]; then
    fail "state changed by blocked command: $*
$(diff <(echo "$before") <(echo "$SNAP"))"
  fi
}

# assert_allowed CMD...: the real git ran and succeeded, the wrapper said nothing.
assert_allowed() {
  run --separate-stderr "$@"
  if [[ $status -ne 0 || $stderr == *agent-sandbox* ]]; then
    fail "expected success from: $* (got $status)
stdout: $output
stderr: $stderr"
  fi
}

# assert_moved REF BEFORE: the ref (a rev) changed.
assert_moved() {
  local now
  now=$(real_git rev-parse -q --verify "$1" || echo missing)
  [[ $now != "$2" ]] || fail "$1 did not move"
}

hook_ran() { grep -qx "$1" "${2:-.git}/hooks.log" 2>/dev/null || fail "hook $1 did not run"; }

#!/usr/bin/env bats
# The push gate: base-image/git-gate.sh and its hooks (base-image/gate-hooks),
# with the real git and no daemon. git-gate.sh runs against a stand-in git
# (AGENT_SANDBOX_REAL_GIT) that records the daemon's argv and environment
# instead of serving; the pushes then go over a local path to a receive-pack
# started with the same -c settings and environment, and with a copy of the
# gate's hooks installed as the Dockerfile installs them (update, post-receive
# and post-update are copies of chain). Each refusal has a control: the same
# push without the gate lands.

load test_helper

bats_require_minimum_version 1.5.0

GATE="$ROOT/base-image/git-gate.sh"

setup() {
  common_setup
  export GIT_AUTHOR_NAME=Tester GIT_AUTHOR_EMAIL=tester@example.com GIT_COMMITTER_NAME=Tester GIT_COMMITTER_EMAIL=tester@example.com
  export AGENT_SANDBOX_REAL_GIT="$TEST_TMP/fake-git"
  export AGENT_SANDBOX_GATE_HOOKS="$TEST_TMP/gate-hooks"
  export AGENT_SANDBOX_GATE_MODE=branch
  unset AGENT_SANDBOX_PROTECTED_BRANCHES AGENT_SANDBOX_HOST_HOOKS AGENT_SANDBOX_GATE_PORT
  mkdir -p "$AGENT_SANDBOX_GATE_HOOKS"
  install -m 0755 "$ROOT/base-image/gate-hooks/pre-receive" "$ROOT/base-image/gate-hooks/push-to-checkout" "$AGENT_SANDBOX_GATE_HOOKS/"
  local h
  for h in update post-receive post-update; do install -m 0755 "$ROOT/base-image/gate-hooks/chain" "$AGENT_SANDBOX_GATE_HOOKS/$h"; done
  # The stand-in git: everything but `daemon` goes to the real one.
  cat > "$AGENT_SANDBOX_REAL_GIT" <<'EOF'
#!/usr/bin/env bash
for a in "$@"; do
  if [ "$a" = daemon ]; then
    printf '%s\n' "$@" > "$TEST_TMP/daemon.argv"
    printf '%s' "${AGENT_SANDBOX_HOST_HOOKS-<unset>}" > "$TEST_TMP/daemon.host-hooks"
    printf '%s' "$AGENT_SANDBOX_PROTECTED_BRANCHES" > "$TEST_TMP/daemon.protected"
    exit 0
  fi
done
exec /usr/bin/git "$@"
EOF
  chmod +x "$AGENT_SANDBOX_REAL_GIT"
  HOST="$TEST_TMP/ws"
  AREPO="$TEST_TMP/agent"
  export AGENT_SANDBOX_GATE_REPO="$HOST"
  LOG="$TEST_TMP/host-hooks.log"
  make_host
}

teardown() {
  common_teardown
}

# make_host: the host repository (main checked out, feat, tag v1) and the agent's clone, whose remote is `host`.
make_host() {
  git init -q -b main "$HOST"
  echo hello > "$HOST/README.md"
  git -C "$HOST" add README.md
  git -C "$HOST" commit -q -m initial
  git -C "$HOST" branch feat
  git -C "$HOST" tag v1
  git clone -q -o host "$HOST" "$AREPO"
  git -C "$AREPO" checkout -q -b feat host/feat
}

hrev() { git -C "$HOST" rev-parse "$@"; }
arev() { git -C "$AREPO" rev-parse "$@"; }
# acommit FILE CONTENT MESSAGE: the agent commits on its checked-out branch.
acommit() {
  mkdir -p "$(dirname "$AREPO/$1")"
  printf '%s\n' "$2" > "$AREPO/$1"
  git -C "$AREPO" add -- "$1"
  git -C "$AREPO" commit -q -m "$3"
}

# gate: run git-gate.sh (which stops at the stand-in daemon) and keep what the
# daemon would get: the -c settings before `daemon`, AGENT_SANDBOX_HOST_HOOKS
# and AGENT_SANDBOX_PROTECTED_BRANCHES.
gate() {
  run --separate-stderr bash "$GATE"
  assert_success
  GATE_C=()
  local a
  while IFS= read -r a; do
    [ "$a" != daemon ] || break
    GATE_C+=("$a")
  done < "$TEST_TMP/daemon.argv"
  GATE_HOST_HOOKS="$(cat "$TEST_TMP/daemon.host-hooks")"
  GATE_PROTECTED="$(cat "$TEST_TMP/daemon.protected")"
}

# push ARGS: `git push host ARGS` from the agent's clone through the gate.
push() {
  gate
  local rp
  rp="$(printf '%q ' /usr/bin/git "${GATE_C[@]}") receive-pack"
  [ "$GATE_HOST_HOOKS" != '<unset>' ] || fail 'git-gate.sh did not export AGENT_SANDBOX_HOST_HOOKS'
  run --separate-stderr env AGENT_SANDBOX_HOST_HOOKS="$GATE_HOST_HOOKS" AGENT_SANDBOX_PROTECTED_BRANCHES="$GATE_PROTECTED" \
    /usr/bin/git -C "$AREPO" push --receive-pack="$rp" host "$@"
}
# plain_push ARGS: the control, the same push to a receive-pack without the gate.
plain_push() { run --separate-stderr /usr/bin/git -C "$AREPO" push host "$@"; }

assert_stderr_has() { [[ "$stderr" == *"$1"* ]] || fail "stderr lacks: $1"$'\n'"stderr: $stderr"; }
assert_stderr_lacks() { [[ "$stderr" != *"$1"* ]] || fail "stderr has: $1"$'\n'"stderr: $stderr"; }

# host_hook NAME BODY: the host repository's own hook NAME in its .git/hooks.
host_hook() {
  printf '#!/usr/bin/env bash\n%s\n' "$2" > "$HOST/.git/hooks/$1"
  chmod 0755 "$HOST/.git/hooks/$1"
}

# ------------------------------------------------------------ branches

@test "a fast-forward push of a branch is accepted" {
  acommit src/a.txt one 'agent work'
  push feat
  assert_success
  assert_equal "$(hrev feat)" "$(arev feat)"
  assert_stderr_lacks 'agent-sandbox gate'
}

@test "a new branch is accepted" {
  git -C "$AREPO" checkout -q -b topic
  acommit src/a.txt one 'agent work'
  push topic
  assert_success
  assert_equal "$(hrev topic)" "$(arev topic)"
}

@test "a forced non-fast-forward push is refused with the refs/sandbox hint (control: it lands without the gate)" {
  git -C "$HOST" checkout -q feat
  echo host > "$HOST/host.txt"
  git -C "$HOST" add host.txt
  git -C "$HOST" commit -q -m 'host work'
  git -C "$HOST" checkout -q main
  local host_feat
  host_feat="$(hrev feat)"
  acommit src/a.txt one 'agent work'
  push --force feat
  assert_failure
  assert_stderr_has "agent-sandbox gate: refused refs/heads/feat: not a fast-forward (the host has commits you do not); git fetch host and rebase, or propose it for review: git push host HEAD:refs/sandbox/feat"
  assert_equal "$(hrev feat)" "$host_feat"
  plain_push --force feat
  assert_success
  assert_equal "$(hrev feat)" "$(arev feat)"
}

@test "deleting a branch or a tag is refused, by receive.denyDeletes and by the hook itself (control: it works without the gate)" {
  push --delete feat
  assert_failure
  hrev -q --verify refs/heads/feat
  push --delete v1
  assert_failure
  hrev -q --verify refs/tags/v1
  # The hook alone, without receive.denyDeletes.
  run --separate-stderr /usr/bin/git -C "$AREPO" push --receive-pack="git -c core.hooksPath=$AGENT_SANDBOX_GATE_HOOKS receive-pack" host --delete feat
  assert_failure
  assert_stderr_has "agent-sandbox gate: refused refs/heads/feat: deleting refs is not allowed through the sandbox's gate"
  hrev -q --verify refs/heads/feat
  plain_push --delete feat
  assert_success
  run hrev -q --verify refs/heads/feat
  assert_failure
}

@test "protected branches: the default branch by default, and globs from AGENT_SANDBOX_PROTECTED_BRANCHES" {
  git -C "$HOST" checkout -q --detach # so that receive.denyCurrentBranch is not what refuses
  git -C "$AREPO" checkout -q -b main-work host/main
  acommit src/a.txt one 'agent work'
  local main_before
  main_before="$(hrev main)"
  push HEAD:main
  assert_failure
  assert_stderr_has 'agent-sandbox gate: refused refs/heads/main: main is a protected branch; propose it for review instead: git push host HEAD:refs/sandbox/main'
  assert_equal "$(hrev main)" "$main_before"
  export AGENT_SANDBOX_PROTECTED_BRANCHES=$'main\nrelease/*'
  push HEAD:refs/heads/release/1.0
  assert_failure
  assert_stderr_has 'agent-sandbox gate: refused refs/heads/release/1.0: release/1.0 is a protected branch'
  run hrev -q --verify refs/heads/release/1.0
  assert_failure
  # Not matched by the glob: accepted.
  push HEAD:refs/heads/releases HEAD:refs/heads/feat
  assert_success
  assert_equal "$(hrev releases)" "$(arev HEAD)"
  # Control: without the gate, main moves.
  plain_push HEAD:main
  assert_success
  assert_equal "$(hrev main)" "$(arev HEAD)"
}

@test "one refused ref refuses the whole push" {
  acommit src/a.txt one 'agent work'
  push feat HEAD:refs/notes/x
  assert_failure
  assert_equal "$(hrev feat)" "$(hrev main)"
}

# ------------------------------------------------------------ tags and other refs

@test "a new tag is accepted; moving an existing one is refused (control: it moves without the gate)" {
  acommit src/a.txt one 'agent work'
  git -C "$AREPO" tag v2
  push v2
  assert_success
  assert_equal "$(hrev v2)" "$(arev v2)"
  git -C "$AREPO" tag -f v1 HEAD
  local v1
  v1="$(hrev v1)"
  push --force v1
  assert_failure
  assert_stderr_has 'agent-sandbox gate: refused refs/tags/v1: moving an existing tag is not allowed through the sandbox'"'"'s gate'
  assert_equal "$(hrev v1)" "$v1"
  plain_push --force v1
  assert_success
  assert_equal "$(hrev v1)" "$(arev v1)"
}

@test "refs/sandbox/* is accepted, even a forced non-fast-forward" {
  acommit src/a.txt one 'first proposal'
  push HEAD:refs/sandbox/feat
  assert_success
  assert_equal "$(hrev refs/sandbox/feat)" "$(arev HEAD)"
  git -C "$AREPO" reset -q --hard host/feat
  acommit src/a.txt two 'second proposal'
  push --force HEAD:refs/sandbox/feat
  assert_success
  assert_equal "$(hrev refs/sandbox/feat)" "$(arev HEAD)"
  assert_equal "$(git -C "$HOST" log -1 --format=%s refs/sandbox/feat)" 'second proposal'
}

@test "other namespaces are refused (control: they land without the gate)" {
  local ref
  for ref in refs/notes/x refs/remotes/x refs/stash refs/x; do
    push "HEAD:$ref"
    assert_failure
    assert_stderr_has "agent-sandbox gate: refused $ref: only branches (refs/heads/*), new tags and proposals (refs/sandbox/*) can be pushed to the host"
    run hrev -q --verify "$ref"
    assert_failure
  done
  plain_push HEAD:refs/notes/x
  assert_success
  assert_equal "$(hrev refs/notes/x)" "$(arev HEAD)"
}

# ------------------------------------------------------------ quality-gate configuration

@test "a push that changes quality-gate configuration is flagged, and still accepted" {
  acommit .pre-commit-config.yaml 'repos: []' 'drop the hooks'
  acommit .husky/pre-commit 'exit 0' 'husky: do nothing'
  push feat
  assert_success
  assert_stderr_has 'agent-sandbox gate: warning: refs/heads/feat changes quality-gate configuration: .husky/pre-commit, .pre-commit-config.yaml'
  assert_equal "$(hrev feat)" "$(arev feat)"
}

@test "a new branch that changes quality-gate configuration is flagged against the host's history" {
  git -C "$AREPO" checkout -q -b topic
  acommit src/a.txt one 'unrelated'
  acommit package.json '{"lint-staged": {"*.js": "true"}}' 'lint-staged config'
  push topic
  assert_success
  assert_stderr_has 'agent-sandbox gate: warning: refs/heads/topic changes quality-gate configuration: package.json'
}

@test "every hook framework's configuration is flagged, each in a push of its own" {
  local path
  for path in .husky/pre-commit .husky/_/h lefthook.yml .lefthook.yaml lefthook-local.yml .lefthook-local.toml lefthook.json lefthook.jsonc \
    .lefthook/pre-commit/check.sh .lefthook-local/x.sh .config/lefthook.yml .pre-commit-config.yaml .pre-commit-config.yml \
    .overcommit.yml .git-hooks/pre_commit/x.rb .lintstagedrc .lintstagedrc.json .lintstagedrc.mjs lint-staged.config.js \
    packages/a/.lintstagedrc.yml .config/lintstagedrc.json commitlint.config.js commitlint.config.ts .commitlintrc .commitlintrc.yaml \
    .config/commitlintrc.json .simple-git-hooks.json .simple-git-hooks.cjs simple-git-hooks.js .agent-sandbox/config.json; do
    acommit "$path" "weakened $path" "change $path"
    push feat
    assert_success
    assert_stderr_has "agent-sandbox gate: warning: refs/heads/feat changes quality-gate configuration: $path"
  done
}

@test "package.json is flagged when a hook key changes (lint-staged, commitlint, simple-git-hooks, husky), not for other edits" {
  acommit package.json '{"name": "app", "lint-staged": {"*.js": "false"}}' 'package.json with lint-staged'
  push feat
  assert_stderr_has 'changes quality-gate configuration: package.json'
  acommit package.json '{"name": "app", "version": "2", "dependencies": {"x": "1"}, "lint-staged": {"*.js": "false"}}' 'a dependency'
  push feat
  assert_success
  assert_stderr_lacks 'quality-gate'
  local key
  for key in lint-staged commitlint simple-git-hooks husky; do
    acommit package.json "{\"name\": \"app\", \"lint-staged\": {\"*.js\": \"false\"}, \"$key\": {\"changed\": \"$key\"}}" "change $key"
    push feat
    assert_success
    assert_stderr_has 'changes quality-gate configuration: package.json'
    acommit package.json '{"name": "app", "lint-staged": {"*.js": "false"}}' 'back'
    push feat
  done
  # In a workspace package too; and one that is not JSON is flagged when it changes at all.
  acommit packages/a/package.json '{"commitlint": {}}' 'nested'
  push feat
  assert_stderr_has 'changes quality-gate configuration: packages/a/package.json'
  acommit package.json '{not json' 'broken'
  push feat
  assert_stderr_has 'changes quality-gate configuration: package.json'
}

@test "AGENT_SANDBOX_GATE_FILES (what the sandbox protected for the hooks): those paths and what is under them are flagged" {
  acommit scripts/hooks/env.sh 'exit 0' 'a sourced helper'
  acommit .githooks/pre-commit 'exit 0' 'the hooks directory'
  acommit scripts/hooks-other.sh 'x' 'a neighbour'
  AGENT_SANDBOX_GATE_FILES=$'scripts/hooks/env.sh\n.githooks' push feat
  assert_success
  assert_stderr_has 'changes quality-gate configuration: .githooks/pre-commit, scripts/hooks/env.sh'
  assert_stderr_lacks 'hooks-other'
}

@test "an unrelated change is not flagged" {
  acommit src/a.txt one 'agent work'
  acommit docs/pre-commit-config.yaml.md notes 'docs about hooks'
  acommit docs/lefthook.yml.md notes 'more docs'
  acommit src/lint-staged-helper.ts 'x' 'a source file'
  acommit package.json '{"name": "app"}' 'a package without hook keys'
  push feat
  assert_success
  assert_stderr_lacks 'quality-gate'
  git -C "$AREPO" checkout -q -b topic
  acommit src/b.txt two 'more'
  push topic
  assert_success
  assert_stderr_lacks 'quality-gate'
}

# ------------------------------------------------------------ the host's own hooks

@test "the host's own pre-receive gets the push's lines and can refuse it" {
  host_hook pre-receive "{ echo pre-receive; cat; } >> '$LOG'; exit \$(cat '$TEST_TMP/pre-receive-exit' 2>/dev/null || echo 0)"
  acommit src/a.txt one 'agent work'
  local old new
  old="$(hrev feat)" new="$(arev feat)"
  echo 1 > "$TEST_TMP/pre-receive-exit"
  push feat
  assert_failure
  assert_equal "$(hrev feat)" "$old"
  assert_equal "$(cat "$LOG")" "pre-receive
$old $new refs/heads/feat"
  : > "$LOG"
  echo 0 > "$TEST_TMP/pre-receive-exit"
  push feat
  assert_success
  assert_equal "$(hrev feat)" "$new"
  assert_equal "$(cat "$LOG")" "pre-receive
$old $new refs/heads/feat"
}

@test "the host's own pre-receive never runs for a push the gate refused" {
  host_hook pre-receive "touch '$TEST_TMP/host-pre-receive-ran'"
  push HEAD:refs/notes/x
  assert_failure
  [ ! -e "$TEST_TMP/host-pre-receive-ran" ]
}

@test "chain: the host's update, post-receive and post-update run with their arguments and input" {
  host_hook pre-receive "{ echo pre-receive; cat; } >> '$LOG'"
  host_hook update "echo \"update \$*\" >> '$LOG'"
  host_hook post-receive "{ echo post-receive; cat; } >> '$LOG'"
  host_hook post-update "echo \"post-update \$*\" >> '$LOG'"
  acommit src/a.txt one 'agent work'
  local old new
  old="$(hrev feat)" new="$(arev feat)"
  push feat
  assert_success
  assert_equal "$(cat "$LOG")" "pre-receive
$old $new refs/heads/feat
update refs/heads/feat $old $new
post-receive
$old $new refs/heads/feat
post-update refs/heads/feat"
  # Control: without the chain copies in the gate's hooks, the host's hooks do not run
  # (core.hooksPath points at the gate's hooks).
  rm "$AGENT_SANDBOX_GATE_HOOKS/update" "$AGENT_SANDBOX_GATE_HOOKS/post-receive" "$AGENT_SANDBOX_GATE_HOOKS/post-update"
  : > "$LOG"
  acommit src/a.txt two 'more agent work'
  push feat
  assert_success
  assert_equal "$(cat "$LOG")" "pre-receive
$new $(arev feat) refs/heads/feat"
}

@test "chain: a failing host update hook refuses its ref" {
  host_hook update "echo 'host update says no' >&2; exit 1"
  acommit src/a.txt one 'agent work'
  local old
  old="$(hrev feat)"
  push feat
  assert_failure
  assert_stderr_has 'host update says no'
  assert_equal "$(hrev feat)" "$old"
}

@test "chain: the host's core.hooksPath inside the workspace is where its hooks are found" {
  git -C "$HOST" config core.hooksPath .githooks
  mkdir -p "$HOST/.githooks"
  printf '#!/bin/sh\necho "update $*" >> %s\n' "$LOG" > "$HOST/.githooks/update"
  chmod 0755 "$HOST/.githooks/update"
  host_hook update "echo 'the .git/hooks one ran' >> '$LOG'"
  acommit src/a.txt one 'agent work'
  local old
  old="$(hrev feat)"
  push feat
  assert_success
  assert_equal "$(cat "$LOG")" "update refs/heads/feat $old $(arev feat)"
}

@test "chain: no host hooks at all, and the push still lands" {
  acommit src/a.txt one 'agent work'
  push feat
  assert_success
  assert_equal "$(hrev feat)" "$(arev feat)"
}

# ------------------------------------------------------------ bind mode: the host's checked-out branch

@test "bind: a push to the checked-out branch moves the host's branch and index only; git status is clean" {
  export AGENT_SANDBOX_GATE_MODE=bind
  git -C "$HOST" checkout -q feat
  acommit src/a.txt one 'agent work'
  # The shared work tree already holds the agent's files.
  mkdir -p "$HOST/src"
  echo one > "$HOST/src/a.txt"
  push feat
  assert_success
  assert_equal "$(hrev feat)" "$(arev feat)"
  assert_equal "$(git -C "$HOST" symbolic-ref HEAD)" refs/heads/feat
  run git -C "$HOST" status --porcelain
  assert_success
  assert_output ''
}

@test "bind: a push whose files the shared work tree does not hold is refused; the work tree and the index are untouched" {
  export AGENT_SANDBOX_GATE_MODE=bind
  git -C "$HOST" checkout -q feat
  acommit src/a.txt one 'agent work'
  mkdir -p "$HOST/src"
  echo 'edited since' > "$HOST/src/a.txt"
  local old index_before
  old="$(hrev feat)" index_before="$(git -C "$HOST" ls-files -s)"
  push feat
  assert_failure
  assert_stderr_has 'agent-sandbox gate: refused refs/heads/feat: the pushed commit is not what the shared work tree holds (src/a.txt differs)'
  assert_equal "$(hrev feat)" "$old"
  assert_equal "$(git -C "$HOST" ls-files -s)" "$index_before"
  assert_equal "$(cat "$HOST/src/a.txt")" 'edited since'
}

@test "bind: a removed file still in the work tree, or another executable bit, is refused too" {
  export AGENT_SANDBOX_GATE_MODE=bind
  git -C "$HOST" checkout -q feat
  mkdir -p "$HOST/src"
  echo zero > "$HOST/src/a.txt"
  git -C "$HOST" add src/a.txt
  git -C "$HOST" commit -q -m 'a file on the host'
  git -C "$AREPO" fetch -q host
  git -C "$AREPO" reset -q --hard host/feat
  git -C "$AREPO" rm -q src/a.txt
  git -C "$AREPO" commit -q -m 'agent removes it'
  push feat
  assert_failure
  assert_stderr_has 'src/a.txt is still there'
  git -C "$AREPO" reset -q --hard host/feat
  chmod +x "$AREPO/src/a.txt"
  git -C "$AREPO" commit -q -am 'agent makes it executable'
  push feat
  assert_failure
  assert_stderr_has 'src/a.txt has another mode'
  # The same commit lands once the work tree holds it.
  chmod +x "$HOST/src/a.txt"
  push feat
  assert_success
  assert_equal "$(hrev feat)" "$(arev feat)"
}

@test "bind: control: updateInstead without the gate's push-to-checkout refuses when the work tree holds the files" {
  git -C "$HOST" checkout -q feat
  acommit src/a.txt one 'agent work'
  mkdir -p "$HOST/src"
  echo one > "$HOST/src/a.txt"
  local old
  old="$(hrev feat)"
  run --separate-stderr /usr/bin/git -C "$AREPO" push --receive-pack='git -c receive.denyCurrentBranch=updateInstead receive-pack' host feat
  assert_failure
  assert_equal "$(hrev feat)" "$old"
}

@test "bind: what the user staged elsewhere is kept" {
  export AGENT_SANDBOX_GATE_MODE=bind
  git -C "$HOST" checkout -q feat
  echo 'user change' > "$HOST/README.md"
  git -C "$HOST" add README.md
  acommit src/a.txt one 'agent work'
  mkdir -p "$HOST/src"
  echo one > "$HOST/src/a.txt"
  push feat
  assert_success
  assert_equal "$(hrev feat)" "$(arev feat)"
  run git -C "$HOST" status --porcelain
  assert_output 'M  README.md'
  assert_equal "$(git -C "$HOST" show :README.md)" 'user change'
}

@test "bind: a push that conflicts with what the user staged is refused by pre-receive, and the index is kept" {
  export AGENT_SANDBOX_GATE_MODE=bind
  git -C "$HOST" checkout -q feat
  mkdir -p "$HOST/src"
  echo 'staged by the user' > "$HOST/src/a.txt"
  git -C "$HOST" add src/a.txt
  local old index_before
  old="$(hrev feat)" index_before="$(git -C "$HOST" ls-files -s)"
  acommit src/a.txt 'pushed by the agent' 'agent work'
  # The agent's edit is in the shared work tree; the user's staged version is in the host's index.
  echo 'pushed by the agent' > "$HOST/src/a.txt"
  push feat
  assert_failure
  assert_stderr_has 'agent-sandbox gate: refused refs/heads/feat: the user has staged changes on the host that conflict with this push; propose it for review: git push host HEAD:refs/sandbox/feat'
  assert_equal "$(hrev feat)" "$old"
  assert_equal "$(git -C "$HOST" ls-files -s)" "$index_before"
  # The proposal route the message names works.
  push HEAD:refs/sandbox/feat
  assert_success
  assert_equal "$(hrev refs/sandbox/feat)" "$(arev feat)"
}

@test "branch mode: a push to the host's checked-out branch is refused (receive.denyCurrentBranch=refuse)" {
  git -C "$HOST" checkout -q feat
  acommit src/a.txt one 'agent work'
  local old
  old="$(hrev feat)"
  push feat
  assert_failure
  assert_equal "$(hrev feat)" "$old"
}

# ------------------------------------------------------------ git-gate.sh

@test "git-gate.sh: no REPO/.git, a bad port, a bad mode: refused before serving" {
  AGENT_SANDBOX_GATE_REPO="$TEST_TMP/none" run --separate-stderr bash "$GATE"
  assert_failure 1
  assert_equal "$stderr" "git-gate: $TEST_TMP/none/.git is not mounted"
  local port
  for port in abc 94x18 '' ' 9418'; do
    [ -n "$port" ] || continue # empty means the default
    AGENT_SANDBOX_GATE_PORT="$port" run --separate-stderr bash "$GATE"
    assert_failure 1
    assert_equal "$stderr" "git-gate: AGENT_SANDBOX_GATE_PORT is not a port: $port"
  done
  AGENT_SANDBOX_GATE_MODE=shelf run --separate-stderr bash "$GATE"
  assert_failure 1
  assert_equal "$stderr" 'git-gate: AGENT_SANDBOX_GATE_MODE must be bind or branch, not shelf'
  [ ! -e "$TEST_TMP/daemon.argv" ]
}

@test "git-gate.sh: the daemon's argv (bind: updateInstead, branch: refuse)" {
  AGENT_SANDBOX_GATE_MODE=bind AGENT_SANDBOX_GATE_PORT=9555 run --separate-stderr bash "$GATE"
  assert_success
  assert_equal "$stderr" "git-gate: serving $HOST on 127.0.0.1:9555 (bind mode); protected: main"
  assert_equal "$(cat "$TEST_TMP/daemon.argv")" "-c
core.hooksPath=$AGENT_SANDBOX_GATE_HOOKS
-c
core.fsmonitor=false
-c
receive.denyDeletes=true
-c
receive.denyDeleteCurrent=refuse
-c
receive.fsckObjects=true
-c
receive.denyCurrentBranch=updateInstead
-c
receive.shallowUpdate=false
-c
uploadpack.allowAnySHA1InWant=false
-c
safe.directory=$HOST
-c
safe.directory=$HOST/.git
daemon
--listen=127.0.0.1
--port=9555
--reuseaddr
--export-all
--enable=receive-pack
--base-path=/gate
--strict-paths
--informative-errors
--log-destination=stderr
$HOST/.git"
  AGENT_SANDBOX_GATE_MODE=branch run --separate-stderr bash "$GATE"
  assert_success
  grep -qx 'receive.denyCurrentBranch=refuse' "$TEST_TMP/daemon.argv"
  grep -qx -- '--port=9418' "$TEST_TMP/daemon.argv"
}

@test "git-gate.sh: the protected branch by default is origin/HEAD's, else main, else master, else main" {
  gate
  assert_equal "$GATE_PROTECTED" main
  assert_equal "$stderr" "git-gate: serving $HOST on 127.0.0.1:9418 (branch mode); protected: main"
  git -C "$HOST" branch -m main master
  gate
  assert_equal "$GATE_PROTECTED" master
  git -C "$HOST" branch main master
  gate
  assert_equal "$GATE_PROTECTED" main
  git -C "$HOST" update-ref refs/remotes/origin/develop master
  git -C "$HOST" symbolic-ref refs/remotes/origin/HEAD refs/remotes/origin/develop
  gate
  assert_equal "$GATE_PROTECTED" develop
  # Neither main nor master, no origin/HEAD.
  git -C "$HOST" symbolic-ref --delete refs/remotes/origin/HEAD
  git -C "$HOST" checkout -q feat
  git -C "$HOST" branch -D main master
  gate
  assert_equal "$GATE_PROTECTED" main
}

@test "git-gate.sh: AGENT_SANDBOX_PROTECTED_BRANCHES adds to the default branch, never replaces it" {
  export AGENT_SANDBOX_PROTECTED_BRANCHES=$'trunk\nrelease/*'
  gate
  assert_equal "$GATE_PROTECTED" $'main\ntrunk\nrelease/*'
  assert_equal "$stderr" "git-gate: serving $HOST on 127.0.0.1:9418 (branch mode); protected: main, trunk, release/*"
}

@test "git-gate.sh: with no origin/HEAD, main or master, init.defaultBranch's branch is the default" {
  git -C "$HOST" branch -m main trunk
  git -C "$HOST" config init.defaultBranch trunk
  gate
  assert_equal "$GATE_PROTECTED" trunk
}

@test "git-gate.sh: the host's hooks for chain: .git/hooks, a relative core.hooksPath, none for an absolute one" {
  gate
  assert_equal "$GATE_HOST_HOOKS" "$HOST/.git/hooks"
  git -C "$HOST" config core.hooksPath ./.husky
  gate
  assert_equal "$GATE_HOST_HOOKS" "$HOST/.husky"
  git -C "$HOST" config core.hooksPath /opt/hooks
  gate
  assert_equal "$GATE_HOST_HOOKS" ''
}

# ------------------------------------------------------------ names that differ only in case

@test "rules: a protected branch is matched whatever its case, and a new ref that differs from an existing one only in case is refused" {
  acommit src/a.txt one 'agent work'
  push HEAD:refs/heads/MAIN
  assert_failure
  assert_stderr_has 'refused refs/heads/MAIN: it differs from refs/heads/main only in case'
  export AGENT_SANDBOX_PROTECTED_BRANCHES='release/*'
  push HEAD:refs/heads/Release/1
  assert_failure
  assert_stderr_has 'refused refs/heads/Release/1: Release/1 is a protected branch'
  unset AGENT_SANDBOX_PROTECTED_BRANCHES
  push HEAD:refs/heads/Feat
  assert_failure
  assert_stderr_has 'refused refs/heads/Feat: it differs from refs/heads/feat only in case'
  run git -C "$HOST" rev-parse -q --verify refs/heads/Feat
  assert_failure
  # control: a new name of its own lands
  push HEAD:refs/heads/feature-two
  assert_success
}

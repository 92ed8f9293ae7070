#!/bin/sh
# hook-dispatch.sh [ARGS...]: every git hook of a bind-mode sandbox.
#
# agent-git.sh pins core.hooksPath to a root-owned directory of links to this
# script, one per hook name, and writes the repository's real hooks directory
# to .hooks-dir beside them. Git runs us as the agent, from the work tree,
# with the hook's arguments and stdin; we run the real hook of the same name
# (if it exists and is executable) with the same, and exit with its status.
# Around it, the hook configuration the agent could otherwise weaken:
#   * a framework's config file that is writable here was created (or is not
#     protected) inside the sandbox, so it is not the repository's: refused;
#   * package.json's hook keys ("lint-staged", "commitlint",
#     "simple-git-hooks", "husky") are HEAD's for the hook's run: the working
#     copy is rewritten with them (hook-head-config.cjs) and restored byte for
#     byte afterwards. Tools read package.json themselves (`npx lint-staged`
#     resolves node_modules/.bin first), so the file itself is what we change.
# A .protect-off file beside the links (protectHookConfig false) turns both off.
# POSIX sh, builtins only until a real hook is found: it runs for every hook event.
# Env: AGENT_SANDBOX_REAL_GIT (default /usr/bin/git), AGENT_SANDBOX_NODE (node),
#   AGENT_SANDBOX_HEAD_CONFIG (default: hook-head-config.cjs beside the real script).
set -eu

name=${0##*/}
links=${0%/*}
real=""
if [ -r "$links/.hooks-dir" ]; then IFS= read -r real <"$links/.hooks-dir" || true; fi
[ -n "$real" ] && [ -f "$real/$name" ] && [ -x "$real/$name" ] || exit 0
hook=$real/$name

say() { printf 'agent-sandbox: %s\n' "$*" >&2; }

if [ ! -e "$links/.protect-off" ]; then
  # The names hook-config.ts detects (and protects when they exist at start).
  for f in lefthook.yml lefthook.yaml lefthook.json lefthook.jsonc lefthook.toml \
    .lefthook.yml .lefthook.yaml .lefthook.json .lefthook.jsonc .lefthook.toml \
    lefthook-local.yml lefthook-local.yaml lefthook-local.json lefthook-local.jsonc lefthook-local.toml \
    .lefthook-local.yml .lefthook-local.yaml .lefthook-local.json .lefthook-local.jsonc .lefthook-local.toml \
    .lefthook .lefthook-local .config/lefthook.yml .config/lefthook.yaml .config/lefthook-local.yml .config/lefthook-local.yaml \
    .pre-commit-config.yaml .pre-commit-config.yml .overcommit.yml \
    .lintstagedrc .lintstagedrc.json .lintstagedrc.yaml .lintstagedrc.yml .lintstagedrc.js .lintstagedrc.cjs .lintstagedrc.mjs \
    .lintstagedrc.ts .lintstagedrc.cts .lintstagedrc.mts lint-staged.config.js lint-staged.config.cjs lint-staged.config.mjs \
    lint-staged.config.ts lint-staged.config.cts lint-staged.config.mts \
    .commitlintrc .commitlintrc.json .commitlintrc.yaml .commitlintrc.yml .commitlintrc.js .commitlintrc.cjs .commitlintrc.mjs \
    .commitlintrc.ts .commitlintrc.cts .commitlintrc.mts commitlint.config.js commitlint.config.cjs commitlint.config.mjs \
    commitlint.config.ts commitlint.config.cts commitlint.config.mts \
    .simple-git-hooks.js .simple-git-hooks.cjs .simple-git-hooks.mjs .simple-git-hooks.json \
    simple-git-hooks.js simple-git-hooks.cjs simple-git-hooks.mjs simple-git-hooks.json; do
    if [ -e "$f" ] && [ -w "$f" ]; then
      say "$f is hook configuration that is not the repository's own here: it was created or replaced inside the sandbox (the repository's is read-only). The $name hook does not run with it; remove it (or, if the user added it on the host, ask them to restart the sandbox)."
      exit 1
    fi
  done

  GIT=${AGENT_SANDBOX_REAL_GIT:-/usr/bin/git}
  backup=""
  restore() {
    if [ -n "$backup" ]; then
      cat -- "$backup" >package.json && rm -f -- "$backup"
      backup=""
    fi
  }
  keys='"(lint-staged|commitlint|simple-git-hooks|husky)"'
  # Node only when package.json is not HEAD's byte for byte and one of them
  # mentions a key (two or three git processes otherwise; node costs ~100 ms).
  head_blob=""
  if [ -f package.json ] && "$GIT" rev-parse -q --verify HEAD >/dev/null 2>&1 &&
    head_blob=$("$GIT" rev-parse -q --verify HEAD:package.json 2>/dev/null || true) &&
    [ "$head_blob" != "$("$GIT" hash-object package.json 2>/dev/null)" ] &&
    { grep -qE "$keys" package.json || { [ -n "$head_blob" ] && "$GIT" cat-file -p "$head_blob" | grep -qE "$keys"; }; }; then
    backup=$(mktemp "${TMPDIR:-/tmp}/agent-sandbox-package.json.XXXXXX")
    trap restore EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    trap 'exit 129' HUP
    head_config=${AGENT_SANDBOX_HEAD_CONFIG:-/usr/local/lib/agent-sandbox/hook-head-config.cjs}
    if changed=$("${AGENT_SANDBOX_NODE:-node}" "$head_config" package.json "$backup"); then
      if [ -n "$changed" ]; then
        say "the $name hook runs with package.json $changed as committed in HEAD (the working copy's differ); your package.json is put back afterwards"
      else
        rm -f -- "$backup"
        backup=""
      fi
    else
      rm -f -- "$backup"
      backup=""
      say "could not read package.json's hook keys from HEAD; refusing to run the $name hook with the working copy's"
      exit 1
    fi
  fi
  status=0
  "$hook" "$@" || status=$?
  restore
  exit "$status"
fi
exec "$hook" "$@"

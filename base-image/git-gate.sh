#!/usr/bin/env bash
# git-gate.sh: the push gate, the only writer of the host repository.
#
# The main process of a sandbox's gate container: a container of its own (own
# PID and mount namespaces, no capabilities, read-only root), running as the
# workspace's owner, that shares only the sandbox's network namespace. It has
# the host workspace read-only at /gate/ws and the host's .git read-write at
# /gate/ws/.git; the sandbox has neither writable. It serves git on
# 127.0.0.1:GATE_PORT inside the sandbox, where `git push host <branch>` goes,
# and only that repository (--strict-paths, one whitelisted directory: the
# agent can write repositories of its own in the work tree, and receive-pack
# would run their config's programs, core.alternateRefsCommand among them).
# receive-pack enforces, whatever client the agent uses:
#   - no deletions (receive.denyDeletes) and no malformed objects (fsckObjects);
#   - through the gate's own hooks (core.hooksPath, root's, in the image):
#     no non-fast-forward updates of branches or tags, no updates of protected
#     branches (the default branch, plus AGENT_SANDBOX_PROTECTED_BRANCHES),
#     only refs/heads/*, refs/tags/* and refs/sandbox/* (the agent's proposals,
#     which may move freely); then the host repository's own receive hooks run.
#   - bind mode (AGENT_SANDBOX_GATE_MODE=bind): a push to the branch the host
#     has checked out updates the host's index to it (the work tree is shared,
#     so it already holds the files), so the host's `git status` stays clean.
# Env: AGENT_SANDBOX_GATE_MODE bind|branch, AGENT_SANDBOX_GATE_PORT (9418),
#      AGENT_SANDBOX_PROTECTED_BRANCHES (newline-separated globs, on top of the default branch).
set -euo pipefail

abort() { printf 'git-gate: %s\n' "$*" >&2; exit 1; }

REPO="${AGENT_SANDBOX_GATE_REPO:-/gate/ws}"
HOOKS="${AGENT_SANDBOX_GATE_HOOKS:-/usr/local/lib/agent-sandbox/gate-hooks}"
PORT="${AGENT_SANDBOX_GATE_PORT:-9418}"
MODE="${AGENT_SANDBOX_GATE_MODE:-bind}"
GIT="${AGENT_SANDBOX_REAL_GIT:-/usr/bin/git}"

[[ -d "$REPO/.git" ]] || abort "$REPO/.git is not mounted"
[[ "$PORT" =~ ^[0-9]+$ ]] || abort "AGENT_SANDBOX_GATE_PORT is not a port: $PORT"
case "$MODE" in
  bind) current=updateInstead ;;
  branch) current=refuse ;;
  *) abort "AGENT_SANDBOX_GATE_MODE must be bind or branch, not $MODE" ;;
esac

export HOME="${TMPDIR:-/tmp}" GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null

# The host's own hooks directory, for the gate's hooks to chain to: its
# core.hooksPath when that is inside the workspace, else .git/hooks.
host_hooks="$("$GIT" config --file "$REPO/.git/config" --get core.hooksPath || true)"
case "$host_hooks" in
  "") host_hooks="$REPO/.git/hooks" ;;
  /*) host_hooks="" ;;
  *) host_hooks="$REPO/${host_hooks#./}" ;;
esac
export AGENT_SANDBOX_HOST_HOOKS="$host_hooks" AGENT_SANDBOX_GATE_REPO="$REPO"

# The default branch is always protected: protectedBranches only adds to it (a
# repository's own config must not be able to take the protection away).
default=""
if ref="$("$GIT" --git-dir="$REPO/.git" symbolic-ref -q refs/remotes/origin/HEAD)"; then
  default="${ref#refs/remotes/origin/}"
else
  for b in main master "$("$GIT" config --file "$REPO/.git/config" --get init.defaultBranch || true)"; do
    if [[ -n "$b" ]] && "$GIT" --git-dir="$REPO/.git" show-ref --verify --quiet "refs/heads/$b"; then default="$b"; break; fi
  done
fi
export AGENT_SANDBOX_PROTECTED_BRANCHES="${default:-main}${AGENT_SANDBOX_PROTECTED_BRANCHES:+$'\n'$AGENT_SANDBOX_PROTECTED_BRANCHES}"
printf 'git-gate: serving %s on 127.0.0.1:%s (%s mode); protected: %s\n' "$REPO" "$PORT" "$MODE" "${AGENT_SANDBOX_PROTECTED_BRANCHES//$'\n'/, }" >&2

# -c settings reach receive-pack and upload-pack through GIT_CONFIG_PARAMETERS,
# above the host repository's own config.
exec "$GIT" \
  -c core.hooksPath="$HOOKS" \
  -c core.fsmonitor=false \
  -c receive.denyDeletes=true \
  -c receive.denyDeleteCurrent=refuse \
  -c receive.fsckObjects=true \
  -c receive.denyCurrentBranch="$current" \
  -c receive.shallowUpdate=false \
  -c uploadpack.allowAnySHA1InWant=false \
  -c safe.directory="$REPO" \
  -c safe.directory="$REPO/.git" \
  daemon --listen=127.0.0.1 --port="$PORT" --reuseaddr --export-all --enable=receive-pack \
  --base-path=/gate --strict-paths --informative-errors --log-destination=stderr "$REPO/.git"

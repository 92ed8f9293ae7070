#!/usr/bin/env bash
# sandbox-exec CMD [ARG...]: run CMD once the sandbox is ready.
#
# The CLI prefixes every `docker exec` with this, so that no agent process can
# start before the entrypoint has installed the firewall, even in the first
# instant after a (re)start. Readiness is the file /run/agent-sandbox/ready on a
# tmpfs that only root can write and that is empty after every restart.
# Exits 125 if set-up failed or did not finish within AGENT_SANDBOX_READY_TIMEOUT seconds.
set -euo pipefail

state="${AGENT_SANDBOX_STATE_DIR:-/run/agent-sandbox}"
timeout="${AGENT_SANDBOX_READY_TIMEOUT:-120}"

abort() { printf 'agent-sandbox: %s\n' "$*" >&2; exit 125; }

if [ ! -e "$state/ready" ]; then
  deadline=$((SECONDS + timeout))
  while [ ! -e "$state/ready" ]; do
    if [ -e "$state/failed" ]; then
      abort "sandbox set-up failed: $(head -n 1 "$state/failed")"
    fi
    [ "$SECONDS" -lt "$deadline" ] || abort "sandbox not ready after ${timeout}s (see: docker logs)"
    sleep 0.02
  done
fi
# Bind mode: the agent's git directory follows the host's branches when the
# user moved them on the host (agent-git.sh --sync). Only builtins on the way:
# the check runs before every command, the sync only when a ref is newer.
if [ -n "${AGENT_SANDBOX_HOST_GIT:-}" ] && [ -n "${AGENT_SANDBOX_GIT_WORKTREE:-}" ]; then
  gd="$AGENT_SANDBOX_GIT_WORKTREE/.git"
  stamp="$gd/agent-sandbox-synced"
  if [ -e "$stamp" ] && read -r head < "$gd/HEAD" 2>/dev/null; then
    ref="${head#ref: }"
    if [ "$AGENT_SANDBOX_HOST_GIT/$ref" -nt "$stamp" ] || [ "$AGENT_SANDBOX_HOST_GIT/packed-refs" -nt "$stamp" ]; then
      "${AGENT_SANDBOX_AGENT_GIT_SCRIPT:-/usr/local/sbin/agent-git}" --sync "$AGENT_SANDBOX_GIT_WORKTREE" "$AGENT_SANDBOX_HOST_GIT" >&2 || true
    fi
  fi
fi
[ "$#" -gt 0 ] || exit 0
exec "$@"

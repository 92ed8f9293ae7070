#!/usr/bin/env bash
# sandbox-exec CMD [ARG...]: run CMD once the sandbox is ready.
#
# The CLI prefixes every `docker exec` with this, so that no agent process can
# start before the entrypoint has installed the firewall, even in the first
# instant after a (re)start. Readiness is the file /run/agent-sandbox/ready on a
# tmpfs that only root can write and that is empty after every restart.
# Exits 125 if set-up failed or did not finish within AGENT_SANDBOX_READY_TIMEOUT
# seconds, or if mount-watch found a protected path unmounted (the file
# compromised: the sandbox must be restarted to get its read-only mounts back).
set -euo pipefail

state="${AGENT_SANDBOX_STATE_DIR:-/run/agent-sandbox}"
timeout="${AGENT_SANDBOX_READY_TIMEOUT:-120}"

abort() { printf 'agent-sandbox: %s\n' "$*" >&2; exit 125; }

# Builtins only: mount-watch kills every other process of `node` once compromised.
# The CLI, which restarts the sandbox and says why itself, asks for no message.
if [ -e "$state/compromised" ]; then
  [ "${AGENT_SANDBOX_QUIET_REFUSAL:-}" != compromised ] || exit 125
  IFS= read -r why < "$state/compromised" || true
  abort "refused: ${why:-a protected path was unmounted}; the sandbox must be restarted (agent-sandbox exec or start restarts it)"
fi
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
unset AGENT_SANDBOX_QUIET_REFUSAL
# Bind mode: the agent's git directory follows the host's branches when the
# user moved them on the host (agent-git.sh --sync). Only builtins on the way:
# the check runs before every command, the sync only when a ref is newer.
if [ -n "${AGENT_SANDBOX_HOST_GIT:-}" ] && [ -n "${AGENT_SANDBOX_GIT_WORKTREE:-}" ]; then
  gd="$AGENT_SANDBOX_GIT_WORKTREE/.git"
  stamp="$gd/agent-sandbox-synced"
  # The pinned keys (.git/config.worktree, root's) are read only while the
  # agent's own config says extensions.worktreeConfig = true. That switch is in
  # a file the agent may write (git writes everyday settings there), so each
  # command puts it back if it was turned off: a guardrail (docs/security.md).
  pinned_on=0
  if [ -e "$gd/config.worktree" ] && [ -r "$gd/config" ]; then
    # The last worktreeConfig line wins, as in git.
    while IFS= read -r line || [ -n "$line" ]; do
      line="${line//[[:space:]]/}"
      line="${line,,}"
      case "$line" in
        worktreeconfig=true) pinned_on=1 ;;
        worktreeconfig=*) pinned_on=0 ;;
      esac
    done < "$gd/config"
    if [ "$pinned_on" = 0 ]; then
      printf 'agent-sandbox: extensions.worktreeConfig was turned off in %s/config; turned back on (the pinned git settings stay in force)\n' "$gd" >&2
      "${AGENT_SANDBOX_REAL_GIT:-/usr/bin/git}" --git-dir="$gd" config --replace-all extensions.worktreeConfig true || true
    fi
  fi
  if [ -e "$stamp" ] && read -r head < "$gd/HEAD" 2>/dev/null; then
    ref="${head#ref: }"
    if [ "$AGENT_SANDBOX_HOST_GIT/$ref" -nt "$stamp" ] || [ "$AGENT_SANDBOX_HOST_GIT/packed-refs" -nt "$stamp" ]; then
      "${AGENT_SANDBOX_AGENT_GIT_SCRIPT:-/usr/local/sbin/agent-git}" --sync "$AGENT_SANDBOX_GIT_WORKTREE" "$AGENT_SANDBOX_HOST_GIT" >&2 || true
    fi
  fi
fi
[ "$#" -gt 0 ] || exit 0
exec "$@"

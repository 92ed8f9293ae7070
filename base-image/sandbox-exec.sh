#!/usr/bin/env bash
# sandbox-exec CMD [ARG...]: run CMD once the sandbox is ready.
#
# The CLI prefixes every `docker exec` with this, so that no agent process can
# start before the entrypoint has installed the firewall, even in the first
# instant after a (re)start. Readiness is the file /run/agent-sandbox/ready on a
# tmpfs that only root can write and that is empty after every restart.
# Exits 125 if set-up failed or did not finish within AGENT_SANDBOX_READY_TIMEOUT
# seconds, or if mount-watch found a protected path unmounted (the file
# compromised: the sandbox must be restarted to get its read-only mounts back),
# or, when the caller asks with AGENT_SANDBOX_CHECK_GATEWAY=PORT (the CLI's exec
# and shell do), if a sidecar of the sandbox does not listen in its network
# namespace: the egress gateway on 127.0.0.1:PORT (when the sandbox has one,
# AGENT_SANDBOX_GATEWAY_UID), the push gate on 127.0.0.1:AGENT_SANDBOX_GATE_PORT
# (when it has one). Such a sidecar is missing, stopped, was left in the
# namespace of an earlier start (a `docker restart` of the sandbox), or lost
# its state in a restart of its own: the CLI repairs it (sandbox/health.ts) and
# runs CMD then.
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
# Builtins only (the check runs before every exec): a connect to a sidecar's
# port through bash's /dev/tcp, about 0.1 ms (reading /proc/net/tcp costs
# milliseconds: the kernel walks its whole socket table). The gateway closes
# the silent connection without logging it; the gate's git daemon ends the
# child it forks for it at the end of input.
listens() {
  local fd
  { exec {fd}<> "/dev/tcp/127.0.0.1/$1"; } 2> /dev/null || return 1
  exec {fd}>&-
}
if [ -n "${AGENT_SANDBOX_CHECK_GATEWAY:-}" ]; then
  check_port="$AGENT_SANDBOX_CHECK_GATEWAY"
  unset AGENT_SANDBOX_CHECK_GATEWAY
  if [ -n "${AGENT_SANDBOX_GATEWAY_UID:-}" ] && ! listens "$check_port"; then
    [ "${AGENT_SANDBOX_QUIET_REFUSAL:-}" != compromised ] || exit 125
    abort "refused: the egress gateway does not serve this sandbox (no web access); agent-sandbox exec or start makes it anew"
  fi
  if [ -n "${AGENT_SANDBOX_GATE_PORT:-}" ] && ! listens "$AGENT_SANDBOX_GATE_PORT"; then
    [ "${AGENT_SANDBOX_QUIET_REFUSAL:-}" != compromised ] || exit 125
    abort "refused: the push gate does not serve this sandbox (no git push host); agent-sandbox exec or start makes it anew"
  fi
fi
unset AGENT_SANDBOX_QUIET_REFUSAL
# Bind mode: the agent's git directory follows the host's branches when the
# user moved them on the host (agent-git.sh --sync). Only builtins on the way:
# the check runs before every command, the sync only when a ref is newer.
# Only for the agent's own commands: root must not leave files of its own in the
# agent's .git (AGENT_SANDBOX_SYNC_AS_ROOT: the bats tests, which run as root).
if [ -n "${AGENT_SANDBOX_HOST_GIT:-}" ] && [ -n "${AGENT_SANDBOX_GIT_WORKTREE:-}" ] && { [ "$EUID" -ne 0 ] || [ -n "${AGENT_SANDBOX_SYNC_AS_ROOT:-}" ]; }; then
  gd="$AGENT_SANDBOX_GIT_WORKTREE/.git"
  stamp="$gd/agent-sandbox-synced"
  # The pinned keys (.git/config.worktree, root's) are read only while the
  # agent's own config says extensions.worktreeConfig = true. That switch is in
  # a file the agent may write (git writes everyday settings there), so each
  # command puts it back if it was turned off: a guardrail (docs/security.md).
  if [ -e "$gd/config.worktree" ]; then
    git_bin="${AGENT_SANDBOX_REAL_GIT:-/usr/bin/git}"
    # git's own reading (sections, includes, the last value wins), not a parse of ours.
    if [ "$("$git_bin" --git-dir="$gd" config --type=bool --get extensions.worktreeConfig 2>/dev/null)" != true ]; then
      "$git_bin" --git-dir="$gd" config --replace-all extensions.worktreeConfig true 2>/dev/null || true
      if [ "$("$git_bin" --git-dir="$gd" config --type=bool --get extensions.worktreeConfig 2>/dev/null)" = true ]; then
        printf 'agent-sandbox: extensions.worktreeConfig was turned off in %s/config; turned back on (the pinned git settings stay in force)\n' "$gd" >&2
      else
        printf 'agent-sandbox: warning: extensions.worktreeConfig is turned off in %s/config (an include?): the pinned git settings are not in force\n' "$gd" >&2
      fi
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

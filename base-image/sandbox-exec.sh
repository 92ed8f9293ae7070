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
[ "$#" -gt 0 ] || exit 0
exec "$@"

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
[ "$#" -gt 0 ] || exit 0
exec "$@"

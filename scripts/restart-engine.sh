#!/usr/bin/env bash
# restart-engine.sh docker|podman: restart the engine daemon that
# scripts/setup-engine.sh started, as a host reboot or a daemon upgrade does.
#
# Finds the daemon by the pid file setup-engine.sh wrote ($STATE_DIR/dockerd.pid
# or podman.pid), stops it (TERM, then KILL after 90 s) and starts it again the
# same way (lib.sh start_dockerd / start_podman_service) with the arguments it
# ran with (read from /proc before it stops), so a private engine started with
# its own --data-root, --exec-root, -H, --pidfile and --bridge comes back as
# itself. Docker without live-restore stops every container on that engine;
# Podman's containers run under conmon and outlive the service. For CI's last
# step only (AGENT_SANDBOX_TEST_ENGINE_RESTART=1, test/integration/engine-restart.test.ts):
# never beside other tests on the same engine.
# Env: AGENT_SANDBOX_CI_STATE (default /tmp/agent-sandbox-ci), DOCKER_HOST (where
# `docker info` waits for dockerd to answer).
# Prints the new pid on stdout.
set -euo pipefail

STATE_DIR="${AGENT_SANDBOX_CI_STATE:-/tmp/agent-sandbox-ci}"

log() { printf 'restart-engine: %s\n' "$*" >&2; }
abort() { printf 'restart-engine: error: %s\n' "$*" >&2; exit 1; }

# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[ "$#" -eq 1 ] || abort "usage: restart-engine.sh docker|podman"
case "$1" in
  docker) pidfile="$STATE_DIR/dockerd.pid" comm=dockerd ;;
  podman) pidfile="$STATE_DIR/podman.pid" comm=podman ;;
  *) abort "unknown engine: $1 (use docker or podman)" ;;
esac
[ -s "$pidfile" ] || abort "no $pidfile: this engine was not started by scripts/setup-engine.sh; restart it yourself"
pid="$(cat "$pidfile")"
[[ "$pid" =~ ^[0-9]+$ ]] || abort "$pidfile does not hold a pid: $pid"
[ "$(cat "/proc/$pid/comm" 2> /dev/null)" = "$comm" ] || abort "pid $pid (from $pidfile) is not a running $comm"

# Its arguments, as it was started.
mapfile -d '' -t argv < "/proc/$pid/cmdline"
log "stopping $comm (pid $pid): ${argv[*]}"
kill -TERM "$pid"
for _ in $(seq 1 180); do
  kill -0 "$pid" 2> /dev/null || break
  sleep 0.5
done
if kill -0 "$pid" 2> /dev/null; then
  log "$comm (pid $pid) did not stop within 90 s: killing it"
  kill -KILL "$pid"
  while kill -0 "$pid" 2> /dev/null; do sleep 0.2; done
fi

log "starting $comm again"
if [ "$1" = docker ]; then
  start_dockerd "$STATE_DIR" "${argv[@]:1}"
else
  # podman system service --time=0 unix://SOCKET
  sock=""
  for a in "${argv[@]}"; do
    case "$a" in unix://*) sock="${a#unix://}" ;; esac
  done
  [ -n "$sock" ] || abort "cannot tell the socket of podman (pid $pid) from its arguments: ${argv[*]}"
  start_podman_service "$STATE_DIR" "$sock"
fi
cat "$pidfile"
log "$comm is back (pid $(cat "$pidfile"))"

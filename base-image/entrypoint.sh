#!/usr/bin/env bash
# entrypoint.sh [CMD...]: the sandbox container's main process (under docker-init).
#
# Runs as root, once per container start:
#   1. renumbers `node` to the workspace owner's uid/gid (AGENT_SANDBOX_UID/GID),
#   2. sets the host's git identity for `node` (AGENT_SANDBOX_GIT_NAME/EMAIL),
#   3. installs the egress firewall (AGENT_SANDBOX_NETWORK=firewall|none|open),
#   4. marks the sandbox ready in /run/agent-sandbox (a tmpfs, empty after a restart).
# Then, with no CMD, it idles so that `docker exec -u node` can attach agents;
# with a CMD (one-shot `run`), it drops to `node` and execs CMD.
# If any step fails, the reason goes to /run/agent-sandbox/failed and to stderr,
# and it exits 1: the container stops and nothing runs with open egress.
set -euo pipefail

STATE="${AGENT_SANDBOX_STATE_DIR:-/run/agent-sandbox}"
FIREWALL="${AGENT_SANDBOX_FIREWALL_SCRIPT:-/usr/local/sbin/init-firewall.sh}"
NODE_USER="${AGENT_SANDBOX_USER:-node}"

fail() {
  mkdir -p "$STATE"
  printf '%s\n' "$*" > "$STATE/failed"
  printf 'agent-sandbox: %s\n' "$*" >&2
  exit 1
}

prepare_state() {
  mkdir -p "$STATE"
  chmod 0755 "$STATE"
  rm -f "$STATE/ready" "$STATE/failed"
}

# Files on the bind-mounted workspace should belong to its owner on the host.
renumber_user() {
  local uid="${AGENT_SANDBOX_UID:-}" gid="${AGENT_SANDBOX_GID:-}"
  [[ -n "$uid" && "$uid" != 0 ]] || return 0
  [[ "$uid" =~ ^[0-9]+$ ]] || fail "AGENT_SANDBOX_UID is not a number: $uid"
  [[ -z "$gid" || "$gid" =~ ^[0-9]+$ ]] || fail "AGENT_SANDBOX_GID is not a number: $gid"
  [[ -n "$gid" && "$gid" != 0 ]] || gid="$uid"
  local cur_uid cur_gid
  cur_uid="$(id -u "$NODE_USER")"
  cur_gid="$(id -g "$NODE_USER")"
  if [[ "$cur_gid" != "$gid" ]]; then
    groupmod --non-unique --gid "$gid" "$NODE_USER" || fail "cannot set the gid of $NODE_USER to $gid"
  fi
  if [[ "$cur_uid" != "$uid" ]]; then
    usermod --non-unique --uid "$uid" "$NODE_USER" >/dev/null || fail "cannot set the uid of $NODE_USER to $uid"
  fi
}

# Volumes may be new (root-owned) or come from a sandbox with another owner.
own_volumes() {
  local dir
  for dir in /commandhistory /home/node /home/node/.claude /home/node/.codex; do
    [[ -d "$dir" ]] || continue
    if [[ "$(stat -c %u "$dir")" != "$(id -u "$NODE_USER")" ]]; then
      chown -R "$NODE_USER:$NODE_USER" "$dir" 2>/dev/null || chown "$NODE_USER:$NODE_USER" "$dir"
    fi
  done
  # The repo-shelf: only its top directory. Provisioning owns the rest, and the
  # shelf repository's config is deliberately root's (see provision-shelf.sh).
  if [[ -d /repo-shelf && "$(stat -c %u /repo-shelf)" != "$(id -u "$NODE_USER")" ]]; then
    chown "$NODE_USER:$NODE_USER" /repo-shelf
  fi
  [[ -e /commandhistory/.bash_history ]] || install -o "$NODE_USER" -g "$NODE_USER" -m 0600 /dev/null /commandhistory/.bash_history
}

set_git_identity() {
  local key value
  for key in name email; do
    if [[ "$key" == name ]]; then value="${AGENT_SANDBOX_GIT_NAME:-}"; else value="${AGENT_SANDBOX_GIT_EMAIL:-}"; fi
    [[ -n "$value" ]] || continue
    setpriv --reuid="$NODE_USER" --regid="$NODE_USER" --init-groups \
      env HOME="/home/$NODE_USER" /usr/bin/git config --global "user.$key" "$value" \
      || fail "cannot set git user.$key"
  done
}

setup_network() {
  case "${AGENT_SANDBOX_NETWORK:-firewall}" in
    firewall)
      local err
      if ! err="$("$FIREWALL" 2>&1 >/dev/null)"; then
        fail "firewall set-up failed: $(printf '%s\n' "$err" | grep -v '^$' | tail -n 1)"
      fi
      [[ -z "$err" ]] || printf '%s\n' "$err" >&2
      ;;
    none) ;;
    open) printf 'agent-sandbox: WARNING: network mode "open": egress is NOT filtered in this sandbox\n' >&2 ;;
    *) fail "unknown AGENT_SANDBOX_NETWORK: ${AGENT_SANDBOX_NETWORK}" ;;
  esac
}

main() {
  prepare_state
  renumber_user
  own_volumes
  set_git_identity
  setup_network
  : > "$STATE/ready"
  printf 'agent-sandbox: ready\n'
  if [[ "$#" -eq 0 ]]; then
    exec sleep infinity
  fi
  local home="/home/$NODE_USER"
  exec setpriv --reuid="$NODE_USER" --regid="$NODE_USER" --init-groups --inh-caps=-all \
    env HOME="$home" USER="$NODE_USER" LOGNAME="$NODE_USER" "$@"
}

main "$@"

#!/usr/bin/env bash
# entrypoint.sh [CMD...]: the sandbox container's main process (under docker-init).
#
# Runs as root, once per container start:
#   1. renumbers `node` to the workspace owner's uid/gid (AGENT_SANDBOX_UID/GID),
#   2. sets the host's git identity for `node` (AGENT_SANDBOX_GIT_NAME/EMAIL),
#   3. starts mount-watch, which keeps the protected paths read-only or kills
#      `node`'s processes (AGENT_SANDBOX_PROTECTED_MOUNTS; see mount-watch.sh),
#      and with the firewall keeps /etc/resolv.conf pointed at its resolver,
#   4. installs the egress firewall (AGENT_SANDBOX_NETWORK=firewall|none|open),
#   5. gives the agent a git directory of its own over the host's .git
#      (agent-git.sh; AGENT_SANDBOX_HOST_GIT, AGENT_SANDBOX_GIT_WORKTREE, AGENT_SANDBOX_GATE_URL),
#   6. with nestedContainers (AGENT_SANDBOX_NESTED=1), gives node rootless Podman
#      behind that firewall (nested-podman.sh),
#   7. adds the egress gateway's CA (AGENT_SANDBOX_GATEWAY_CA, one line of
#      base64 DER) to the system bundle, which NODE_EXTRA_CA_CERTS and
#      SSL_CERT_FILE name: intercepted hosts present leaves of that CA,
#   8. marks the sandbox ready in /run/agent-sandbox (a tmpfs, empty after a restart).
# Then, with no CMD, it idles so that `docker exec -u node` can attach agents;
# with a CMD (one-shot `run`), it waits for the run's egress gateway if one is
# announced (AGENT_SANDBOX_RUN_GATEWAY, wait_gateway), then drops to `node` and execs CMD.
# If any step fails, the reason goes to /run/agent-sandbox/failed and to stderr,
# and it exits 1: the container stops and nothing runs with open egress.
# It runs before every sandbox and every one-shot command, so it uses builtins
# where a command would do: each fork+exec costs ~2 ms of the start.
set -euo pipefail

STATE="${AGENT_SANDBOX_STATE_DIR:-/run/agent-sandbox}"
FIREWALL="${AGENT_SANDBOX_FIREWALL_SCRIPT:-/usr/local/sbin/init-firewall.sh}"
NODE_USER="${AGENT_SANDBOX_USER:-node}"
# The firewall's resolver user (firewall-lib.sh FW_DNS_USER).
DNS_USER=dnsmasq
# Overridable only so that the bats tests can point them at temporary directories.
NODE_HOME="${AGENT_SANDBOX_USER_HOME:-/home/$NODE_USER}"
HISTORY_DIR="${AGENT_SANDBOX_HISTORY_DIR:-/commandhistory}"
SHELF="${AGENT_SANDBOX_SHELF:-/repo-shelf}"
MOUNT_WATCH="${AGENT_SANDBOX_MOUNT_WATCH:-/usr/local/sbin/mount-watch}"

FAIL_EXIT=1
SETUP_LOG=/dev/stderr

# The container's environment as it came (the agent's settings among it), for the
# one-shot command; root's own steps run without it (root-env.sh).
ORIG_ENV=()
mapfile -d '' -t ORIG_ENV < /proc/self/environ || true
# shellcheck source=base-image/root-env.sh
. "${AGENT_SANDBOX_LIB_DIR:-/usr/local/lib/agent-sandbox}/root-env.sh"
clean_root_env

fail() {
  mkdir -p "$STATE"
  printf '%s\n' "$*" > "$STATE/failed"
  printf 'agent-sandbox: %s\n' "$*" >&2
  exit "$FAIL_EXIT"
}

prepare_state() {
  local f
  local -a stale=()
  [[ -d "$STATE" ]] || mkdir -p "$STATE"
  chmod 0755 "$STATE"
  # rm(1) only if there is something to remove: on a fresh start there is not.
  for f in "$STATE/ready" "$STATE/failed"; do
    if [[ -e "$f" || -L "$f" ]]; then stale+=("$f"); fi
  done
  [[ "${#stale[@]}" -eq 0 ]] || rm -f "${stale[@]}"
}

# node_ids: set NODE_UID and NODE_GID to node's uid and primary gid, from one
# `id` call (not `id -u` and `id -g`).
NODE_UID="" NODE_GID=""
node_ids() {
  local out
  out="$(id "$NODE_USER")" || fail "cannot look up user $NODE_USER"
  [[ "$out" =~ ^uid=([0-9]+)[^\ ]*\ gid=([0-9]+) ]] || fail "cannot look up user $NODE_USER: unexpected id output: $out"
  NODE_UID="${BASH_REMATCH[1]}" NODE_GID="${BASH_REMATCH[2]}"
}

# Files on the bind-mounted workspace should belong to its owner on the host.
renumber_user() {
  local uid="${AGENT_SANDBOX_UID:-}" gid="${AGENT_SANDBOX_GID:-}"
  [[ -n "$uid" && "$uid" != 0 ]] || return 0
  [[ "$uid" =~ ^[0-9]+$ ]] || fail "AGENT_SANDBOX_UID is not a number: $uid"
  [[ -z "$gid" || "$gid" =~ ^[0-9]+$ ]] || fail "AGENT_SANDBOX_GID is not a number: $gid"
  [[ -n "$gid" && "$gid" != 0 ]] || gid="$uid"
  node_ids
  local cur_uid="$NODE_UID" cur_gid="$NODE_GID"
  if [[ "$cur_gid" != "$gid" ]]; then
    NODE_UID="" # own_volumes looks node up again
    groupmod --non-unique --gid "$gid" "$NODE_USER" || fail "cannot set the gid of $NODE_USER to $gid"
  fi
  if [[ "$cur_uid" != "$uid" ]]; then
    NODE_UID=""
    free_uid "$uid"
    usermod --non-unique --uid "$uid" "$NODE_USER" >/dev/null || fail "cannot set the uid of $NODE_USER to $uid"
  fi
}

# free_uid UID: if the resolver's user (dnsmasq, 999) has UID, move it to a free
# system uid. The firewall lets DNS out only for the resolver's uid: a workspace
# owned by 999 must not make node that user. Other entries with UID stay: under
# rootless Podman's keep-id, Podman adds one for you, which is who node becomes.
free_uid() {
  local uid="$1" new
  [[ "$(id -u "$DNS_USER" 2> /dev/null)" == "$uid" ]] || return 0
  for ((new = 999; new >= 100; new--)); do
    [[ "$new" == "$uid" ]] || getent passwd "$new" > /dev/null || break
  done
  ((new >= 100)) || fail "no free system uid to move $DNS_USER away from uid $uid"
  usermod --uid "$new" "$DNS_USER" > /dev/null || fail "cannot move user $DNS_USER from uid $uid (the workspace owner's) to $new"
}

# Volumes may be new (root-owned) or come from a sandbox with another owner.
own_volumes() {
  local dir u g n out first found
  local -a dirs=() check=() rest=()
  local -A uid_of=() gid_of=() needs=()
  [[ -n "$NODE_UID" ]] || node_ids
  # The owners of every top directory from one stat(1), not one per directory.
  for dir in "$HISTORY_DIR" "$NODE_HOME" "$NODE_HOME/.claude" "$NODE_HOME/.codex"; do
    if [[ -d "$dir" ]]; then dirs+=("$dir"); fi
  done
  # The repo-shelf: only its top directory. Provisioning owns the rest, and the
  # shelf repository's config is deliberately root's (see provision-shelf.sh).
  # Once provisioned (repo/ exists) it is root's and sticky on purpose: leave it.
  if [[ -d "$SHELF" && ! -e "$SHELF/repo" ]]; then dirs+=("$SHELF"); fi
  if [[ "${#dirs[@]}" -gt 0 ]]; then
    out="$(stat -c '%u %g %n' -- "${dirs[@]}")" || true
    while read -r u g n; do
      if [[ -n "$n" ]]; then uid_of[$n]="$u" gid_of[$n]="$g"; fi
    done <<< "$out"
  fi
  for dir in "$HISTORY_DIR" "$NODE_HOME"; do
    [[ -d "$dir" ]] || continue
    if [[ "${uid_of[$dir]:-}" != "$NODE_UID" ]]; then
      chown -R "$NODE_USER:$NODE_USER" "$dir" 2>/dev/null || chown "$NODE_USER:$NODE_USER" "$dir"
    fi
  done
  # The agent config volumes are shared, and files may be put there from outside
  # this sandbox (codex-init-config, a sandbox of another workspace owner). Their
  # credentials are mode 0600, so every file must be node's, group included
  # (usermod renumbers the files under the home directory, but not their group).
  for dir in "$NODE_HOME/.claude" "$NODE_HOME/.codex"; do
    [[ -d "$dir" ]] || continue
    if [[ "${uid_of[$dir]:-}" != "$NODE_UID" || "${gid_of[$dir]:-}" != "$NODE_GID" ]]; then
      needs[$dir]=1
    else
      check+=("$dir")
    fi
  done
  # One find(1) for the volumes whose top is node's: it stops (-quit) at the first
  # file that is not node's (uid or gid) and names its volume (%H); only the
  # volumes after that one need searching again.
  while [[ "${#check[@]}" -gt 0 ]]; do
    first="$(find "${check[@]}" -mindepth 1 \( ! -uid "$NODE_UID" -o ! -gid "$NODE_GID" \) -printf '%H' -quit 2>/dev/null)" || true
    [[ -n "$first" ]] || break
    needs[$first]=1
    rest=() found=0
    for dir in "${check[@]}"; do
      if [[ "$found" == 1 ]]; then rest+=("$dir"); fi
      if [[ "$dir" == "$first" ]]; then found=1; fi
    done
    check=("${rest[@]}")
  done
  for dir in "$NODE_HOME/.claude" "$NODE_HOME/.codex"; do
    if [[ -n "${needs[$dir]:-}" ]]; then
      chown -R "$NODE_USER:$NODE_USER" "$dir" 2>/dev/null || chown "$NODE_USER:$NODE_USER" "$dir"
    fi
  done
  if [[ -d "$SHELF" && ! -e "$SHELF/repo" && "${uid_of[$SHELF]:-}" != "$NODE_UID" ]]; then
    chown "$NODE_USER:$NODE_USER" "$SHELF"
  fi
  [[ -e "$HISTORY_DIR/.bash_history" ]] || install -o "$NODE_USER" -g "$NODE_USER" -m 0600 /dev/null "$HISTORY_DIR/.bash_history"
}

set_git_identity() {
  local key value
  for key in name email; do
    if [[ "$key" == name ]]; then value="${AGENT_SANDBOX_GIT_NAME:-}"; else value="${AGENT_SANDBOX_GIT_EMAIL:-}"; fi
    [[ -n "$value" ]] || continue
    # HOME passed in setpriv's environment (which git inherits), not by env(1): one exec less.
    HOME="$NODE_HOME" setpriv --reuid="$NODE_USER" --regid="$NODE_USER" --init-groups \
      /usr/bin/git config --global "user.$key" "$value" \
      || fail "cannot set git user.$key"
  done
}

AGENT_GIT="${AGENT_SANDBOX_AGENT_GIT_SCRIPT:-/usr/local/sbin/agent-git}"
setup_git() {
  [[ -n "${AGENT_SANDBOX_HOST_GIT:-}" ]] || return 0
  local err
  if ! err="$("$AGENT_GIT" "${AGENT_SANDBOX_GIT_WORKTREE:?}" "$AGENT_SANDBOX_HOST_GIT" "${AGENT_SANDBOX_GATE_URL:-}" "$NODE_USER" 2>&1 >/dev/null)"; then
    fail "git set-up failed: $(printf '%s\n' "$err" | grep -v '^$' | tail -n 1)"
  fi
  [[ -z "$err" ]] || printf '%s\n' "$err" >>"$SETUP_LOG"
}

setup_network() {
  case "${AGENT_SANDBOX_NETWORK:-firewall}" in
    firewall)
      local err
      if ! err="$("$FIREWALL" 2>&1 >/dev/null)"; then
        fail "firewall set-up failed: $(printf '%s\n' "$err" | grep -v '^$' | tail -n 1)"
      fi
      [[ -z "$err" ]] || printf '%s\n' "$err" >>"$SETUP_LOG"
      ;;
    none) ;;
    open) printf 'agent-sandbox: WARNING: network mode "open": egress is NOT filtered in this sandbox\n' >>"$SETUP_LOG" ;;
    *) fail "unknown AGENT_SANDBOX_NETWORK: ${AGENT_SANDBOX_NETWORK}" ;;
  esac
}

NESTED="${AGENT_SANDBOX_NESTED_SCRIPT:-/usr/local/sbin/nested-podman}"
setup_nested() {
  [[ "${AGENT_SANDBOX_NESTED:-}" == 1 ]] || return 0
  local err
  if ! err="$("$NESTED" 2>&1 >/dev/null)"; then
    fail "nested containers set-up failed: $(printf '%s\n' "$err" | grep -v '^$' | tail -n 1)"
  fi
}

# start_watch: start mount-watch in the background (it outlives this script's
# exec of sleep or the command). It checks the mounts while the firewall is set
# up; watch_started reads its verdict, one line, before the sandbox is ready.
# With the firewall it also watches resolv.conf (--dns), from ready on.
WATCH_FD=""
start_watch() {
  local -a args=()
  [[ "${AGENT_SANDBOX_NETWORK:-firewall}" != firewall ]] || args=(--dns)
  [[ -n "${AGENT_SANDBOX_PROTECTED_MOUNTS:-}" || "${#args[@]}" -gt 0 ]] || return 0
  exec {WATCH_FD}< <(exec "$MOUNT_WATCH" "${args[@]}")
}

watch_started() {
  [[ -n "$WATCH_FD" ]] || return 0
  local line=""
  read -r line <&"$WATCH_FD" || true
  exec {WATCH_FD}<&-
  [[ "$line" == watching ]] || fail "${line#fail: }"
}

# cgroup_count VAR KEY FILE...: set VAR to the value of the "KEY N" line in the
# first readable cgroup file (v2 first, then v1), or 0. Read with builtins (no
# awk, no "$(...)"): it runs twice around every one-shot command.
cgroup_count() {
  local var="$1" key="$2" file k v
  shift 2
  for file in "$@"; do
    if [[ -r "$file" ]]; then
      while read -r k v _ || [[ -n "$k" ]]; do
        if [[ "$k" == "$key" ]]; then
          printf -v "$var" '%s' "$v"
          return 0
        fi
      done < "$file"
      break
    fi
  done
  printf -v "$var" '%s' 0
}

CGROUP="${AGENT_SANDBOX_CGROUP_DIR:-/sys/fs/cgroup}"
# pids_refused VAR: how many forks the pids cgroup has refused so far.
pids_refused() { cgroup_count "$1" max "$CGROUP/pids.events" "$CGROUP/pids/pids.events"; }
# oom_kills VAR: how many processes the memory cgroup's OOM killer has killed.
oom_kills() { cgroup_count "$1" oom_kill "$CGROUP/memory.events" "$CGROUP/memory/memory.oom_control"; }

# One-shot mode: run CMD as node, pass signals on, and say if the pids limit bit.
run_command() {
  local before=0 child rc=0 hits=0 oom_before=0 ooms=0
  pids_refused before
  oom_kills oom_before
  # The command gets the container's environment back only once it is node's
  # (env runs as node): setpriv itself runs with root's clean one.
  setpriv --reuid="$NODE_USER" --regid="$NODE_USER" --init-groups --inh-caps=-all \
    env -i "${ORIG_ENV[@]}" HOME="$NODE_HOME" USER="$NODE_USER" LOGNAME="$NODE_USER" "$@" <&0 &
  child=$!
  # bash reports a signalled job ("Killed …") on its own stderr: keep that out
  # of the command's output, and write our own notes to the saved stderr.
  exec 3>&2 2>/dev/null
  trap 'kill -TERM "$child" 2>/dev/null || true' TERM INT HUP
  while :; do
    wait "$child" && rc=0 || rc=$?
    # A trapped signal interrupts wait; keep waiting while the command lives.
    kill -0 "$child" 2>/dev/null || break
  done
  if [[ -e "$STATE/compromised" ]]; then
    printf 'agent-sandbox: command killed: %s\n' "$(< "$STATE/compromised")" >&3
  fi
  oom_kills ooms
  ooms=$(( ooms - oom_before ))
  if (( ooms > 0 )); then
    printf 'agent-sandbox: out of memory: %d processes killed\n' "$ooms" >&3
  fi
  pids_refused hits
  hits=$(( hits - before ))
  if (( hits > 0 )); then
    printf 'agent-sandbox: pids limit reached: %d forks refused\n' "$hits" >&3
  fi
  exit "$rc"
}

# wait_gateway: a one-shot run with an egress gateway starts its command only
# once the CLI has started the gateway in this network namespace and handed it
# its CA and secrets. Only AGENT_SANDBOX_RUN_GATEWAY=1 announces one (the CLI
# sets it only for a run it will start a gateway for: one with masked secrets);
# any other command starts at once, whatever else is set. The gateway listens
# only once it holds its secrets (src/gateway.ts), and until the command starts
# nothing else in this namespace listens on loopback: its TLS port accepting is
# the sign. Until then the firewall's redirect meets a closed port anyway (fail
# closed): this wait only keeps the command from meeting a gateway that is not
# up yet. No gateway in time: set-up failed.
wait_gateway() {
  [[ "${AGENT_SANDBOX_RUN_GATEWAY:-}" == 1 ]] || return 0
  local limit="${AGENT_SANDBOX_GATEWAY_WAIT:-120}" i port
  [[ "$limit" =~ ^[0-9]+$ ]] || fail "AGENT_SANDBOX_GATEWAY_WAIT is not a number of seconds: $limit"
  [[ "${AGENT_SANDBOX_GATEWAY_PORTS:-}" =~ ^[0-9]{1,5},([0-9]{1,5})$ ]] \
    || fail "AGENT_SANDBOX_GATEWAY_PORTS must be two ports, HTTP,TLS: '${AGENT_SANDBOX_GATEWAY_PORTS:-}'"
  port="${BASH_REMATCH[1]}"
  # Every 20 ms (node boots in about 0.1 s): a coarser step would add up to its length to every run.
  for ((i = 0; i < limit * 50; i++)); do
    if (: < "/dev/tcp/127.0.0.1/$port") 2> /dev/null; then return 0; fi
    sleep 0.02
  done
  fail "the egress gateway did not come up within ${limit}s"
}

# The bundle is in the container's own layer: after a restart it has the CA already.
trust_gateway_ca() {
  local ca="${AGENT_SANDBOX_GATEWAY_CA:-}" bundle="${AGENT_SANDBOX_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}" pem i
  [[ -n "$ca" ]] || return 0
  [[ "$ca" =~ ^[A-Za-z0-9+/]+=*$ ]] || fail "AGENT_SANDBOX_GATEWAY_CA is not base64"
  pem=$'-----BEGIN CERTIFICATE-----\n'
  for ((i = 0; i < ${#ca}; i += 64)); do pem+="${ca:i:64}"$'\n'; done
  pem+=$'-----END CERTIFICATE-----\n'
  if [[ -f "$bundle" ]] && grep -qF -- "${ca:0:64}" "$bundle"; then return 0; fi
  printf '%s' "$pem" >> "$bundle" || fail "cannot add the gateway's CA to $bundle"
}

main() {
  # With a command (one-shot run), set-up failure exits 125 so that the CLI
  # can tell it from the command's own exit code; set-up warnings go to the
  # state directory instead of the command's stderr.
  if [[ "$#" -gt 0 ]]; then
    FAIL_EXIT=125
    SETUP_LOG="$STATE/setup.log"
  fi
  prepare_state
  renumber_user
  own_volumes
  start_watch
  set_git_identity
  # The firewall first: nothing the agent may have configured (its own .git is
  # its to write) runs before egress is filtered.
  setup_network
  # After the firewall: nested containers' traffic must meet it from their first packet.
  setup_nested
  setup_git
  trust_gateway_ca
  watch_started
  if [[ "$#" -eq 0 ]]; then
    : > "$STATE/ready"
    printf 'agent-sandbox: ready\n'
    exec sleep infinity
  fi
  wait_gateway
  : > "$STATE/ready"
  run_command "$@"
}

main "$@"

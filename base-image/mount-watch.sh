#!/usr/bin/env bash
# mount-watch [--check]: keep the workspace's protected paths read-only, or stop the agent.
#
# Installed as /usr/local/sbin/mount-watch (root, 0755). The entrypoint starts it
# as root, in the background, before the sandbox is marked ready; `--check` only
# checks once and exits (0 if every protected mount is in place, 1 if not).
#
# Each protected path is a read-only bind mount over a host path inside the
# read-write workspace mount. When the HOST renames a file over that mount point
# or removes the mounted directory (a branch switch, a hook manager reinstalling
# .husky, an editor saving by rename), the kernel (3.18+) silently detaches the
# mount in every other mount namespace, and the agent could then write the host
# file. So this script:
#   1. checks at start that every expected mount is in /proc/self/mountinfo and
#      read-only, and says on stdout, in one line, "watching" or "fail: REASON"
#      (the entrypoint reads that line and fails set-up on anything else);
#   2. then polls mountinfo every AGENT_SANDBOX_WATCH_INTERVAL seconds with bash
#      builtins only (mapfile, and `read -t` on a private fifo as the sleep): no
#      fork per poll;
#   3. when an expected mount is gone: kills every process of the agent user in
#      one kill(-1) run as that user (the kernel signals them all under the
#      tasklist lock, so nothing forks past it), writes the reason to
#      STATE/compromised, and from then on kills any process of that user that
#      appears (seen in two polls in a row), except sandbox-exec refusing to
#      run (it only prints and exits).
# It runs as root: `node` can neither signal it nor write its state.
#
# Environment (defaults in brackets):
#   AGENT_SANDBOX_PROTECTED_MOUNTS  expected mount points (container paths), one a line
#   AGENT_SANDBOX_KEPT_MOUNTS       mount points that must stay but may be writable (the
#                                   agent's own .git over the host's), one a line
#   AGENT_SANDBOX_WATCH_INTERVAL    [0.05] seconds between polls
#   AGENT_SANDBOX_STATE_DIR         [/run/agent-sandbox]
#   AGENT_SANDBOX_USER              [node]
#   AGENT_SANDBOX_MOUNTINFO         [/proc/self/mountinfo] (tests)
#   AGENT_SANDBOX_PROC_DIR          [/proc] (tests)
set -euo pipefail

STATE="${AGENT_SANDBOX_STATE_DIR:-/run/agent-sandbox}"
MOUNTINFO="${AGENT_SANDBOX_MOUNTINFO:-/proc/self/mountinfo}"
PROC="${AGENT_SANDBOX_PROC_DIR:-/proc}"
INTERVAL="${AGENT_SANDBOX_WATCH_INTERVAL:-0.05}"
NODE_USER="${AGENT_SANDBOX_USER:-node}"
SANDBOX_EXEC=/usr/local/bin/sandbox-exec

abort() {
  printf 'mount-watch: %s\n' "$*" >&2
  exit 2
}

# fail REASON: the start-up check failed; tell the entrypoint on stdout.
fail() {
  printf 'fail: %s\n' "$*"
  exit 1
}

# shellcheck source=base-image/mount-lib.sh
. "${AGENT_SANDBOX_LIB_DIR:-/usr/local/lib/agent-sandbox}/mount-lib.sh"

[[ "$INTERVAL" =~ ^[0-9]*\.?[0-9]+$ ]] || abort "AGENT_SANDBOX_WATCH_INTERVAL is not a number of seconds: $INTERVAL"

# WANT: encoded mount point -> the container path, for every expected mount;
# WRITABLE: the ones that may be read-write.
declare -A WANT=() WRITABLE=()
enc=""
while IFS= read -r path; do
  [[ -n "$path" ]] || continue
  [[ "$path" == /* ]] || abort "AGENT_SANDBOX_PROTECTED_MOUNTS: not an absolute path: $path"
  encode_mountpoint enc "$path"
  WANT[$enc]="$path"
done <<< "${AGENT_SANDBOX_PROTECTED_MOUNTS:-}"
while IFS= read -r path; do
  [[ -n "$path" ]] || continue
  [[ "$path" == /* ]] || abort "AGENT_SANDBOX_KEPT_MOUNTS: not an absolute path: $path"
  encode_mountpoint enc "$path"
  WANT[$enc]="$path"
  WRITABLE[$enc]=1
done <<< "${AGENT_SANDBOX_KEPT_MOUNTS:-}"

# The start-up check: every expected mount present, and its top mount read-only.
check_start() {
  local line mp opts path
  local -A top=()
  local -a lines=()
  mapfile -t lines < "$MOUNTINFO" || fail "cannot read $MOUNTINFO"
  # Fields: id parent major:minor root MOUNT-POINT OPTIONS ...; a later line
  # mounted at the same point is on top of an earlier one.
  for line in "${lines[@]}"; do
    mountinfo_fields "$line" path opts
    top[$path]="$opts"
  done
  for mp in "${!WANT[@]}"; do
    path="${WANT[$mp]}"
    [[ -n "${top[$path]+set}" ]] || fail "protected path $path is not mounted"
    [[ -n "${WRITABLE[$mp]:-}" || ",${top[$path]}," == *,ro,* ]] || fail "protected path $path is mounted read-write"
  done
}

NODE_UID=""
# kill_agent [PID...]: SIGKILL the given processes, or with none every process
# of the agent user, in one kill(2) run as that user (it cannot reach root's
# processes, even if a pid was reused). If that cannot start (the pids limit
# is full), root kills them one by one, each checked to be the agent's first.
kill_agent() {
  local target=(-1)
  [[ "$#" -eq 0 ]] || target=("$@")
  if setpriv --reuid="$NODE_USER" --regid="$NODE_USER" --clear-groups kill -s KILL -- "${target[@]}" 2> /dev/null; then
    return 0
  fi
  sweep force
}

# sweep [force]: kill every process of the agent user found in /proc, except
# sandbox-exec (which refuses in a compromised sandbox); with `force`, as root,
# exempting nothing. Builtins only: it runs on every poll once compromised.
sweep() {
  local force="${1:-}" dir pid key uid _rest
  local -a argv pids=()
  local -A next=()
  for dir in "$PROC"/[0-9]*; do
    pid="${dir##*/}"
    uid=""
    while read -r key uid _rest; do
      [[ "$key" != Uid: ]] || break
    done < "$dir/status" 2> /dev/null || continue
    [[ "$key" == Uid: && "$uid" == "$NODE_UID" ]] || continue
    if [[ -z "$force" ]]; then
      argv=()
      mapfile -d '' -t argv < "$dir/cmdline" 2> /dev/null || true
      exempt "${argv[@]}" && continue
      # Killed when seen in two sweeps in a row: a process the engine is
      # starting (runc init, mid-execve, an empty cmdline) gets one interval
      # to become recognisable as sandbox-exec.
      next[$pid]=1
      [[ -z "${SUSPECT[$pid]+set}" ]] || pids+=("$pid")
      continue
    else
      kill -s KILL "$pid" 2> /dev/null || true
    fi
  done
  if [[ -z "$force" ]]; then
    SUSPECT=()
    for pid in "${!next[@]}"; do SUSPECT[$pid]=1; done
  fi
  if [[ "${#pids[@]}" -gt 0 ]]; then kill_agent "${pids[@]}"; fi
}
declare -A SUSPECT=()

# exempt ARGV...: a process on its way to sandbox-exec, which refuses to run
# anything once the sandbox is compromised: `runc init` about to exec it,
# env(1) of its #! line, or the script itself. Only the engine starts these
# after the first kill(-1) (the agent has no process left by then).
exempt() {
  [[ "${1:-}" != runc || "${2:-}" != init ]] || return 0
  [[ "${2:-}" != "$SANDBOX_EXEC" ]] || return 0
  [[ "${2:-}" != bash || "${3:-}" != "$SANDBOX_EXEC" ]] || return 0
  return 1
}

compromised() {
  local path="$1"
  kill_agent
  printf 'protected path %s was unmounted (changed on the host)\n' "$path" > "$STATE/compromised"
  printf 'mount-watch: protected path %s was unmounted (changed on the host): processes of %s killed; restart the sandbox\n' "$path" "$NODE_USER" >&2
  sweep
}

main() {
  case "${1:-}" in
    "" | --check) ;;
    *) abort "unknown argument '$1' (usage: ${0##*/} [--check])" ;;
  esac
  check_start
  [[ "${1:-}" != --check ]] || exit 0
  if [[ "${#WANT[@]}" -eq 0 ]]; then
    printf 'watching\n'
    exit 0
  fi
  local uid_line
  uid_line="$(id -u "$NODE_USER")" || fail "cannot look up user $NODE_USER"
  NODE_UID="$uid_line"
  # The sleep: `read -t` on a fifo that only this process holds (opened
  # read-write, so the open does not block, then unlinked).
  local fifo="$STATE/.mount-watch.$$"
  mkfifo -m 0600 "$fifo" || fail "cannot create $fifo"
  exec 3<> "$fifo"
  rm -f "$fifo"
  printf '%s\n' "$$" > "$STATE/mount-watch.pid"
  printf 'watching\n'
  exec > /dev/null
  local line rest mp lost=""
  local -a lines=()
  local -A seen=()
  while :; do
    if [[ -z "$lost" ]]; then
      # Unreadable counts as every mount gone: fail closed.
      mapfile -t lines < "$MOUNTINFO" || lines=()
      seen=()
      for line in "${lines[@]}"; do
        rest="${line#* * * * }"
        mp="${rest%% *}"
        [[ -z "${WANT[$mp]+set}" ]] || seen[$mp]=1
      done
      for mp in "${!WANT[@]}"; do
        if [[ -z "${seen[$mp]+set}" ]]; then
          lost="${WANT[$mp]}"
          compromised "$lost"
          break
        fi
      done
    else
      sweep
    fi
    read -r -t "$INTERVAL" -u 3 _ || :
  done
}

main "$@"

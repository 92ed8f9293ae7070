#!/usr/bin/env bash
# mount-watch [--check | --dns]: keep the workspace's protected paths read-only, or
# stop the agent; with --dns, also keep the system resolver pointed at the firewall's.
#
# Installed as /usr/local/sbin/mount-watch (root, 0755). The entrypoint starts it
# as root, in the background, before the sandbox is marked ready (with --dns in
# network mode "firewall"); `--check` only checks once and exits (0 if every
# protected mount is in place, 1 if not).
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
#   2. then waits for events, with no fork and no wake-up while nothing happens:
#      a fifo that only this process reads is fed by two helpers it starts
#      (util-linux `findmnt --poll`, which wakes on poll(2) of mountinfo when
#      this namespace's mount table changes, and `inotifywait -m` on every
#      expected mount point, its parent directory and, with --dns,
#      resolv.conf: a host rename over a file, a removed directory, a link
#      count change, an in-place rewrite). Any line on the fifo means "check
#      now"; with none, a full check runs every AGENT_SANDBOX_WATCH_IDLE
#      seconds anyway, and then also restarts a helper that has died.
#      It polls every AGENT_SANDBOX_WATCH_INTERVAL seconds instead (builtins
#      only: mapfile, and `read -t` on the fifo as the sleep) while the
#      sandbox is setting up (until STATE/ready), after a loss, for a second
#      after (re)starting a helper, and while a helper cannot run;
#   3. when an expected mount is gone: kills every process of the agent user in
#      one kill(-1) run as that user (the kernel signals them all under the
#      tasklist lock, so nothing forks past it), writes the reason to
#      STATE/compromised, and from then on kills any process of that user that
#      appears (seen in two polls in a row), except sandbox-exec refusing to
#      run (it only prints and exits). STATE/mount-watch.log says whether an
#      event or a timed check saw the loss.
# With --dns, each check also reads /etc/resolv.conf (one read(2), no fork), once
# the sandbox is ready. The engine rewrites that file when a network is connected
# later (Docker: to its own 127.0.0.11; Podman: the new network's DNS in front),
# and every name would then stop resolving (the agent may not use those resolvers
# directly). When it lists any nameserver but 127.0.0.1, this runs init-firewall
# again (AGENT_SANDBOX_FIREWALL_SCRIPT), which takes the new nameservers as the
# resolver's first upstreams (firewall-lib.sh fw_read_upstreams), reloads the
# rules for them (DNS to them for the resolver's uid only; default-deny for
# every interface, the new one too), restarts dnsmasq and writes resolv.conf back
# in place. The mount checks pause while it runs (a few hundred ms). If it fails
# three times (a second apart), the old rules stay (names do not resolve:
# closed) and it is not tried again until resolv.conf changes; `doctor` then
# fails on resolv.conf.
# It runs as root: `node` can neither signal it nor write its state.
#
# Environment (defaults in brackets):
#   AGENT_SANDBOX_PROTECTED_MOUNTS  expected mount points (container paths), one a line
#   AGENT_SANDBOX_KEPT_MOUNTS       mount points that must stay but may be writable (the
#                                   agent's own .git over the host's), one a line
#   AGENT_SANDBOX_WATCH_INTERVAL    [0.05] seconds between polls (set-up, after a loss,
#                                   helpers down)
#   AGENT_SANDBOX_WATCH_IDLE        [10] seconds between full checks while events work
#   AGENT_SANDBOX_WATCH_EVENTS      [1] 0: no helpers, poll every INTERVAL (tests, fallback)
#   AGENT_SANDBOX_STATE_DIR         [/run/agent-sandbox]
#   AGENT_SANDBOX_USER              [node]
#   AGENT_SANDBOX_MOUNTINFO         [/proc/self/mountinfo] (tests)
#   AGENT_SANDBOX_PROC_DIR          [/proc] (tests)
#   AGENT_SANDBOX_RESOLV_CONF       [/etc/resolv.conf] (tests)
#   AGENT_SANDBOX_FIREWALL_SCRIPT   [/usr/local/sbin/init-firewall.sh] (tests)
set -euo pipefail

STATE="${AGENT_SANDBOX_STATE_DIR:-/run/agent-sandbox}"
MOUNTINFO="${AGENT_SANDBOX_MOUNTINFO:-/proc/self/mountinfo}"
PROC="${AGENT_SANDBOX_PROC_DIR:-/proc}"
INTERVAL="${AGENT_SANDBOX_WATCH_INTERVAL:-0.05}"
IDLE="${AGENT_SANDBOX_WATCH_IDLE:-10}"
EVENTS="${AGENT_SANDBOX_WATCH_EVENTS:-1}"
NODE_USER="${AGENT_SANDBOX_USER:-node}"
SANDBOX_EXEC=/usr/local/bin/sandbox-exec
RESOLV="${AGENT_SANDBOX_RESOLV_CONF:-/etc/resolv.conf}"
FIREWALL="${AGENT_SANDBOX_FIREWALL_SCRIPT:-/usr/local/sbin/init-firewall.sh}"

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
[[ "$IDLE" =~ ^[0-9]*\.?[0-9]+$ ]] || abort "AGENT_SANDBOX_WATCH_IDLE is not a number of seconds: $IDLE"
[[ "$EVENTS" == [01] ]] || abort "AGENT_SANDBOX_WATCH_EVENTS must be 0 or 1, not: $EVENTS"

# WANT: encoded mount point -> the container path, for every expected mount;
# WRITABLE: the ones that may be read-write; ORDER: their paths as given.
declare -A WANT=() WRITABLE=()
declare -a ORDER=()
enc=""
while IFS= read -r path; do
  [[ -n "$path" ]] || continue
  [[ "$path" == /* ]] || abort "AGENT_SANDBOX_PROTECTED_MOUNTS: not an absolute path: $path"
  encode_mountpoint enc "$path"
  WANT[$enc]="$path"
  ORDER+=("$path")
done <<< "${AGENT_SANDBOX_PROTECTED_MOUNTS:-}"
while IFS= read -r path; do
  [[ -n "$path" ]] || continue
  [[ "$path" == /* ]] || abort "AGENT_SANDBOX_KEPT_MOUNTS: not an absolute path: $path"
  encode_mountpoint enc "$path"
  WANT[$enc]="$path"
  WRITABLE[$enc]=1
  ORDER+=("$path")
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
  watch_note "protected path $path was unmounted: seen by $TRIGGER"
  sweep
}

# TRIGGER: what woke the current check, for the logs: "an event (LINE)" or a timed check.
TRIGGER="the start-up check"

# watch_note MSG: a timestamped line in STATE/mount-watch.log.
watch_note() {
  TZ=UTC printf '%(%Y-%m-%dT%H:%M:%SZ)T %s\n' -1 "$*" >> "$STATE/mount-watch.log" 2> /dev/null || true
}

# DNS_ON: --dns given (then "armed" once the sandbox is ready); DNS_SEEN: the
# resolv.conf text last acted on, or found to be ours.
DNS_ON="" DNS_SEEN="" DNS_FAILS=0

# read_resolv VAR: resolv.conf's text, with builtins (it is read on every poll).
read_resolv() {
  local resolv_text=""
  { IFS= read -r -d '' resolv_text < "$RESOLV"; } 2> /dev/null || true
  printf -v "$1" '%s' "$resolv_text"
}

# nameservers VAR TEXT: the nameserver addresses in resolv.conf TEXT, space separated.
nameservers() {
  local line ns_list=""
  while IFS= read -r line; do
    if [[ "$line" =~ ^[[:space:]]*nameserver[[:space:]]+([^[:space:]]+) ]]; then ns_list+="${ns_list:+ }${BASH_REMATCH[1]}"; fi
  done <<< "$2"
  printf -v "$1" '%s' "$ns_list"
}

# dns_note MSG: a timestamped line in the firewall's log (as firewall-lib.sh fw_log writes).
dns_note() {
  TZ=UTC printf '%(%Y-%m-%dT%H:%M:%SZ)T dns-watch: %s\n' -1 "$*" >> "$STATE/firewall.log" 2> /dev/null || true
}

# dns_poll: once the sandbox is ready, act on a resolv.conf that names any
# nameserver but 127.0.0.1, or none at all.
dns_poll() {
  [[ -n "$DNS_ON" ]] || return 0
  if [[ "$DNS_ON" != armed ]]; then
    # Not during set-up: init-firewall itself is about to write resolv.conf.
    [[ -e "$STATE/ready" ]] || return 0
    DNS_ON=armed
  fi
  local text servers
  read_resolv text
  # Empty: read between the engine's truncate and its write; the next poll sees the text.
  [[ -n "$text" && "$text" != "$DNS_SEEN" ]] || return 0
  DNS_SEEN="$text"
  nameservers servers "$text"
  [[ "$servers" != 127.0.0.1 ]] || return 0
  dns_note "resolv.conf rewritten (nameservers: ${servers:-none}): reloading the firewall for them (seen by $TRIGGER)"
  if "$FIREWALL" > /dev/null 2>> "$STATE/firewall.log" 3>&-; then
    DNS_FAILS=0
    dns_note "resolv.conf points at 127.0.0.1 again"
  elif ((++DNS_FAILS < 3)); then
    # Another reload at the same time (`firewall allow` restarting dnsmasq) can
    # make this one fail: again in a second, twice at most.
    dns_note "reloading the firewall failed; trying again in 1 s"
    DNS_SEEN=""
    read -r -t 1 -u 3 _ || :
    return 0
  else
    DNS_FAILS=0
    dns_note "reloading the firewall failed; names do not resolve until resolv.conf changes again or the sandbox restarts"
    printf 'mount-watch: resolv.conf was rewritten and reloading the firewall failed: names do not resolve (see %s)\n' "$STATE/firewall.log" >&2
  fi
  read_resolv DNS_SEEN
}

# The event helpers (see the header): their pids, empty when not started; the
# paths inotifywait watches; until when (µs) to keep polling after a start.
MNT_PID="" INO_PID="" SETTLE_UNTIL=0 NEXT_START=0 SETTLED=""
declare -a INO_PATHS=()
# Host-side changes that replace or remove a watched inode (a rename over a
# file, `rm -rf` of a directory, a link count change) and the engine's
# in-place rewrite of resolv.conf. No MODIFY (one line per write(2)).
INO_EVENTS=close_write,attrib,move,create,delete,delete_self,move_self,unmount

# now_us VAR: the time in microseconds (a builtin: EPOCHREALTIME).
now_us() {
  local t="${EPOCHREALTIME/[.,]/}"
  printf -v "$1" '%s' "$t"
}

# watch_targets: every expected mount point and its parent directory (a rename
# over a file or the removal of a directory is an event there too, on the
# host's own inode), and resolv.conf with --dns; each once.
watch_targets() {
  local path dir p
  local -A seen=()
  for path in "${ORDER[@]}"; do
    dir="${path%/*}"
    for p in "$path" "${dir:-/}"; do
      [[ -n "${seen[$p]+set}" ]] || INO_PATHS+=("$p")
      seen[$p]=1
    done
  done
  [[ -z "$DNS_ON" ]] || INO_PATHS+=("$RESOLV")
}

# alive PID: a helper that runs (bash reaps its children, so a dead one fails kill -0).
alive() { [[ -n "$1" ]] && kill -0 "$1" 2> /dev/null; }

# helpers_up: every helper this watcher needs runs.
helpers_up() {
  [[ "${#WANT[@]}" -eq 0 ]] || alive "$MNT_PID" || return 1
  [[ "${#INO_PATHS[@]}" -eq 0 ]] || alive "$INO_PID" || return 1
}

# start_helpers: start the helpers that do not run, at most once a second;
# each writes its lines to the fifo and dies with this process (pdeathsig).
# Keep polling for a second after a start: findmnt reports changes against
# the table it reads first, and that first read is not announced.
start_helpers() {
  local now
  now_us now
  ((now >= NEXT_START)) || return 0
  NEXT_START=$((now + 1000000))
  SETTLE_UNTIL=$((now + 1000000))
  if [[ "${#WANT[@]}" -gt 0 ]] && ! alive "$MNT_PID"; then
    [[ -z "$MNT_PID" ]] || watch_note "findmnt is not running: starting it again, polling meanwhile"
    setpriv --pdeathsig KILL -- findmnt --poll --noheadings --raw --output ACTION >&3 2>&3 3>&- &
    MNT_PID=$!
    # Out of the job table: no "Killed" line on stderr when it is stopped (still reaped).
    disown "$MNT_PID"
  fi
  restart_inotify
}

# restart_inotify: (re)start inotifywait, which resolves the paths again (a
# watched inode replaced on the host is a new one now). Its "Watches
# established." line wakes a check that covers any change made meanwhile.
restart_inotify() {
  [[ "${#INO_PATHS[@]}" -gt 0 ]] || return 0
  if alive "$INO_PID"; then
    kill -s KILL "$INO_PID" 2> /dev/null || true
  elif [[ -n "$INO_PID" ]]; then
    watch_note "inotifywait is not running: starting it again, polling meanwhile"
  fi
  setpriv --pdeathsig KILL -- inotifywait -m -e "$INO_EVENTS" --format %e -- "${INO_PATHS[@]}" >&3 2>&3 3>&- &
  INO_PID=$!
  disown "$INO_PID"
}

# check: one look at everything; sets LOST once a mount is gone.
LOST=""
check() {
  local line rest mp
  local -a lines=()
  local -A seen=()
  dns_poll
  if [[ "${#WANT[@]}" -eq 0 ]]; then
    return 0
  elif [[ -n "$LOST" ]]; then
    sweep
    return 0
  fi
  # Unreadable counts as every mount gone: fail closed.
  mapfile -t lines < "$MOUNTINFO" || lines=()
  for line in "${lines[@]}"; do
    rest="${line#* * * * }"
    mp="${rest%% *}"
    [[ -z "${WANT[$mp]+set}" ]] || seen[$mp]=1
  done
  for mp in "${!WANT[@]}"; do
    if [[ -z "${seen[$mp]+set}" ]]; then
      LOST="${WANT[$mp]}"
      compromised "$LOST"
      return 0
    fi
  done
}

# wait_time VAR: how long to sleep before the next check: the poll interval
# while setting up, after a loss, just after a helper start or with a helper
# down; otherwise IDLE.
wait_time() {
  local now
  if [[ "$EVENTS" == 1 && -z "$LOST" ]]; then
    if ! helpers_up; then
      start_helpers
    else
      now_us now
      if [[ -z "$SETTLED" && (-e "$STATE/ready" || -e "$STATE/failed") ]]; then SETTLED=1; fi
      if [[ -n "$SETTLED" ]] && ((now >= SETTLE_UNTIL)); then
        printf -v "$1" '%s' "$IDLE"
        return 0
      fi
    fi
  fi
  printf -v "$1" '%s' "$INTERVAL"
}

# wake LINE: a helper's line; a watched inode gone means watching the paths again.
wake() {
  [[ "$TRIGGER" == "an event"* ]] || TRIGGER="an event ($1)"
  case "$1" in
    *DELETE_SELF* | *MOVE_SELF* | *IGNORED* | *UNMOUNT*) [[ -n "$LOST" ]] || restart_inotify ;;
  esac
}

main() {
  case "$*" in
    "" | --check) ;;
    --dns) DNS_ON=1 ;;
    *) abort "unknown argument '$*' (usage: ${0##*/} [--check | --dns])" ;;
  esac
  check_start
  [[ "${1:-}" != --check ]] || exit 0
  if [[ "${#WANT[@]}" -eq 0 && -z "$DNS_ON" ]]; then
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
  watch_targets
  trap 'kill -s KILL $MNT_PID $INO_PID 2> /dev/null; exit 143' TERM
  trap 'kill -s KILL $MNT_PID $INO_PID 2> /dev/null; exit 130' INT
  [[ "$EVENTS" != 1 ]] || start_helpers
  printf 'watching\n'
  exec > /dev/null
  local line timeout n
  while :; do
    check
    wait_time timeout
    TRIGGER="the check every ${timeout} s"
    if read -r -t "$timeout" -u 3 line; then
      wake "$line"
      # A burst (a branch switch) is one check: take what is queued, up to a bound.
      for ((n = 0; n < 256; n++)); do
        read -r -t 0 -u 3 || break
        read -r -u 3 line || break
        wake "$line"
      done
    fi
  done
}

main "$@"

#!/usr/bin/env bash
# doctor.sh — try, as the unprivileged sandbox user, each way out of the sandbox, and
# report what held.
#
# Installed as /usr/local/bin/sandbox-doctor. `agent-sandbox doctor` runs it as
# `node` through sandbox-exec (and checks the rules in force separately, as root,
# with firewall-status); it can also be run by hand inside a sandbox. Every check is
# a real attempt, bounded by a short timeout, and aimed only at this sandbox, its
# default gateway (the host side of its bridge) or its own resolvers:
#   - TCP to the gateway on ports 80 and 22, and over IPv6 if there is an IPv6
#     route: refused at once, and the refusal logged by this sandbox's firewall
#     (denied.log), so that a host that refuses on its own does not count;
#   - UDP to the gateway: the send itself refused (EPERM);
#   - DNS: a name outside the allowlist answers NXDOMAIN from 127.0.0.1, and queries
#     straight to Docker's resolver (127.0.0.11) or the upstream resolvers, over UDP
#     and TCP, get no answer;
#   - socket families the firewall cannot see (vsock and others): refused by the
#     sandbox's seccomp profile (EPERM), and io_uring, which could open sockets
#     past that filter, is not there (ENOSYS);
#   - raw sockets, network administration, changing iptables/ipsets/resolv.conf/the
#     firewall state, signalling dnsmasq, sudo: all refused;
#   - git (bind mode, AGENT_SANDBOX_HOST_GIT): the host's .git cannot be written,
#     the pinned config (.git/config.worktree) cannot be changed or replaced and
#     its keys win, and the push gate answers at the remote `host`.
# With network mode "none" it checks that there is no route at all instead; with
# "open" it reports that egress is not filtered.
# As root (--mounts, or a full run as root) it also checks that mount-watch runs
# with --dns, keeping resolv.conf pointed at the sandbox resolver.
# It also checks that every protected path (AGENT_SANDBOX_PROTECTED_MOUNTS) is still
# a read-only mount in /proc/self/mountinfo (the host can detach one, see
# mount-watch.sh), that mount-watch has not marked the sandbox compromised, and that
# `node` cannot signal mount-watch. `--mounts` runs only the mount checks (the CLI
# runs that part as root: in a compromised sandbox every process of `node` is
# killed); `--no-mounts` runs all the others.
#
# Output: one line per check, "pass|fail|skip<TAB>NAME<TAB>DETAIL". Exits 0 if no
# check failed, 1 otherwise, 2 on a usage error.
#
# Environment (defaults in brackets):
#   AGENT_SANDBOX_NETWORK           [firewall] the sandbox's network mode
#   AGENT_SANDBOX_STATE_DIR         [/run/agent-sandbox]
#   AGENT_SANDBOX_RESOLV_CONF       [/etc/resolv.conf]
#   AGENT_SANDBOX_DOCTOR_TIMEOUT    [2] seconds allowed for each attempt
#   AGENT_SANDBOX_DOCTOR_LOG_WAIT   [3] seconds to wait for refusals to reach denied.log
#   AGENT_SANDBOX_DOCTOR_PROC       [/proc/self/status] (tests)
#   AGENT_SANDBOX_HOST_GIT, AGENT_SANDBOX_GIT_WORKTREE   set by the CLI in bind mode (agent-git.sh)
#   AGENT_SANDBOX_REAL_GIT          [/usr/bin/git]
#   AGENT_SANDBOX_PROTECTED_MOUNTS  the protected mount points, one a line
#   AGENT_SANDBOX_DOCTOR_MOUNTINFO  [/proc/self/mountinfo] (tests)

# The attempts run small programs whose own variables are in single quotes.
# shellcheck disable=SC2016
set -euo pipefail
# The libraries come from the image, unless the CLI sent them with this script
# (it runs its own copy of doctor.sh, so that it works on older images too).
# shellcheck source=base-image/root-env.sh
declare -F clean_root_env > /dev/null || . "${AGENT_SANDBOX_LIB_DIR:-/usr/local/lib/agent-sandbox}/root-env.sh"
clean_root_env

abort() {
  printf 'sandbox-doctor: %s\n' "$*" >&2
  exit 2
}

PART=all
case "${1:-}" in
  "") ;;
  --mounts) PART=mounts ;;
  --no-mounts) PART=others ;;
  -h | --help)
    printf 'usage: %s [--mounts | --no-mounts]\n' "${0##*/}"
    exit 0
    ;;
  *) abort "unknown argument '$1' (usage: ${0##*/} [--mounts | --no-mounts])" ;;
esac

MODE="${AGENT_SANDBOX_NETWORK:-firewall}"
STATE="${AGENT_SANDBOX_STATE_DIR:-/run/agent-sandbox}"
RESOLV="${AGENT_SANDBOX_RESOLV_CONF:-/etc/resolv.conf}"
T="${AGENT_SANDBOX_DOCTOR_TIMEOUT:-2}"
LOG_WAIT="${AGENT_SANDBOX_DOCTOR_LOG_WAIT:-3}"
PROC_STATUS="${AGENT_SANDBOX_DOCTOR_PROC:-/proc/self/status}"
MOUNTINFO="${AGENT_SANDBOX_DOCTOR_MOUNTINFO:-/proc/self/mountinfo}"
[[ "$T" =~ ^[0-9]+$ && "$T" -gt 0 ]] || abort "AGENT_SANDBOX_DOCTOR_TIMEOUT must be a positive integer"
[[ "$LOG_WAIT" =~ ^[0-9]+$ ]] || abort "AGENT_SANDBOX_DOCTOR_LOG_WAIT must be a non-negative integer"

failed=0
report() {
  local status="$1" name="$2" detail="$3"
  detail="${detail//$'\t'/ }"
  detail="${detail//$'\n'/; }"
  printf '%s\t%s\t%s\n' "$status" "$name" "$detail"
  [ "$status" != fail ] || failed=1
}
pass() { report pass "$1" "$2"; }
fail() { report fail "$1" "$2"; }
skip() { report skip "$1" "$2"; }

# try CMD...: run CMD bounded by the timeout; its stdout+stderr in $OUT, status in $RC.
OUT="" RC=0
try() {
  RC=0
  OUT="$(timeout -k 1 "$T" "$@" 2>&1 < /dev/null)" || RC=$?
}

# last_msg: the last non-empty line of $OUT (an error message, usually).
last_msg() {
  grep -v '^[[:space:]]*$' <<< "$OUT" | tail -n 1 || true
}

# ---- who we are --------------------------------------------------------------

check_unprivileged() {
  local uid cap nnp
  uid="$(id -u)"
  cap="$(sed -n 's/^CapEff:[[:space:]]*//p' "$PROC_STATUS" 2> /dev/null || true)"
  nnp="$(sed -n 's/^NoNewPrivs:[[:space:]]*//p' "$PROC_STATUS" 2> /dev/null || true)"
  if [ "$uid" = 0 ]; then
    fail unprivileged "running as root (uid 0): run as the sandbox user (docker exec -u node)"
  elif [[ -n "$cap" && ! "$cap" =~ ^0+$ ]]; then
    fail unprivileged "uid $uid holds capabilities (CapEff $cap)"
  elif [ "$nnp" != 1 ]; then
    fail unprivileged "uid $uid without no-new-privileges (NoNewPrivs ${nnp:-unknown})"
  else
    pass unprivileged "uid $uid, no capabilities, no-new-privileges"
  fi
}

check_ready() {
  if [ -e "$STATE/failed" ]; then
    fail ready "set-up failed: $(head -n 1 "$STATE/failed" || true)"
  elif [ -e "$STATE/ready" ]; then
    pass ready "$STATE/ready present"
  else
    fail ready "$STATE/ready missing: set-up has not finished"
  fi
}

# ---- protected mounts ----------------------------------------------------------

# shellcheck source=base-image/mount-lib.sh
declare -F decode_mountpoint > /dev/null || . "${AGENT_SANDBOX_LIB_DIR:-/usr/local/lib/agent-sandbox}/mount-lib.sh"

# check_mounts: each expected mount point is in mountinfo, its top mount read-only.
check_mounts() {
  local line opts path pid
  local -A top=()
  if [ -e "$STATE/compromised" ]; then
    fail compromised "$(head -n 1 "$STATE/compromised" || true); every process of node was killed: restart the sandbox"
  else
    pass compromised "no protected path lost since the sandbox started"
  fi
  if [ -z "${AGENT_SANDBOX_PROTECTED_MOUNTS:-}" ]; then
    skip protected-mounts "AGENT_SANDBOX_PROTECTED_MOUNTS is not set: no protected paths to check"
    return 0
  fi
  while IFS= read -r line; do
    mountinfo_fields "$line" path opts
    top[$path]="$opts"
  done < "$MOUNTINFO"
  while IFS= read -r path; do
    [ -n "$path" ] || continue
    if [ -z "${top[$path]+set}" ]; then
      fail "mount:$path" "not mounted: the host replaced or removed it, and the sandbox can write the host's file"
    elif [[ ",${top[$path]}," != *,ro,* ]]; then
      fail "mount:$path" "mounted read-write (${top[$path]})"
    else
      pass "mount:$path" "read-only mount in place"
    fi
  done <<< "$AGENT_SANDBOX_PROTECTED_MOUNTS"
  if [ "$(id -u)" = 0 ]; then
    pid="$(head -n 1 "$STATE/mount-watch.pid" 2> /dev/null | tr -dc '0-9' || true)"
    if [ -n "$pid" ] && kill -0 "$pid" 2> /dev/null; then
      pass mount-watch "running (pid $pid)"
    else
      fail mount-watch "not running: a protected path lost now would go unnoticed"
    fi
  fi
}

# check_dns_watch: as root, with the firewall: mount-watch runs with --dns, which
# points resolv.conf back at the sandbox resolver when the engine rewrites it (a
# network connected later) and reloads the firewall for the new resolvers.
check_dns_watch() {
  [ "$MODE" = firewall ] && [ "$(id -u)" = 0 ] || return 0
  local pid args=""
  pid="$(head -n 1 "$STATE/mount-watch.pid" 2> /dev/null | tr -dc '0-9' || true)"
  if [ -n "$pid" ] && kill -0 "$pid" 2> /dev/null; then
    args="$(tr '\0' ' ' < "/proc/$pid/cmdline" 2> /dev/null || true)"
  fi
  if [[ " $args" == *" --dns "* ]]; then
    pass dns-watch "mount-watch --dns running (pid $pid): a resolv.conf the engine rewrites is pointed back at 127.0.0.1"
  else
    fail dns-watch "mount-watch --dns is not running: after a network is connected later no name would resolve; restart the sandbox"
  fi
}

# ---- network ---------------------------------------------------------------

# gateway FAMILY: the default gateway for -4 or -6, or nothing.
gateway() {
  { ip "$1" route show default 2> /dev/null || true; } \
    | awk '$1 == "default" { for (i = 2; i < NF; i++) if ($i == "via") { print $(i + 1); exit } }'
}

DENIED_BEFORE=0
PENDING=() # "name|host|port" TCP refusals still to be confirmed in denied.log

# tcp NAME HOST PORT: connect; a refusal is confirmed later by confirm_logged.
tcp() {
  local name="$1" host="$2" port="$3" dest
  dest="$host:$port"
  [[ "$host" == *:* ]] && dest="[$host]:$port"
  try bash -c 'exec 3<> "/dev/tcp/$0/$1"' "$host" "$port"
  if [ "$RC" = 0 ]; then
    fail "$name" "connected to $dest"
  elif [ "$RC" = 124 ] || [ "$RC" = 137 ]; then
    fail "$name" "no answer from $dest within ${T}s: blocked, but not refused at once (REJECT rule missing?)"
  elif grep -q 'Connection refused' <<< "$OUT"; then
    PENDING+=("$name|$host|$port")
  else
    fail "$name" "unexpected error connecting to $dest: $(last_msg)"
  fi
}

# confirm_logged: a refusal counts only if this sandbox's firewall logged it (the
# host refuses closed ports too); NFLOG hands packets to tcpdump about once a second.
confirm_logged() {
  [ "${#PENDING[@]}" -gt 0 ] || return 0
  local log="$STATE/denied.log" deadline entry name host port new all
  deadline=$((SECONDS + LOG_WAIT))
  while :; do
    new="$(tail -n "+$((DENIED_BEFORE + 1))" "$log" 2> /dev/null || true)"
    all=1
    for entry in "${PENDING[@]}"; do
      IFS='|' read -r name host port <<< "$entry"
      host="${host%%\%*}"
      grep -qF " > $host.$port: tcp" <<< "$new" || all=0
    done
    if [ "$all" = 1 ] || [ "$SECONDS" -ge "$deadline" ]; then break; fi
    sleep 0.1
  done
  for entry in "${PENDING[@]}"; do
    IFS='|' read -r name host port <<< "$entry"
    host="${host%%\%*}" # tcpdump prints no zone index
    if grep -qF " > $host.$port: tcp" <<< "$new"; then
      pass "$name" "refused at once by the firewall ($host port $port, logged in denied.log)"
    else
      fail "$name" "refused ($host port $port), but not logged by this sandbox's firewall: the refusal came from elsewhere, or logging is down"
    fi
  done
  PENDING=()
}

# udp NAME HOST PORT: the firewall refuses the datagram before it leaves (EPERM).
udp() {
  local name="$1" host="$2" port="$3"
  try bash -c 'exec 3> "/dev/udp/$0/$1" && printf x >&3' "$host" "$port"
  if [ "$RC" = 0 ]; then
    fail "$name" "datagram sent to $host port $port"
  elif grep -q 'Operation not permitted' <<< "$OUT"; then
    pass "$name" "send to $host port $port refused by the firewall (EPERM)"
  else
    fail "$name" "unexpected error sending to $host port $port: $(last_msg)"
  fi
}

# first name of example.com/.net/.org that the allowlist does not cover (a real name,
# so that only a filtering resolver answers NXDOMAIN).
probe_name() {
  local candidate entry base covered
  for candidate in example.com example.net example.org; do
    covered=0
    while IFS= read -r entry; do
      base="${entry#\*.}"
      [ -n "$base" ] || continue
      if [ "$candidate" = "$base" ] || [[ "$candidate" == *".$base" ]]; then covered=1; fi
    done < <(cat "$STATE/allowlist" 2> /dev/null)
    if [ "$covered" = 0 ]; then
      printf '%s\n' "$candidate"
      return 0
    fi
  done
  return 1
}

check_resolver() {
  local servers
  servers="$(awk '$1 == "nameserver" { print $2 }' "$RESOLV" 2> /dev/null | paste -sd ' ' || true)"
  if [ "$servers" = 127.0.0.1 ]; then
    pass resolv-conf "$RESOLV points at the sandbox resolver only (127.0.0.1)"
  else
    fail resolv-conf "$RESOLV lists '${servers:-no nameserver}', not only 127.0.0.1: the engine rewrote it (a network connected later?) and it was not pointed back, so names do not resolve (see $STATE/firewall.log); restart the sandbox"
  fi
}

check_nxdomain() {
  local name status server
  if ! name="$(probe_name)"; then
    skip dns-nxdomain "example.com, .net and .org are all allowlisted: no name to probe"
    return 0
  fi
  try dig +time="$T" +tries=1 "$name"
  status="$(sed -n 's/.*status: \([A-Z]*\).*/\1/p' <<< "$OUT" | head -n 1 || true)"
  server="$(sed -n 's/^;; SERVER: \([^#]*\)#.*/\1/p' <<< "$OUT" | head -n 1 || true)"
  if [ "$status" = NXDOMAIN ] && [ "$server" = 127.0.0.1 ]; then
    pass dns-nxdomain "$name (not allowlisted): NXDOMAIN from the sandbox resolver"
  elif [ -n "$status" ]; then
    fail dns-nxdomain "$name (not allowlisted): $status from ${server:-an unknown server}, expected NXDOMAIN from 127.0.0.1"
  else
    fail dns-nxdomain "$name: no answer from the sandbox resolver: $(last_msg)"
  fi
}

# direct_dns RESOLVER: queries that bypass dnsmasq must get no answer. The name asked
# is this container's own, which Docker's resolver answers without forwarding it.
direct_dns() {
  local r="$1" proto flag name
  name="$(hostname 2> /dev/null || echo localhost)"
  for proto in udp tcp; do
    flag=+notcp
    [ "$proto" = tcp ] && flag=+tcp
    try dig "$flag" +time="$T" +tries=1 +retry=0 "@$r" "$name"
    if grep -q 'Got answer' <<< "$OUT"; then
      fail "dns-direct-$proto-$r" "$r answered a direct query over $proto"
    elif grep -qiE 'refused|no servers could be reached|timed out' <<< "$OUT"; then
      pass "dns-direct-$proto-$r" "direct query to $r over $proto got no answer ($(grep -oiE 'connection refused|timed out|no servers could be reached' <<< "$OUT" | head -n 1))"
    else
      fail "dns-direct-$proto-$r" "unexpected result querying $r over $proto: $(last_msg)"
    fi
  done
}

check_direct_dns() {
  local r
  local -a resolvers=(127.0.0.11)
  while IFS= read -r r; do
    [ -n "$r" ] && [ "$r" != 127.0.0.11 ] && resolvers+=("$r")
  done < <(cat "$STATE/upstream-resolvers" 2> /dev/null)
  for r in "${resolvers[@]}"; do direct_dns "$r"; done
}

check_ipv6() {
  local gw6
  gw6="$(gateway -6)"
  if [ -z "$gw6" ]; then
    if { ip -6 addr show scope global 2> /dev/null || true; } | grep -q inet6; then
      fail ipv6-egress "a global IPv6 address but no default route to test through"
    else
      pass ipv6-egress "no IPv6 route"
    fi
    return 0
  fi
  if [[ "$gw6" == fe80:* ]]; then
    gw6="$gw6%$(ip -6 route show default 2> /dev/null | awk '{ for (i = 1; i < NF; i++) if ($i == "dev") { print $(i + 1); exit } }' || true)"
  fi
  tcp ipv6-egress "$gw6" 80
}

check_firewall_network() {
  local gw
  gw="$(gateway -4)"
  DENIED_BEFORE="$(wc -l < "$STATE/denied.log" 2> /dev/null || echo 0)"
  if [ -n "$gw" ]; then
    tcp tcp-gateway-80 "$gw" 80
    tcp tcp-gateway-22 "$gw" 22
    udp udp-gateway-53 "$gw" 53
  else
    skip tcp-gateway "no IPv4 default route"
  fi
  check_ipv6
  check_resolver
  check_nxdomain
  check_direct_dns
  confirm_logged
}

check_no_route() {
  local routes
  routes="$( (ip -4 route show || true; ip -6 route show || true) 2> /dev/null | grep -v '^[[:space:]]*$' || true)"
  if [ -z "$routes" ]; then
    pass no-route "no IPv4 or IPv6 route (network mode none)"
  else
    fail no-route "routes present in network mode none: $(paste -sd ';' <<< "$routes")"
  fi
}

# ---- privileges over the network stack and the firewall ----------------------

check_raw_socket() {
  if command -v perl > /dev/null 2>&1; then
    try perl -MSocket -e 'socket(my $s, PF_INET, SOCK_RAW, 1) or die "$!\n"'
  elif command -v python3 > /dev/null 2>&1; then
    try python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, 1)'
  else
    skip raw-socket "neither perl nor python3 is installed"
    return 0
  fi
  if [ "$RC" = 0 ]; then
    fail raw-socket "opened a raw socket"
  else
    pass raw-socket "raw socket refused ($(last_msg))"
  fi
}

# Families netfilter does not filter, which unprivileged processes may otherwise
# open: vsock, RDS, CAN, TIPC, Bluetooth, RxRPC, KCM, Qualcomm IPC, SMC.
SECCOMP_FAMILIES=(40 21 29 30 31 33 41 42 43)

check_socket_families() {
  local fam open=()
  if ! command -v perl > /dev/null 2>&1; then
    skip socket-families "perl is not installed"
    return 0
  fi
  for fam in "${SECCOMP_FAMILIES[@]}"; do
    # EPERM is the profile's answer; any other (opened, or the kernel's own EAFNOSUPPORT) means it did not refuse.
    try perl -e 'socket(my $s, $ARGV[0], 1, 0) and exit 0; exit($!{EPERM} ? 3 : 4)' "$fam"
    [ "$RC" = 3 ] || open+=("$fam")
  done
  if [ "${#open[@]}" -gt 0 ]; then
    fail socket-families "socket() not refused by the seccomp profile for address families ${open[*]} (40 is AF_VSOCK)"
  else
    pass socket-families "socket() refused (EPERM) for ${#SECCOMP_FAMILIES[@]} families the firewall cannot see (AF_VSOCK among them)"
  fi
  # io_uring_setup (425 on every architecture): sockets it opens skip seccomp's socket() filter.
  try perl -e 'syscall(425, 1, 0) == -1 or exit 0; exit($!{ENOSYS} ? 3 : 4)'
  if [ "$RC" = 3 ]; then
    pass io-uring "io_uring_setup refused (ENOSYS)"
  else
    fail io-uring "io_uring_setup is not refused by the seccomp profile"
  fi
}

check_net_admin() {
  local mtu
  # Setting lo's MTU to its current value changes nothing but needs CAP_NET_ADMIN.
  mtu="$(cat /sys/class/net/lo/mtu 2> /dev/null || echo 65536)"
  try ip link set dev lo mtu "$mtu"
  if [ "$RC" = 0 ]; then
    fail net-admin "changed a network interface (ip link set lo)"
  else
    pass net-admin "ip link set refused ($(last_msg))"
  fi
}

check_iptables() {
  local ipt=iptables
  [ "$(head -n 1 "$STATE/backend" 2> /dev/null)" = legacy ] && ipt=iptables-legacy
  if ! command -v "$ipt" > /dev/null 2>&1; then
    skip iptables-write "$ipt not installed"
    return 0
  fi
  # A new, empty chain: a change that is harmless if it succeeds (it is then removed).
  try "$ipt" -w 1 -N agent-sandbox-doctor
  if [ "$RC" = 0 ]; then
    "$ipt" -w 1 -X agent-sandbox-doctor > /dev/null 2>&1 || true
    fail iptables-write "created an iptables chain"
  else
    pass iptables-write "$ipt refused ($(last_msg))"
  fi
}

check_ipset() {
  if ! command -v ipset > /dev/null 2>&1; then
    skip ipset-write "ipset not installed"
    return 0
  fi
  try ipset create agent-sandbox-doctor hash:ip
  if [ "$RC" = 0 ]; then
    ipset destroy agent-sandbox-doctor > /dev/null 2>&1 || true
    fail ipset-write "created an ipset"
  else
    pass ipset-write "ipset refused ($(last_msg))"
  fi
}

# writable NAME PATH WHAT: opening PATH for appending (which writes nothing) must fail.
not_writable() {
  local name="$1" path="$2"
  try sh -c ': >> "$1"' sh "$path"
  if [ "$RC" = 0 ]; then
    fail "$name" "$path is writable"
  else
    pass "$name" "$path is read-only ($(last_msg | sed 's/^sh: [0-9]*: //'))"
  fi
}

check_signal() {
  local name="$1" pidfile="$STATE/$1.pid" pid
  pid="$(head -n 1 "$pidfile" 2> /dev/null | tr -dc '0-9' || true)"
  if [ -z "$pid" ]; then
    fail "signal-$name" "$name is not running (no $pidfile)"
    return 0
  fi
  # Signal 0 goes through the same permission check as any other signal.
  try kill -s 0 "$pid"
  if [ "$RC" = 0 ]; then
    fail "signal-$name" "could signal $name (pid $pid)"
  else
    pass "signal-$name" "signalling $name (pid $pid) refused ($(last_msg | sed 's/^.*: //'))"
  fi
}

check_sudo() {
  if ! command -v sudo > /dev/null 2>&1; then
    pass sudo "sudo is not installed"
    return 0
  fi
  try sudo -n true
  if [ "$RC" = 0 ]; then
    fail sudo "sudo -n true succeeded"
  else
    pass sudo "sudo refused ($(grep -m 1 -v '^[[:space:]]*$' <<< "$OUT" || true))"
  fi
}

# check_git: the host's .git is out of reach, the pinned keys hold, the gate answers.
check_git() {
  local host="${AGENT_SANDBOX_HOST_GIT:-}" wt="${AGENT_SANDBOX_GIT_WORKTREE:-}" git="${AGENT_SANDBOX_REAL_GIT:-/usr/bin/git}"
  [ -n "$host" ] && [ -n "$wt" ] || return 0
  not_writable host-git-config "$host/config"
  try sh -c ': > "$1/agent-sandbox-doctor"' sh "$host/hooks"
  if [ "$RC" = 0 ]; then
    rm -f "$host/hooks/agent-sandbox-doctor"
    fail host-git-hooks "could create a file in $host/hooks"
  else
    pass host-git-hooks "$host/hooks is read-only ($(last_msg | sed 's/^sh: [0-9]*: //'))"
  fi
  local pinned="$wt/.git/config.worktree" want got
  not_writable git-pinned-config "$pinned"
  try sh -c 'printf "[core]\n" > "$1.doctor" && mv -f "$1.doctor" "$1"' sh "$pinned"
  rm -f "$pinned.doctor" 2> /dev/null || true
  if [ "$RC" = 0 ]; then
    fail git-pinned-replace "could replace $pinned"
  else
    pass git-pinned-replace "replacing $pinned refused ($(last_msg | sed 's/^mv: //'))"
  fi
  want="$("$git" config --file "$pinned" core.hooksPath 2> /dev/null || true)"
  got="$("$git" -C "$wt" config core.hooksPath 2> /dev/null || true)"
  if [ -n "$want" ] && [ "$want" = "$got" ] && [ "$("$git" -C "$wt" config core.fsmonitor 2> /dev/null || true)" = false ]; then
    pass git-pinned-keys "core.hooksPath is $got and core.fsmonitor is off"
  else
    fail git-pinned-keys "the pinned git keys do not hold: core.hooksPath is '${got}' (pinned: '${want}'), or core.fsmonitor is not off"
  fi
  try "$git" -C "$wt" ls-remote --heads host
  if [ "$RC" = 0 ]; then
    pass git-gate "the push gate answers at the remote host"
  else
    fail git-gate "the push gate does not answer: $(last_msg)"
  fi
}

# ---- nested containers (nestedContainers) ------------------------------------

# check_nested: without nestedContainers, no user namespaces for node; with them,
# the nested Podman answers on DOCKER_HOST, its storage driver, and the devices node's alone.
check_nested() {
  if [ "${AGENT_SANDBOX_NESTED:-}" != 1 ]; then
    try unshare --user true
    if [ "$RC" = 0 ]; then
      # Podman's default seccomp profile allows unshare; Docker's refuses it.
      skip userns "user namespaces can be created (the engine's seccomp profile allows them); nested containers are off"
    else
      pass userns "user namespaces refused ($(last_msg | sed 's/^unshare: //'))"
    fi
    return 0
  fi
  local driver="" dev bad=""
  if [ -r "$STATE/nested-storage" ]; then read -r driver < "$STATE/nested-storage" || true; fi
  if [ -n "$driver" ]; then
    pass nested-storage "nested images are stored with the $driver driver"
  else
    fail nested-storage "$STATE/nested-storage missing: the nested Podman was not set up"
  fi
  try curl -sf --unix-socket "$STATE/podman/podman.sock" http://podman/_ping
  if [ "$RC" = 0 ]; then
    pass nested-engine "rootless Podman answers at ${DOCKER_HOST:-unix://$STATE/podman/podman.sock}"
  else
    fail nested-engine "rootless Podman does not answer at $STATE/podman/podman.sock: $(last_msg)"
  fi
  for dev in /dev/fuse /dev/net/tun; do
    [ "$(stat -c '%U %a' "$dev" 2> /dev/null || true)" = "$(id -un) 600" ] || bad="$bad $dev"
  done
  if [ -z "$bad" ]; then
    pass nested-devices "/dev/fuse and /dev/net/tun are $(id -un)'s alone (0600)"
  else
    fail nested-devices "not $(id -un)'s alone (0600):$bad"
  fi
}

# ---- main --------------------------------------------------------------------

if [ "$PART" = mounts ]; then
  check_mounts
  check_dns_watch
  exit "$failed"
fi
if [ "$PART" != others ]; then
  check_mounts
  check_dns_watch
fi
check_unprivileged
check_ready
case "$MODE" in
  firewall)
    check_firewall_network
    ;;
  none)
    check_no_route
    ;;
  open)
    fail egress "network mode is open: egress is not filtered in this sandbox"
    ;;
  *)
    fail egress "unknown network mode '$MODE'"
    ;;
esac
check_raw_socket
check_socket_families
check_net_admin
if [ "$MODE" = firewall ]; then
  check_iptables
  check_ipset
  not_writable resolv-conf-write "$RESOLV"
  not_writable state-write "$STATE/allowlist"
  check_signal dnsmasq
fi
[ -z "${AGENT_SANDBOX_PROTECTED_MOUNTS:-}" ] || check_signal mount-watch
check_sudo
check_git
check_nested
exit "$failed"

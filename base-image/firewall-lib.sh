# shellcheck shell=bash
# Variables here are used by the scripts that source this file.
# shellcheck disable=SC2034
# Shared by init-firewall.sh and firewall-allow.sh (installed at
# /usr/local/lib/agent-sandbox/firewall-lib.sh; tests point AGENT_SANDBOX_LIB_DIR
# at base-image/). Sourced, never run, as the scripts' common opening: the
# sourcing script sets FW_PROG (its name in messages) and runs with
# `set -euo pipefail`; this defines abort() and warn() and sources
# firewall-entries.sh (allowlist entries and their ports).
# init-firewall.sh runs on every sandbox start, so the helpers use builtins where
# a command would do: each fork+exec costs ~2 ms, a good part of a one-shot run.

# ---- paths and names -------------------------------------------------------
FW_STATE="${AGENT_SANDBOX_STATE_DIR:-/run/agent-sandbox}"
FW_RESOLV_CONF="${AGENT_SANDBOX_RESOLV_CONF:-/etc/resolv.conf}"
FW_DEFAULT_DOMAINS_FILE="${AGENT_SANDBOX_DEFAULT_DOMAINS_FILE:-/etc/agent-sandbox/default-domains.txt}"
# Survives a container restart (unlike the tmpfs $FW_STATE); see fw_read_upstreams.
FW_PERSIST_DIR="${AGENT_SANDBOX_PERSIST_DIR:-/var/lib/agent-sandbox}"
FW_DNS_USER=dnsmasq
FW_SET4=agent-sandbox-allow4
FW_SET6=agent-sandbox-allow6
FW_NET4=agent-sandbox-net4
FW_NFLOG_GROUP=42
FW_SELFTEST_NAME=agent-sandbox-selftest.invalid

# Effective allowlist, in order (entries lower-cased, in their one written form:
# firewall-entries.sh), and the set of their keys (fw_seen_key) for de-duplication.
FW_DOMAINS=()
declare -A FW_SEEN=()
# Upstream resolvers dnsmasq forwards to.
FW_UPSTREAMS=()
# A private temporary directory that the sourcing script sets after sourcing this
# and removes on exit, if it has one (else fw_start_dnsmasq makes and removes its
# own temp file). Never taken from the environment.
FW_TMP=""

# ---- small helpers ---------------------------------------------------------

# abort MSG: the reason, as the last stderr line, and exit 1 (unless the sourcing
# script has its own).
declare -F abort > /dev/null || abort() {
  printf '%s: %s\n' "${FW_PROG:-firewall}" "$*" >&2
  exit 1
}

# warn MSG: to stderr and the firewall log.
declare -F warn > /dev/null || warn() {
  printf '%s: warning: %s\n' "${FW_PROG:-firewall}" "$*" >&2
  fw_log "${FW_PROG:-firewall}: warning: $*"
}

# fw_log MSG: append a timestamped line to $FW_STATE/firewall.log (best effort).
fw_log() {
  if [ -d "$FW_STATE" ]; then
    # printf's %()T, not date(1): no fork.
    TZ=UTC printf '%(%Y-%m-%dT%H:%M:%SZ)T %s\n' -1 "$*" >> "$FW_STATE/firewall.log" 2>/dev/null || true
  fi
}

# fw_read_file VAR FILE: set VAR to FILE's content without its trailing newlines,
# like "$(cat FILE)" but without a fork; empty if FILE cannot be read.
fw_read_file() {
  local content=""
  { IFS= read -r -d '' content < "$2"; } 2>/dev/null || true
  printf -v "$1" '%s' "${content%"${content##*[!$'\n']}"}"
}

# fw_read_lines ARRAY FILE: set ARRAY to the lines of FILE that are not blank
# (like `mapfile -t ARRAY < <(grep -v '^[[:space:]]*$' FILE)`, without the forks).
fw_read_lines() {
  local -n fw_lines_out="$1"
  local line
  fw_lines_out=()
  while IFS= read -r line || [ -n "$line" ]; do
    if [[ "$line" == *[![:space:]]* ]]; then fw_lines_out+=("$line"); fi
  done < "$2" || true
}

# fw_last_line FILE: print the last non-blank line of FILE (nothing if unreadable).
fw_last_line() {
  local line last=""
  if [ -r "$1" ]; then
    while IFS= read -r line || [ -n "$line" ]; do
      if [[ "$line" == *[![:space:]]* ]]; then last="$line"; fi
    done < "$1"
  fi
  if [ -n "$last" ]; then printf '%s\n' "$last"; fi
}

# fw_split STRING: print the items of a comma/space/newline separated list, one per line.
# Uses `read -a`, so `*.example.com` is never glob-expanded.
fw_split() {
  local item
  local -a FW_ITEMS=()
  fw_split_into "$1"
  for item in "${FW_ITEMS[@]}"; do
    printf '%s\n' "$item"
  done
}

# fw_split_into STRING: the same items, into the array FW_ITEMS (no subshell: the
# firewall is on every start's critical path, and each fork costs a few ms).
fw_split_into() {
  local s="$1"
  FW_ITEMS=()
  s="${s//[,$'\n\t\r']/ }"
  read -r -a FW_ITEMS <<< "$s" || true
}

# fw_valid_domain PATTERN: succeed if PATTERN is `name` or `*.name`, where name is a
# DNS hostname (labels of letters, digits, `-` and `_`, 1-63 chars, not starting or
# ending with `-`; 253 chars at most; last label not all digits, so no IP addresses).
fw_valid_domain() {
  local d="${1#\*.}" label
  local -a labels=()
  [ -n "$d" ] && [ "${#d}" -le 253 ] || return 1
  [[ "$d" =~ ^[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*$ ]] || return 1
  IFS=. read -r -a labels <<< "$d"
  for label in "${labels[@]}"; do
    [ "${#label}" -le 63 ] || return 1
  done
  [[ ! "${labels[-1]}" =~ ^[0-9]+$ ]]
}

# fw_add_domain ENTRY SOURCE: validate ENTRY (lower-cased, in its one written
# form) and append it to FW_DOMAINS unless the same name and port are already
# there (then warn). Aborts if invalid. Sets FW_ADDED=1 if it was added, else 0.
fw_add_domain() {
  local entry
  fw_check_entry "$1" "$2"
  entry="$FW_E_KEY"
  fw_seen_key
  if [ -n "${FW_SEEN[$FW_E_SEEN]:-}" ]; then
    FW_ADDED=0
    if [ "${FW_SEEN[$FW_E_SEEN]}" = "$entry" ]; then
      warn "duplicate entry '$entry' in $2 ignored"
    else
      warn "duplicate entry '$entry' in $2 ignored (same as '${FW_SEEN[$FW_E_SEEN]}')"
    fi
    return 0
  fi
  FW_SEEN[$FW_E_SEEN]="$entry"
  FW_DOMAINS+=("$entry")
  FW_ADDED=1
}

# fw_add_domains_from_file FILE: every non-comment word of FILE.
fw_add_domains_from_file() {
  local file="$1" src="$1" line item
  local -a FW_ITEMS=()
  [ -r "$file" ] || abort "cannot read domain list $file"
  while IFS= read -r line || [ -n "$line" ]; do
    fw_split_into "${line%%#*}"
    for item in "${FW_ITEMS[@]}"; do
      if [ -n "$item" ]; then fw_add_domain "$item" "$src"; fi
    done
  done < "$file"
}

# fw_add_domains_from_list STRING SOURCE: every item of a comma/space/newline list.
fw_add_domains_from_list() {
  local item
  local -a FW_ITEMS=()
  fw_split_into "$1"
  for item in "${FW_ITEMS[@]}"; do
    if [ -n "$item" ]; then fw_add_domain "$item" "$2"; fi
  done
}

# fw_valid_ip ADDR: a plausible IPv4 or IPv6 address (no zone index).
fw_valid_ip() {
  [[ "$1" =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}$ ]] || [[ "$1" =~ ^[0-9a-fA-F:.]*:[0-9a-fA-F:.]*$ ]]
}

# fw_is_ipv6 ADDR
fw_is_ipv6() {
  [[ "$1" == *:* ]]
}

# fw_read_upstreams: fill FW_UPSTREAMS. Order of preference:
#  1. $FW_STATE/upstream-resolvers (saved by an earlier run in this boot; by now
#     resolv.conf points at 127.0.0.1), after the `nameserver` lines resolv.conf
#     has again: the engine rewrote it since (a network connected later: Docker
#     writes its own 127.0.0.11 there, Podman puts the new network's DNS in front),
#     and its newest resolvers come first, as the C library would ask them;
#  2. the `nameserver` lines of resolv.conf, other than our own 127.0.0.1;
#  3. $FW_PERSIST_DIR/upstream-resolvers (saved at an earlier boot: Docker does not
#     rewrite a resolv.conf the container has modified, so after a restart it may
#     still say 127.0.0.1 while the tmpfs state dir is empty).
# Saves the list to 1 and 3. Aborts if none is found.
fw_read_upstreams() {
  local saved="$FW_STATE/upstream-resolvers" persisted="$FW_PERSIST_DIR/upstream-resolvers"
  local key addr rest
  local -a earlier=()
  local -A have=()
  FW_UPSTREAMS=()
  if [ -r "$FW_RESOLV_CONF" ]; then
    while read -r key addr rest; do
      [ "$key" = nameserver ] || continue
      if [ -z "$addr" ] || [ "$addr" = 127.0.0.1 ]; then continue; fi
      : "$rest"
      if ! fw_valid_ip "$addr"; then
        warn "ignoring nameserver '$addr' in $FW_RESOLV_CONF"
      elif [ -z "${have[$addr]:-}" ]; then
        have[$addr]=1
        FW_UPSTREAMS+=("$addr")
      fi
    done < "$FW_RESOLV_CONF"
  fi
  if [ -s "$saved" ]; then
    fw_read_lines earlier "$saved"
    for addr in "${earlier[@]}"; do
      fw_valid_ip "$addr" || abort "invalid upstream resolver '$addr' in $saved"
      [ -n "${have[$addr]:-}" ] || FW_UPSTREAMS+=("$addr")
      have[$addr]=1
    done
  elif [ "${#FW_UPSTREAMS[@]}" -eq 0 ] && [ -s "$persisted" ]; then
    fw_read_lines FW_UPSTREAMS "$persisted"
    warn "no upstream nameserver in $FW_RESOLV_CONF; reusing the ones saved in $persisted"
    for addr in "${FW_UPSTREAMS[@]}"; do
      fw_valid_ip "$addr" || abort "invalid upstream resolver '$addr' in $persisted"
    done
  fi
  [ "${#FW_UPSTREAMS[@]}" -gt 0 ] || abort "no upstream nameserver found in $FW_RESOLV_CONF"
  fw_write_file "$saved" printf '%s\n' "${FW_UPSTREAMS[@]}"
  if [ -d "$FW_PERSIST_DIR" ] || mkdir -p "$FW_PERSIST_DIR" 2>/dev/null; then
    fw_write_file "$persisted" printf '%s\n' "${FW_UPSTREAMS[@]}" 2>/dev/null \
      || warn "could not save upstream resolvers to $persisted"
  fi
}

# Our effective gid, read once from /proc by fw_root_owned (bash has no $EGID).
FW_EGID=""

# fw_root_owned PATH: PATH belongs to uid 0 and gid 0. Builtin tests (-O/-G: owned
# by our euid/egid) instead of stat(1): no fork.
fw_root_owned() {
  local key eff
  [ "$EUID" -eq 0 ] && [ -O "$1" ] && [ -G "$1" ] || return 1
  if [ -z "$FW_EGID" ]; then
    # "Gid:	real	effective	saved	fs"
    { while read -r key _ eff _; do
      if [ "$key" = Gid: ]; then FW_EGID="$eff" && break; fi
    done < /proc/self/status; } 2>/dev/null || true
  fi
  [ "$FW_EGID" = 0 ]
}

# fw_write_file PATH CMD [ARG...]: replace PATH with the output of CMD (a builtin
# or function, so that nothing forks), through a temp file and one rename: readers
# (firewall-status) never see a partial file. The result is mode 0644 (umask 022;
# this sets it) and, when run as root, owned by root. Returns non-zero on failure,
# leaving no temp file, also where `set -e` is off (`fw_write_file ... || warn`).
fw_write_file() {
  local - path="$1" tmp
  shift
  umask 022
  # noclobber: the temp file is created exclusively, as mktemp would; one retry
  # with a new name, then bash's own message says why.
  set -C
  tmp="$path.$$.$RANDOM"
  if ! { : > "$tmp"; } 2>/dev/null; then
    tmp="$path.$$.$RANDOM"
    : > "$tmp" || return 1
  fi
  set +C
  if ! { "$@"; } >> "$tmp"; then
    rm -f "$tmp"
    return 1
  fi
  if [ "$EUID" -eq 0 ] && ! fw_root_owned "$tmp"; then chown 0:0 "$tmp" 2>/dev/null || true; fi
  if ! mv -f "$tmp" "$path"; then
    rm -f "$tmp"
    return 1
  fi
}

# fw_prepare_state: create $FW_STATE (root, 0755) if needed.
fw_prepare_state() {
  umask 022
  [ -d "$FW_STATE" ] || mkdir -p "$FW_STATE" || abort "cannot create state directory $FW_STATE"
  chmod 0755 "$FW_STATE" 2>/dev/null || true
  if [ "$EUID" -eq 0 ] && ! fw_root_owned "$FW_STATE"; then chown 0:0 "$FW_STATE" 2>/dev/null || true; fi
}

# fw_read_allowlist: load FW_DOMAINS from $FW_STATE/allowlist.
fw_read_allowlist() {
  [ -r "$FW_STATE/allowlist" ] || abort "$FW_STATE/allowlist not found: is the firewall initialised?"
  fw_add_domains_from_file "$FW_STATE/allowlist"
}

# fw_write_allowlist: save FW_DOMAINS to $FW_STATE/allowlist.
fw_write_allowlist() {
  if [ "${#FW_DOMAINS[@]}" -gt 0 ]; then
    fw_write_file "$FW_STATE/allowlist" printf '%s\n' "${FW_DOMAINS[@]}"
  else
    fw_write_file "$FW_STATE/allowlist" :
  fi
}

# fw_dnsmasq_conf: print the dnsmasq configuration for FW_DOMAINS and FW_UPSTREAMS.
# dnsmasq (>= 2.86) picks the longest matching domain, so `server=/D/...` wins over
# `address=/#/` for D and its subdomains; every other name gets NXDOMAIN without
# being forwarded. /etc/hosts is still read (the container's own hostname).
# strict-order: the upstream resolvers are asked in resolv.conf's order, as the C
# library asks them, not all at once with the first answer winning. On a Podman
# network the first is the network's own DNS (it knows the containers) and the
# next the host's (it does not): the host's NXDOMAIN must not win the race.
# No answer cache: every lookup is forwarded, so an allowlisted host that moves to a
# new address (a recreated container: Docker's DNS answers with TTL 600) is usable
# at once, its new address reaching the ipset before the client sees it. A plain
# container has no DNS cache either.
fw_dnsmasq_conf() {
  local entry up
  local -A seen_base=()
  printf '%s\n' '# Generated by agent-sandbox init-firewall.sh / firewall-allow.sh; do not edit.' \
    no-resolv no-poll strict-order listen-address=127.0.0.1 bind-interfaces port=53 "user=$FW_DNS_USER" \
    cache-size=0 log-queries "log-facility=$FW_STATE/dnsmasq.log"
  for entry in "${FW_DOMAINS[@]}"; do
    fw_parse_entry "$entry" || continue
    [ -z "${seen_base[$FW_E_BASE]:-}" ] || continue
    seen_base[$FW_E_BASE]=1
    for up in "${FW_UPSTREAMS[@]}"; do
      printf 'server=/%s/%s\n' "$FW_E_BASE" "$up"
    done
  done
  fw_dnsmasq_ipsets
  printf 'address=/#/\n'
}

# fw_pid_alive PID NAME: PID is a live (not zombie) process whose command name is
# NAME (guards against killing an unrelated process that reused a stale pid).
fw_pid_alive() {
  local comm stat
  [[ "$1" =~ ^[0-9]+$ ]] || return 1
  { IFS= read -r comm < "/proc/$1/comm"; } 2>/dev/null || return 1
  [ "$comm" = "$2" ] || return 1
  { IFS= read -r stat < "/proc/$1/stat"; } 2>/dev/null || return 1
  stat="${stat##*) }"
  [ "${stat%% *}" != Z ]
}

# fw_stop_pidfile FILE NAME: stop the process named NAME whose pid is in FILE, and
# wait (at most ~1 s) until it is gone. Removes FILE.
fw_stop_pidfile() {
  local file="$1" name="$2" pid="" i
  [ -f "$file" ] || return 0
  { IFS= read -r pid < "$file"; } 2>/dev/null || true
  pid="${pid//[!0-9]/}"
  if [ -n "$pid" ] && fw_pid_alive "$pid" "$name"; then
    kill "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
      fw_pid_alive "$pid" "$name" || break
      sleep 0.02
    done
    if fw_pid_alive "$pid" "$name"; then
      kill -9 "$pid" 2>/dev/null || true
      sleep 0.05
    fi
  fi
  rm -f "$file"
}

# fw_start_dnsmasq: (re)write dnsmasq.conf and (re)start dnsmasq.
fw_start_dnsmasq() {
  local conf="$FW_STATE/dnsmasq.conf" err
  fw_write_file "$conf" fw_dnsmasq_conf
  fw_stop_pidfile "$FW_STATE/dnsmasq.pid" dnsmasq
  if [ -n "$FW_TMP" ]; then err="$FW_TMP/dnsmasq.err"; else err="$(mktemp)"; fi
  # dnsmasq daemonises once it is listening, so it answers as soon as this returns.
  if ! dnsmasq --conf-file="$conf" --pid-file="$FW_STATE/dnsmasq.pid" < /dev/null > /dev/null 2> "$err" 3>&-; then
    local msg
    msg="$(fw_last_line "$err")"
    [ -n "$FW_TMP" ] || rm -f "$err"
    abort "dnsmasq failed to start: ${msg:-unknown error}"
  fi
  [ -n "$FW_TMP" ] || rm -f "$err"
  # dnsmasq makes its log file 0660 dnsmasq:root; let `firewall-status` (any user) read it.
  chmod 0644 "$FW_STATE/dnsmasq.pid" "$FW_STATE/dnsmasq.log" 2>/dev/null || true
}

# fw_check_dns VAR: dnsmasq must answer a name outside the allowlist with NXDOMAIN
# (answered locally from address=/#/, never forwarded). Returns 1 and sets VAR to
# the reason if it does not.
fw_check_dns() {
  local fw_out fw_why
  fw_out="$(dig @127.0.0.1 +time=1 +tries=1 "$FW_SELFTEST_NAME" 2>&1)" || true
  [[ "$fw_out" != *'status: NXDOMAIN'* ]] || return 0
  fw_why="$(grep -E 'status:|timed out|refused|error' <<< "$fw_out" | head -n 1 | sed 's/^[;[:space:]]*//')" || true
  printf -v "$1" 'dnsmasq did not answer %s with NXDOMAIN (%s)' "$FW_SELFTEST_NAME" "${fw_why:-no answer}"
  return 1
}

# fw_selftest_dns: fw_check_dns, aborting if it fails.
fw_selftest_dns() {
  local why=""
  fw_check_dns why || abort "DNS self-test failed: $why"
}

# shellcheck source=base-image/firewall-entries.sh
. "${BASH_SOURCE[0]%/*}/firewall-entries.sh"

#!/usr/bin/env bash
# firewall-allow.sh [--until EPOCH] [--limited] ENTRY... — add entries to a running sandbox's allowlist.
#
# Run as root (`docker exec -u root CONTAINER /usr/local/sbin/firewall-allow.sh
# example.com '*.example.org' db.example:5432 dns.example:853/udp`) after
# init-firewall.sh. An entry is a name (TCP 80 and 443, through the egress
# gateway), `name:PORT` (that TCP port) or `name:PORT/udp` (that UDP port).
# Validates every argument first (nothing changes if one is invalid), appends the
# new ones to /run/agent-sandbox/allowlist, creates the ipsets and the
# AGENT-SANDBOX-PORTS rule of a port not declared before, regenerates dnsmasq.conf
# and restarts dnsmasq. The names' addresses are added to the ipsets as they are
# looked up. Prints one line per argument: `added ENTRY`, `renewed ENTRY` (an
# entry an earlier firewall-allow added: its grant is replaced) or `ENTRY is
# already allowed` (by the defaults or the config, or by the same lasting
# grant: left as it is).
#
# Grants: each entry this adds is recorded in /run/agent-sandbox/grants as
# `ENTRY UNTIL [limited]` (UNTIL: epoch seconds it expires at, 0 for the
# sandbox's life, --until EPOCH sets it; `limited`, from --limited: the egress
# gateway counts the grant, once or against an upload budget). For a grant that
# expires, a detached process (`firewall-allow --expire ENTRY UNTIL`, in its own
# session) sleeps until then by the wall clock (waking once a minute), and
# removes the entry if its grant is still that one: first every address from
# the ipsets of its port (a `name:PORT` entry's; flush_port_sets says why all of
# them), then the entry from the allowlist and dnsmasq (its names are refused
# again), then its grant line; a step that fails is logged and the whole
# removal tried again (3 tries, a second apart). A bare name's addresses stay
# in the web sets: the egress gateway refuses its requests itself, saying the
# grant expired. Every change and every failure is logged in firewall.log.
# Same environment overrides as init-firewall.sh (AGENT_SANDBOX_STATE_DIR,
# AGENT_SANDBOX_LIB_DIR).
set -euo pipefail
# shellcheck source=base-image/root-env.sh
. "${AGENT_SANDBOX_LIB_DIR:-/usr/local/lib/agent-sandbox}/root-env.sh"
clean_root_env

FW_PROG=firewall-allow
FW_LIB="${AGENT_SANDBOX_LIB_DIR:-/usr/local/lib/agent-sandbox}/firewall-lib.sh"
[ -r "$FW_LIB" ] || { printf '%s: missing %s\n' "$FW_PROG" "$FW_LIB" >&2 && exit 1; }
# shellcheck source=base-image/firewall-lib.sh
. "$FW_LIB"

GRANTS="$FW_STATE/grants"
# Grants in force: ENTRY -> `UNTIL` or `UNTIL limited` (epoch seconds, 0: for the sandbox's life).
declare -A GRANT=()

# read_grants: GRANT from $GRANTS (none before the first grant).
read_grants() {
  local entry until rest
  [ -f "$GRANTS" ] || return 0
  while read -r entry until rest; do
    [ -n "$entry" ] && GRANT[$entry]="${until:-0}${rest:+ $rest}"
  done < "$GRANTS"
}

# print_grants: GRANT as $GRANTS holds it.
print_grants() {
  local entry
  for entry in "${!GRANT[@]}"; do printf '%s %s\n' "$entry" "${GRANT[$entry]}"; done
}

# write_grants: GRANT to $GRANTS.
write_grants() {
  fw_write_file "$GRANTS" print_grants || abort "cannot write $GRANTS"
}

# lock: one firewall-allow at a time changes the allowlist (an expiry may come during a grant).
lock() {
  exec 9> "$FW_STATE/grants.lock"
  flock 9 || abort "cannot lock $FW_STATE/grants.lock"
}

# when UNTIL: the time a grant lasts until, for the log.
when() {
  if [ "$1" = 0 ]; then printf 'for the sandbox'"'"'s life'; else TZ=UTC printf 'until %(%Y-%m-%dT%H:%M:%SZ)T' "$1"; fi
}

# flush_port_sets ENTRY: empty the ipsets of a `name:PORT` entry's port (nothing for a bare name).
# Every address goes, also those of the port's other entries: which addresses ENTRY's names
# reached cannot be told reliably from dnsmasq's log. dnsmasq adds the answer to a name
# reached through a CNAME under the query's sets but logs the address under the CNAME's
# target, a name no entry need cover; lines of concurrent lookups interleave; and the log
# may be cut. Flushing removes them all for sure, and costs little: dnsmasq keeps no cache
# and forwards every lookup, so the port's still-allowed names are back in the sets at
# their next lookup, and conntrack keeps their established connections. A client that
# keeps an address without looking its name up again is refused until it does.
flush_port_sets() {
  local s4 s6
  fw_parse_entry "$1" || return 0
  [ -n "$FW_E_PORT" ] || return 0
  fw_port_set s4 "$FW_E_PROTO" "$FW_E_PORT" 4
  fw_port_set s6 "$FW_E_PROTO" "$FW_E_PORT" 6
  ipset flush "$s4" && ipset flush "$s6"
}

# close_inherited: close every descriptor past stderr this process inherited (a caller that waits
# for its pipes to close, as an exec or a test runner does, is not held until the grant expires).
close_inherited() {
  local fd
  for fd in "/proc/$$/fd/"*; do
    fd="${fd##*/}"
    if [[ "$fd" =~ ^[0-9]+$ ]] && ((fd > 2)); then exec {fd}>&- 2> /dev/null || true; fi
  done
}

# wall_clock VAR: the wall clock's epoch seconds (date(1): the tests move it; the builtin if it cannot fork).
wall_clock() {
  local t
  t="$(date +%s 2> /dev/null)" || t=""
  if [[ "$t" =~ ^[0-9]+$ ]]; then printf -v "$1" '%s' "$t"; else printf -v "$1" '%(%s)T' -1; fi
}

# sleep_until UNTIL: wake at least once a minute and compare with the wall clock. sleep(1)
# does not count time while the machine is suspended (a laptop's lid closed, a paused VM):
# one long sleep would make the grant last that much longer. Where sleep cannot fork (the
# pids limit full), `read -t` on a pipe this process holds both ends of waits instead of
# spinning: nothing is ever written to it.
sleep_until() {
  local now n idle=""
  { exec {idle}<> <(:); } 2> /dev/null || idle=""
  wall_clock now
  while ((now < $1)); do
    n=$((($1 - now) < 60 ? $1 - now : 60))
    sleep "$n" 2> /dev/null || { [ -n "$idle" ] && read -r -t "$n" -u "$idle" _; } || true
    wall_clock now
  done
  [ -z "$idle" ] || exec {idle}<&-
}

# expire_once ENTRY UNTIL: remove ENTRY unless its grant changed meanwhile. Run in a subshell
# (its abort ends that try only). The port's addresses go first, so that a later step that
# fails (dnsmasq or a fork refused: an agent can flood the one or fill the pids limit) does
# not leave them open; the grant's line goes last, so that the next try finds it.
expire_once() {
  local entry="$1" until="$2" e why=""
  local -a kept=()
  abort() {
    fw_log "firewall-allow: warning: removing the expired grant of $entry: $*"
    exit 1
  }
  lock
  read_grants
  [ -n "${GRANT[$entry]:-}" ] && [ "${GRANT[$entry]%% *}" = "$until" ] || return 0
  unset 'GRANT[$entry]'
  flush_port_sets "$entry" || abort "cannot empty the ipsets of its port"
  fw_read_allowlist
  fw_read_upstreams
  for e in "${FW_DOMAINS[@]}"; do [ "$e" = "$entry" ] || kept+=("$e"); done
  FW_DOMAINS=("${kept[@]}")
  FW_TMP="$(mktemp -d)" || abort "cannot make a temporary directory"
  trap 'rm -rf "$FW_TMP"' EXIT
  fw_write_allowlist || abort "cannot write $FW_STATE/allowlist"
  fw_start_dnsmasq
  # Again: the dnsmasq stopped above may have answered a lookup of ENTRY's names since the first flush.
  flush_port_sets "$entry" || abort "cannot empty the ipsets of its port after restarting dnsmasq"
  # Not fatal here: the entry is out of the allowlist and dnsmasq.conf, and its addresses out of the sets.
  fw_check_dns why || fw_log "firewall-allow: warning: DNS self-test failed after the expiry of $entry: $why"
  write_grants
  fw_log "firewall-allow: the grant of $entry expired ($(when "$until")): its names are refused again"
}

# expire ENTRY UNTIL: sleep until UNTIL, then expire_once, up to EXPIRE_TRIES tries a second apart.
EXPIRE_TRIES=3
expire() {
  local entry="$1" until="$2" try rc
  close_inherited
  sleep_until "$until"
  for ((try = 1; try <= EXPIRE_TRIES; try++)); do
    set +e
    (
      set -e
      expire_once "$entry" "$until"
    )
    rc=$?
    set -e
    ((rc != 0)) || return 0
    fw_log "firewall-allow: warning: try $try of $EXPIRE_TRIES to remove the expired grant of $entry failed (status $rc)"
    ((try == EXPIRE_TRIES)) || sleep 1 || true
  done
  fw_log "firewall-allow: error: the expired grant of $entry is not removed (its line stays in $GRANTS; $FW_PROG --expire $entry $until as root tries again)"
  return 1
}

if [ "${1:-}" = --expire ]; then
  if [ "$#" != 3 ] || [[ ! "$3" =~ ^[0-9]+$ ]]; then abort "usage: ${0##*/} --expire ENTRY UNTIL"; fi
  expire "$2" "$3" || exit 1
  exit 0
fi

until=0
limited=""
while [ "$#" -gt 0 ]; do
  case "$1" in
    --until)
      [[ "${2:-}" =~ ^[1-9][0-9]{0,11}$ ]] || abort "--until takes the epoch seconds the grant expires at, not '${2:-}'"
      until="$2"
      shift 2
      ;;
    --limited) limited=" limited" && shift ;;
    *) break ;;
  esac
done
grant="$until$limited"

[ "$#" -gt 0 ] || abort "usage: ${0##*/} [--until EPOCH] [--limited] ENTRY... (e.g. example.com '*.example.org' github.com:22 dns.example:853/udp)"

for arg in "$@"; do fw_check_entry "$arg" arguments; done

umask 022
[ -w "$FW_STATE" ] || abort "cannot write $FW_STATE: run as root (docker exec -u root ...)"
[ -s "$FW_STATE/upstream-resolvers" ] \
  || abort "$FW_STATE/upstream-resolvers not found: is the firewall initialised (init-firewall.sh)?"
lock
read_grants
fw_read_allowlist
fw_read_upstreams

added=()
granted=()
messages=()
new_port=0
for arg in "$@"; do
  fw_parse_entry "${arg,,}" || true
  entry="$FW_E_KEY"
  fw_seen_key
  if [ -n "${FW_SEEN[$FW_E_SEEN]:-}" ]; then
    had="${FW_SEEN[$FW_E_SEEN]}"
    # Granted before (not the defaults' or the config's): the new grant replaces it, unless both last
    # for the sandbox's life unlimited (nothing to replace).
    if [ -n "${GRANT[$had]:-}" ] && [[ " ${granted[*]} " != *" $had "* ]] && [ "${GRANT[$had]}$grant" != 00 ]; then
      GRANT[$had]="$grant"
      granted+=("$had")
      messages+=("firewall-allow: renewed $had")
    else
      messages+=("firewall-allow: $entry is already allowed")
    fi
    continue
  fi
  [ -z "$FW_E_PORT" ] || new_port=1
  fw_add_domain "$entry" "arguments"
  added+=("$entry")
  granted+=("$entry")
  GRANT[$entry]="$grant"
  messages+=("firewall-allow: added $entry")
done

# ports_live: the ipsets and AGENT-SANDBOX-PORTS rules of every declared port
# (those already there stay; `-C` first, so a rule is never there twice).
ports_live() {
  local backend="" ipt ip6t fam line
  local -a rule=()
  fw_ipset_specs | ipset -exist restore 2> "$FW_TMP/ipset.err" \
    || abort "cannot create the ipsets of the new ports: $(fw_last_line "$FW_TMP/ipset.err")"
  fw_read_file backend "$FW_STATE/backend"
  if [ "$backend" = legacy ]; then ipt=iptables-legacy ip6t=ip6tables-legacy; else ipt=iptables ip6t=ip6tables; fi
  for fam in 4 6; do
    local tool="$ipt"
    [ "$fam" = 4 ] || tool="$ip6t"
    # No IPv6 rules loaded (IPv6 disabled): nothing leaves over IPv6 to open.
    if [ "$fam" = 6 ] && ! "$tool" -S "$FW_PORTS_CHAIN" > /dev/null 2>&1; then continue; fi
    while IFS= read -r line; do
      read -r -a rule <<< "${line#-A }"
      "$tool" -C "${rule[@]}" 2> /dev/null || "$tool" -A "${rule[@]}" 2> "$FW_TMP/ipt.err" \
        || abort "cannot add the rule for the new port ($tool): $(fw_last_line "$FW_TMP/ipt.err")"
    done < <(fw_port_rules "$fam")
  done
}

if [ "${#added[@]}" -gt 0 ]; then
  FW_TMP="$(mktemp -d)"
  trap 'rm -rf "$FW_TMP"' EXIT
  # A bare name needs no new set or rule: its addresses go to the web sets.
  [ "$new_port" = 0 ] || ports_live
  fw_write_allowlist
  fw_start_dnsmasq
  fw_selftest_dns
fi
if [ "${#granted[@]}" -gt 0 ]; then
  write_grants
  for entry in "${granted[@]}"; do
    if [[ " ${added[*]} " == *" $entry "* ]]; then fw_log "firewall-allow: added $entry ($(when "$until"))"; else fw_log "firewall-allow: renewed $entry ($(when "$until"))"; fi
    # Forked into a session of its own, its output nowhere, nothing of this process's held open (an
    # exec ends when its pipes close): it outlives this exec, and sleeps until the grant expires.
    [ "$until" = 0 ] || setsid -f "$0" --expire "$entry" "$until" < /dev/null > /dev/null 2>&1 9>&-
  done
fi
printf '%s\n' "${messages[@]}"

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
# gateway counts the grant, once or against an upload budget). For a grant that expires, a detached process
# (`firewall-allow --expire ENTRY UNTIL`, in its own session) sleeps until then,
# once, and removes the entry if its grant is still that one: from the
# allowlist and dnsmasq (its names are refused again), and its addresses from
# the ipsets of its port (a `name:PORT` entry's). A bare name's addresses stay
# in the web sets: the egress gateway refuses its requests itself, saying the
# grant expired. Every change is logged in firewall.log.
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

# forget_port_addresses ENTRY: the addresses dnsmasq answered for ENTRY's names leave the
# ipsets of its port, but those it answered for a name another entry of that port covers.
forget_port_addresses() {
  local set s4 s6 other
  local -a bases=()
  fw_parse_entry "$1" || return 0
  [ -n "$FW_E_PORT" ] || return 0
  local base="$FW_E_BASE" proto="$FW_E_PROTO" port="$FW_E_PORT"
  fw_port_set s4 "$proto" "$port" 4
  fw_port_set s6 "$proto" "$port" 6
  for other in "${FW_DOMAINS[@]}"; do
    fw_parse_entry "$other" || continue
    [ "$FW_E_PORT" = "$port" ] && [ "$FW_E_PROTO" = "$proto" ] && bases+=("$FW_E_BASE")
  done
  [ -r "$FW_STATE/dnsmasq.log" ] || return 0
  awk -v gone="$base" -v keep="${bases[*]}" '
    function covered(name, b) { return name == b || substr(name, length(name) - length(b)) == "." b }
    $0 ~ /: reply / && $(NF - 1) == "is" && $NF ~ /^[0-9a-fA-F:.]+$/ {
      name = tolower($(NF - 2)); addr = $NF
      if (covered(name, gone)) drop[addr] = 1
      n = split(keep, k, " ")
      for (i = 1; i <= n; i++) if (covered(name, k[i])) kept[addr] = 1
    }
    END { for (a in drop) if (!(a in kept)) print a }
  ' "$FW_STATE/dnsmasq.log" | while IFS= read -r addr; do
    if [[ "$addr" == *:* ]]; then set="$s6"; else set="$s4"; fi
    ipset del "$set" "$addr" 2> /dev/null || true
  done
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

# expire ENTRY UNTIL: sleep until UNTIL (one wake-up), then remove ENTRY unless its grant changed meanwhile.
expire() {
  local entry="$1" until="$2" now e
  local -a kept=()
  close_inherited
  printf -v now '%(%s)T' -1
  if ((until > now)); then sleep "$((until - now))"; fi
  lock
  read_grants
  [ -n "${GRANT[$entry]:-}" ] && [ "${GRANT[$entry]%% *}" = "$until" ] || exit 0
  unset 'GRANT[$entry]'
  fw_read_allowlist
  fw_read_upstreams
  for e in "${FW_DOMAINS[@]}"; do [ "$e" = "$entry" ] || kept+=("$e"); done
  FW_DOMAINS=("${kept[@]}")
  FW_TMP="$(mktemp -d)"
  trap 'rm -rf "$FW_TMP"' EXIT
  fw_write_allowlist
  write_grants
  fw_start_dnsmasq
  fw_selftest_dns
  forget_port_addresses "$entry"
  fw_log "firewall-allow: the grant of $entry expired ($(when "$until")): its names are refused again"
}

if [ "${1:-}" = --expire ]; then
  if [ "$#" != 3 ] || [[ ! "$3" =~ ^[0-9]+$ ]]; then abort "usage: ${0##*/} --expire ENTRY UNTIL"; fi
  expire "$2" "$3"
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

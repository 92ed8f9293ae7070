#!/usr/bin/env bash
# firewall-allow.sh ENTRY... — add entries to a running sandbox's allowlist.
#
# Run as root (`docker exec -u root CONTAINER /usr/local/sbin/firewall-allow.sh
# example.com '*.example.org' db.example:5432 dns.example:853/udp`) after
# init-firewall.sh. An entry is a name (TCP 80 and 443, through the egress
# gateway), `name:PORT` (that TCP port) or `name:PORT/udp` (that UDP port).
# Validates every argument first (nothing changes if one is invalid), appends the
# new ones to /run/agent-sandbox/allowlist, creates the ipsets and the
# AGENT-SANDBOX-PORTS rule of a port not declared before, regenerates dnsmasq.conf
# and restarts dnsmasq. The names' addresses are added to the ipsets as they are
# looked up. Prints one line per argument.
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

[ "$#" -gt 0 ] || abort "usage: ${0##*/} ENTRY... (e.g. example.com '*.example.org' github.com:22 dns.example:853/udp)"

for arg in "$@"; do fw_check_entry "$arg" arguments; done

umask 022
[ -w "$FW_STATE" ] || abort "cannot write $FW_STATE: run as root (docker exec -u root ...)"
[ -s "$FW_STATE/upstream-resolvers" ] \
  || abort "$FW_STATE/upstream-resolvers not found: is the firewall initialised (init-firewall.sh)?"
fw_read_allowlist
fw_read_upstreams

added=()
messages=()
new_port=0
for arg in "$@"; do
  fw_parse_entry "${arg,,}" || true
  entry="$FW_E_KEY"
  fw_seen_key
  if [ -n "${FW_SEEN[$FW_E_SEEN]:-}" ]; then
    messages+=("firewall-allow: $entry is already allowed")
    continue
  fi
  [ -z "$FW_E_PORT" ] || new_port=1
  fw_add_domain "$entry" "arguments"
  added+=("$entry")
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
  for entry in "${added[@]}"; do fw_log "firewall-allow: added $entry"; done
fi
printf '%s\n' "${messages[@]}"

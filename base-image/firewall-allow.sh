#!/usr/bin/env bash
# firewall-allow.sh DOMAIN... — add domains to a running sandbox's allowlist.
#
# Run as root (`docker exec -u root CONTAINER /usr/local/sbin/firewall-allow.sh
# example.com '*.example.org'`) after init-firewall.sh. Validates every argument
# first (nothing changes if one is invalid), appends the new ones to
# /run/agent-sandbox/allowlist, regenerates dnsmasq.conf and restarts dnsmasq.
# The ipsets and iptables rules stay as they are: the new domains' addresses are
# added to the ipsets as they are looked up. Prints one line per argument.
# Same environment overrides as init-firewall.sh (AGENT_SANDBOX_STATE_DIR,
# AGENT_SANDBOX_LIB_DIR).
set -euo pipefail
# shellcheck source=base-image/root-env.sh
. "${AGENT_SANDBOX_LIB_DIR:-/usr/local/lib/agent-sandbox}/root-env.sh"
clean_root_env

abort() {
  printf 'firewall-allow: %s\n' "$*" >&2
  exit 1
}

warn() {
  printf 'firewall-allow: warning: %s\n' "$*" >&2
  if declare -F fw_log > /dev/null; then fw_log "firewall-allow: warning: $*"; fi
}

FW_LIB="${AGENT_SANDBOX_LIB_DIR:-/usr/local/lib/agent-sandbox}/firewall-lib.sh"
[ -r "$FW_LIB" ] || abort "missing $FW_LIB"
# shellcheck source=base-image/firewall-lib.sh
. "$FW_LIB"

[ "$#" -gt 0 ] || abort "usage: ${0##*/} DOMAIN... (e.g. example.com '*.example.org')"

for arg in "$@"; do
  fw_valid_domain "$(printf '%s' "$arg" | tr '[:upper:]' '[:lower:]')" \
    || abort "invalid domain '$arg': expected a hostname like example.com or *.example.com"
done

umask 022
[ -w "$FW_STATE" ] || abort "cannot write $FW_STATE: run as root (docker exec -u root ...)"
[ -s "$FW_STATE/upstream-resolvers" ] \
  || abort "$FW_STATE/upstream-resolvers not found: is the firewall initialised (init-firewall.sh)?"
fw_read_allowlist
fw_read_upstreams

added=()
messages=()
for arg in "$@"; do
  entry="$(printf '%s' "$arg" | tr '[:upper:]' '[:lower:]')"
  base="$(fw_domain_base "$entry")"
  if [ -n "${FW_SEEN[$base]:-}" ]; then
    messages+=("firewall-allow: $entry is already allowed")
    continue
  fi
  fw_add_domain "$entry" "arguments"
  added+=("$entry")
  messages+=("firewall-allow: added $entry")
done

if [ "${#added[@]}" -gt 0 ]; then
  fw_write_allowlist
  fw_start_dnsmasq
  fw_selftest_dns
  for entry in "${added[@]}"; do fw_log "firewall-allow: added $entry"; done
fi
printf '%s\n' "${messages[@]}"

#!/usr/bin/env bash
# firewall-status.sh [--json] — show the state of the sandbox's egress firewall.
#
# Readable by anyone (`docker exec CONTAINER firewall-status.sh`); some parts (the
# rules in force, ipset sizes) need root and are reported as unavailable otherwise.
# Shows: the iptables backend, the filter rules (iptables -S / ip6tables -S), the
# allowlist, ipset member counts, the last 20 names refused by dnsmasq (from
# dnsmasq.log) and the last 20 denied connections (denied.log, written by tcpdump
# from NFLOG group 42). With --json prints one JSON object with keys backend,
# rules, rules6, rulesReadable, allowlist, ipsets, deniedDns, deniedConnections and
# resolved (the name each recent address was looked up as, from dnsmasq.log: the
# CLI names the allowlist entry that would allow a denied connection).
# Environment: AGENT_SANDBOX_STATE_DIR [/run/agent-sandbox].
set -euo pipefail
# shellcheck source=base-image/root-env.sh
. "${AGENT_SANDBOX_LIB_DIR:-/usr/local/lib/agent-sandbox}/root-env.sh"
clean_root_env

abort() {
  printf 'firewall-status: %s\n' "$*" >&2
  exit 1
}

STATE="${AGENT_SANDBOX_STATE_DIR:-/run/agent-sandbox}"
SELFTEST_NAME=agent-sandbox-selftest.invalid
SETS=(agent-sandbox-allow4 agent-sandbox-allow6 agent-sandbox-net4)

json=0
case "${1:-}" in
  "") ;;
  --json) json=1 ;;
  -h | --help)
    printf 'usage: %s [--json]\n' "${0##*/}"
    exit 0
    ;;
  *) abort "unknown argument '$1' (usage: ${0##*/} [--json])" ;;
esac
if [ "$json" = 1 ]; then command -v jq > /dev/null 2>&1 || abort "--json needs jq"; fi

backend="$(head -n 1 "$STATE/backend" 2> /dev/null || true)"
if [ "$backend" = legacy ]; then
  ipt=iptables-legacy ip6t=ip6tables-legacy
else
  ipt=iptables ip6t=ip6tables
fi

# rules TOOL: the filter table as `-S` lines, or nothing (status 1) if unreadable.
rules() {
  local out
  command -v "$1" > /dev/null 2>&1 || return 1
  out="$("$1" -S 2> /dev/null)" || return 1
  grep -v '^#' <<< "$out" || true
}

readable=true
rules4="$(rules "$ipt")" || { rules4=""; readable=false; }
rules6="$(rules "$ip6t")" || rules6=""

allowlist="$(grep -v '^[[:space:]]*$' "$STATE/allowlist" 2> /dev/null || true)"

# ipset NAME: number of members, or nothing if unreadable (needs root).
ipset_count() {
  command -v ipset > /dev/null 2>&1 || return 0
  ipset list -t "$1" 2> /dev/null | sed -n 's/^Number of entries: *\([0-9]*\).*/\1/p' || true
}
declare -A counts=()
for s in "${SETS[@]}"; do counts[$s]="$(ipset_count "$s")"; done

# Names dnsmasq refused ("config NAME is NXDOMAIN"), most recent last, each once.
denied_dns="$(
  if [ -r "$STATE/dnsmasq.log" ]; then
    sed -n 's/.* config \([^ ]*\) is NXDOMAIN.*/\1/p' "$STATE/dnsmasq.log" \
      | grep -vxF "$SELFTEST_NAME" | tac | awk '!seen[$0]++' | head -n 20 | tac
  fi
)" || true
denied_conn="$(tail -n 20 "$STATE/denied.log" 2> /dev/null || true)"
# "ADDRESS NAME": the name each address was last an answer for (dnsmasq logs
# "query[A] NAME from ..." then "reply NAME2 is ADDRESS", NAME2 a CNAME's target).
resolved="$(
  if [ -r "$STATE/dnsmasq.log" ]; then
    tail -n 5000 "$STATE/dnsmasq.log" | awk '
      { for (i = 1; i < NF; i++) {
          if ($i ~ /^query\[/) q = $(i + 1)
          if ($i == "reply" && $(i + 2) == "is" && $(i + 3) ~ /^[0-9a-fA-F.:]+$/ && $(i + 3) ~ /[.:]/) print $(i + 3), q
      } }' | tac | awk '!seen[$1]++' | head -n 500
  fi
)" || true

# lines_json TEXT: a JSON array of the non-empty lines of TEXT.
lines_json() {
  jq -Rn '[inputs | select(length > 0)]' <<< "$1"
}

if [ "$json" = 1 ]; then
  ipsets='{}'
  for s in "${SETS[@]}"; do
    ipsets="$(jq -c --arg k "$s" --arg v "${counts[$s]}" '. + {($k): (if $v == "" then null else ($v | tonumber) end)}' <<< "$ipsets")"
  done
  jq -n \
    --arg backend "${backend:-unknown}" \
    --argjson rules "$(lines_json "$rules4")" \
    --argjson rules6 "$(lines_json "$rules6")" \
    --argjson rulesReadable "$readable" \
    --argjson allowlist "$(lines_json "$allowlist")" \
    --argjson ipsets "$ipsets" \
    --argjson deniedDns "$(lines_json "$denied_dns")" \
    --argjson deniedConnections "$(lines_json "$denied_conn")" \
    --argjson resolved "$(jq -Rn '[inputs | select(length > 0) | split(" ") | {address: .[0], name: .[1]}]' <<< "$resolved")" \
    '{backend: $backend, rules: $rules, rules6: $rules6, rulesReadable: $rulesReadable,
      allowlist: $allowlist, ipsets: $ipsets, deniedDns: $deniedDns,
      deniedConnections: $deniedConnections, resolved: $resolved}'
  exit 0
fi

# section TITLE TEXT [EMPTY]: a heading and TEXT indented, or EMPTY if TEXT is empty.
section() {
  printf '%s\n' "$1"
  if [ -n "$2" ]; then
    local line
    while IFS= read -r line; do printf '  %s\n' "$line"; done <<< "$2"
  else
    printf '  %s\n' "${3:-(none)}"
  fi
}

[ -d "$STATE" ] || printf 'firewall state directory %s not found: the firewall is not set up\n' "$STATE"
printf 'backend: %s\n' "${backend:-unknown}"
if [ "$readable" = true ]; then
  section "IPv4 rules ($ipt -S):" "$rules4"
  section "IPv6 rules ($ip6t -S):" "$rules6" "(none loaded: IPv6 disabled or unavailable)"
else
  printf 'rules: not readable as uid %s (run as root: docker exec -u root ...)\n' "$(id -u)"
fi
section "allowlist ($(grep -c . <<< "$allowlist" || true) entries):" "$allowlist"
printf 'ipsets:\n'
for s in "${SETS[@]}"; do
  printf '  %s: %s\n' "$s" "${counts[$s]:-unavailable (needs root)}"
done
section "denied DNS names (last 20):" "$denied_dns"
section "denied connections (last 20):" "$denied_conn"

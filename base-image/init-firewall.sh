#!/usr/bin/env bash
# init-firewall.sh — put the sandbox's egress firewall in place.
#
# Called as root by the entrypoint (/usr/local/bin/entrypoint.sh) when
# AGENT_SANDBOX_NETWORK=firewall, before anything runs as `node`; safe to run again
# (rules are replaced atomically, ipsets keep their entries, dnsmasq and tcpdump
# are restarted). On failure it exits non-zero and its last stderr line is the
# reason ("init-firewall: <reason>"), which the entrypoint records in
# /run/agent-sandbox/failed.
#
# What it does:
#  - validates AGENT_SANDBOX_ALLOW_DOMAINS and AGENT_SANDBOX_INBOUND_PORTS before
#    changing anything;
#  - starts dnsmasq on 127.0.0.1:53 as user dnsmasq, forwarding only allowlisted
#    domains (and their subdomains) to the original resolvers and adding their
#    answers to ipsets agent-sandbox-allow4/-allow6; every other name gets NXDOMAIN;
#    /etc/resolv.conf then points at it;
#  - loads filter-table rules with iptables-restore/ip6tables-restore (the nat table,
#    where Docker's embedded DNS keeps its DNAT rules, is left alone): policy DROP,
#    allow loopback, replies, dnsmasq's DNS, the ipsets, the inbound ports; log
#    (NFLOG group 42, read by tcpdump into denied.log) and REJECT the rest;
#  - with an egress gateway (AGENT_SANDBOX_GATEWAY_UID/_PORTS): TCP to ports 80 and
#    443 of allowlisted addresses is redirected (nat table, chain AGENT-SANDBOX-GW,
#    the only nat rules of ours) to the gateway on loopback, for every uid but the
#    gateway's; in the filter table only the gateway's uid may open such connections
#    itself, so with the gateway down they are refused (fail closed);
#  - checks the result (OUTPUT policy DROP, dnsmasq answers NXDOMAIN) and prints
#    "init-firewall: ready (N domains, backend X)".
#
# Environment (defaults in brackets):
#   AGENT_SANDBOX_ALLOW_DOMAINS      extra domains, comma/space/newline separated; `*.x` allowed
#   AGENT_SANDBOX_INBOUND_PORTS      TCP ports accepted inbound, comma separated
#   AGENT_SANDBOX_DEFAULT_DOMAINS_FILE [/etc/agent-sandbox/default-domains.txt]
#   AGENT_SANDBOX_STATE_DIR          [/run/agent-sandbox]
#   AGENT_SANDBOX_RESOLV_CONF        [/etc/resolv.conf]
#   AGENT_SANDBOX_PERSIST_DIR        [/var/lib/agent-sandbox] upstream resolvers across restarts
#   AGENT_SANDBOX_GITHUB_META        [0] 1 = also add GitHub's published IP ranges (fetched in the background)
#   AGENT_SANDBOX_IPV6_CONF_DIR      [/proc/sys/net/ipv6/conf] (IPv6 on if any non-lo interface has disable_ipv6=0)
#   AGENT_SANDBOX_LIB_DIR            [/usr/local/lib/agent-sandbox] where firewall-lib.sh is
#   AGENT_SANDBOX_GATEWAY_UID        the egress gateway's uid (none: no gateway)
#   AGENT_SANDBOX_GATEWAY_PORTS      its HTTP and TLS ports on loopback, "HTTP,TLS"
#
# This runs on every sandbox start (and every one-shot `run`): it uses builtins
# wherever a command would do, since each fork+exec costs ~2 ms of the start.
set -euo pipefail

FW_PROG=init-firewall
FW_LIB="${AGENT_SANDBOX_LIB_DIR:-/usr/local/lib/agent-sandbox}/firewall-lib.sh"
[ -r "$FW_LIB" ] || { printf '%s: missing %s\n' "$FW_PROG" "$FW_LIB" >&2 && exit 1; }
# shellcheck source=base-image/firewall-lib.sh
. "$FW_LIB"

IPV6_CONF_DIR="${AGENT_SANDBOX_IPV6_CONF_DIR:-/proc/sys/net/ipv6/conf}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
FW_TMP="$TMP"

# ---- 1. inputs (validated before anything changes) --------------------------

fw_add_domains_from_file "$FW_DEFAULT_DOMAINS_FILE"
fw_add_domains_from_list "${AGENT_SANDBOX_ALLOW_DOMAINS:-}" AGENT_SANDBOX_ALLOW_DOMAINS
# A re-run keeps the domains firewall-allow.sh added since the container started.
if [ -r "${FW_STATE}/allowlist" ]; then
  while IFS= read -r d; do
    [ -n "$d" ] || continue
    fw_parse_entry "$d" || continue
    fw_seen_key
    [ -n "${FW_SEEN[$FW_E_SEEN]:-}" ] || fw_add_domain "$d" "the saved allowlist"
  done < "$FW_STATE/allowlist"
fi

# inbound_ports VAR: the ports of VAR (a comma separated list), checked, into PORTS.
inbound_ports() {
  local p
  local -a FW_ITEMS=()
  PORTS=()
  fw_split_into "${!1:-}"
  for p in "${FW_ITEMS[@]}"; do
    [ -n "$p" ] || continue
    if [[ ! "$p" =~ ^[0-9]{1,5}$ ]] || ((10#$p < 1 || 10#$p > 65535)); then
      abort "invalid port '$p' in $1: expected integers 1-65535, comma separated"
    fi
    p=$((10#$p))
    [ -z "${SEEN_PORT[$p]:-}" ] || continue
    SEEN_PORT[$p]=1
    PORTS+=("$p")
  done
}
# Published ports: from the engine's port publisher only, or (published on a host
# address other than loopback, the user's explicit choice) from any peer.
declare -A SEEN_PORT=()
inbound_ports AGENT_SANDBOX_INBOUND_PEER_PORTS
PEER_PORTS=("${PORTS[@]}")
inbound_ports AGENT_SANDBOX_INBOUND_PORTS

DNS_UID="$(id -u "$FW_DNS_USER" 2> /dev/null)" || abort "user $FW_DNS_USER does not exist"
[[ "$DNS_UID" =~ ^[0-9]+$ ]] || abort "cannot determine the uid of user $FW_DNS_USER"
# Only the resolver's uid may send DNS upstream: the agent's user must not share it.
AGENT_UID="$(id -u "${AGENT_SANDBOX_USER:-node}" 2> /dev/null)" || true
[ "$AGENT_UID" != "$DNS_UID" ] || abort "user ${AGENT_SANDBOX_USER:-node} has the resolver's uid $DNS_UID: DNS filtering would not apply to it"

# The egress gateway: only its uid may connect to ports 80/443 out; the agent must not have it.
GW_UID="${AGENT_SANDBOX_GATEWAY_UID:-}" GW_HTTP="" GW_TLS=""
if [ -n "$GW_UID" ]; then
  [[ "$GW_UID" =~ ^[0-9]+$ ]] || abort "AGENT_SANDBOX_GATEWAY_UID is not a uid: $GW_UID"
  [[ "${AGENT_SANDBOX_GATEWAY_PORTS:-}" =~ ^([0-9]{1,5}),([0-9]{1,5})$ ]] \
    || abort "AGENT_SANDBOX_GATEWAY_PORTS must be two ports, HTTP,TLS: '${AGENT_SANDBOX_GATEWAY_PORTS:-}'"
  GW_HTTP="${BASH_REMATCH[1]}" GW_TLS="${BASH_REMATCH[2]}"
  [ "$AGENT_UID" != "$GW_UID" ] || abort "user ${AGENT_SANDBOX_USER:-node} has the gateway's uid $GW_UID: its web traffic would bypass the gateway"
  [ "$DNS_UID" != "$GW_UID" ] || abort "user $FW_DNS_USER has the gateway's uid $GW_UID"
fi

fw_prepare_state
fw_read_upstreams

# ---- 2. rulesets -------------------------------------------------------------

# publishers FAMILY: PUBLISHERS, the addresses the engine's port publisher connects
# from: the default gateway (the bridge's address: Docker's proxy and Podman's
# port forwarding) and this container's own addresses (rootless Podman's
# forwarder); loopback is accepted anyway.
publishers() {
  local line word prev
  PUBLISHERS=()
  while IFS= read -r line; do
    prev=""
    for word in $line; do
      case "$prev" in via | inet | inet6) PUBLISHERS+=("${word%/*}") ;; esac
      prev="$word"
    done
  done < <(ip "-$1" route show default 2> /dev/null; ip "-$1" -o addr show scope global 2> /dev/null)
}

# rules FAMILY: print the filter table for FAMILY (4 or 6).
rules() {
  local fam="$1" set reject up port loop web_set icmp src
  local -a web_sets=()
  if [ "$fam" = 4 ]; then
    set="$FW_SET4" reject=icmp-port-unreachable icmp="-p icmp -m icmp --icmp-type"
  else
    set="$FW_SET6" reject=icmp6-port-unreachable icmp="-p ipv6-icmp -m icmp6 --icmpv6-type"
  fi
  printf '*filter\n:INPUT DROP [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT DROP [0:0]\n:%s - [0:0]\n' "$FW_PORTS_CHAIN"

  printf -- '-A INPUT -i lo -j ACCEPT\n'
  # Redirects (and, for IPv6, router advertisements) from a peer would reroute
  # this sandbox's traffic; conntrack counts a redirect as RELATED, so first.
  printf -- '-A INPUT %s redirect -j DROP\n' "$icmp"
  [ "$fam" = 6 ] && printf -- '-A INPUT %s router-advertisement -j DROP\n' "$icmp"
  printf -- '-A INPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT\n'
  if [ "$fam" = 6 ]; then
    # Neighbour discovery, or nothing on the link (the allowed hosts included) is reachable.
    printf -- '-A INPUT -p ipv6-icmp -m icmp6 --icmpv6-type %s -m hl --hl-eq 255 -j ACCEPT\n' \
      neighbour-solicitation neighbour-advertisement
  fi
  for port in "${PEER_PORTS[@]}"; do
    printf -- '-A INPUT -p tcp -m tcp --dport %s -j ACCEPT\n' "$port"
  done
  if [ "${#PORTS[@]}" -gt 0 ]; then
    publishers "$fam"
    for port in "${PORTS[@]}"; do
      for src in "${PUBLISHERS[@]}"; do
        printf -- '-A INPUT -s %s -p tcp -m tcp --dport %s -j ACCEPT\n' "$src" "$port"
      done
    done
  fi
  printf -- '-A INPUT -p tcp -j REJECT --reject-with tcp-reset\n'
  printf -- '-A INPUT -j REJECT --reject-with %s\n' "$reject"

  # Loopback resolvers (Docker's embedded DNS at 127.0.0.11, reached after its nat
  # OUTPUT DNAT to another port, so matched by address only): dnsmasq's uid only.
  local -a local_dns=()
  [ "$fam" = 4 ] && local_dns=(127.0.0.11)
  for up in "${FW_UPSTREAMS[@]}"; do
    if [ "$fam" = 4 ] && [[ "$up" == 127.* ]] && [ "$up" != 127.0.0.11 ]; then local_dns+=("$up"); fi
    if [ "$fam" = 6 ] && [ "$up" = ::1 ]; then local_dns+=("$up"); fi
  done
  for up in "${local_dns[@]}"; do
    printf -- '-A OUTPUT -d %s -m owner --uid-owner %s -j ACCEPT\n' "$up" "$DNS_UID"
    printf -- '-A OUTPUT -d %s -j REJECT --reject-with %s\n' "$up" "$reject"
  done
  printf -- '-A OUTPUT -o lo -j ACCEPT\n'
  printf -- '-A OUTPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT\n'
  if [ "$fam" = 6 ]; then
    printf -- '-A OUTPUT -p ipv6-icmp -m icmp6 --icmpv6-type %s -m hl --hl-eq 255 -j ACCEPT\n' \
      neighbour-solicitation neighbour-advertisement router-solicitation
  fi
  for up in "${FW_UPSTREAMS[@]}"; do
    [[ "$up" == 127.* || "$up" == ::1 ]] && continue # covered above
    if { [ "$fam" = 4 ] && ! fw_is_ipv6 "$up"; } || { [ "$fam" = 6 ] && fw_is_ipv6 "$up"; }; then
      printf -- '-A OUTPUT -d %s -p udp -m udp --dport 53 -m owner --uid-owner %s -j ACCEPT\n' "$up" "$DNS_UID"
      printf -- '-A OUTPUT -d %s -p tcp -m tcp --dport 53 -m owner --uid-owner %s -j ACCEPT\n' "$up" "$DNS_UID"
    fi
  done
  # Docker's embedded DNS answers names it does not know by asking the host's
  # resolvers from a socket dockerd (uid 0) opens inside this network namespace, so
  # those queries cross this chain too: DNS out for uid 0 only. Root here holds
  # NET_ADMIN and could rewrite these rules anyway; node never gets this.
  if [[ " ${FW_UPSTREAMS[*]} " == *" 127.0.0.11 "* ]]; then
    printf -- '-A OUTPUT -p udp -m udp --dport 53 -m owner --uid-owner 0 -j ACCEPT\n'
    printf -- '-A OUTPUT -p tcp -m tcp --dport 53 -m owner --uid-owner 0 -j ACCEPT\n'
  fi
  # An allowlisted name is TCP 80 and 443 of its addresses, nothing else: no UDP
  # (QUIC would pass the gateway's name check), no ICMP, no other port.
  web_sets=("$set")
  if [ "$fam" = 4 ]; then web_sets+=("$FW_NET4"); fi
  if [ -n "$GW_UID" ]; then
    # The agent's connections redirected to the gateway (nat): this chain still sees
    # them leaving by the interface first routed to, so `-o lo` does not match them.
    if [ "$fam" = 4 ]; then loop=127.0.0.1/32; else loop=::1/128; fi
    printf -- '-A OUTPUT -d %s -p tcp -m multiport --dports %s,%s -j ACCEPT\n' "$loop" "$GW_HTTP" "$GW_TLS"
    # Web traffic to allowlisted addresses is the gateway's alone: the agent's was
    # redirected to it (nat), and whatever was not (a rule lost) is refused below.
    for web_set in "${web_sets[@]}"; do
      printf -- '-A OUTPUT -p tcp -m multiport --dports 80,443 -m owner --uid-owner %s -m set --match-set %s dst -j ACCEPT\n' "$GW_UID" "$web_set"
    done
  else
    for web_set in "${web_sets[@]}"; do
      printf -- '-A OUTPUT -p tcp -m multiport --dports 80,443 -m set --match-set %s dst -j ACCEPT\n' "$web_set"
    done
  fi
  # Declared ports (`name:PORT`, `name:PORT/udp`): one rule each, in their own chain.
  printf -- '-A OUTPUT -j %s\n' "$FW_PORTS_CHAIN"
  fw_port_rules "$fam"
  if [ "$fam" = 6 ]; then
    # Multicast listener reports, sent by the kernel itself when eth0 comes up: dropped
    # unlogged, so that they do not fill the denied-connection log.
    printf -- '-A OUTPUT -p ipv6-icmp -m icmp6 --icmpv6-type %s -j DROP\n' 131 143
  fi
  printf -- '-A OUTPUT -m limit --limit 20/s -j NFLOG --nflog-group %s --nflog-prefix agent-sandbox-deny\n' "$FW_NFLOG_GROUP"
  # A refused datagram fails at its send (EPERM), so a QUIC client falls back to TCP at once.
  printf -- '-A OUTPUT -p tcp -j REJECT --reject-with tcp-reset\n'
  printf -- '-A OUTPUT -j REJECT --reject-with %s\n' "$reject"
  printf 'COMMIT\n'
}

rules 4 > "$TMP/rules4"
rules 6 > "$TMP/rules6"

# tool VAR BACKEND NAME: set VAR to the binary for NAME (iptables,
# ip6tables-restore, ...) on BACKEND. Sets a variable: "$(tool ...)" would fork.
tool() {
  if [ "$2" = legacy ]; then
    case "$3" in
      *-restore) printf -v "$1" '%s' "${3%-restore}-legacy-restore" ;;
      *) printf -v "$1" '%s' "$3-legacy" ;;
    esac
  else
    printf -v "$1" '%s' "$3"
  fi
}

# ---- 3. ipsets, dnsmasq, rules ----------------------------------------------

# One `ipset restore` for the three sets (one process, not three); `-exist` keeps
# an existing set of the same type, like `ipset create -exist`. ipset names the
# input line that failed ("ipset v7.22: Error in line 2: ..."): name its set.
mapfile -t SETS < <(fw_ipset_specs)
SETS=("${SETS[@]#create }")
printf -v spec 'create %s\n' "${SETS[@]}"
if ! ipset -exist restore 2> "$TMP/ipset.err" <<< "${spec%$'\n'}"; then
  why="$(fw_last_line "$TMP/ipset.err")"
  if [[ "$why" =~ ^(.*: )?Error\ in\ line\ ([0-9]+):\ (.*)$ ]] && ((BASH_REMATCH[2] >= 1 && BASH_REMATCH[2] <= ${#SETS[@]})); then
    abort "cannot create ipset ${SETS[BASH_REMATCH[2] - 1]%% *}: ${BASH_REMATCH[1]}${BASH_REMATCH[3]}"
  fi
  abort "cannot create ipsets $FW_SET4, $FW_SET6, $FW_NET4 and those of the declared ports: ${why:-ipset exited with an error}"
fi

fw_write_allowlist
fw_start_dnsmasq

# IPv4: the default iptables (nft on Debian) first, unless an earlier run had to use
# legacy; each restore is atomic, so a failed attempt changes nothing.
BACKEND="" prev_backend="" t="" t6="" ipt="" v=""
order=(nft legacy)
fw_read_file prev_backend "$FW_STATE/backend"
[ "$prev_backend" = legacy ] && order=(legacy nft)
errors=()
for b in "${order[@]}"; do
  tool t "$b" iptables-restore
  if ! command -v "$t" > /dev/null 2>&1; then
    errors+=("$b: $t not found")
    continue
  fi
  rc=0
  "$t" < "$TMP/rules4" 2> "$TMP/restore4.err" || rc=$?
  if [ "$rc" = 0 ]; then
    BACKEND="$b"
    break
  fi
  why="$(fw_last_line "$TMP/restore4.err")"
  errors+=("$b: ${why:-$t exited with status $rc}")
done
if [ -z "$BACKEND" ]; then
  msg="$(printf '%s; ' "${errors[@]}")"
  abort "cannot load IPv4 rules (${msg%; })"
fi
if [ "$BACKEND" = nft ] && version="$(iptables --version 2> /dev/null)" && [[ "$version" == *legacy* ]]; then
  BACKEND=legacy # the default iptables is the legacy one
fi
fw_write_file "$FW_STATE/backend" printf '%s\n' "$BACKEND"
[ "${#errors[@]}" -eq 0 ] || warn "using iptables backend $BACKEND (${errors[*]})"

# IPv6: nothing can leave over IPv6 if it is disabled, so failing to load rules is
# then only a warning; with IPv6 enabled it is fatal.
# Docker sets conf/all/disable_ipv6=1 even on dual-stack networks (only eth0 says
# 0), so IPv6 counts as enabled if any interface but lo has disable_ipv6=0.
ipv6_disabled=1
for f in "$IPV6_CONF_DIR"/*/disable_ipv6; do
  case "${f%/disable_ipv6}" in */all | */default | */lo) continue ;; esac
  fw_read_file v "$f"
  if [ "$v" = 0 ]; then ipv6_disabled=0; fi
done
tool t6 "$BACKEND" ip6tables-restore
if ! command -v "$t6" > /dev/null 2>&1; then
  printf '%s not found\n' "$t6" > "$TMP/restore6.err"
  ok6=0
elif "$t6" < "$TMP/rules6" 2> "$TMP/restore6.err"; then
  ok6=1
else
  rc=$?
  [ -s "$TMP/restore6.err" ] || printf '%s exited with status %s\n' "$t6" "$rc" > "$TMP/restore6.err"
  ok6=0
fi
if [ "$ok6" = 0 ]; then
  if [ "$ipv6_disabled" = 1 ]; then
    warn "IPv6 is disabled in this container; no IPv6 rules loaded ($(fw_last_line "$TMP/restore6.err"))"
  else
    abort "IPv6 is enabled but the IPv6 rules could not be loaded: $(fw_last_line "$TMP/restore6.err")"
  fi
fi

# nat_rules FAMILY: the gateway's redirects, as iptables-restore input for the nat
# table with --noflush (Docker's own nat rules for its embedded DNS stay).
nat_rules() {
  local fam="$1" set
  local -a sets=("$FW_SET4" "$FW_NET4")
  [ "$fam" = 6 ] && sets=("$FW_SET6")
  printf '*nat\n:AGENT-SANDBOX-GW - [0:0]\n-F AGENT-SANDBOX-GW\n'
  printf -- '-A AGENT-SANDBOX-GW -m owner --uid-owner %s -j RETURN\n' "$GW_UID"
  for set in "${sets[@]}"; do
    printf -- '-A AGENT-SANDBOX-GW -p tcp -m tcp --dport 80 -m set --match-set %s dst -j REDIRECT --to-ports %s\n' "$set" "$GW_HTTP"
    printf -- '-A AGENT-SANDBOX-GW -p tcp -m tcp --dport 443 -m set --match-set %s dst -j REDIRECT --to-ports %s\n' "$set" "$GW_TLS"
  done
  printf 'COMMIT\n'
}

# gateway_nat FAMILY RESTORE IPTABLES: load the redirects and jump to them from OUTPUT once.
gateway_nat() {
  nat_rules "$1" > "$TMP/nat$1"
  "$2" --noflush < "$TMP/nat$1" 2> "$TMP/nat$1.err" || return 1
  "$3" -t nat -C OUTPUT -j AGENT-SANDBOX-GW 2> /dev/null \
    || "$3" -t nat -I OUTPUT 1 -j AGENT-SANDBOX-GW 2>> "$TMP/nat$1.err"
}

if [ -n "$GW_UID" ]; then
  tool t "$BACKEND" iptables-restore
  tool ipt "$BACKEND" iptables
  gateway_nat 4 "$t" "$ipt" || abort "cannot load the egress gateway's IPv4 redirects: $(fw_last_line "$TMP/nat4.err")"
  if [ "$ok6" = 1 ]; then
    tool ipt "$BACKEND" ip6tables
    # Without them IPv6 web traffic is refused by the filter rule above (closed, not open).
    gateway_nat 6 "$t6" "$ipt" || warn "no IPv6 redirects to the egress gateway; IPv6 web traffic is refused ($(fw_last_line "$TMP/nat6.err"))"
  fi
fi

# Point the system resolver at dnsmasq, keeping its search/domain/options lines.
# /etc/resolv.conf is a bind mount in Docker: rewrite it in place, never replace it
# (the new text is complete before the file is truncated).
resolv=$'# Written by agent-sandbox init-firewall.sh: all DNS goes through dnsmasq.\nnameserver 127.0.0.1\n'
{ while IFS= read -r line || [ -n "$line" ]; do
  if [[ "$line" =~ ^[[:space:]]*(search|domain|options)[[:space:]] ]]; then resolv+="$line"$'\n'; fi
done < "$FW_RESOLV_CONF"; } 2> /dev/null || true
printf '%s' "$resolv" > "$FW_RESOLV_CONF" || abort "cannot write $FW_RESOLV_CONF"

# ---- 4. denied-connection log (best effort) ----------------------------------

fw_stop_pidfile "$FW_STATE/tcpdump.pid" tcpdump
: >> "$FW_STATE/denied.log"
TCPDUMP_PID=""
if command -v tcpdump > /dev/null 2>&1; then
  tcpdump -i "nflog:$FW_NFLOG_GROUP" -n -l -q -U -Z root \
    < /dev/null >> "$FW_STATE/denied.log" 2>> "$FW_STATE/firewall.log" 3>&- &
  TCPDUMP_PID=$!
  fw_write_file "$FW_STATE/tcpdump.pid" printf '%s\n' "$TCPDUMP_PID"
else
  warn "tcpdump not found; denied connections will not be logged"
fi

# ---- 5. checks ---------------------------------------------------------------

tool ipt "$BACKEND" iptables
out="$("$ipt" -S OUTPUT 2> "$TMP/s.err")" || true
policy=""
while IFS= read -r line; do
  if [[ "$line" == "-P OUTPUT"* ]]; then policy="$line" && break; fi
done <<< "$out"
[ "$policy" = "-P OUTPUT DROP" ] \
  || abort "self-test failed: OUTPUT policy is '${policy:-unknown}', not DROP ($(fw_last_line "$TMP/s.err"))"
fw_selftest_dns

if [ -n "$TCPDUMP_PID" ] && ! kill -0 "$TCPDUMP_PID" 2> /dev/null; then
  warn "tcpdump exited; denied connections will not be logged (see $FW_STATE/firewall.log)"
  rm -f "$FW_STATE/tcpdump.pid"
fi

# ---- 6. GitHub's published ranges, in the background --------------------------

github_meta() {
  local json cidrs n
  if ! command -v curl > /dev/null 2>&1 || ! command -v jq > /dev/null 2>&1; then
    fw_log "warning: curl or jq not found; GitHub IP ranges not added"
    return 0
  fi
  # -q first: curl must not read a .curlrc from $CURL_HOME, $XDG_CONFIG_HOME or
  # $HOME, which the container's environment (a repository's config) may point
  # into the workspace (an output= there would overwrite root's files).
  if ! json="$(curl -q -fsS --max-time 5 https://api.github.com/meta 2> "$TMP/curl.err")"; then
    fw_log "warning: could not fetch https://api.github.com/meta ($(fw_last_line "$TMP/curl.err")); GitHub IP ranges not added"
    return 0
  fi
  if ! cidrs="$(jq -r '[(.web // [])[], (.api // [])[], (.git // [])[]] | unique | .[]
      | select(test("^[0-9]{1,3}([.][0-9]{1,3}){3}/[0-9]{1,2}$"))' <<< "$json" 2> /dev/null)" \
    || [ -z "$cidrs" ]; then
    fw_log "warning: no IPv4 ranges in https://api.github.com/meta; GitHub IP ranges not added"
    return 0
  fi
  n="$(wc -l <<< "$cidrs")"
  if while IFS= read -r c; do printf 'add %s %s\n' "$FW_NET4" "$c"; done <<< "$cidrs" | ipset -exist restore 2> "$TMP/ipset-meta.err"; then
    fw_log "added $n GitHub IPv4 ranges to $FW_NET4"
  else
    fw_log "warning: could not add GitHub IP ranges to $FW_NET4: $(fw_last_line "$TMP/ipset-meta.err")"
  fi
}

if [ "${AGENT_SANDBOX_GITHUB_META:-0}" = 1 ]; then
  # Own temp dir: the EXIT trap removes $TMP when this script ends.
  (
    TMP="$(mktemp -d)"
    FW_TMP="$TMP"
    trap 'rm -rf "$TMP"' EXIT
    github_meta
  ) < /dev/null > /dev/null 2>&1 3>&- &
fi

# One chmod for all the state files (denied.log too: it may predate this run).
files=()
for f in allowlist backend upstream-resolvers dnsmasq.conf firewall.log denied.log; do
  if [ -e "$FW_STATE/$f" ]; then files+=("$FW_STATE/$f"); fi
done
[ "${#files[@]}" -eq 0 ] || chmod 0644 "${files[@]}" 2> /dev/null || true

printf 'init-firewall: ready (%s domains, backend %s)\n' "${#FW_DOMAINS[@]}" "$BACKEND"

# shellcheck shell=bash
# Variables here are used by the scripts that source this file.
# shellcheck disable=SC2034
# Allowlist entries and the ports they open; sourced by firewall-lib.sh, never run.
#
# An entry is `NAME`, `NAME:PORT` or `NAME:PORT/udp` (NAME is `host` or `*.host`,
# and covers the host's subdomains either way):
#  - `NAME` is TCP 80 and 443, through the egress gateway (ipsets FW_SET4/FW_SET6);
#  - `NAME:PORT` is that TCP port, `NAME:PORT/udp` that UDP port, directly: each
#    declared port has its own pair of ipsets (fw_port_set) and one ACCEPT in the
#    filter chain AGENT-SANDBOX-PORTS, so an address reached under one entry is
#    open on that entry's ports only.
# dnsmasq adds a name's answers to the sets of every entry that covers the name.

FW_PORTS_CHAIN=AGENT-SANDBOX-PORTS

# fw_parse_entry ENTRY: split a lower-case entry into FW_E_NAME (`x` or `*.x`),
# FW_E_BASE (`x`), FW_E_PORT (empty for a bare name) and FW_E_PROTO (tcp, udp),
# and set FW_E_KEY (the entry in its one written form: `:PORT/tcp` is `:PORT`).
# Status 1: not an entry; 2: TCP 80 or 443, which the bare name already means.
fw_parse_entry() {
  local e="$1"
  FW_E_PORT="" FW_E_PROTO=tcp
  if [[ "$e" =~ ^(.*):([0-9]{1,5})(/(tcp|udp))?$ ]]; then
    FW_E_NAME="${BASH_REMATCH[1]}" FW_E_PROTO="${BASH_REMATCH[4]:-tcp}"
    FW_E_PORT=$((10#${BASH_REMATCH[2]}))
    ((FW_E_PORT >= 1 && FW_E_PORT <= 65535)) || return 1
  else
    FW_E_NAME="$e"
  fi
  fw_valid_domain "$FW_E_NAME" || return 1
  FW_E_BASE="${FW_E_NAME#\*.}"
  FW_E_KEY="$FW_E_NAME"
  [ -z "$FW_E_PORT" ] && return 0
  if [ "$FW_E_PROTO" = tcp ] && { [ "$FW_E_PORT" = 80 ] || [ "$FW_E_PORT" = 443 ]; }; then return 2; fi
  FW_E_KEY="$FW_E_NAME:$FW_E_PORT"
  [ "$FW_E_PROTO" = tcp ] || FW_E_KEY+="/udp"
}

# fw_check_entry ENTRY SOURCE: fw_parse_entry, aborting with the reason and the fix.
fw_check_entry() {
  local rc=0
  fw_parse_entry "${1,,}" || rc=$?
  case "$rc" in
    0) ;;
    2) abort "invalid entry '$1' in $2: TCP ports 80 and 443 are what '${FW_E_NAME}' alone allows (through the egress gateway); write ${FW_E_NAME}" ;;
    *) abort "invalid entry '$1' in $2: expected a hostname like example.com or *.example.com, optionally with :PORT or :PORT/udp (e.g. github.com:22)" ;;
  esac
}

# fw_seen_key: the de-duplication key of the parsed entry (a name and its `*.` form are one).
fw_seen_key() {
  FW_E_SEEN="$FW_E_BASE"
  [ -z "$FW_E_PORT" ] || FW_E_SEEN+=":$FW_E_PORT/$FW_E_PROTO"
}

# fw_port_set VAR PROTO PORT FAMILY(4|6): the ipset of one declared port.
fw_port_set() {
  printf -v "$1" 'agent-sandbox-%s%s-%s' "$2" "$3" "$4"
}

# fw_entry_sets VAR: the ipsets the parsed entry's addresses go to, comma separated.
fw_entry_sets() {
  local s4 s6
  if [ -z "$FW_E_PORT" ]; then
    printf -v "$1" '%s,%s' "$FW_SET4" "$FW_SET6"
  else
    fw_port_set s4 "$FW_E_PROTO" "$FW_E_PORT" 4
    fw_port_set s6 "$FW_E_PROTO" "$FW_E_PORT" 6
    printf -v "$1" '%s,%s' "$s4" "$s6"
  fi
}

# fw_declared_ports: FW_DECLARED, the distinct `PROTO PORT` pairs of FW_DOMAINS, in order.
fw_declared_ports() {
  local entry
  local -A seen=()
  FW_DECLARED=()
  for entry in "${FW_DOMAINS[@]}"; do
    fw_parse_entry "$entry" || continue
    [ -n "$FW_E_PORT" ] || continue
    [ -z "${seen[$FW_E_PROTO $FW_E_PORT]:-}" ] || continue
    seen[$FW_E_PROTO $FW_E_PORT]=1
    FW_DECLARED+=("$FW_E_PROTO $FW_E_PORT")
  done
}

# fw_ipset_specs: `create` lines (ipset restore) for every set FW_DOMAINS needs.
fw_ipset_specs() {
  local pair s4 s6
  printf 'create %s hash:ip family inet\ncreate %s hash:ip family inet6\ncreate %s hash:net family inet\n' \
    "$FW_SET4" "$FW_SET6" "$FW_NET4"
  fw_declared_ports
  for pair in "${FW_DECLARED[@]}"; do
    fw_port_set s4 "${pair% *}" "${pair#* }" 4
    fw_port_set s6 "${pair% *}" "${pair#* }" 6
    printf 'create %s hash:ip family inet\ncreate %s hash:ip family inet6\n' "$s4" "$s6"
  done
}

# fw_port_rules FAMILY: the AGENT-SANDBOX-PORTS rules (`-A ...` lines) for FW_DOMAINS.
fw_port_rules() {
  local pair proto port set
  fw_declared_ports
  for pair in "${FW_DECLARED[@]}"; do
    proto="${pair% *}" port="${pair#* }"
    fw_port_set set "$proto" "$port" "$1"
    printf -- '-A %s -p %s -m %s --dport %s -m set --match-set %s dst -j ACCEPT\n' \
      "$FW_PORTS_CHAIN" "$proto" "$proto" "$port" "$set"
  done
}

# fw_dnsmasq_ipsets: the `ipset=` lines. dnsmasq uses only the line of the longest
# domain that matches a name, so each domain's line lists the sets of every entry
# that covers it (its own and its parent domains').
fw_dnsmasq_ipsets() {
  local entry sets b line s d
  local -a bases=() parts=()
  local -A own=()
  for entry in "${FW_DOMAINS[@]}"; do
    fw_parse_entry "$entry" || continue
    fw_entry_sets sets
    [ -n "${own[$FW_E_BASE]+x}" ] || bases+=("$FW_E_BASE")
    own[$FW_E_BASE]+="${own[$FW_E_BASE]:+,}$sets"
  done
  for b in "${bases[@]}"; do
    local -A have=()
    line="" d="$b"
    while :; do
      if [ -n "${own[$d]:-}" ]; then
        IFS=, read -r -a parts <<< "${own[$d]}"
        for s in "${parts[@]}"; do
          [ -z "${have[$s]:-}" ] || continue
          have[$s]=1
          line+="${line:+,}$s"
        done
      fi
      [[ "$d" == *.* ]] || break
      d="${d#*.}"
    done
    unset have
    printf 'ipset=/%s/%s\n' "$b" "$line"
  done
}

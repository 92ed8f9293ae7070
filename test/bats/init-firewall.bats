#!/usr/bin/env bats
# base-image/init-firewall.sh with every network tool stubbed: no real
# iptables/ipset/dnsmasq is touched. The *-restore stubs save the ruleset they are
# fed to $TEST_TMP/rules4 / rules6 (legacy: rules4-legacy / rules6-legacy).

load test_helper

SCRIPT="$ROOT/base-image/init-firewall.sh"

setup() {
  common_setup
  export AGENT_SANDBOX_LIB_DIR="$ROOT/base-image"
  export AGENT_SANDBOX_STATE_DIR="$TEST_TMP/state"
  export AGENT_SANDBOX_RESOLV_CONF="$TEST_TMP/resolv.conf"
  export AGENT_SANDBOX_DEFAULT_DOMAINS_FILE="$ROOT/base-image/default-domains.txt"
  export AGENT_SANDBOX_PERSIST_DIR="$TEST_TMP/persist"
  export AGENT_SANDBOX_IPV6_CONF_DIR="$TEST_TMP/ipv6conf"
  export AGENT_SANDBOX_GITHUB_META=0
  unset AGENT_SANDBOX_ALLOW_DOMAINS AGENT_SANDBOX_INBOUND_PORTS
  printf 'nameserver 127.0.0.11\nsearch corp.example\noptions ndots:0\n' > "$AGENT_SANDBOX_RESOLV_CONF"
  ipv6 off
  # Every tool the script may run is stubbed, so a test can never reach the real ones.
  stub id 'if [ "$*" = "-u dnsmasq" ]; then echo 999; else exec /usr/bin/id "$@"; fi'
  # `ipset restore` input: the sets it creates to ipset-create, the rest to ipset-restore.
  stub ipset 'case " $* " in *" restore "*)
  while IFS= read -r l; do
    case "$l" in "create "*) f=ipset-create ;; *) f=ipset-restore ;; esac
    printf "%s\n" "$l" >> "$TEST_TMP/$f"
  done ;; esac'
  stub dnsmasq
  stub iptables-restore 'cat > "$TEST_TMP/rules4"'
  stub ip6tables-restore 'cat > "$TEST_TMP/rules6"'
  stub iptables-legacy-restore 'cat > "$TEST_TMP/rules4-legacy"'
  stub ip6tables-legacy-restore 'cat > "$TEST_TMP/rules6-legacy"'
  stub iptables 'case "$1" in --version) echo "iptables v1.8.11 (nf_tables)" ;; -S) echo "-P OUTPUT DROP"; echo "-A OUTPUT -o lo -j ACCEPT" ;; esac'
  stub iptables-legacy 'case "$1" in -S) echo "-P OUTPUT DROP" ;; esac'
  stub ip6tables
  stub ip6tables-legacy
  stub dig 'echo ";; ->>HEADER<<- opcode: QUERY, status: NXDOMAIN, id: 4242"'
  stub tcpdump 'exec sleep 5'
  stub curl 'exit 7'
  # The port publisher's addresses: the default gateway and the container's own.
  stub ip 'case "$*" in
  "-4 route show default") echo "default via 172.17.0.1 dev eth0" ;;
  "-4 -o addr show scope global") echo "2: eth0    inet 172.17.0.5/16 brd 172.17.255.255 scope global eth0\       valid_lft forever preferred_lft forever" ;;
  "-6 route show default") echo "default via fd00::1 dev eth0 metric 1024 pref medium" ;;
  "-6 -o addr show scope global") echo "2: eth0    inet6 fd00::5/64 scope global nodad \       valid_lft forever preferred_lft forever" ;;
  esac'
}

teardown() {
  local f
  for f in "$TEST_TMP"/state/tcpdump.pid "$TEST_TMP"/fake.pids; do
    if [ -f "$f" ]; then kill $(cat "$f") 2> /dev/null || true; fi
  done
  common_teardown
}

# ipv6 on|off: whether eth0 has IPv6 (Docker leaves conf/all/disable_ipv6=1 either way).
ipv6() {
  mkdir -p "$AGENT_SANDBOX_IPV6_CONF_DIR"/{all,default,lo,eth0}
  echo 1 > "$AGENT_SANDBOX_IPV6_CONF_DIR/all/disable_ipv6"
  echo 1 > "$AGENT_SANDBOX_IPV6_CONF_DIR/default/disable_ipv6"
  echo 0 > "$AGENT_SANDBOX_IPV6_CONF_DIR/lo/disable_ipv6"
  if [ "$1" = on ]; then echo 0; else echo 1; fi > "$AGENT_SANDBOX_IPV6_CONF_DIR/eth0/disable_ipv6"
}

# fake NAME: a running process whose command name is NAME; prints its pid.
fake() {
  mkdir -p "$TEST_TMP/fake"
  cp "$(command -v sleep)" "$TEST_TMP/fake/$1"
  "$TEST_TMP/fake/$1" 30 < /dev/null > /dev/null 2>&1 3>&- &
  echo $! | tee -a "$TEST_TMP/fake.pids"
}

# alive PID: a running (not zombie) process.
alive() {
  [ -e "/proc/$1/stat" ] && ! grep -q ') Z ' "/proc/$1/stat"
}

# line_no PATTERN FILE: line number of the first line equal to PATTERN.
line_no() {
  grep -nxF -- "$1" "$2" | head -n 1 | cut -d: -f1
}

assert_nothing_loaded() {
  run grep -E '^(ipset|dnsmasq|iptables-restore|ip6tables-restore|iptables-legacy-restore|tcpdump)' "$STUB_LOG"
  assert_failure
  [ ! -e "$TEST_TMP/rules4" ]
  [ ! -e "$AGENT_SANDBOX_STATE_DIR/dnsmasq.conf" ]
}

@test "loads a default-deny filter table and reports ready" {
  run "$SCRIPT"
  assert_success
  assert_output --partial "init-firewall: ready (17 domains, backend nft)"
  run cat "$TEST_TMP/rules4"
  assert_line --index 0 '*filter'
  assert_line ':INPUT DROP [0:0]'
  assert_line ':FORWARD DROP [0:0]'
  assert_line ':OUTPUT DROP [0:0]'
  # An allowlisted address is TCP 80 and 443 only (no UDP, no other port), then the declared ports.
  assert_line '-A OUTPUT -p tcp -m multiport --dports 80,443 -m set --match-set agent-sandbox-allow4 dst -j ACCEPT'
  assert_line '-A OUTPUT -p tcp -m multiport --dports 80,443 -m set --match-set agent-sandbox-net4 dst -j ACCEPT'
  refute_line --regexp '^-A OUTPUT( -m set)? --match-set .* -j ACCEPT$'
  refute_line --regexp '^-A OUTPUT -p udp .*--match-set agent-sandbox-allow4'
  assert_line '-A OUTPUT -j AGENT-SANDBOX-PORTS'
  assert_line '-A AGENT-SANDBOX-PORTS -p tcp -m tcp --dport 22 -m set --match-set agent-sandbox-tcp22-4 dst -j ACCEPT'
  assert_line '-A OUTPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT'
  assert_line '-A OUTPUT -o lo -j ACCEPT'
  assert_line '-A INPUT -i lo -j ACCEPT'
  # log, then reject, at the very end of OUTPUT
  assert_line --index $((${#lines[@]} - 4)) '-A OUTPUT -m limit --limit 20/s -j NFLOG --nflog-group 42 --nflog-prefix agent-sandbox-deny'
  assert_line --index $((${#lines[@]} - 3)) '-A OUTPUT -p tcp -j REJECT --reject-with tcp-reset'
  assert_line --index $((${#lines[@]} - 2)) '-A OUTPUT -j REJECT --reject-with icmp-port-unreachable'
  assert_line --index $((${#lines[@]} - 1)) 'COMMIT'
  # INPUT also ends in REJECT
  assert_line '-A INPUT -j REJECT --reject-with icmp-port-unreachable'
  [ "$(cat "$AGENT_SANDBOX_STATE_DIR/backend")" = nft ]
}

@test "only the filter table is loaded (Docker's DNS DNAT in nat is left alone)" {
  run "$SCRIPT"
  assert_success
  run grep -c '^\*' "$TEST_TMP/rules4"
  assert_output 1
  run grep -E '^iptables-restore' "$STUB_LOG"
  assert_output 'iptables-restore'
}

@test "127.0.0.11 is reachable by the dnsmasq uid only, before loopback is allowed" {
  run "$SCRIPT"
  assert_success
  local r="$TEST_TMP/rules4" accept reject lo
  accept="$(line_no '-A OUTPUT -d 127.0.0.11 -m owner --uid-owner 999 -j ACCEPT' "$r")"
  reject="$(line_no '-A OUTPUT -d 127.0.0.11 -j REJECT --reject-with icmp-port-unreachable' "$r")"
  lo="$(line_no '-A OUTPUT -o lo -j ACCEPT' "$r")"
  [ -n "$accept" ]
  [ -n "$reject" ]
  [ -n "$lo" ]
  [ "$accept" -lt "$reject" ]
  [ "$reject" -lt "$lo" ]
  # no port match on 127.0.0.11: the nat DNAT has already changed it
  run grep -- '-d 127.0.0.11 .*--dport' "$r"
  assert_failure
}

@test "with Docker's DNS upstream, its own forwarded queries (uid 0, port 53) may leave; nobody else's" {
  run "$SCRIPT"
  assert_success
  run grep -- '--dport 53' "$TEST_TMP/rules4"
  assert_output $'-A OUTPUT -p udp -m udp --dport 53 -m owner --uid-owner 0 -j ACCEPT\n-A OUTPUT -p tcp -m tcp --dport 53 -m owner --uid-owner 0 -j ACCEPT'
  # not on the default bridge, where dnsmasq talks to the host's resolvers itself
  printf 'nameserver 10.0.0.2\n' > "$AGENT_SANDBOX_RESOLV_CONF"
  rm -rf "$AGENT_SANDBOX_STATE_DIR"
  run "$SCRIPT"
  assert_success
  run grep -- '--uid-owner 0 ' "$TEST_TMP/rules4"
  assert_failure
}

@test "non-loopback upstreams: DNS out for the dnsmasq uid only" {
  printf 'nameserver 10.0.0.2\nnameserver 127.0.0.1\nnameserver fd00::53\n' > "$AGENT_SANDBOX_RESOLV_CONF"
  ipv6 on
  run "$SCRIPT"
  assert_success
  run cat "$TEST_TMP/rules4"
  assert_line '-A OUTPUT -d 10.0.0.2 -p udp -m udp --dport 53 -m owner --uid-owner 999 -j ACCEPT'
  assert_line '-A OUTPUT -d 10.0.0.2 -p tcp -m tcp --dport 53 -m owner --uid-owner 999 -j ACCEPT'
  refute_line --partial 'fd00::53'
  run cat "$TEST_TMP/rules6"
  assert_line '-A OUTPUT -d fd00::53 -p udp -m udp --dport 53 -m owner --uid-owner 999 -j ACCEPT'
  run cat "$AGENT_SANDBOX_STATE_DIR/upstream-resolvers"
  assert_output $'10.0.0.2\nfd00::53'
  run grep -c '^server=/github.com/' "$AGENT_SANDBOX_STATE_DIR/dnsmasq.conf"
  assert_output 2
}

@test "inbound ports are accepted from the port publisher only, de-duplicated, before INPUT's REJECT" {
  export AGENT_SANDBOX_INBOUND_PORTS='3000, 8080,3000,'
  run "$SCRIPT"
  assert_success
  local r="$TEST_TMP/rules4"
  run grep -c -- '--dport 3000 -j ACCEPT' "$r"
  assert_output 2
  # Never from any source: another container on the network is not the publisher.
  run grep -- '-A INPUT -p tcp -m tcp --dport' "$r"
  assert_failure
  local p3000 p8080 own rej
  p3000="$(line_no '-A INPUT -s 172.17.0.1 -p tcp -m tcp --dport 3000 -j ACCEPT' "$r")"
  own="$(line_no '-A INPUT -s 172.17.0.5 -p tcp -m tcp --dport 3000 -j ACCEPT' "$r")"
  p8080="$(line_no '-A INPUT -s 172.17.0.1 -p tcp -m tcp --dport 8080 -j ACCEPT' "$r")"
  rej="$(line_no '-A INPUT -p tcp -j REJECT --reject-with tcp-reset' "$r")"
  [ -n "$own" ]
  [ "$p3000" -lt "$p8080" ]
  [ "$p8080" -lt "$rej" ]
}

@test "a port published beyond loopback (the user's opt-in) accepts any peer; the same port is not also limited" {
  export AGENT_SANDBOX_INBOUND_PORTS='3000,9000' AGENT_SANDBOX_INBOUND_PEER_PORTS='9000'
  run "$SCRIPT"
  assert_success
  run cat "$TEST_TMP/rules4"
  assert_line '-A INPUT -p tcp -m tcp --dport 9000 -j ACCEPT'
  assert_line '-A INPUT -s 172.17.0.1 -p tcp -m tcp --dport 3000 -j ACCEPT'
  refute_line '-A INPUT -s 172.17.0.1 -p tcp -m tcp --dport 9000 -j ACCEPT'
  AGENT_SANDBOX_INBOUND_PEER_PORTS='x' run "$SCRIPT"
  assert_failure
  assert_line --index $((${#lines[@]} - 1)) "init-firewall: invalid port 'x' in AGENT_SANDBOX_INBOUND_PEER_PORTS: expected integers 1-65535, comma separated"
}

@test "redirects and router advertisements are dropped before replies are accepted" {
  ipv6 on
  run "$SCRIPT"
  assert_success
  local drop related
  drop="$(line_no '-A INPUT -p icmp -m icmp --icmp-type redirect -j DROP' "$TEST_TMP/rules4")"
  related="$(line_no '-A INPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT' "$TEST_TMP/rules4")"
  [ -n "$drop" ] && [ "$drop" -lt "$related" ]
  drop="$(line_no '-A INPUT -p ipv6-icmp -m icmp6 --icmpv6-type router-advertisement -j DROP' "$TEST_TMP/rules6")"
  related="$(line_no '-A INPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT' "$TEST_TMP/rules6")"
  [ -n "$drop" ] && [ "$drop" -lt "$related" ]
  grep -qxF -- '-A INPUT -p ipv6-icmp -m icmp6 --icmpv6-type redirect -j DROP' "$TEST_TMP/rules6"
  run grep -- 'router-advertisement -m hl' "$TEST_TMP/rules6"
  assert_failure
}

@test "declared ports: each gets its own ipsets and one ACCEPT; dnsmasq feeds every set that covers a name" {
  ipv6 on
  export AGENT_SANDBOX_ALLOW_DOMAINS='db.internal:5432, dns.internal:853/udp, *.corp.example, git.corp.example:2222/TCP, api.corp.example'
  run "$SCRIPT"
  assert_success
  run cat "$TEST_TMP/ipset-create"
  assert_line 'create agent-sandbox-tcp5432-4 hash:ip family inet'
  assert_line 'create agent-sandbox-tcp5432-6 hash:ip family inet6'
  assert_line 'create agent-sandbox-udp853-4 hash:ip family inet'
  assert_line 'create agent-sandbox-tcp2222-6 hash:ip family inet6'
  run cat "$TEST_TMP/rules4"
  assert_line '-A AGENT-SANDBOX-PORTS -p tcp -m tcp --dport 5432 -m set --match-set agent-sandbox-tcp5432-4 dst -j ACCEPT'
  assert_line '-A AGENT-SANDBOX-PORTS -p udp -m udp --dport 853 -m set --match-set agent-sandbox-udp853-4 dst -j ACCEPT'
  run grep -c -- '--dport 22 ' "$TEST_TMP/rules4"
  assert_output 1
  run cat "$TEST_TMP/rules6"
  assert_line '-A AGENT-SANDBOX-PORTS -p tcp -m tcp --dport 2222 -m set --match-set agent-sandbox-tcp2222-6 dst -j ACCEPT'
  run cat "$AGENT_SANDBOX_STATE_DIR/dnsmasq.conf"
  # A port entry alone is not web: db.internal's addresses go to its port's sets only.
  assert_line 'ipset=/db.internal/agent-sandbox-tcp5432-4,agent-sandbox-tcp5432-6'
  assert_line 'ipset=/corp.example/agent-sandbox-allow4,agent-sandbox-allow6'
  assert_line 'ipset=/git.corp.example/agent-sandbox-tcp2222-4,agent-sandbox-tcp2222-6,agent-sandbox-allow4,agent-sandbox-allow6'
  assert_line 'ipset=/github.com/agent-sandbox-allow4,agent-sandbox-allow6,agent-sandbox-tcp22-4,agent-sandbox-tcp22-6'
  run grep -c '^server=/github.com/' "$AGENT_SANDBOX_STATE_DIR/dnsmasq.conf"
  assert_output 1
  run cat "$AGENT_SANDBOX_STATE_DIR/allowlist"
  assert_line 'git.corp.example:2222'
  assert_line 'dns.internal:853/udp'
}

@test "TCP 80 and 443 are what a bare name means: as a port entry they are refused, naming the fix" {
  AGENT_SANDBOX_ALLOW_DOMAINS='api.example:443' run "$SCRIPT"
  assert_failure
  assert_line --index $((${#lines[@]} - 1)) "init-firewall: invalid entry 'api.example:443' in AGENT_SANDBOX_ALLOW_DOMAINS: TCP ports 80 and 443 are what 'api.example' alone allows (through the egress gateway); write api.example"
  assert_nothing_loaded
  AGENT_SANDBOX_ALLOW_DOMAINS='api.example:443/udp' run "$SCRIPT"
  assert_success
}

@test "invalid ports are rejected and nothing is loaded" {
  local p
  for p in 0 65536 abc 80x -1 1.5; do
    rm -rf "$AGENT_SANDBOX_STATE_DIR"
    : > "$STUB_LOG"
    AGENT_SANDBOX_INBOUND_PORTS="80,$p" run "$SCRIPT"
    assert_failure
    assert_line --index $((${#lines[@]} - 1)) "init-firewall: invalid port '$p' in AGENT_SANDBOX_INBOUND_PORTS: expected integers 1-65535, comma separated"
    assert_nothing_loaded
  done
}

@test "dnsmasq config: allowlisted domains forwarded and ipset-tracked, everything else NXDOMAIN" {
  export AGENT_SANDBOX_ALLOW_DOMAINS=$'*.Example.COM, pypi.org\nfiles.pythonhosted.org _acme.internal'
  run "$SCRIPT"
  assert_success
  assert_output --partial "ready (21 domains"
  run cat "$AGENT_SANDBOX_STATE_DIR/dnsmasq.conf"
  local opt
  # strict-order: upstreams asked in resolv.conf's order, as libc does (a Podman network's DNS first).
  for opt in no-resolv no-poll strict-order listen-address=127.0.0.1 bind-interfaces port=53 user=dnsmasq \
    cache-size=0 log-queries "log-facility=$AGENT_SANDBOX_STATE_DIR/dnsmasq.log"; do
    assert_line "$opt"
  done
  assert_line 'server=/example.com/127.0.0.11'
  assert_line 'ipset=/example.com/agent-sandbox-allow4,agent-sandbox-allow6'
  assert_line 'server=/pypi.org/127.0.0.11'
  assert_line 'server=/_acme.internal/127.0.0.11'
  assert_line 'server=/registry.npmjs.org/127.0.0.11'
  refute_line --partial '*'
  assert_line --index $((${#lines[@]} - 1)) 'address=/#/'
  refute_line --regexp '^(no-hosts|resolv-file)'
  run cat "$AGENT_SANDBOX_STATE_DIR/allowlist"
  assert_line --index 0 registry.npmjs.org
  assert_line --index 17 '*.example.com'
  assert_line --index 20 '_acme.internal'
  [ "${#lines[@]}" -eq 21 ]
  grep -q "^dnsmasq --conf-file=$AGENT_SANDBOX_STATE_DIR/dnsmasq.conf --pid-file=$AGENT_SANDBOX_STATE_DIR/dnsmasq.pid\$" "$STUB_LOG"
}

@test "invalid domains are rejected with a clear message and nothing is loaded" {
  local d
  for d in '$(x)' '..' '-bad.example' 'bad-.example' 'a..b' '1.2.3.4' '*' '*.' 'a.*.b' 'x;y' "$(printf 'a%.0s' {1..64}).com" 'ex"ample.com'; do
    rm -rf "$AGENT_SANDBOX_STATE_DIR"
    : > "$STUB_LOG"
    AGENT_SANDBOX_ALLOW_DOMAINS="ok.example,$d" run "$SCRIPT"
    assert_failure
    assert_line --index $((${#lines[@]} - 1)) "init-firewall: invalid entry '$d' in AGENT_SANDBOX_ALLOW_DOMAINS: expected a hostname like example.com or *.example.com, optionally with :PORT or :PORT/udp (e.g. github.com:22)"
    assert_nothing_loaded
  done
}

@test "an invalid entry in the defaults file names the file" {
  printf 'good.example\nbad..example # comment\n' > "$TEST_TMP/defaults.txt"
  AGENT_SANDBOX_DEFAULT_DOMAINS_FILE="$TEST_TMP/defaults.txt" run "$SCRIPT"
  assert_failure
  assert_output --partial "invalid entry 'bad..example' in $TEST_TMP/defaults.txt"
  assert_nothing_loaded
}

@test "defaults file: comments and blank lines are ignored; a missing file fails" {
  printf '# comment\n\n  one.example   # trailing\ntwo.example\n' > "$TEST_TMP/defaults.txt"
  AGENT_SANDBOX_DEFAULT_DOMAINS_FILE="$TEST_TMP/defaults.txt" run "$SCRIPT"
  assert_success
  assert_output --partial "ready (2 domains"
  AGENT_SANDBOX_DEFAULT_DOMAINS_FILE="$TEST_TMP/none.txt" run "$SCRIPT"
  assert_failure
  assert_output --partial "init-firewall: cannot read domain list $TEST_TMP/none.txt"
}

@test "duplicates are warnings, not failures, and are dropped" {
  export AGENT_SANDBOX_ALLOW_DOMAINS='github.com,new.example,*.new.example,NEW.example'
  run "$SCRIPT"
  assert_success
  assert_output --partial "init-firewall: warning: duplicate entry 'github.com' in AGENT_SANDBOX_ALLOW_DOMAINS ignored"
  assert_output --partial "duplicate entry '*.new.example' in AGENT_SANDBOX_ALLOW_DOMAINS ignored (same as 'new.example')"
  assert_output --partial "duplicate entry 'new.example' in AGENT_SANDBOX_ALLOW_DOMAINS ignored"
  assert_output --partial "ready (18 domains"
  run grep -c '^new.example$' "$AGENT_SANDBOX_STATE_DIR/allowlist"
  assert_output 1
  run grep -c '^server=/new.example/' "$AGENT_SANDBOX_STATE_DIR/dnsmasq.conf"
  assert_output 1
}

@test "ipsets are created with -exist and the right types, in one ipset call" {
  run "$SCRIPT"
  assert_success
  run grep '^ipset' "$STUB_LOG"
  assert_output 'ipset -exist restore'
  run cat "$TEST_TMP/ipset-create"
  assert_output $'create agent-sandbox-allow4 hash:ip family inet\ncreate agent-sandbox-allow6 hash:ip family inet6\ncreate agent-sandbox-net4 hash:net family inet\ncreate agent-sandbox-tcp22-4 hash:ip family inet\ncreate agent-sandbox-tcp22-6 hash:ip family inet6'
  [ ! -e "$TEST_TMP/ipset-restore" ]
}

@test "an ipset failure aborts before rules are loaded and names the set that failed" {
  # ipset restore names the input line that failed.
  stub ipset 'echo "ipset v7.22: Error in line 1: Kernel error received: Operation not permitted" >&2; exit 1'
  run "$SCRIPT"
  assert_failure
  assert_line --index $((${#lines[@]} - 1)) 'init-firewall: cannot create ipset agent-sandbox-allow4: ipset v7.22: Kernel error received: Operation not permitted'
  [ ! -e "$TEST_TMP/rules4" ]
  stub ipset 'cat > /dev/null; echo "ipset v7.22: Error in line 2: Set cannot be created: set with the same name already exists" >&2; exit 1'
  run "$SCRIPT"
  assert_failure
  assert_line --index $((${#lines[@]} - 1)) 'init-firewall: cannot create ipset agent-sandbox-allow6: ipset v7.22: Set cannot be created: set with the same name already exists'
  [ ! -e "$TEST_TMP/rules4" ]
  # No line number: all three sets are named.
  stub ipset 'echo "ipset: something else" >&2; exit 1'
  run "$SCRIPT"
  assert_failure
  assert_line --index $((${#lines[@]} - 1)) 'init-firewall: cannot create ipsets agent-sandbox-allow4, agent-sandbox-allow6, agent-sandbox-net4 and those of the declared ports: ipset: something else'
  stub ipset 'exit 2'
  run "$SCRIPT"
  assert_failure
  assert_line --index $((${#lines[@]} - 1)) 'init-firewall: cannot create ipsets agent-sandbox-allow4, agent-sandbox-allow6, agent-sandbox-net4 and those of the declared ports: ipset exited with an error'
  [ ! -e "$TEST_TMP/rules4" ]
}

@test "several upstreams (a Podman network's DNS, then the host's): kept in order, and asked in order" {
  printf 'search dns.podman\nnameserver 10.89.0.1\nnameserver 10.255.255.53\n' > "$AGENT_SANDBOX_RESOLV_CONF"
  run "$SCRIPT"
  assert_success
  run grep -E '^(strict-order|server=/github.com/)' "$AGENT_SANDBOX_STATE_DIR/dnsmasq.conf"
  assert_output 'strict-order
server=/github.com/10.89.0.1
server=/github.com/10.255.255.53'
  run cat "$AGENT_SANDBOX_RESOLV_CONF"
  assert_line 'search dns.podman'
}

@test "resolv.conf is rewritten in place to 127.0.0.1, keeping search/options" {
  local inode
  inode="$(stat -c %i "$AGENT_SANDBOX_RESOLV_CONF")"
  run "$SCRIPT"
  assert_success
  [ "$(stat -c %i "$AGENT_SANDBOX_RESOLV_CONF")" = "$inode" ]
  run grep -v '^#' "$AGENT_SANDBOX_RESOLV_CONF"
  assert_output $'nameserver 127.0.0.1\nsearch corp.example\noptions ndots:0'
  run cat "$AGENT_SANDBOX_STATE_DIR/upstream-resolvers"
  assert_output 127.0.0.11
  run cat "$AGENT_SANDBOX_PERSIST_DIR/upstream-resolvers"
  assert_output 127.0.0.11
}

@test "re-run reuses the saved upstreams and replaces dnsmasq and tcpdump" {
  run "$SCRIPT"
  assert_success
  kill "$(cat "$AGENT_SANDBOX_STATE_DIR/tcpdump.pid")"
  local old_dns old_tcpdump
  old_dns="$(fake dnsmasq)"
  old_tcpdump="$(fake tcpdump)"
  echo "$old_dns" > "$AGENT_SANDBOX_STATE_DIR/dnsmasq.pid"
  echo "$old_tcpdump" > "$AGENT_SANDBOX_STATE_DIR/tcpdump.pid"
  : > "$STUB_LOG"
  run "$SCRIPT"
  assert_success
  run alive "$old_dns"
  assert_failure
  run alive "$old_tcpdump"
  assert_failure
  [ "$(cat "$AGENT_SANDBOX_STATE_DIR/tcpdump.pid")" != "$old_tcpdump" ]
  grep -q '^dnsmasq --conf-file=' "$STUB_LOG"
  grep -qx 'server=/github.com/127.0.0.11' "$AGENT_SANDBOX_STATE_DIR/dnsmasq.conf"
  run grep -c '^nameserver' "$AGENT_SANDBOX_RESOLV_CONF"
  assert_output 1
}

@test "a network connected later (Docker writes its 127.0.0.11): a re-run asks it first, lets its forwards out, points resolv.conf back" {
  printf 'nameserver 10.255.255.53\n' > "$AGENT_SANDBOX_RESOLV_CONF"
  run "$SCRIPT"
  assert_success
  # Before: the host's resolver, asked by dnsmasq itself; no DNS out for uid 0.
  run grep -- '--uid-owner 0 ' "$TEST_TMP/rules4"
  assert_failure
  printf 'nameserver 127.0.0.11\noptions ndots:0\n' > "$AGENT_SANDBOX_RESOLV_CONF"
  run "$SCRIPT"
  assert_success
  run cat "$AGENT_SANDBOX_STATE_DIR/upstream-resolvers"
  assert_output $'127.0.0.11\n10.255.255.53'
  run cat "$AGENT_SANDBOX_PERSIST_DIR/upstream-resolvers"
  assert_output $'127.0.0.11\n10.255.255.53'
  run grep '^server=/github.com/' "$AGENT_SANDBOX_STATE_DIR/dnsmasq.conf"
  assert_output $'server=/github.com/127.0.0.11\nserver=/github.com/10.255.255.53'
  run cat "$TEST_TMP/rules4"
  assert_line '-A OUTPUT -d 127.0.0.11 -m owner --uid-owner 999 -j ACCEPT'
  assert_line '-A OUTPUT -d 127.0.0.11 -j REJECT --reject-with icmp-port-unreachable'
  assert_line '-A OUTPUT -p udp -m udp --dport 53 -m owner --uid-owner 0 -j ACCEPT'
  assert_line ':OUTPUT DROP [0:0]'
  run grep -v '^#' "$AGENT_SANDBOX_RESOLV_CONF"
  assert_output $'nameserver 127.0.0.1\noptions ndots:0'
  # A re-run with resolv.conf ours again changes nothing.
  run "$SCRIPT"
  assert_success
  run cat "$AGENT_SANDBOX_STATE_DIR/upstream-resolvers"
  assert_output $'127.0.0.11\n10.255.255.53'
}

@test "a network connected later (Podman puts its DNS in front of ours): new first, no duplicates, DNS to it for dnsmasq only" {
  printf 'nameserver 10.89.0.1\nnameserver 10.255.255.53\n' > "$AGENT_SANDBOX_RESOLV_CONF"
  run "$SCRIPT"
  assert_success
  printf 'nameserver 10.89.1.1\nnameserver 10.255.255.53\nnameserver 127.0.0.1\n' > "$AGENT_SANDBOX_RESOLV_CONF"
  run "$SCRIPT"
  assert_success
  run cat "$AGENT_SANDBOX_STATE_DIR/upstream-resolvers"
  assert_output $'10.89.1.1\n10.255.255.53\n10.89.0.1'
  run grep -- '-d 10.89.1.1 ' "$TEST_TMP/rules4"
  assert_output $'-A OUTPUT -d 10.89.1.1 -p udp -m udp --dport 53 -m owner --uid-owner 999 -j ACCEPT\n-A OUTPUT -d 10.89.1.1 -p tcp -m tcp --dport 53 -m owner --uid-owner 999 -j ACCEPT'
  run grep -c '^nameserver' "$AGENT_SANDBOX_RESOLV_CONF"
  assert_output 1
}

@test "a stale pid file naming another program does not kill it" {
  local other
  other="$(fake notdnsmasq)"
  mkdir -p "$AGENT_SANDBOX_STATE_DIR"
  echo "$other" > "$AGENT_SANDBOX_STATE_DIR/dnsmasq.pid"
  run "$SCRIPT"
  assert_success
  alive "$other"
}

@test "re-run keeps domains added by firewall-allow" {
  run "$SCRIPT"
  assert_success
  echo added.example >> "$AGENT_SANDBOX_STATE_DIR/allowlist"
  run "$SCRIPT"
  assert_success
  assert_output --partial "ready (18 domains"
  refute_output --partial warning
  grep -qx 'server=/added.example/127.0.0.11' "$AGENT_SANDBOX_STATE_DIR/dnsmasq.conf"
}

@test "after a container restart (resolv.conf already ours, state empty) the persisted upstreams are used" {
  mkdir -p "$AGENT_SANDBOX_PERSIST_DIR"
  echo 10.1.2.3 > "$AGENT_SANDBOX_PERSIST_DIR/upstream-resolvers"
  printf 'nameserver 127.0.0.1\n' > "$AGENT_SANDBOX_RESOLV_CONF"
  run "$SCRIPT"
  assert_success
  assert_output --partial "warning: no upstream nameserver in $AGENT_SANDBOX_RESOLV_CONF; reusing the ones saved"
  grep -qx 'server=/github.com/10.1.2.3' "$AGENT_SANDBOX_STATE_DIR/dnsmasq.conf"
}

@test "no upstream resolver at all is an error" {
  printf 'nameserver 127.0.0.1\n' > "$AGENT_SANDBOX_RESOLV_CONF"
  run "$SCRIPT"
  assert_failure
  assert_line --index $((${#lines[@]} - 1)) "init-firewall: no upstream nameserver found in $AGENT_SANDBOX_RESOLV_CONF"
  [ ! -e "$TEST_TMP/rules4" ]
}

@test "IPv6 disabled: an ip6tables failure is only a warning" {
  stub ip6tables-restore 'echo "ip6tables-restore v1.8.11 (nf_tables): unknown option" >&2; exit 1'
  run "$SCRIPT"
  assert_success
  assert_output --partial "init-firewall: warning: IPv6 is disabled in this container; no IPv6 rules loaded (ip6tables-restore v1.8.11 (nf_tables): unknown option)"
  assert_output --partial "ready (17 domains, backend nft)"
}

@test "IPv6 enabled (even with conf/all/disable_ipv6=1): an ip6tables failure is fatal" {
  ipv6 on
  stub ip6tables-restore 'echo "ip6tables-restore: line 2 failed" >&2; exit 1'
  run "$SCRIPT"
  assert_failure
  assert_line --index $((${#lines[@]} - 1)) "init-firewall: IPv6 is enabled but the IPv6 rules could not be loaded: ip6tables-restore: line 2 failed"
  refute_output --partial ready
}

@test "IPv6 rules: same shape, allow6 set, neighbour discovery, icmp6 reject" {
  ipv6 on
  export AGENT_SANDBOX_INBOUND_PORTS=3000
  run "$SCRIPT"
  assert_success
  run cat "$TEST_TMP/rules6"
  assert_line ':OUTPUT DROP [0:0]'
  assert_line ':INPUT DROP [0:0]'
  assert_line ':FORWARD DROP [0:0]'
  assert_line '-A OUTPUT -o lo -j ACCEPT'
  assert_line '-A OUTPUT -p tcp -m multiport --dports 80,443 -m set --match-set agent-sandbox-allow6 dst -j ACCEPT'
  assert_line '-A OUTPUT -p ipv6-icmp -m icmp6 --icmpv6-type neighbour-solicitation -m hl --hl-eq 255 -j ACCEPT'
  assert_line '-A INPUT -s fd00::1 -p tcp -m tcp --dport 3000 -j ACCEPT'
  assert_line '-A INPUT -s fd00::5 -p tcp -m tcp --dport 3000 -j ACCEPT'
  assert_line --index $((${#lines[@]} - 2)) '-A OUTPUT -j REJECT --reject-with icmp6-port-unreachable'
  refute_line --partial 'agent-sandbox-allow4'
  refute_line --partial 'agent-sandbox-net4'
  refute_line --partial '127.0.0.11'
  # The kernel's own multicast listener reports are dropped before the NFLOG rule, unlogged.
  local mld nflog
  mld="$(line_no '-A OUTPUT -p ipv6-icmp -m icmp6 --icmpv6-type 143 -j DROP' "$TEST_TMP/rules6")"
  nflog="$(grep -n -- '-j NFLOG' "$TEST_TMP/rules6" | cut -d: -f1)"
  [ -n "$mld" ]
  [ "$mld" -lt "$nflog" ]
  grep -qxF -- '-A OUTPUT -p ipv6-icmp -m icmp6 --icmpv6-type 131 -j DROP' "$TEST_TMP/rules6"
  run grep -- '--icmpv6-type' "$TEST_TMP/rules4"
  assert_failure
}

@test "falls back to iptables-legacy when the default iptables cannot load the rules" {
  stub iptables-restore 'echo "iptables-restore v1.8.11 (nf_tables): RULE_APPEND failed" >&2; exit 1'
  stub iptables 'echo "iptables -S must not be used with the legacy backend" >&2; exit 1'
  run "$SCRIPT"
  assert_success
  assert_output --partial "init-firewall: warning: using iptables backend legacy (nft: iptables-restore v1.8.11 (nf_tables): RULE_APPEND failed)"
  assert_output --partial "ready (17 domains, backend legacy)"
  [ "$(cat "$AGENT_SANDBOX_STATE_DIR/backend")" = legacy ]
  grep -q ':OUTPUT DROP' "$TEST_TMP/rules4-legacy"
  grep -q ':OUTPUT DROP' "$TEST_TMP/rules6-legacy"
  [ ! -e "$TEST_TMP/rules6" ]
  grep -qx 'iptables-legacy -S OUTPUT' "$STUB_LOG"
}

@test "a re-run tries the recorded legacy backend first" {
  mkdir -p "$AGENT_SANDBOX_STATE_DIR"
  echo legacy > "$AGENT_SANDBOX_STATE_DIR/backend"
  run "$SCRIPT"
  assert_success
  assert_output --partial "backend legacy)"
  refute_output --partial warning
  [ ! -e "$TEST_TMP/rules4" ]
}

@test "both backends failing is fatal and says why" {
  stub iptables-restore 'echo "nft says no" >&2; exit 1'
  stub iptables-legacy-restore 'echo "legacy says no" >&2; exit 1'
  run "$SCRIPT"
  assert_failure
  assert_line --index $((${#lines[@]} - 1)) "init-firewall: cannot load IPv4 rules (nft: nft says no; legacy: legacy says no)"
}

@test "a backend that fails without a message is named with its exit status" {
  stub iptables-restore 'exit 1'
  stub iptables-legacy-restore 'exit 3'
  run "$SCRIPT"
  assert_failure
  assert_line --index $((${#lines[@]} - 1)) \
    "init-firewall: cannot load IPv4 rules (nft: iptables-restore exited with status 1; legacy: iptables-legacy-restore exited with status 3)"
}

@test "IPv6 enabled and ip6tables-restore failing silently: fatal, with its exit status" {
  ipv6 on
  stub ip6tables-restore 'exit 2'
  run "$SCRIPT"
  assert_failure
  assert_line --index $((${#lines[@]} - 1)) \
    "init-firewall: IPv6 is enabled but the IPv6 rules could not be loaded: ip6tables-restore exited with status 2"
}

@test "a default iptables that is itself legacy is recorded as legacy" {
  stub iptables 'case "$1" in --version) echo "iptables v1.8.11 (legacy)" ;; -S) echo "-P OUTPUT DROP" ;; esac'
  run "$SCRIPT"
  assert_success
  assert_output --partial "backend legacy)"
}

@test "self-test: OUTPUT policy must be DROP" {
  stub iptables 'case "$1" in -S) echo "-P OUTPUT ACCEPT" ;; esac'
  run "$SCRIPT"
  assert_failure
  assert_line --index $((${#lines[@]} - 1)) --partial "init-firewall: self-test failed: OUTPUT policy is '-P OUTPUT ACCEPT', not DROP"
}

@test "self-test: dnsmasq must answer NXDOMAIN" {
  stub dig 'echo ";; ->>HEADER<<- opcode: QUERY, status: SERVFAIL, id: 1"'
  run "$SCRIPT"
  assert_failure
  assert_line --index $((${#lines[@]} - 1)) "init-firewall: DNS self-test failed: dnsmasq did not answer agent-sandbox-selftest.invalid with NXDOMAIN (->>HEADER<<- opcode: QUERY, status: SERVFAIL, id: 1)"
  grep -qx 'dig @127.0.0.1 +time=1 +tries=1 agent-sandbox-selftest.invalid' "$STUB_LOG"
}

@test "dnsmasq failing to start is fatal with its message" {
  stub dnsmasq 'echo "dnsmasq: failed to create listening socket for 127.0.0.1: Address in use" >&2; exit 2'
  run "$SCRIPT"
  assert_failure
  assert_line --index $((${#lines[@]} - 1)) "init-firewall: dnsmasq failed to start: dnsmasq: failed to create listening socket for 127.0.0.1: Address in use"
}

@test "a missing dnsmasq user is fatal" {
  stub id 'exit 1'
  run "$SCRIPT"
  assert_failure
  assert_output --partial "init-firewall: user dnsmasq does not exist"
  assert_nothing_loaded
}

@test "the agent's user sharing the resolver's uid is fatal: DNS filtering would not apply to it" {
  stub id 'case "$*" in "-u dnsmasq" | "-u node") echo 999 ;; *) exit 1 ;; esac'
  run "$SCRIPT"
  assert_failure
  assert_output --partial "init-firewall: user node has the resolver's uid 999: DNS filtering would not apply to it"
  assert_nothing_loaded
}

@test "tcpdump logs NFLOG group 42 to denied.log; if it dies that is only a warning" {
  run "$SCRIPT"
  assert_success
  # tcpdump starts in the background: on a loaded machine its stub may log after the script returns.
  for _ in $(seq 1 50); do grep -qx 'tcpdump -i nflog:42 -n -l -q -U -Z root' "$STUB_LOG" && break; sleep 0.1; done
  grep -qx 'tcpdump -i nflog:42 -n -l -q -U -Z root' "$STUB_LOG"
  [ -f "$AGENT_SANDBOX_STATE_DIR/denied.log" ]
  stub tcpdump 'echo "tcpdump: nflog:42: no such device" >&2; touch "$TEST_TMP/tcpdump-exited"; exit 1'
  # The check comes after the DNS self-test: that test waits here until tcpdump has gone (on a loaded
  # machine its stub may not have run yet), and a moment more for the script to reap it.
  stub dig 'for _ in $(seq 1 100); do [ -e "$TEST_TMP/tcpdump-exited" ] && break; sleep 0.05; done; sleep 0.2; echo ";; ->>HEADER<<- opcode: QUERY, status: NXDOMAIN, id: 4242"'
  run "$SCRIPT"
  assert_success
  assert_output --partial "init-firewall: warning: tcpdump exited; denied connections will not be logged"
  grep -q 'no such device' "$AGENT_SANDBOX_STATE_DIR/firewall.log"
}

@test "background processes do not hold the caller's stdout open" {
  stub tcpdump 'exec sleep 5'
  export AGENT_SANDBOX_GITHUB_META=1
  stub curl 'sleep 5; exit 7'
  local start end
  start="$(date +%s%N)"
  run timeout 4 bash -c 'out="$("$0" 2>&1)"; echo "$out"' "$SCRIPT"
  end="$(date +%s%N)"
  assert_success
  assert_output --partial ready
  [ $(((end - start) / 1000000)) -lt 2000 ]
}

@test "GitHub meta: ranges are added to agent-sandbox-net4 in the background" {
  export AGENT_SANDBOX_GITHUB_META=1
  stub curl 'echo "{\"web\":[\"192.30.252.0/22\",\"2a0a:a440::/29\"],\"api\":[\"192.30.252.0/22\",\"140.82.112.0/20\"],\"git\":[\"143.55.64.0/20\"],\"hooks\":[\"1.1.1.0/24\"]}"'
  run "$SCRIPT"
  assert_success
  local i
  for ((i = 0; i < 50; i++)); do
    grep -q 'GitHub IPv4 ranges' "$AGENT_SANDBOX_STATE_DIR/firewall.log" 2> /dev/null && break
    sleep 0.1
  done
  grep -qx 'curl -q -fsS --max-time 5 https://api.github.com/meta' "$STUB_LOG"
  # -q only works as curl's first argument: anywhere else a .curlrc is read first.
  run grep -c '^curl -q ' "$STUB_LOG"
  assert_output 1
  run cat "$TEST_TMP/ipset-restore"
  assert_output $'add agent-sandbox-net4 140.82.112.0/20\nadd agent-sandbox-net4 143.55.64.0/20\nadd agent-sandbox-net4 192.30.252.0/22'
  grep -q 'added 3 GitHub IPv4 ranges to agent-sandbox-net4' "$AGENT_SANDBOX_STATE_DIR/firewall.log"
}

@test "GitHub meta: a failure is only a warning in firewall.log and is not waited for" {
  export AGENT_SANDBOX_GITHUB_META=1
  # curl answers only once the script has returned: if the script waited for it, timeout would fire.
  stub curl 'while [ ! -e "$TEST_TMP/release" ]; do sleep 0.05; done; echo "curl: (28) Connection timed out after 5000 milliseconds" >&2; exit 28'
  run timeout 20 "$SCRIPT"
  assert_success
  touch "$TEST_TMP/release"
  refute_output --partial api.github.com
  local i
  for ((i = 0; i < 50; i++)); do
    grep -q 'api.github.com' "$AGENT_SANDBOX_STATE_DIR/firewall.log" 2> /dev/null && break
    sleep 0.1
  done
  run grep 'api.github.com' "$AGENT_SANDBOX_STATE_DIR/firewall.log"
  assert_output --partial "warning: could not fetch https://api.github.com/meta (curl: (28) Connection timed out after 5000 milliseconds); GitHub IP ranges not added"
  [ ! -e "$TEST_TMP/ipset-restore" ]
}

@test "GitHub meta: AGENT_SANDBOX_GITHUB_META=0 never calls curl" {
  run "$SCRIPT"
  assert_success
  sleep 0.2
  run grep '^curl' "$STUB_LOG"
  assert_failure
}

@test "state files are 0644 and the state dir 0755" {
  export AGENT_SANDBOX_INBOUND_PORTS=3000
  run "$SCRIPT"
  assert_success
  [ "$(stat -c %a "$AGENT_SANDBOX_STATE_DIR")" = 755 ]
  local f
  for f in allowlist backend upstream-resolvers dnsmasq.conf denied.log tcpdump.pid firewall.log; do
    [ "$(stat -c %a "$AGENT_SANDBOX_STATE_DIR/$f")" = 644 ] || { echo "$f: $(stat -c %a "$AGENT_SANDBOX_STATE_DIR/$f")"; false; }
  done
}

# lib CODE: run CODE in bash with firewall-lib.sh sourced the way the scripts do.
lib() {
  bash -c 'set -euo pipefail
abort() { printf "lib: %s\n" "$*" >&2; exit 1; }
warn() { printf "lib: warning: %s\n" "$*" >&2; }
. "$AGENT_SANDBOX_LIB_DIR/firewall-lib.sh"
'"$1"
}

@test "firewall-lib: fw_write_file writes CMD's exact output, mode 0644 whatever the umask, no temp file left" {
  local d="$TEST_TMP/w"
  mkdir -p "$d"
  run lib "umask 077; fw_write_file $d/f printf '%s' 'no newline'"
  assert_success
  [ "$(cat "$d/f")" = 'no newline' ]
  [ "$(stat -c %s "$d/f")" = 10 ]
  [ "$(stat -c %a "$d/f")" = 644 ]
  run lib "fw_write_file $d/f printf 'a\n\nb\n\n'"
  assert_success
  [ "$(od -An -c "$d/f" | tr -d ' \n')" = 'a\n\nb\n\n' ]
  # empty content
  run lib "fw_write_file $d/f :"
  assert_success
  [ -f "$d/f" ] && [ ! -s "$d/f" ]
  [ "$(stat -c %a "$d/f")" = 644 ]
  # a function's output
  run lib "FW_DOMAINS=(a.example) FW_UPSTREAMS=(10.0.0.2); fw_write_file $d/conf fw_dnsmasq_conf"
  assert_success
  grep -qx 'server=/a.example/10.0.0.2' "$d/conf"
  run ls -A "$d"
  assert_output $'conf\nf'
}

@test "firewall-lib: fw_write_file replaces the file by rename (a reader's open file keeps the old text)" {
  local d="$TEST_TMP/w"
  mkdir -p "$d"
  printf 'old\n' > "$d/f"
  exec 5< "$d/f"
  run lib "fw_write_file $d/f printf 'new\n'"
  assert_success
  [ "$(cat <&5)" = old ]
  exec 5<&-
  [ "$(cat "$d/f")" = new ]
}

@test "firewall-lib: fw_write_file fails cleanly: a failing CMD or an unwritable place leaves no file behind" {
  local d="$TEST_TMP/w"
  mkdir -p "$d"
  printf 'old\n' > "$d/f"
  run lib "f() { printf 'partial'; return 3; }; if fw_write_file $d/f f; then echo wrote; else echo failed; fi"
  assert_output failed
  [ "$(cat "$d/f")" = old ]
  run ls -A "$d"
  assert_output f
  # set -e off (`fw_write_file ... || warn`): still no partial file and a failure status
  run lib "fw_write_file $d/missing/f printf x 2> /dev/null || warn 'could not save'"
  assert_success
  assert_output 'lib: warning: could not save'
  [ ! -e "$d/missing" ]
}

@test "firewall-lib: fw_write_file as root: the file is root's even in a setgid directory of another group" {
  [ "$EUID" -eq 0 ] || fail "this test needs root (CI runs the bats suite as root)"
  local d="$TEST_TMP/sgid"
  mkdir -p "$d"
  chgrp 1234 "$d"
  chmod 2775 "$d"
  run lib "fw_write_file $d/f printf 'x\n'"
  assert_success
  [ "$(stat -c '%u:%g %a' "$d/f")" = '0:0 644' ]
}

@test "firewall-lib: fw_read_file, fw_read_lines and fw_last_line read like cat, grep -v blank and tail -n 1" {
  printf 'legacy\n\n\n' > "$TEST_TMP/a"
  printf '  \n10.0.0.2\n\t\nfd00::53' > "$TEST_TMP/b"
  run lib "fw_read_file v $TEST_TMP/a; printf '[%s]' \"\$v\"; fw_read_file v $TEST_TMP/none; printf '[%s]' \"\$v\""
  assert_output '[legacy][]'
  run lib "fw_read_lines arr $TEST_TMP/b; printf '[%s]' \"\${arr[@]}\""
  assert_output '[10.0.0.2][fd00::53]'
  run lib "fw_last_line $TEST_TMP/b; fw_last_line $TEST_TMP/a; fw_last_line $TEST_TMP/none"
  assert_output $'fd00::53\nlegacy'
}

@test "firewall-lib: fw_log writes a UTC timestamp, whatever TZ says" {
  mkdir -p "$AGENT_SANDBOX_STATE_DIR"
  # A POSIX TZ string, nine hours east of UTC: needs no tzdata, so it cannot quietly mean UTC.
  TZ=XST-9 run lib "fw_log hello world"
  assert_success
  run cat "$AGENT_SANDBOX_STATE_DIR/firewall.log"
  assert_output --regexp '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z hello world$'
  local logged now
  logged="$(cut -c1-13 "$AGENT_SANDBOX_STATE_DIR/firewall.log")"
  now="$(date -u +%Y-%m-%dT%H)"
  [ "$logged" = "$now" ] || [ "$logged" = "$(date -u -d '1 minute ago' +%Y-%m-%dT%H)" ]
}

@test "resolv.conf: search/domain/options lines kept as they are, also a last line without a newline" {
  printf 'nameserver 10.0.0.2\n  domain corp.example\n#options x\nsearchx no\noptions\tndots:2' > "$AGENT_SANDBOX_RESOLV_CONF"
  run "$SCRIPT"
  assert_success
  run cat "$AGENT_SANDBOX_RESOLV_CONF"
  assert_output $'# Written by agent-sandbox init-firewall.sh: all DNS goes through dnsmasq.\nnameserver 127.0.0.1\n  domain corp.example\noptions\tndots:2'
}

@test "a pid file with junk around the pid still stops that process" {
  run "$SCRIPT"
  assert_success
  local old
  old="$(fake dnsmasq)"
  printf ' %s \nignored\n' "$old" > "$AGENT_SANDBOX_STATE_DIR/dnsmasq.pid"
  run "$SCRIPT"
  assert_success
  run alive "$old"
  assert_failure
}

@test "is shellcheck-clean" {
  command -v shellcheck > /dev/null || fail "shellcheck is not installed: scripts/setup-engine.sh installs it"
  cd "$ROOT" && run shellcheck base-image/init-firewall.sh base-image/firewall-lib.sh base-image/firewall-entries.sh \
    base-image/firewall-allow.sh base-image/firewall-status.sh base-image/root-env.sh
  assert_success
}

# gateway_env: a sandbox with an egress gateway (uid 65532, ports 19080/19443); the
# nat restore (--noflush) goes to nat4/nat6, the filter one to rules4/rules6.
gateway_env() {
  export AGENT_SANDBOX_GATEWAY_UID=65532 AGENT_SANDBOX_GATEWAY_PORTS=19080,19443
  stub iptables-restore 'if [ "${1:-}" = --noflush ]; then cat > "$TEST_TMP/nat4"; else cat > "$TEST_TMP/rules4"; fi'
  stub ip6tables-restore 'if [ "${1:-}" = --noflush ]; then cat > "$TEST_TMP/nat6"; else cat > "$TEST_TMP/rules6"; fi'
  # `-t nat -C OUTPUT -j AGENT-SANDBOX-GW` fails: the jump is not there yet
  stub iptables 'case "$*" in --version) echo "iptables v1.8.11 (nf_tables)" ;; "-S"*) echo "-P OUTPUT DROP" ;; "-t nat -C "*) exit 1 ;; esac'
}

@test "gateway: web traffic of every uid but the gateway's is redirected to it; 80/443 out is the gateway's alone" {
  gateway_env
  run "$SCRIPT"
  assert_success
  run cat "$TEST_TMP/nat4"
  assert_line --index 0 '*nat'
  assert_line --index 1 ':AGENT-SANDBOX-GW - [0:0]'
  assert_line --index 2 '-F AGENT-SANDBOX-GW'
  # the gateway's own connections first: never redirected to itself
  assert_line --index 3 '-A AGENT-SANDBOX-GW -m owner --uid-owner 65532 -j RETURN'
  assert_line '-A AGENT-SANDBOX-GW -p tcp -m tcp --dport 80 -m set --match-set agent-sandbox-allow4 dst -j REDIRECT --to-ports 19080'
  assert_line '-A AGENT-SANDBOX-GW -p tcp -m tcp --dport 443 -m set --match-set agent-sandbox-allow4 dst -j REDIRECT --to-ports 19443'
  assert_line '-A AGENT-SANDBOX-GW -p tcp -m tcp --dport 443 -m set --match-set agent-sandbox-net4 dst -j REDIRECT --to-ports 19443'
  # the jump from OUTPUT is added once (the stub's -C fails: not there yet)
  run grep -F 'iptables -t nat -I OUTPUT 1 -j AGENT-SANDBOX-GW' "$STUB_LOG"
  assert_success
  # filter: the redirected connections accepted, then 80/443 of allowlisted
  # addresses for the gateway's uid only; another uid's (not redirected: a rule
  # lost) goes on to the logged refusal at the end, like any other port.
  accept="$(line_no '-A OUTPUT -d 127.0.0.1/32 -p tcp -m multiport --dports 19080,19443 -j ACCEPT' "$TEST_TMP/rules4")"
  gw="$(line_no '-A OUTPUT -p tcp -m multiport --dports 80,443 -m owner --uid-owner 65532 -m set --match-set agent-sandbox-allow4 dst -j ACCEPT' "$TEST_TMP/rules4")"
  run grep -cF -- '-A OUTPUT -p tcp -m multiport --dports 80,443 -m owner --uid-owner 65532 -m set --match-set agent-sandbox-net4 dst -j ACCEPT' "$TEST_TMP/rules4"
  assert_output 1
  run grep -cF -- '--dports 80,443' "$TEST_TMP/rules4"
  assert_output 2
  run grep -E -- '-m set --match-set agent-sandbox-(allow4|net4) dst -j ACCEPT' "$TEST_TMP/rules4"
  refute_line --regexp '^-A OUTPUT (-m set|-p tcp -m multiport --dports 80,443 -m set)'
  nflog="$(line_no '-A OUTPUT -m limit --limit 20/s -j NFLOG --nflog-group 42 --nflog-prefix agent-sandbox-deny' "$TEST_TMP/rules4")"
  reject="$(line_no '-A OUTPUT -p tcp -j REJECT --reject-with tcp-reset' "$TEST_TMP/rules4")"
  [ -n "$accept" ] && [ -n "$gw" ] && [ -n "$nflog" ] && [ -n "$reject" ]
  ((accept < gw && gw < nflog && nflog < reject))
}

@test "gateway: IPv6 gets the same redirects to ::1" {
  gateway_env
  ipv6 on
  run "$SCRIPT"
  assert_success
  run cat "$TEST_TMP/nat6"
  assert_line '-A AGENT-SANDBOX-GW -p tcp -m tcp --dport 443 -m set --match-set agent-sandbox-allow6 dst -j REDIRECT --to-ports 19443'
  run grep -F -- '-A OUTPUT -d ::1/128 -p tcp -m multiport --dports 19080,19443 -j ACCEPT' "$TEST_TMP/rules6"
  assert_success
}

@test "gateway: without one, nothing is added to nat and 80/443 of allowlisted addresses are open to every uid" {
  run "$SCRIPT"
  assert_success
  [ ! -e "$TEST_TMP/nat4" ]
  run grep -F -- '--dports 80,443' "$TEST_TMP/rules4"
  assert_output "-A OUTPUT -p tcp -m multiport --dports 80,443 -m set --match-set agent-sandbox-allow4 dst -j ACCEPT
-A OUTPUT -p tcp -m multiport --dports 80,443 -m set --match-set agent-sandbox-net4 dst -j ACCEPT"
  run grep -F -- '--uid-owner 65532' "$TEST_TMP/rules4"
  assert_failure
  run grep -F -- '-j REDIRECT' "$TEST_TMP/rules4"
  assert_failure
}

@test "gateway: the agent may not have the gateway's uid, and the ports must be two ports; nothing is loaded" {
  gateway_env
  stub id 'case "$*" in "-u dnsmasq") echo 999 ;; "-u node") echo 65532 ;; *) exec /usr/bin/id "$@" ;; esac'
  run "$SCRIPT"
  assert_failure
  assert_output --partial "init-firewall: user node has the gateway's uid 65532: its web traffic would bypass the gateway"
  assert_nothing_loaded
  stub id 'if [ "$*" = "-u dnsmasq" ]; then echo 999; else exec /usr/bin/id "$@"; fi'
  export AGENT_SANDBOX_GATEWAY_PORTS=19080
  run "$SCRIPT"
  assert_failure
  assert_output --partial "AGENT_SANDBOX_GATEWAY_PORTS must be two ports, HTTP,TLS: '19080'"
  assert_nothing_loaded
}

@test "gateway: redirects that cannot be loaded are fatal" {
  gateway_env
  stub iptables-restore 'if [ "${1:-}" = --noflush ]; then echo "iptables-restore: line 2 failed" >&2; exit 1; fi; cat > "$TEST_TMP/rules4"'
  run "$SCRIPT"
  assert_failure
  assert_output --partial "init-firewall: cannot load the egress gateway's IPv4 redirects: iptables-restore: line 2 failed"
}

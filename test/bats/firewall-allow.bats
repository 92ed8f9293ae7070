#!/usr/bin/env bats
# base-image/firewall-allow.sh on state made by init-firewall.sh, all tools stubbed.

load test_helper

SCRIPT="$ROOT/base-image/firewall-allow.sh"

setup() {
  common_setup
  export AGENT_SANDBOX_LIB_DIR="$ROOT/base-image"
  export AGENT_SANDBOX_STATE_DIR="$TEST_TMP/state"
  export AGENT_SANDBOX_RESOLV_CONF="$TEST_TMP/resolv.conf"
  export AGENT_SANDBOX_PERSIST_DIR="$TEST_TMP/persist"
  export AGENT_SANDBOX_IPV6_CONF_DIR="$TEST_TMP/ipv6conf"
  export AGENT_SANDBOX_GITHUB_META=0
  printf 'one.example\n*.two.example\n' > "$TEST_TMP/defaults.txt"
  export AGENT_SANDBOX_DEFAULT_DOMAINS_FILE="$TEST_TMP/defaults.txt"
  unset AGENT_SANDBOX_ALLOW_DOMAINS AGENT_SANDBOX_INBOUND_PORTS
  printf 'nameserver 127.0.0.11\n' > "$AGENT_SANDBOX_RESOLV_CONF"
  stub id 'if [ "$*" = "-u dnsmasq" ]; then echo 999; else exec /usr/bin/id "$@"; fi'
  stub ipset
  stub dnsmasq
  stub iptables-restore 'cat > /dev/null'
  stub ip6tables-restore 'cat > /dev/null'
  stub iptables-legacy-restore 'cat > /dev/null'
  stub ip6tables-legacy-restore 'cat > /dev/null'
  stub iptables 'case "$1" in -S) echo "-P OUTPUT DROP" ;; esac'
  stub iptables-legacy
  stub ip6tables
  stub ip6tables-legacy
  stub dig 'echo ";; ->>HEADER<<- opcode: QUERY, status: NXDOMAIN, id: 4242"'
  stub tcpdump 'exit 0'
  stub curl 'exit 7'
  "$ROOT/base-image/init-firewall.sh" > /dev/null 2>&1
  : > "$STUB_LOG"
}

teardown() {
  if [ -f "$TEST_TMP/fake.pid" ]; then kill "$(cat "$TEST_TMP/fake.pid")" 2> /dev/null || true; fi
  common_teardown
}

@test "adds domains, rewrites dnsmasq.conf and restarts dnsmasq" {
  mkdir -p "$TEST_TMP/fake"
  cp "$(command -v sleep)" "$TEST_TMP/fake/dnsmasq"
  "$TEST_TMP/fake/dnsmasq" 30 < /dev/null > /dev/null 2>&1 3>&- &
  local old=$!
  echo "$old" > "$TEST_TMP/fake.pid"
  echo "$old" > "$AGENT_SANDBOX_STATE_DIR/dnsmasq.pid"
  run "$SCRIPT" New.Example '*.three.example'
  assert_success
  assert_output $'firewall-allow: added new.example\nfirewall-allow: added *.three.example'
  run cat "$AGENT_SANDBOX_STATE_DIR/allowlist"
  assert_output $'one.example\n*.two.example\nnew.example\n*.three.example'
  run cat "$AGENT_SANDBOX_STATE_DIR/dnsmasq.conf"
  assert_line 'server=/new.example/127.0.0.11'
  assert_line 'ipset=/three.example/agent-sandbox-allow4,agent-sandbox-allow6'
  assert_line 'server=/one.example/127.0.0.11'
  assert_line --index $((${#lines[@]} - 1)) 'address=/#/'
  [ ! -e "/proc/$old/stat" ] || grep -q ') Z ' "/proc/$old/stat"
  grep -q "^dnsmasq --conf-file=$AGENT_SANDBOX_STATE_DIR/dnsmasq.conf --pid-file=$AGENT_SANDBOX_STATE_DIR/dnsmasq.pid\$" "$STUB_LOG"
  grep -qx 'dig @127.0.0.1 +time=1 +tries=1 agent-sandbox-selftest.invalid' "$STUB_LOG"
  # the firewall rules and ipsets are not touched
  run grep -E '^(ipset|iptables|ip6tables)' "$STUB_LOG"
  assert_failure
  grep -q 'firewall-allow: added new.example' "$AGENT_SANDBOX_STATE_DIR/firewall.log"
}

@test "already allowed domains (also as wildcards) are reported and dnsmasq is left alone" {
  run "$SCRIPT" one.example '*.one.example' two.example
  assert_success
  assert_output $'firewall-allow: one.example is already allowed\nfirewall-allow: *.one.example is already allowed\nfirewall-allow: two.example is already allowed'
  run grep '^dnsmasq' "$STUB_LOG"
  assert_failure
}

@test "an argument repeated on the command line is added once" {
  run "$SCRIPT" dup.example dup.example
  assert_success
  assert_output $'firewall-allow: added dup.example\nfirewall-allow: dup.example is already allowed'
  run grep -c '^dup.example$' "$AGENT_SANDBOX_STATE_DIR/allowlist"
  assert_output 1
}

@test "an invalid domain fails and nothing changes" {
  local before d
  before="$(cat "$AGENT_SANDBOX_STATE_DIR/allowlist")"
  for d in 'a b' '$(x)' '..' 'ok.example;rm' '' '1.2.3.4'; do
    run "$SCRIPT" good.example "$d"
    assert_failure
    assert_output "firewall-allow: invalid entry '$d' in arguments: expected a hostname like example.com or *.example.com, optionally with :PORT or :PORT/udp (e.g. github.com:22)"
  done
  [ "$(cat "$AGENT_SANDBOX_STATE_DIR/allowlist")" = "$before" ]
  run grep '^dnsmasq' "$STUB_LOG"
  assert_failure
}

@test "a new port: its ipsets, one AGENT-SANDBOX-PORTS rule (only once), and dnsmasq feeds its sets" {
  stub iptables 'case "$1" in -C) exit 1 ;; -S) echo "-P OUTPUT DROP" ;; esac'
  stub ip6tables 'case "$1" in -S) exit 1 ;; esac'
  stub ipset 'cat >> "$TEST_TMP/ipset-in"'
  run "$SCRIPT" db.one.example:5432 'dns.example:853/UDP' one.example
  assert_success
  assert_output $'firewall-allow: added db.one.example:5432\nfirewall-allow: added dns.example:853/udp\nfirewall-allow: one.example is already allowed'
  run cat "$TEST_TMP/ipset-in"
  assert_line 'create agent-sandbox-tcp5432-4 hash:ip family inet'
  assert_line 'create agent-sandbox-udp853-6 hash:ip family inet6'
  run grep '^iptables -A' "$STUB_LOG"
  assert_line 'iptables -A AGENT-SANDBOX-PORTS -p tcp -m tcp --dport 5432 -m set --match-set agent-sandbox-tcp5432-4 dst -j ACCEPT'
  assert_line 'iptables -A AGENT-SANDBOX-PORTS -p udp -m udp --dport 853 -m set --match-set agent-sandbox-udp853-4 dst -j ACCEPT'
  # IPv6 has no rules loaded (disabled): nothing added there.
  run grep '^ip6tables -A' "$STUB_LOG"
  assert_failure
  run cat "$AGENT_SANDBOX_STATE_DIR/dnsmasq.conf"
  assert_line 'ipset=/db.one.example/agent-sandbox-tcp5432-4,agent-sandbox-tcp5432-6,agent-sandbox-allow4,agent-sandbox-allow6'
  assert_line 'ipset=/dns.example/agent-sandbox-udp853-4,agent-sandbox-udp853-6'
  # A rule already there (-C succeeds) is not added twice.
  stub iptables 'case "$1" in -C) exit 0 ;; esac'
  : > "$STUB_LOG"
  run "$SCRIPT" other.example:5432
  assert_success
  run grep '^iptables -A' "$STUB_LOG"
  assert_failure
}

@test "TCP 80 or 443 as a port entry is refused, naming the bare name" {
  run "$SCRIPT" api.example:443
  assert_failure
  assert_output "firewall-allow: invalid entry 'api.example:443' in arguments: TCP ports 80 and 443 are what 'api.example' alone allows (through the egress gateway); write api.example"
}

@test "no arguments prints usage" {
  run "$SCRIPT"
  assert_failure
  assert_output --partial "firewall-allow: usage: firewall-allow.sh ENTRY..."
}

@test "fails clearly when the firewall is not initialised" {
  AGENT_SANDBOX_STATE_DIR="$TEST_TMP/empty" run "$SCRIPT" x.example
  assert_failure
  assert_output --partial "firewall-allow: cannot write $TEST_TMP/empty"
  mkdir -p "$TEST_TMP/empty"
  AGENT_SANDBOX_STATE_DIR="$TEST_TMP/empty" run "$SCRIPT" x.example
  assert_failure
  assert_output "firewall-allow: $TEST_TMP/empty/upstream-resolvers not found: is the firewall initialised (init-firewall.sh)?"
}

@test "dnsmasq not answering after the restart is an error" {
  stub dig 'echo ";; communications error to 127.0.0.1#53: connection refused"; exit 9'
  run "$SCRIPT" new.example
  assert_failure
  assert_output --partial "firewall-allow: DNS self-test failed: dnsmasq did not answer agent-sandbox-selftest.invalid with NXDOMAIN (communications error to 127.0.0.1#53: connection refused)"
}

@test "uses the saved upstreams, not the rewritten resolv.conf" {
  grep -qx 'nameserver 127.0.0.1' "$AGENT_SANDBOX_RESOLV_CONF"
  run "$SCRIPT" new.example
  assert_success
  grep -qx 'server=/new.example/127.0.0.11' "$AGENT_SANDBOX_STATE_DIR/dnsmasq.conf"
}

@test "dnsmasq failing to restart is an error with its message, and no temp file is left" {
  export TMPDIR="$TEST_TMP/tmpdir"
  mkdir -p "$TMPDIR"
  stub dnsmasq 'echo "dnsmasq: bad option at line 3" >&2; echo >&2; exit 1'
  run "$SCRIPT" new.example
  assert_failure
  assert_output "firewall-allow: dnsmasq failed to start: dnsmasq: bad option at line 3"
  run ls -A "$TMPDIR" "$AGENT_SANDBOX_STATE_DIR"
  refute_output --regexp '\.[0-9]+\.[0-9]+$|^tmp\.'
}

@test "state files it rewrites stay 0644, whatever the caller's umask" {
  umask 077
  run "$SCRIPT" new.example
  assert_success
  local f
  for f in allowlist dnsmasq.conf upstream-resolvers; do
    [ "$(stat -c %a "$AGENT_SANDBOX_STATE_DIR/$f")" = 644 ] || { echo "$f: $(stat -c %a "$AGENT_SANDBOX_STATE_DIR/$f")"; false; }
  done
  [ "$(stat -c %a "$AGENT_SANDBOX_PERSIST_DIR/upstream-resolvers")" = 644 ]
}

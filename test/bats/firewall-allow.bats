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
  # Reads what `ipset restore` is given: a stub that exits first breaks the writer's pipe (pipefail).
  stub ipset 'case " $* " in *" restore "*) cat > /dev/null ;; esac'
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
  assert_output --partial "firewall-allow: usage: firewall-allow.sh [--until EPOCH] [--limited] ENTRY..."
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

# ---- grants: --until, renewal, expiry ---------------------------------------

@test "--until: the entry is added, its grant recorded, and one detached expirer started for it" {
  stub setsid
  run "$SCRIPT" --until 4000000000 timed.example db.example:5432
  assert_success
  assert_output $'firewall-allow: added timed.example\nfirewall-allow: added db.example:5432'
  run sort "$AGENT_SANDBOX_STATE_DIR/grants"
  assert_output $'db.example:5432 4000000000\ntimed.example 4000000000'
  run grep '^setsid' "$STUB_LOG"
  assert_output $"setsid -f $SCRIPT --expire timed.example 4000000000
setsid -f $SCRIPT --expire db.example:5432 4000000000"
  grep -q 'firewall-allow: added timed.example (until 2096-10-02T07:06:40Z)' "$AGENT_SANDBOX_STATE_DIR/firewall.log"
  [ "$(stat -c %a "$AGENT_SANDBOX_STATE_DIR/grants")" = 644 ]
}

@test "without --until a grant lasts for the sandbox's life: recorded, no expirer" {
  stub setsid
  run "$SCRIPT" lasting.example
  assert_success
  [ "$(cat "$AGENT_SANDBOX_STATE_DIR/grants")" = 'lasting.example 0' ]
  run grep '^setsid' "$STUB_LOG"
  assert_failure
  grep -q "firewall-allow: added lasting.example (for the sandbox's life)" "$AGENT_SANDBOX_STATE_DIR/firewall.log"
}

@test "granting an entry again replaces its grant; one the defaults allow stays theirs, with no grant" {
  stub setsid
  run "$SCRIPT" --until 4000000000 again.example
  assert_success
  run "$SCRIPT" '*.again.example' one.example
  assert_success
  assert_output $'firewall-allow: renewed again.example\nfirewall-allow: one.example is already allowed'
  [ "$(cat "$AGENT_SANDBOX_STATE_DIR/grants")" = 'again.example 0' ]
  # The same lasting grant again: nothing to replace.
  run "$SCRIPT" again.example
  assert_output 'firewall-allow: again.example is already allowed'
  # A grant the gateway counts (--limited) is replaced by a lasting one, and the other way round.
  run "$SCRIPT" --limited again.example
  assert_output 'firewall-allow: renewed again.example'
  [ "$(cat "$AGENT_SANDBOX_STATE_DIR/grants")" = 'again.example 0 limited' ]
  run "$SCRIPT" again.example
  assert_output 'firewall-allow: renewed again.example'
  [ "$(cat "$AGENT_SANDBOX_STATE_DIR/grants")" = 'again.example 0' ]
  run grep -c '^again.example$' "$AGENT_SANDBOX_STATE_DIR/allowlist"
  assert_output 1
  run "$SCRIPT" --until 4000000100 again.example one.example
  assert_output $'firewall-allow: renewed again.example\nfirewall-allow: one.example is already allowed'
  [ "$(cat "$AGENT_SANDBOX_STATE_DIR/grants")" = 'again.example 4000000100' ]
  grep -q 'firewall-allow: renewed again.example (until ' "$AGENT_SANDBOX_STATE_DIR/firewall.log"
}

@test "--until takes epoch seconds only; nothing changes otherwise" {
  local before
  before="$(cat "$AGENT_SANDBOX_STATE_DIR/allowlist")"
  for bad in '' soon -5 0 1.5; do
    run "$SCRIPT" --until "$bad" x.example
    assert_failure
    assert_output "firewall-allow: --until takes the epoch seconds the grant expires at, not '$bad'"
  done
  [ "$(cat "$AGENT_SANDBOX_STATE_DIR/allowlist")" = "$before" ]
  [ ! -e "$AGENT_SANDBOX_STATE_DIR/grants" ]
}

@test "--expire: the entry leaves the allowlist and dnsmasq, its grant goes, and the log says so" {
  stub setsid
  run "$SCRIPT" --until 1000 gone.example kept.example
  assert_success
  : > "$STUB_LOG"
  run "$SCRIPT" --expire gone.example 1000
  assert_success
  run cat "$AGENT_SANDBOX_STATE_DIR/allowlist"
  assert_output $'one.example\n*.two.example\nkept.example'
  run grep -c 'gone.example' "$AGENT_SANDBOX_STATE_DIR/dnsmasq.conf"
  assert_output 0
  grep -qx 'server=/kept.example/127.0.0.11' "$AGENT_SANDBOX_STATE_DIR/dnsmasq.conf"
  [ "$(cat "$AGENT_SANDBOX_STATE_DIR/grants")" = 'kept.example 1000' ]
  grep -q '^dnsmasq --conf-file=' "$STUB_LOG"
  grep -q 'firewall-allow: the grant of gone.example expired (until 1970-01-01T00:16:40Z): its names are refused again' "$AGENT_SANDBOX_STATE_DIR/firewall.log"
}

@test "--expire of a limited grant: the entry goes all the same" {
  stub setsid
  run "$SCRIPT" --until 1000 --limited counted.example
  assert_success
  [ "$(cat "$AGENT_SANDBOX_STATE_DIR/grants")" = 'counted.example 1000 limited' ]
  run "$SCRIPT" --expire counted.example 1000
  assert_success
  run grep -c 'counted.example' "$AGENT_SANDBOX_STATE_DIR/allowlist"
  assert_output 0
}

@test "--expire does nothing when the grant was replaced meanwhile, or the entry is the defaults'" {
  stub setsid
  run "$SCRIPT" --until 1000 moved.example
  run "$SCRIPT" --until 4000000000 moved.example
  : > "$STUB_LOG"
  local allowlist
  allowlist="$(cat "$AGENT_SANDBOX_STATE_DIR/allowlist")"
  run "$SCRIPT" --expire moved.example 1000
  assert_success
  run "$SCRIPT" --expire one.example 0
  assert_success
  [ "$(cat "$AGENT_SANDBOX_STATE_DIR/allowlist")" = "$allowlist" ]
  [ "$(cat "$AGENT_SANDBOX_STATE_DIR/grants")" = 'moved.example 4000000000' ]
  [ ! -s "$STUB_LOG" ]
}

# port_sets_env: ipsets kept as files ($TEST_TMP/set.NAME: `add` appends, `flush` empties), and two
# name:PORT grants on TCP 5432 that expire at 1000.
port_sets_env() {
  stub setsid
  stub iptables 'case "$1" in -C) exit 0 ;; -S) echo "-P OUTPUT DROP" ;; esac'
  stub ipset 'case "$1" in add) echo "$3" >> "$TEST_TMP/set.$2" ;; flush) : > "$TEST_TMP/set.$2" ;; *) cat > /dev/null ;; esac'
  run "$SCRIPT" --until 1000 db.example:5432 cache.example:5432
  assert_success
  # db.example is a CNAME: dnsmasq adds the target's address under the query's sets, and logs
  # it under the target's name, which no entry covers.
  cat > "$AGENT_SANDBOX_STATE_DIR/dnsmasq.log" <<'LOG'
Nov 29 13:00:00 dnsmasq[12]: query[A] db.example from 127.0.0.1
Nov 29 13:00:00 dnsmasq[12]: forwarded db.example to 127.0.0.11
Nov 29 13:00:00 dnsmasq[12]: reply db.example is <CNAME>
Nov 29 13:00:00 dnsmasq[12]: reply db.cdn.example is 10.0.0.8
Nov 29 13:00:01 dnsmasq[12]: reply db.example is fd00::5
Nov 29 13:00:02 dnsmasq[12]: reply cache.example is 10.0.0.7
LOG
  printf '10.0.0.8\n10.0.0.7\n' > "$TEST_TMP/set.agent-sandbox-tcp5432-4"
  printf 'fd00::5\n' > "$TEST_TMP/set.agent-sandbox-tcp5432-6"
  printf '10.0.0.1\n' > "$TEST_TMP/set.agent-sandbox-allow4"
  : > "$STUB_LOG"
}

@test "--expire of a name:PORT entry: its port's sets are emptied (a CNAME's address too) before and after dnsmasq restarts" {
  port_sets_env
  run "$SCRIPT" --expire db.example:5432 1000
  assert_success
  [ ! -s "$TEST_TMP/set.agent-sandbox-tcp5432-4" ]
  [ ! -s "$TEST_TMP/set.agent-sandbox-tcp5432-6" ]
  # The web sets are not the port's: left alone.
  [ "$(cat "$TEST_TMP/set.agent-sandbox-allow4")" = 10.0.0.1 ]
  # First the sets, then dnsmasq, then the sets again (the old dnsmasq may have answered in between).
  run grep -E '^(ipset|dnsmasq)' "$STUB_LOG"
  assert_output "ipset flush agent-sandbox-tcp5432-4
ipset flush agent-sandbox-tcp5432-6
dnsmasq --conf-file=$AGENT_SANDBOX_STATE_DIR/dnsmasq.conf --pid-file=$AGENT_SANDBOX_STATE_DIR/dnsmasq.pid
ipset flush agent-sandbox-tcp5432-4
ipset flush agent-sandbox-tcp5432-6"
  run cat "$AGENT_SANDBOX_STATE_DIR/allowlist"
  refute_line 'db.example:5432'
  assert_line 'cache.example:5432'
  # The port's other entry still feeds the sets: its addresses come back at its next lookup.
  grep -qx 'ipset=/cache.example/agent-sandbox-tcp5432-4,agent-sandbox-tcp5432-6' "$AGENT_SANDBOX_STATE_DIR/dnsmasq.conf"
  run grep -c 'db.example' "$AGENT_SANDBOX_STATE_DIR/dnsmasq.conf"
  assert_output 0
  [ "$(cat "$AGENT_SANDBOX_STATE_DIR/grants")" = 'cache.example:5432 1000' ]
}

@test "--expire with a failing DNS self-test: the entry and its addresses go all the same, and the log says so" {
  port_sets_env
  stub dig 'echo ";; communications error to 127.0.0.1#53: timed out"; exit 9'
  run "$SCRIPT" --expire db.example:5432 1000
  assert_success
  [ ! -s "$TEST_TMP/set.agent-sandbox-tcp5432-4" ]
  [ ! -s "$TEST_TMP/set.agent-sandbox-tcp5432-6" ]
  run grep -c 'db.example' "$AGENT_SANDBOX_STATE_DIR/allowlist" "$AGENT_SANDBOX_STATE_DIR/grants"
  assert_output "$AGENT_SANDBOX_STATE_DIR/allowlist:0
$AGENT_SANDBOX_STATE_DIR/grants:0"
  grep -q 'firewall-allow: warning: DNS self-test failed after the expiry of db.example:5432: dnsmasq did not answer agent-sandbox-selftest.invalid with NXDOMAIN (communications error to 127.0.0.1#53: timed out)' "$AGENT_SANDBOX_STATE_DIR/firewall.log"
  grep -q 'firewall-allow: the grant of db.example:5432 expired' "$AGENT_SANDBOX_STATE_DIR/firewall.log"
}

@test "--expire: a step that fails is logged and the whole removal tried again" {
  port_sets_env
  stub sleep
  # dnsmasq cannot start the first time (a flooded or forkless sandbox), then can.
  stub dnsmasq 'if [ ! -e "$TEST_TMP/dnsmasq-failed" ]; then : > "$TEST_TMP/dnsmasq-failed"; echo "dnsmasq: cannot fork" >&2; exit 5; fi'
  run "$SCRIPT" --expire db.example:5432 1000
  assert_success
  run grep -c '^dnsmasq' "$STUB_LOG"
  assert_output 2
  grep -qx 'sleep 1' "$STUB_LOG"
  local log="$AGENT_SANDBOX_STATE_DIR/firewall.log"
  grep -q 'firewall-allow: warning: removing the expired grant of db.example:5432: dnsmasq failed to start: dnsmasq: cannot fork' "$log"
  grep -q 'firewall-allow: warning: try 1 of 3 to remove the expired grant of db.example:5432 failed (status 1)' "$log"
  grep -q 'firewall-allow: the grant of db.example:5432 expired' "$log"
  run grep -c 'db.example' "$AGENT_SANDBOX_STATE_DIR/allowlist" "$AGENT_SANDBOX_STATE_DIR/grants"
  assert_output "$AGENT_SANDBOX_STATE_DIR/allowlist:0
$AGENT_SANDBOX_STATE_DIR/grants:0"
}

@test "--expire that fails every try: the addresses are out all the same, the grant line stays, and the log says so" {
  port_sets_env
  stub sleep
  stub dnsmasq 'echo "dnsmasq: cannot fork" >&2; exit 5'
  run "$SCRIPT" --expire db.example:5432 1000
  assert_failure
  [ ! -s "$TEST_TMP/set.agent-sandbox-tcp5432-4" ]
  [ ! -s "$TEST_TMP/set.agent-sandbox-tcp5432-6" ]
  run grep -c '^dnsmasq' "$STUB_LOG"
  assert_output 3
  run grep -c 'firewall-allow: warning: try [123] of 3 to remove the expired grant of db.example:5432 failed' "$AGENT_SANDBOX_STATE_DIR/firewall.log"
  assert_output 3
  grep -q "firewall-allow: error: the expired grant of db.example:5432 is not removed (its line stays in $AGENT_SANDBOX_STATE_DIR/grants; firewall-allow --expire db.example:5432 1000 as root tries again)" "$AGENT_SANDBOX_STATE_DIR/firewall.log"
  grep -qx 'db.example:5432 1000' "$AGENT_SANDBOX_STATE_DIR/grants"
  run grep -c 'expired (until' "$AGENT_SANDBOX_STATE_DIR/firewall.log"
  assert_output 0
}

@test "the expirer wakes at least once a minute and counts by the wall clock (time passed while suspended counts)" {
  stub setsid
  run "$SCRIPT" --until 1300 clock.example
  assert_success
  echo 1000 > "$TEST_TMP/clock"
  stub date 'if [ "$1" = +%s ]; then cat "$TEST_TMP/clock"; else exec /usr/bin/date "$@"; fi'
  # Each sleep moves the clock by its length; the first one also by 100 s the machine spent suspended.
  stub sleep 'read -r t < "$TEST_TMP/clock"; if [ ! -e "$TEST_TMP/suspended" ]; then : > "$TEST_TMP/suspended"; t=$((t + 100)); fi; echo $((t + $1)) > "$TEST_TMP/clock"'
  : > "$STUB_LOG"
  run "$SCRIPT" --expire clock.example 1300
  assert_success
  run grep '^sleep' "$STUB_LOG"
  assert_output $'sleep 60\nsleep 60\nsleep 60\nsleep 20'
  [ "$(cat "$TEST_TMP/clock")" = 1300 ]
  run grep -c 'clock.example' "$AGENT_SANDBOX_STATE_DIR/allowlist"
  assert_output 0
  grep -q 'firewall-allow: the grant of clock.example expired' "$AGENT_SANDBOX_STATE_DIR/firewall.log"
}

@test "the detached expirer sleeps until the grant expires, then removes the entry" {
  local now
  printf -v now '%(%s)T' -1
  run "$SCRIPT" --until "$((now + 1))" brief.example
  assert_success
  grep -qx 'brief.example' "$AGENT_SANDBOX_STATE_DIR/allowlist"
  # Polled with a generous deadline: the expiry is the process's to keep, not this test's to time.
  # Its log line is its last step.
  local i
  for ((i = 0; i < 300; i++)); do
    ! grep -q 'firewall-allow: the grant of brief.example expired' "$AGENT_SANDBOX_STATE_DIR/firewall.log" || break
    sleep 0.1
  done
  grep -q 'firewall-allow: the grant of brief.example expired' "$AGENT_SANDBOX_STATE_DIR/firewall.log"
  run grep -c 'brief.example' "$AGENT_SANDBOX_STATE_DIR/allowlist"
  assert_output 0
  [ "$(cat "$AGENT_SANDBOX_STATE_DIR/grants")" = '' ]
}

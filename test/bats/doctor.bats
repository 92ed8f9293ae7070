#!/usr/bin/env bats
# base-image/doctor.sh with every probe stubbed: `timeout` runs the stubbed tool,
# and each tool's behaviour is chosen per test through BEH_* variables. No real
# connection, DNS query, socket or firewall change is made.

load test_helper

SCRIPT="$ROOT/base-image/doctor.sh"

setup() {
  common_setup
  export AGENT_SANDBOX_NETWORK=firewall
  export AGENT_SANDBOX_STATE_DIR="$TEST_TMP/state"
  export AGENT_SANDBOX_RESOLV_CONF="$TEST_TMP/resolv.conf"
  export AGENT_SANDBOX_DOCTOR_PROC="$TEST_TMP/status"
  export AGENT_SANDBOX_DOCTOR_TIMEOUT=2
  export AGENT_SANDBOX_DOCTOR_LOG_WAIT=0
  local s="$AGENT_SANDBOX_STATE_DIR"
  mkdir -p "$s"
  : > "$s/ready"
  printf 'registry.npmjs.org\ngithub.com\n' > "$s/allowlist"
  echo 127.0.0.11 > "$s/upstream-resolvers"
  echo nft > "$s/backend"
  echo 4242 > "$s/dnsmasq.pid"
  : > "$s/denied.log"
  printf '# Written by agent-sandbox\nnameserver 127.0.0.1\noptions ndots:0\n' > "$AGENT_SANDBOX_RESOLV_CONF"
  printf 'Name:\tbash\nCapInh:\t0000000000000000\nCapEff:\t0000000000000000\nNoNewPrivs:\t1\n' > "$AGENT_SANDBOX_DOCTOR_PROC"
  export IP_GW4=10.9.0.1 IP_GW6="" IP_ROUTES=""

  stub id 'echo 1000'
  stub hostname 'echo c0ffee123456'
  stub timeout '[ "$1" = -k ] && shift 2; shift; exec "$@"'
  stub ip 'case "$*" in
  "-4 route show default") [ -z "$IP_GW4" ] || echo "default via $IP_GW4 dev eth0" ;;
  "-6 route show default") [ -z "$IP_GW6" ] || echo "default via $IP_GW6 dev eth0 metric 1024 pref medium" ;;
  "-6 addr show scope global") [ -z "${IP_ADDR6:-}" ] || echo "    inet6 $IP_ADDR6/64 scope global" ;;
  "-4 route show" | "-6 route show") [ -z "$IP_ROUTES" ] || echo "$IP_ROUTES" ;;
  "link set dev lo mtu "*) [ "${BEH_NETADMIN:-refused}" = ok ] || { echo "RTNETLINK answers: Operation not permitted" >&2; exit 2; } ;;
  *) echo "ip stub: unexpected $*" >&2; exit 99 ;;
esac'
  # `bash -c` runs the /dev/tcp and /dev/udp attempts; anything else is the real bash
  # (the stubs themselves start with `#!/usr/bin/env bash`).
  cat > "$STUB_BIN/bash" << 'STUB'
#!/bin/bash
[ "${1:-}" = -c ] || exec /bin/bash "$@"
printf 'bash %s\n' "$*" >> "$STUB_LOG"
host="$3" port="$4"
case "$2" in
  *dev/tcp*)
    case "${BEH_TCP:-refused-logged}" in
      connected) exit 0 ;;
      timeout) exit 124 ;;
      unreachable) echo "bash: connect: Network is unreachable" >&2; exit 1 ;;
      refused) ;;
      refused-logged) printf '00:00:00.000001 IP 10.9.0.2.40000 > %s.%s: tcp 0\n' "${host%%\%*}" "$port" >> "$AGENT_SANDBOX_STATE_DIR/denied.log" ;;
      refused-late)
        (sleep 1; printf '00:00:01.000001 IP 10.9.0.2.40000 > %s.%s: tcp 0\n' "$host" "$port" >> "$AGENT_SANDBOX_STATE_DIR/denied.log") > /dev/null 2>&1 &
        ;;
    esac
    echo "bash: connect: Connection refused" >&2
    echo "bash: line 1: /dev/tcp/$host/$port: Connection refused" >&2
    exit 1
    ;;
  *dev/udp*)
    [ "${BEH_UDP:-eperm}" = sent ] && exit 0
    [ "${BEH_UDP:-eperm}" = unreachable ] && { echo "bash: connect: Network is unreachable" >&2; exit 1; }
    echo "bash: line 1: printf: write error: Operation not permitted" >&2
    exit 1
    ;;
esac
exit 98
STUB
  chmod +x "$STUB_BIN/bash"
  stub dig 'server=127.0.0.1 proto=UDP
for a in "$@"; do case "$a" in @*) server="${a#@}" ;; +tcp) proto=TCP ;; esac; done
if [ "$server" = 127.0.0.1 ]; then
  case "${BEH_DIG_LOCAL:-nxdomain}" in
    nxdomain) status=NXDOMAIN ;;
    noerror) status=NOERROR ;;
    elsewhere) status=NXDOMAIN server=8.8.8.8 ;;
    silent) echo ";; communications error to 127.0.0.1#53: timed out"; echo ";; no servers could be reached"; exit 9 ;;
  esac
  printf ";; Got answer:\n;; ->>HEADER<<- opcode: QUERY, status: %s, id: 1\n;; SERVER: %s#53(%s) (%s)\n" "$status" "$server" "$server" "$proto"
  exit 0
fi
if [ "${BEH_DIG_DIRECT:-refused}" = answer ]; then
  printf ";; Got answer:\n;; ->>HEADER<<- opcode: QUERY, status: NOERROR, id: 2\n;; SERVER: %s#53(%s) (%s)\n" "$server" "$server" "$proto"
  exit 0
fi
echo ";; communications error to $server#53: connection refused"
echo ";; no servers could be reached"
exit 9'
  # perl runs three probes: a raw socket (-MSocket), socket() of an address family
  # (the family last; exit 3 is EPERM, 4 another error) and io_uring_setup (exit 3
  # is ENOSYS). BEH_FAMILIES: the families that are not refused ("40 21" or "*");
  # BEH_FAMILY_ERR: opened (0) or another error (4); BEH_IOURING: enosys, ok, other.
  stub perl 'case "$*" in
  -MSocket*) [ "${BEH_RAW:-refused}" = ok ] && exit 0; echo "Operation not permitted" >&2; exit 1 ;;
  *"syscall(425"*) case "${BEH_IOURING:-enosys}" in enosys) exit 3 ;; ok) exit 0 ;; *) exit 4 ;; esac ;;
  *"socket(my"*)
    fam="${!#}"
    case " ${BEH_FAMILIES:-} " in *" $fam "* | " * ") exit "${BEH_FAMILY_ERR:-0}" ;; esac
    exit 3 ;;
esac
echo "perl stub: unexpected $*" >&2; exit 99'
  stub iptables '[ "${BEH_IPT:-refused}" = ok ] && exit 0; echo "iptables v1.8.11 (nf_tables): Could not fetch rule set generation id: Permission denied (you must be root)" >&2; exit 4'
  stub iptables-legacy '[ "${BEH_IPT:-refused}" = ok ] && exit 0; echo "iptables-legacy: Permission denied (you must be root)" >&2; exit 3'
  stub ipset '[ "${BEH_IPSET:-refused}" = ok ] && exit 0; echo "ipset v7.22: Kernel error received: Operation not permitted" >&2; exit 1'
  stub sh '[ "${BEH_WRITE:-refused}" = ok ] && exit 0; echo "sh: 1: cannot create $3: Permission denied" >&2; exit 2'
  stub kill '[ "${BEH_KILL:-refused}" = ok ] && exit 0; echo "kill: ($3): Operation not permitted" >&2; exit 1'
  stub sudo '[ "${BEH_SUDO:-refused}" = ok ] && exit 0; echo "sudo: a password is required" >&2; exit 1'
}

teardown() {
  common_teardown
}

doctor() {
  run /bin/bash "$SCRIPT" "$@"
}

# check NAME: the output line of check NAME ("status<TAB>name<TAB>detail").
check() {
  grep -P "^[a-z]+\t$1\t" <<< "$output"
}

assert_check() {
  local line
  line="$(check "$2")" || fail "no check $2 in: $output"
  [[ "$line" == "$1"$'\t'* ]] || fail "expected $2 to $1, got: $line"
  if [ -n "${3:-}" ]; then [[ "$line" == *"$3"* ]] || fail "expected '$3' in: $line"; fi
}

@test "a healthy sandbox: every check passes, one tab-separated line each, exit 0" {
  doctor
  assert_success
  local name
  for name in unprivileged ready tcp-gateway-80 tcp-gateway-22 udp-gateway-53 ipv6-egress resolv-conf dns-nxdomain \
    dns-direct-udp-127.0.0.11 dns-direct-tcp-127.0.0.11 raw-socket socket-families io-uring net-admin \
    iptables-write ipset-write resolv-conf-write state-write signal-dnsmasq sudo; do
    assert_check pass "$name"
  done
  [ "$(grep -cvP '^(pass|fail|skip)\t[a-z0-9.-]+\t[^\t]+$' <<< "$output")" -eq 0 ]
  assert_check pass tcp-gateway-80 'refused at once by the firewall (10.9.0.1 port 80, logged in denied.log)'
  assert_check pass dns-nxdomain 'example.com (not allowlisted)'
  assert_check pass ipv6-egress 'no IPv6 route'
}

@test "attempts are bounded by the timeout and aimed at the gateway and the resolvers only" {
  doctor
  assert_success
  run grep -c '^timeout -k 1 2 ' "$STUB_LOG"
  [ "$output" -ge 12 ]
  grep -qxF 'timeout -k 1 2 bash -c exec 3<> "/dev/tcp/$0/$1" 10.9.0.1 80' "$STUB_LOG"
  grep -qxF 'timeout -k 1 2 bash -c exec 3<> "/dev/tcp/$0/$1" 10.9.0.1 22' "$STUB_LOG"
  grep -qxF 'timeout -k 1 2 bash -c exec 3> "/dev/udp/$0/$1" && printf x >&3 10.9.0.1 53' "$STUB_LOG"
  grep -qxF 'dig +tcp +time=2 +tries=1 +retry=0 @127.0.0.11 c0ffee123456' "$STUB_LOG"
  grep -qxF 'dig +notcp +time=2 +tries=1 +retry=0 @127.0.0.11 c0ffee123456' "$STUB_LOG"
  # the changes it tries are harmless if they succeed: a new chain and set, lo's own MTU, signal 0
  grep -qxF 'iptables -w 1 -N agent-sandbox-doctor' "$STUB_LOG"
  grep -qxF 'ipset create agent-sandbox-doctor hash:ip' "$STUB_LOG"
  grep -qxF 'kill -s 0 4242' "$STUB_LOG"
  grep -qE '^ip link set dev lo mtu [0-9]+$' "$STUB_LOG"
  # no address other than the gateway and the resolvers is ever contacted
  local addr
  for addr in $(grep -E '^(bash|dig) ' "$STUB_LOG" | grep -oE '[0-9]+(\.[0-9]+){3}' | sort -u); do
    [[ "$addr" == 10.9.0.1 || "$addr" == 127.0.0.11 ]] || fail "unexpected address $addr"
  done
}

@test "TCP that connects fails the check and the run" {
  BEH_TCP=connected doctor
  assert_failure 1
  assert_check fail tcp-gateway-80 'connected to 10.9.0.1:80'
  assert_check fail tcp-gateway-22
}

@test "a refusal the firewall did not log does not count (the host refuses closed ports too)" {
  # entries from before this run are ignored
  printf '00:00:00.000001 IP 10.9.0.2.1 > 10.9.0.1.80: tcp 0\n' > "$AGENT_SANDBOX_STATE_DIR/denied.log"
  BEH_TCP=refused doctor
  assert_failure 1
  assert_check fail tcp-gateway-80 'not logged by this sandbox'
}

@test "a refusal logged a moment later (NFLOG batches) is waited for" {
  export AGENT_SANDBOX_DOCTOR_LOG_WAIT=3
  BEH_TCP=refused-late doctor
  assert_success
  assert_check pass tcp-gateway-22 'logged in denied.log'
}

@test "a silent drop (timeout) is not a fast failure" {
  BEH_TCP=timeout doctor
  assert_failure 1
  assert_check fail tcp-gateway-80 'not refused at once'
}

@test "other connect errors are reported as they are" {
  BEH_TCP=unreachable doctor
  assert_failure 1
  assert_check fail tcp-gateway-80 'Network is unreachable'
}

@test "a UDP datagram that leaves fails; EPERM passes" {
  BEH_UDP=sent doctor
  assert_failure 1
  assert_check fail udp-gateway-53 'datagram sent to 10.9.0.1 port 53'
  BEH_UDP=unreachable doctor
  assert_failure 1
  assert_check fail udp-gateway-53 'Network is unreachable'
}

@test "DNS: a non-allowlisted name must be NXDOMAIN from 127.0.0.1" {
  BEH_DIG_LOCAL=noerror doctor
  assert_failure 1
  assert_check fail dns-nxdomain 'NOERROR from 127.0.0.1'
  BEH_DIG_LOCAL=elsewhere doctor
  assert_check fail dns-nxdomain 'NXDOMAIN from 8.8.8.8'
  BEH_DIG_LOCAL=silent doctor
  assert_check fail dns-nxdomain 'no answer'
}

@test "DNS: the probe name is one the allowlist does not cover" {
  printf '*.example.com\nexample.net\n' >> "$AGENT_SANDBOX_STATE_DIR/allowlist"
  doctor
  assert_success
  assert_check pass dns-nxdomain 'example.org (not allowlisted)'
  printf 'org\n' >> "$AGENT_SANDBOX_STATE_DIR/allowlist"
  doctor
  assert_success
  assert_check skip dns-nxdomain
}

@test "DNS: resolv.conf must name 127.0.0.1 only" {
  printf 'nameserver 127.0.0.1\nnameserver 127.0.0.11\n' > "$AGENT_SANDBOX_RESOLV_CONF"
  doctor
  assert_failure 1
  assert_check fail resolv-conf "lists '127.0.0.1 127.0.0.11'"
}

@test "DNS: every upstream resolver is tried directly, over UDP and TCP; an answer fails" {
  printf '10.255.255.53\n' > "$AGENT_SANDBOX_STATE_DIR/upstream-resolvers"
  doctor
  assert_success
  assert_check pass dns-direct-udp-127.0.0.11
  assert_check pass dns-direct-tcp-10.255.255.53 'connection refused'
  BEH_DIG_DIRECT=answer doctor
  assert_failure 1
  assert_check fail dns-direct-udp-10.255.255.53 'answered a direct query over udp'
  assert_check fail dns-direct-tcp-127.0.0.11
}

@test "IPv6: with a v6 route the gateway is tried; a global address without a route fails" {
  IP_GW6=fd00:9::1 doctor
  assert_success
  assert_check pass ipv6-egress '(fd00:9::1 port 80, logged in denied.log)'
  IP_GW6=fd00:9::1 BEH_TCP=connected doctor
  assert_check fail ipv6-egress 'connected to [fd00:9::1]:80'
  IP_ADDR6=fd00:9::5 doctor
  assert_check fail ipv6-egress 'no default route'
}

@test "privileges: raw sockets, ip link, iptables, ipset, resolv.conf, state, dnsmasq, sudo" {
  local pair
  for pair in BEH_RAW:raw-socket BEH_NETADMIN:net-admin BEH_IPT:iptables-write BEH_IPSET:ipset-write \
    BEH_WRITE:resolv-conf-write BEH_WRITE:state-write BEH_KILL:signal-dnsmasq BEH_SUDO:sudo; do
    env "${pair%%:*}=ok" /bin/bash "$SCRIPT" > "$TEST_TMP/out" && fail "${pair%%:*}=ok should fail"
    output="$(cat "$TEST_TMP/out")"
    assert_check fail "${pair#*:}"
  done
}

@test "socket families: each is tried and must be refused with EPERM; opened or another error fails, naming it" {
  doctor
  assert_success
  assert_check pass socket-families 'refused (EPERM) for 9 families'
  local fam
  for fam in 40 21 29 30 31 33 41 42 43; do
    grep -qxF "perl -e socket(my \$s, \$ARGV[0], 1, 0) and exit 0; exit(\$!{EPERM} ? 3 : 4) $fam" "$STUB_LOG" ||
      fail "family $fam was not tried"
  done
  BEH_FAMILIES=40 doctor
  assert_failure 1
  assert_check fail socket-families 'for address families 40 (40 is AF_VSOCK)'
  BEH_FAMILIES='21 43' BEH_FAMILY_ERR=4 doctor
  assert_failure 1
  assert_check fail socket-families 'for address families 21 43 '
}

@test "io_uring: ENOSYS passes; io_uring_setup that succeeds or fails otherwise is a failure" {
  doctor
  assert_check pass io-uring 'io_uring_setup refused (ENOSYS)'
  BEH_IOURING=ok doctor
  assert_failure 1
  assert_check fail io-uring 'not refused by the seccomp profile'
  BEH_IOURING=eperm doctor
  assert_failure 1
  assert_check fail io-uring 'not refused by the seccomp profile'
}

@test "a chain or set it managed to create is removed again" {
  BEH_IPT=ok BEH_IPSET=ok doctor
  assert_failure 1
  grep -qxF 'iptables -w 1 -X agent-sandbox-doctor' "$STUB_LOG"
  grep -qxF 'ipset destroy agent-sandbox-doctor' "$STUB_LOG"
}

@test "the legacy backend's iptables is the one tried" {
  echo legacy > "$AGENT_SANDBOX_STATE_DIR/backend"
  doctor
  assert_success
  grep -qxF 'iptables-legacy -w 1 -N agent-sandbox-doctor' "$STUB_LOG"
}

@test "dnsmasq not running is a failure" {
  rm "$AGENT_SANDBOX_STATE_DIR/dnsmasq.pid"
  doctor
  assert_failure 1
  assert_check fail signal-dnsmasq 'not running'
}

@test "root, capabilities or a missing no-new-privileges fail 'unprivileged'" {
  stub id 'echo 0'
  doctor
  assert_check fail unprivileged 'running as root'
  stub id 'echo 1000'
  sed -i 's/^CapEff:.*/CapEff:\t0000000000003000/' "$AGENT_SANDBOX_DOCTOR_PROC"
  doctor
  assert_check fail unprivileged 'CapEff 0000000000003000'
  sed -i 's/^CapEff:.*/CapEff:\t0000000000000000/; s/^NoNewPrivs:.*/NoNewPrivs:\t0/' "$AGENT_SANDBOX_DOCTOR_PROC"
  doctor
  assert_failure 1
  assert_check fail unprivileged 'without no-new-privileges'
}

@test "set-up not finished or failed" {
  rm "$AGENT_SANDBOX_STATE_DIR/ready"
  doctor
  assert_failure 1
  assert_check fail ready 'ready missing'
  echo 'firewall set-up failed: no iptables' > "$AGENT_SANDBOX_STATE_DIR/failed"
  doctor
  assert_check fail ready 'set-up failed: firewall set-up failed: no iptables'
}

@test "network mode none: no route passes, a route fails, no egress is attempted" {
  export AGENT_SANDBOX_NETWORK=none IP_GW4=""
  doctor
  assert_success
  assert_check pass no-route
  run grep -E '^(bash|dig) ' "$STUB_LOG"
  assert_output ''
  IP_ROUTES='default via 10.9.0.1 dev eth0' doctor
  assert_failure 1
  assert_check fail no-route 'default via 10.9.0.1'
}

@test "network mode open: reported as a failure, nothing is attempted" {
  AGENT_SANDBOX_NETWORK=open doctor
  assert_failure 1
  assert_check fail egress 'not filtered'
  run grep -E '^(bash|dig) ' "$STUB_LOG"
  assert_output ''
}

@test "without nested containers: user namespaces refused pass; allowed (an engine that allows them) is a skip" {
  stub unshare 'echo "unshare: unshare failed: Operation not permitted" >&2; exit 1'
  doctor
  assert_success
  assert_check pass userns 'user namespaces refused (unshare failed: Operation not permitted)'
  stub unshare 'exit 0'
  doctor
  assert_check skip userns 'nested containers are off'
}

@test "with nested containers: the storage driver, the engine's answer and node's devices" {
  export AGENT_SANDBOX_NESTED=1
  echo overlay > "$AGENT_SANDBOX_STATE_DIR/nested-storage"
  stub curl 'echo OK'
  stub stat 'echo "1000 600"'
  doctor
  assert_success
  assert_check pass nested-storage 'with the overlay driver'
  assert_check pass nested-engine 'rootless Podman answers'
  assert_check pass nested-devices '0600'
  run grep '^unshare' "$STUB_LOG"
  assert_output ''
  rm "$AGENT_SANDBOX_STATE_DIR/nested-storage"
  stub curl 'echo "curl: (7) Failed to connect" >&2; exit 7'
  stub stat 'echo "root 666"'
  doctor
  assert_failure 1
  assert_check fail nested-storage 'was not set up'
  assert_check fail nested-engine 'Failed to connect'
  assert_check fail nested-devices '/dev/fuse /dev/net/tun'
}

@test "usage errors exit 2" {
  doctor --bogus
  assert_failure 2
  assert_output --partial "unknown argument '--bogus'"
  AGENT_SANDBOX_DOCTOR_TIMEOUT=0 doctor
  assert_failure 2
}

@test "is shellcheck-clean" {
  command -v shellcheck > /dev/null || fail "shellcheck is not installed"
  cd "$ROOT" && shellcheck "$SCRIPT" base-image/mount-lib.sh base-image/root-env.sh
}

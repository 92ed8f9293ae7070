#!/usr/bin/env bats
# base-image/firewall-status.sh on hand-made state files, iptables/ipset stubbed.

load test_helper

SCRIPT="$ROOT/base-image/firewall-status.sh"

setup() {
  common_setup
  export AGENT_SANDBOX_STATE_DIR="$TEST_TMP/state"
  local s="$AGENT_SANDBOX_STATE_DIR" i
  mkdir -p "$s"
  echo nft > "$s/backend"
  printf 'github.com\n*.example.com\n' > "$s/allowlist"
  {
    echo 'Nov 22 02:52:20 dnsmasq[74]: started, version 2.91 cachesize 1000'
    echo 'Nov 22 02:52:20 dnsmasq[74]: query[A] agent-sandbox-selftest.invalid from 127.0.0.1'
    echo 'Nov 22 02:52:20 dnsmasq[74]: config agent-sandbox-selftest.invalid is NXDOMAIN'
    echo 'Nov 22 02:52:21 dnsmasq[74]: query[A] github.com from 127.0.0.1'
    echo 'Nov 22 02:52:21 dnsmasq[74]: forwarded github.com to 127.0.0.11'
    echo 'Nov 22 02:52:21 dnsmasq[74]: reply github.com is 140.82.121.4'
    echo 'Nov 22 02:52:22 dnsmasq[74]: reply nope.example.com is NXDOMAIN'
    for i in $(seq 1 25); do
      echo "Nov 22 02:53:$i dnsmasq[74]: query[A] evil$i.test from 127.0.0.1"
      echo "Nov 22 02:53:$i dnsmasq[74]: config evil$i.test is NXDOMAIN"
      echo "Nov 22 02:53:$i dnsmasq[74]: query[AAAA] evil$i.test from 127.0.0.1"
      echo "Nov 22 02:53:$i dnsmasq[74]: config evil$i.test is NXDOMAIN"
    done
    echo 'Nov 22 02:54:00 dnsmasq[74]: config evil3.test is NXDOMAIN'
  } > "$s/dnsmasq.log"
  for i in $(seq 1 30); do
    echo "02:52:$i.142587 IP 172.18.0.4.4$i > 172.18.0.3.80: tcp 0"
  done > "$s/denied.log"
  stub iptables 'case "$1" in -S) printf -- "-P INPUT DROP\n-P FORWARD DROP\n-P OUTPUT DROP\n-A OUTPUT -o lo -j ACCEPT\n" ;; *) exit 2 ;; esac'
  stub ip6tables 'case "$1" in -S) printf -- "-P OUTPUT DROP\n-A OUTPUT -m set --match-set agent-sandbox-allow6 dst -j ACCEPT\n" ;; *) exit 2 ;; esac'
  stub iptables-legacy 'echo "-P OUTPUT DROP"; echo "-A OUTPUT -m comment --comment legacy-rules"'
  stub ip6tables-legacy 'exit 1'
  stub ipset 'case "$3" in agent-sandbox-allow4) n=12 ;; agent-sandbox-allow6) n=3 ;; *) n=0 ;; esac
printf "Name: %s\nType: hash:ip\nRevision: 6\nHeader: family inet hashsize 1024 maxelem 65536\nSize in memory: 200\nReferences: 1\nNumber of entries: %s\n" "$3" "$n"'
}

teardown() {
  common_teardown
}

# not_root: rules and ipsets unreadable, like `docker exec -u node`.
not_root() {
  stub iptables 'echo "iptables v1.8.11 (nf_tables): Could not fetch rule set generation id: Permission denied (you must be root)" >&2; exit 4'
  stub ip6tables 'echo "Permission denied (you must be root)" >&2; exit 4'
  stub ipset 'echo "ipset v7.22: Kernel error received: Operation not permitted" >&2; exit 1'
}

@test "text: backend, rules, allowlist, ipsets, denied DNS and connections" {
  run "$SCRIPT"
  assert_success
  assert_line 'backend: nft'
  assert_line 'IPv4 rules (iptables -S):'
  assert_line '  -P OUTPUT DROP'
  assert_line '  -A OUTPUT -o lo -j ACCEPT'
  assert_line 'IPv6 rules (ip6tables -S):'
  assert_line '  -A OUTPUT -m set --match-set agent-sandbox-allow6 dst -j ACCEPT'
  assert_line 'allowlist (2 entries):'
  assert_line '  *.example.com'
  assert_line '  agent-sandbox-allow4: 12'
  assert_line '  agent-sandbox-allow6: 3'
  assert_line '  agent-sandbox-net4: 0'
  assert_line 'denied DNS names (last 20):'
  assert_line 'denied connections (last 20):'
  grep -qx 'ipset list -t agent-sandbox-allow4' "$STUB_LOG"
}

@test "denied DNS: NXDOMAIN from config only, each name once, most recent last, last 20, no self-test" {
  run "$SCRIPT"
  assert_success
  local names
  names="$(sed -n '/^denied DNS names/,/^denied connections/p' <<< "$output" | sed '1d;$d')"
  [ "$(wc -l <<< "$names")" -eq 20 ]
  [ "$(head -n 1 <<< "$names")" = '  evil7.test' ]
  [ "$(tail -n 1 <<< "$names")" = '  evil3.test' ]
  [ "$(grep -c 'evil3.test' <<< "$names")" -eq 1 ]
  refute_output --partial selftest
  refute_output --partial nope.example.com
}

@test "denied connections: the last 20 lines of denied.log" {
  run "$SCRIPT"
  assert_success
  refute_line '  02:52:10.142587 IP 172.18.0.4.410 > 172.18.0.3.80: tcp 0'
  assert_line '  02:52:11.142587 IP 172.18.0.4.411 > 172.18.0.3.80: tcp 0'
  assert_line --index $((${#lines[@]} - 1)) '  02:52:30.142587 IP 172.18.0.4.430 > 172.18.0.3.80: tcp 0'
}

@test "not root: says the rules and ipsets are unreadable, still shows the rest" {
  not_root
  run "$SCRIPT"
  assert_success
  assert_line --regexp '^rules: not readable as uid [0-9]+ \(run as root: docker exec -u root \.\.\.\)$'
  refute_output --partial 'Permission denied'
  assert_line '  agent-sandbox-allow4: unavailable (needs root)'
  assert_line '  github.com'
  assert_line '  evil3.test'
}

@test "missing state: no crash, empty sections" {
  rm -rf "$AGENT_SANDBOX_STATE_DIR"
  stub iptables 'exit 1'
  stub ip6tables 'exit 1'
  stub ipset 'exit 1'
  run "$SCRIPT"
  assert_success
  assert_line --partial 'not found: the firewall is not set up'
  assert_line 'backend: unknown'
  assert_line 'allowlist (0 entries):'
  assert_line '  (none)'
}

@test "legacy backend: reads rules with iptables-legacy" {
  echo legacy > "$AGENT_SANDBOX_STATE_DIR/backend"
  run "$SCRIPT"
  assert_success
  assert_line 'IPv4 rules (iptables-legacy -S):'
  assert_line '  -A OUTPUT -m comment --comment legacy-rules'
  assert_line '  (none loaded: IPv6 disabled or unavailable)'
}

@test "--json: one object with the documented keys" {
  run "$SCRIPT" --json
  assert_success
  echo "$output" | jq -e . > /dev/null
  run jq -r 'keys_unsorted | join(",")' <<< "$output"
  assert_output 'backend,rules,rules6,rulesReadable,allowlist,ipsets,deniedDns,deniedConnections,resolved'
  run "$SCRIPT" --json
  local json="$output"
  [ "$(jq -r .backend <<< "$json")" = nft ]
  [ "$(jq -r '.rules[2]' <<< "$json")" = '-P OUTPUT DROP' ]
  [ "$(jq -r '.rules | length' <<< "$json")" -eq 4 ]
  [ "$(jq -r '.rules6 | length' <<< "$json")" -eq 2 ]
  [ "$(jq -c .allowlist <<< "$json")" = '["github.com","*.example.com"]' ]
  [ "$(jq -c .ipsets <<< "$json")" = '{"agent-sandbox-allow4":12,"agent-sandbox-allow6":3,"agent-sandbox-net4":0}' ]
  [ "$(jq -r '.deniedDns | length' <<< "$json")" -eq 20 ]
  [ "$(jq -r '.deniedDns[-1]' <<< "$json")" = evil3.test ]
  [ "$(jq -r '.deniedConnections | length' <<< "$json")" -eq 20 ]
  [ "$(jq -r '.rulesReadable' <<< "$json")" = true ]
  [ "$(jq -c .resolved <<< "$json")" = '[{"address":"140.82.121.4","name":"github.com"}]' ]
}

@test "--json resolved: each address once, as the name it was last asked for (a CNAME's target under the query)" {
  {
    echo 'Nov 22 03:00:00 dnsmasq[74]: query[A] www.example.com from 127.0.0.1'
    echo 'Nov 22 03:00:00 dnsmasq[74]: reply www.example.com is <CNAME>'
    echo 'Nov 22 03:00:00 dnsmasq[74]: reply cdn.example.net is 10.9.8.7'
    echo 'Nov 22 03:00:01 dnsmasq[74]: query[AAAA] db.example.com from 127.0.0.1'
    echo 'Nov 22 03:00:01 dnsmasq[74]: reply db.example.com is fd00::7'
    echo 'Nov 22 03:00:02 dnsmasq[74]: query[A] github.com from 127.0.0.1'
    echo 'Nov 22 03:00:02 dnsmasq[74]: reply github.com is 140.82.121.4'
  } >> "$AGENT_SANDBOX_STATE_DIR/dnsmasq.log"
  run "$SCRIPT" --json
  assert_success
  run jq -c .resolved <<< "$output"
  assert_output '[{"address":"140.82.121.4","name":"github.com"},{"address":"fd00::7","name":"db.example.com"},{"address":"10.9.8.7","name":"www.example.com"}]'
}

@test "--json as non-root: empty rules, null ipset counts" {
  not_root
  run "$SCRIPT" --json
  assert_success
  [ "$(jq -c '[.rules, .rules6, .rulesReadable]' <<< "$output")" = '[[],[],false]' ]
  [ "$(jq -c .ipsets <<< "$output")" = '{"agent-sandbox-allow4":null,"agent-sandbox-allow6":null,"agent-sandbox-net4":null}' ]
  [ "$(jq -r '.allowlist | length' <<< "$output")" -eq 2 ]
}

@test "--json with no state at all is still valid JSON" {
  rm -rf "$AGENT_SANDBOX_STATE_DIR"
  not_root
  run "$SCRIPT" --json
  assert_success
  [ "$(jq -c '[.backend, .allowlist, .deniedDns, .deniedConnections]' <<< "$output")" = '["unknown",[],[],[]]' ]
}

@test "unknown arguments are an error" {
  run "$SCRIPT" --yaml
  assert_failure
  assert_output "firewall-status: unknown argument '--yaml' (usage: firewall-status.sh [--json])"
}

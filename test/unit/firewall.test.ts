import {mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterEach, beforeEach, describe, expect, it, vi} from 'vitest'
import type {Engine, ExecResult} from '../../src/lib/engine/index.js'
import {checkFirewallRules, formatDoctor, parseDoctorOutput, planGatewayProbes} from '../../src/lib/sandbox/doctor.js'
import {gatewayCommand} from '../../src/lib/network/gateway/ports.js'
import {allowedBy} from '../../src/lib/network/firewall-denied.js'
import {parseAllowEntry} from '../../src/lib/util/allow-entry.js'
import {formatStatus, parseDeniedLine, parseStatus, type FirewallStatus} from '../../src/lib/network/firewall.js'
import {allowDomains, splitDomainsAndPath, validateDomains} from '../../src/lib/network/firewall-allow.js'
import {describeWorkspace, Labels, Names, type Workspace} from '../../src/lib/workspace.js'
import {containerInfo, fakeEngine} from './fake-engine.js'

/** `iptables -S` of a healthy sandbox, as init-firewall.sh loads it (Docker DNS upstream). */
const RULES4 = [
  '-P INPUT DROP',
  '-P FORWARD DROP',
  '-P OUTPUT DROP',
  '-A INPUT -i lo -j ACCEPT',
  '-A INPUT -p icmp -m icmp --icmp-type 5 -j DROP',
  '-A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT',
  '-A INPUT -s 172.17.0.1/32 -p tcp -m tcp --dport 3000 -j ACCEPT',
  '-A INPUT -p tcp -j REJECT --reject-with tcp-reset',
  '-A INPUT -j REJECT --reject-with icmp-port-unreachable',
  '-A OUTPUT -d 127.0.0.11/32 -m owner --uid-owner 999 -j ACCEPT',
  '-A OUTPUT -d 127.0.0.11/32 -j REJECT --reject-with icmp-port-unreachable',
  '-A OUTPUT -o lo -j ACCEPT',
  '-A OUTPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT',
  '-A OUTPUT -p udp -m udp --dport 53 -m owner --uid-owner 0 -j ACCEPT',
  '-A OUTPUT -p tcp -m tcp --dport 53 -m owner --uid-owner 0 -j ACCEPT',
  '-A OUTPUT -d 10.255.255.53/32 -p udp -m udp --dport 53 -m owner --uid-owner 999 -j ACCEPT',
  '-A OUTPUT -p tcp -m multiport --dports 80,443 -m set --match-set agent-sandbox-allow4 dst -j ACCEPT',
  '-A OUTPUT -p tcp -m multiport --dports 80,443 -m set --match-set agent-sandbox-net4 dst -j ACCEPT',
  '-A OUTPUT -j AGENT-SANDBOX-PORTS',
  '-A OUTPUT -m limit --limit 20/sec -j NFLOG --nflog-prefix agent-sandbox-deny --nflog-group 42',
  '-A OUTPUT -p tcp -j REJECT --reject-with tcp-reset',
  '-A OUTPUT -j REJECT --reject-with icmp-port-unreachable',
]
const RULES6 = [
  '-P INPUT DROP',
  '-P FORWARD DROP',
  '-P OUTPUT DROP',
  '-A INPUT -p ipv6-icmp -m icmp6 --icmpv6-type 137 -j DROP',
  '-A INPUT -p ipv6-icmp -m icmp6 --icmpv6-type 134 -j DROP',
  '-A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT',
  '-A OUTPUT -o lo -j ACCEPT',
  '-A OUTPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT',
  '-A OUTPUT -p ipv6-icmp -m icmp6 --icmpv6-type 135 -m hl --hl-eq 255 -j ACCEPT',
  '-A OUTPUT -p ipv6-icmp -m icmp6 --icmpv6-type 143 -j DROP',
  '-A OUTPUT -p tcp -m multiport --dports 80,443 -m set --match-set agent-sandbox-allow6 dst -j ACCEPT',
  '-A OUTPUT -m limit --limit 20/sec -j NFLOG --nflog-prefix agent-sandbox-deny --nflog-group 42',
  '-A OUTPUT -p tcp -j REJECT --reject-with tcp-reset',
  '-A OUTPUT -j REJECT --reject-with icmp6-port-unreachable',
]

function status(overrides: Partial<FirewallStatus> = {}): FirewallStatus {
  return {
    container: 'agent-sandbox-app-0123',
    network: 'firewall',
    backend: 'nft',
    rules: RULES4,
    rules6: RULES6,
    rulesReadable: true,
    allowlist: ['registry.npmjs.org', '*.example.com'],
    ipsets: {'agent-sandbox-allow4': 3, 'agent-sandbox-allow6': 0, 'agent-sandbox-net4': 0},
    deniedDns: ['evil.test'],
    deniedConnections: [],
    gateway: 'none',
    requests: [],
    ...overrides,
  }
}

describe('parseDeniedLine', () => {
  it('splits a tcpdump NFLOG line into time, protocol and addr:port ends', () => {
    expect(parseDeniedLine('03:15:24.057260 IP 10.231.7.2.44918 > 10.231.7.1.80: tcp 0')).toEqual({
      time: '03:15:24.057260',
      protocol: 'tcp',
      source: '10.231.7.2:44918',
      destination: '10.231.7.1:80',
      line: '03:15:24.057260 IP 10.231.7.2.44918 > 10.231.7.1.80: tcp 0',
    })
  })

  it('brackets IPv6 addresses and reads UDP', () => {
    const c = parseDeniedLine('03:17:20.630727 IP6 fd00:f17:7::3.55562 > fd00:f17:7::1.53: UDP, length 4')
    expect([c.protocol, c.source, c.destination]).toEqual(['udp', '[fd00:f17:7::3]:55562', '[fd00:f17:7::1]:53'])
  })

  it('keeps portless ICMP addresses whole, and unknown lines raw', () => {
    const icmp = parseDeniedLine('03:17:20.630537 IP6 fe80::1 > ff02::16: HBH ICMP6, multicast listener report v2, length 48')
    expect([icmp.protocol, icmp.source, icmp.destination]).toEqual(['icmp6', 'fe80::1', 'ff02::16'])
    expect(parseDeniedLine('tcpdump: listening on nflog:42')).toEqual({time: '', protocol: '', source: '', destination: '', line: 'tcpdump: listening on nflog:42'})
  })
})

describe('parseStatus / formatStatus', () => {
  const raw = {
    backend: 'nft',
    rules: RULES4,
    rules6: [],
    rulesReadable: true,
    allowlist: ['github.com'],
    ipsets: {'agent-sandbox-allow4': 2, 'agent-sandbox-allow6': null},
    deniedDns: ['evil.test', 'worse.test'],
    deniedConnections: ['03:15:24.057260 IP 10.0.0.2.44918 > 10.0.0.9.22: tcp 0'],
  }

  it('adds the container and network, and parses denied connections', () => {
    const s = parseStatus(JSON.stringify(raw), {name: 'c1', network: 'firewall'})
    expect(s.container).toBe('c1')
    expect(s.deniedConnections[0].destination).toBe('10.0.0.9:22')
    expect(s.deniedDns).toEqual(['evil.test', 'worse.test'])
  })

  it('refuses output that is not JSON', () => {
    expect(() => parseStatus('firewall-status: --json needs jq', {name: 'c1', network: 'firewall'})).toThrow(/not JSON/)
  })

  it('prints rules, allowlist, ipsets, denied names and a table of connections', () => {
    const text = formatStatus(parseStatus(JSON.stringify(raw), {name: 'c1', network: 'firewall'}))
    expect(text).toContain('Rules in force (IPv4):\n  -P INPUT DROP')
    expect(text).toContain('Rules in force (IPv6):\n  (none loaded: IPv6 is disabled in this sandbox)')
    expect(text).toContain('Allowlist (1 entries, each with its subdomains; a name alone is TCP 80/443 through the gateway):\n  github.com')
    expect(text).toContain('agent-sandbox-allow4=2  agent-sandbox-allow6=?')
    // each with the line of a pending approval: the command that grants it
    const line = (n: string) => `agent-sandbox firewall: ${n} refused: DNS name not allowlisted; waiting for the user's approval: agent-sandbox firewall allow ${n}`
    expect(text).toContain(`Denied DNS names (most recent last):\n  ${line('evil.test')}\n  ${line('worse.test')}`)
    expect(text).toMatch(/TIME +PROTO +FROM +TO +ALLOWED BY\n +03:15:24\.057260 +tcp +10\.0\.0\.2:44918 +10\.0\.0\.9:22 +-/)
  })

  it('says plainly when there is no firewall', () => {
    expect(formatStatus({container: 'c1', network: 'open'})).toMatch(/NOT filtered/)
    expect(formatStatus({container: 'c1', network: 'none'})).toMatch(/no network at all/)
  })
})

describe('checkFirewallRules', () => {
  it('passes the rules init-firewall.sh loads', () => {
    const checks = checkFirewallRules(status())
    expect(checks.map((c) => [c.name, c.status])).toEqual([
      ['rules-ipv4', 'pass'],
      ['rules-ipv6', 'pass'],
      ['allowlist', 'pass'],
      ['ipsets', 'pass'],
    ])
  })

  it('fails an unconditional ACCEPT inserted anywhere in OUTPUT', () => {
    const rules = [...RULES4.slice(0, 7), '-A OUTPUT -j ACCEPT', ...RULES4.slice(7)]
    const [v4] = checkFirewallRules(status({rules}))
    expect(v4).toMatchObject({status: 'fail', detail: 'unexpected rule: -A OUTPUT -j ACCEPT'})
  })

  it('fails ACCEPTs that look like ours but are wider', () => {
    for (const rule of [
      '-A OUTPUT -m owner --uid-owner 1000 -j ACCEPT',
      '-A OUTPUT -m conntrack --ctstate NEW -j ACCEPT',
      '-A OUTPUT -d 10.0.0.0/8 -j ACCEPT',
      '-A OUTPUT -m set --match-set other-set dst -j ACCEPT',
      '-A OUTPUT -p udp -m udp --dport 5353 -m owner --uid-owner 0 -j ACCEPT',
    ]) {
      const [v4] = checkFirewallRules(status({rules: [...RULES4.slice(0, -2), rule, ...RULES4.slice(-2)]}))
      expect(v4.status, rule).toBe('fail')
      expect(v4.detail).toContain(rule)
    }
  })

  it('fails an ACCEPT policy, a missing final REJECT and missing logging', () => {
    const rules = RULES4.map((r) => (r === '-P OUTPUT DROP' ? '-P OUTPUT ACCEPT' : r)).filter((r) => !r.includes('REJECT') && !r.includes('NFLOG'))
    const [v4] = checkFirewallRules(status({rules}))
    expect(v4.status).toBe('fail')
    expect(v4.detail).toContain('OUTPUT policy is ACCEPT, not DROP')
    expect(v4.detail).toContain('OUTPUT does not end with a REJECT')
    expect(v4.detail).toContain('no NFLOG rule')
  })

  it('checks IPv6 with its own REJECT; no IPv6 rules at all means IPv6 is off', () => {
    const v6 = checkFirewallRules(status({rules6: RULES6.map((r) => r.replace('icmp6-port-unreachable', 'icmp-port-unreachable'))}))[1]
    expect(v6.status).toBe('fail')
    expect(checkFirewallRules(status({rules6: []}))[1]).toMatchObject({status: 'pass', detail: expect.stringContaining('IPv6 is disabled')})
    expect(checkFirewallRules(status({rules: []}))[0]).toMatchObject({status: 'fail', detail: 'no IPv4 rules loaded'})
  })

  it('fails unreadable rules, an empty allowlist and missing ipsets', () => {
    expect(checkFirewallRules(status({rulesReadable: false}))).toEqual([{name: 'rules', status: 'fail', detail: 'the rules could not be read as root'}])
    const checks = checkFirewallRules(status({allowlist: [], ipsets: {'agent-sandbox-allow4': 1, 'agent-sandbox-allow6': null}}))
    expect(checks[2].status).toBe('fail')
    expect(checks[3]).toMatchObject({status: 'fail', detail: 'missing: agent-sandbox-allow6'})
  })
})

describe('parseDoctorOutput / formatDoctor', () => {
  it('reads pass/fail/skip lines and ignores anything else', () => {
    const checks = parseDoctorOutput('pass\tready\t/run/agent-sandbox/ready present\nnoise\nfail\ttcp-gateway-80\tconnected to 10.0.0.1:80\nskip\tdns-nxdomain\tall allowlisted\n')
    expect(checks).toEqual([
      {name: 'ready', status: 'pass', detail: '/run/agent-sandbox/ready present'},
      {name: 'tcp-gateway-80', status: 'fail', detail: 'connected to 10.0.0.1:80'},
      {name: 'dns-nxdomain', status: 'skip', detail: 'all allowlisted'},
    ])
  })

  it('prints a table and a summary that says when the sandbox does not hold', () => {
    const text = formatDoctor({
      container: 'c1',
      network: 'firewall',
      ok: false,
      checks: [
        {name: 'ready', status: 'pass', detail: 'ok'},
        {name: 'tcp-gateway-80', status: 'fail', detail: 'connected'},
      ],
    })
    expect(text).toMatch(/RESULT +CHECK +DETAIL\nPASS +ready +ok\nFAIL +tcp-gateway-80 +connected/)
    expect(text).toContain('1 passed, 1 failed, 0 skipped: this sandbox does NOT hold')
  })
})

describe('planGatewayProbes (doctor)', () => {
  const allowlist = ['github.com', 'registry.npmjs.org', 'api.test', 'plain.test', '*.wild.test']
  const npm = {host: 'registry.npmjs.org', methods: ['GET', 'HEAD']}

  it('sends a surrogate to an allowlisted name the secret is not declared for, the sandbox\'s own names first', () => {
    const probes = planGatewayProbes({rules: [npm], masked: [{name: 'TOKEN', hosts: ['api.test']}]}, allowlist, ['api.test', 'plain.test'])
    expect(probes.secret).toEqual({name: 'TOKEN', host: 'plain.test'})
    expect(planGatewayProbes({rules: [], masked: [{name: 'TOKEN', hosts: ['api.test', 'plain.test', 'github.com', 'registry.npmjs.org']}]}, allowlist, []).secret).toEqual({name: 'TOKEN', host: 'wild.test'})
  })

  it('sends a blocked method to a restricted host, the last-merged rules first, past a host whose rules admit every method', () => {
    const rules = [npm, {host: 'api.test', methods: ['GET'], paths: ['/pub/*']}, {host: 'api.test', paths: ['/priv/*']}, {host: 'plain.test', methods: ['GET', 'DELETE']}]
    // api.test has a rule without methods: every method passes somewhere, so no method probe there
    expect(planGatewayProbes({rules, masked: []}, allowlist, []).method).toEqual({host: 'plain.test', method: 'PUT'})
    expect(planGatewayProbes({rules: [npm, {host: 'api.test', methods: ['GET']}], masked: []}, allowlist, []).method).toEqual({host: 'api.test', method: 'DELETE'})
    expect(planGatewayProbes({rules: [npm, {host: 'off.list', methods: ['GET']}], masked: []}, allowlist, []).method).toEqual({host: 'registry.npmjs.org', method: 'DELETE'})
  })

  it('skips with the reason when nothing applies', () => {
    expect(planGatewayProbes({rules: [], masked: []}, allowlist, [])).toEqual({
      secret: {skip: 'no masked secretEnv in this sandbox'},
      method: {skip: 'no httpRules restrict the methods of an allowlisted host'},
    })
    expect(planGatewayProbes({rules: [{host: 'registry.npmjs.org', paths: ['/x']}], masked: [{name: 'T', hosts: ['*.com', '*.org', '*.test', 'wild.test', 'api.test', 'plain.test']}]}, allowlist, []).secret).toEqual({
      skip: 'every allowlisted name is declared for T',
    })
  })
})

describe('validateDomains', () => {
  it('accepts names and *.names, lower-cased and de-duplicated', () => {
    expect(validateDomains(['API.Example.com', '*.example.org', 'api.example.com', 'localhost'])).toEqual(['api.example.com', '*.example.org', 'localhost'])
  })

  it('names every bad domain in one error', () => {
    expect(() => validateDomains(['ok.example', 'https://x.example', 'x.example:443', '10.0.0.1', 'a..b', '*'])).toThrow(
      'not a valid allowlist entry: "https://x.example", "x.example:443", "10.0.0.1", "a..b", "*"',
    )
    expect(() => validateDomains([])).toThrow('no domain given')
  })
})

describe('splitDomainsAndPath', () => {
  let dir: string
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'fw-split-'))
    mkdirSync(join(dir, 'app'))
  })
  afterEach(() => rmSync(dir, {recursive: true, force: true}))

  it('takes a last argument with a slash, ".", or an existing directory as the path', () => {
    expect(splitDomainsAndPath(['a.example', 'b.example'], dir)).toEqual({domains: ['a.example', 'b.example']})
    expect(splitDomainsAndPath(['a.example', './x'], dir)).toEqual({domains: ['a.example'], path: './x'})
    expect(splitDomainsAndPath(['a.example', '.'], dir)).toEqual({domains: ['a.example'], path: '.'})
    expect(splitDomainsAndPath(['a.example', 'app'], dir)).toEqual({domains: ['a.example'], path: 'app'})
    expect(splitDomainsAndPath(['app'], dir)).toEqual({domains: ['app']})
  })

  it('refuses a path without domains', () => {
    expect(() => splitDomainsAndPath(['/tmp'], dir)).toThrow('no domain given (/tmp is the workspace path)')
  })
})

describe('allowDomains', () => {
  let dir: string
  let ws: Workspace
  let exec: ReturnType<typeof vi.fn>
  let inspect: ReturnType<typeof vi.fn>
  let engine: Engine
  const configPath = () => join(dir, '.agent-sandbox', 'config.json')

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'fw-allow-'))
    mkdirSync(join(dir, '.agent-sandbox'))
    writeFileSync(join(dir, '.agent-sandbox', 'Dockerfile'), 'FROM agent-sandbox-base:latest\n')
    writeFileSync(configPath(), '{\n    "network": "firewall",\n    "allowDomains": ["github.com"],\n    "env": {"A": "1"}\n}\n', {mode: 0o640})
    ws = describeWorkspace(dir)
    inspect = vi.fn(async (name: string) => containerInfo({name, id: 'id1', running: true, status: 'running', labels: {[Labels.network]: 'firewall'}}))
    exec = vi.fn(async (_id: string, _cmd: string[]): Promise<ExecResult> => ({exitCode: 0, stdout: 'firewall-allow: added pypi.org\nfirewall-allow: github.com is already allowed\n', stderr: ''}))
    engine = fakeEngine({containers: {inspect, exec}})
  })
  afterEach(() => rmSync(dir, {recursive: true, force: true}))

  it('runs firewall-allow as root through sandbox-exec in the running sandbox', async () => {
    const result = await allowDomains({engine}, ws, ['PyPI.org', 'github.com'])
    expect(inspect).toHaveBeenCalledWith(Names.container(ws))
    expect(exec).toHaveBeenCalledWith('id1', ['/usr/local/bin/sandbox-exec', '/usr/local/sbin/firewall-allow', 'pypi.org', 'github.com'], {user: 'root'})
    expect(result).toMatchObject({live: true, added: ['pypi.org'], alreadyAllowed: ['github.com']})
    expect(result.saved).toBeUndefined()
    expect(readFileSync(configPath(), 'utf8')).toContain('"network": "firewall"') // untouched
  })

  it('refuses a rule (--methods, --paths) with limits: a rule lasts for the sandbox\'s life; nothing runs', async () => {
    for (const limits of [{once: true}, {forMs: 600_000}, {maxUploadBytes: 1024}]) {
      await expect(allowDomains({engine}, ws, ['api.example'], {rule: {methods: 'PUT', paths: '/a'}, ...limits})).rejects.toThrow(/--methods and --paths add a rule for the sandbox's life: --.+ cannot limit it/)
    }
    expect(exec).not.toHaveBeenCalled()
  })

  it('--save appends new domains, keeps the other fields and the mode, as 2-space JSON, atomically', async () => {
    const result = await allowDomains({engine}, ws, ['pypi.org', 'GitHub.com'], {save: true})
    expect(result.saved).toMatchObject({path: configPath(), added: ['pypi.org'], rules: []})
    expect(readFileSync(configPath(), 'utf8')).toBe(
      `${JSON.stringify({network: 'firewall', allowDomains: ['github.com', 'pypi.org'], env: {A: '1'}}, null, 2)}\n`,
    )
    expect(statSync(configPath()).mode & 0o777).toBe(0o640)
    expect(readdirSync(join(dir, '.agent-sandbox')).sort()).toEqual(['Dockerfile', 'config.json'])
  })

  it('--save creates the config file when there is none', async () => {
    rmSync(configPath())
    await allowDomains({engine}, ws, ['pypi.org'], {save: true})
    expect(JSON.parse(readFileSync(configPath(), 'utf8'))).toEqual({allowDomains: ['pypi.org']})
  })

  it('--save on a broken config changes nothing, in the sandbox or on disk', async () => {
    writeFileSync(configPath(), '{"allowDomains": ["x.example"],}')
    await expect(allowDomains({engine}, ws, ['pypi.org'], {save: true})).rejects.toThrow(/not valid JSON/)
    writeFileSync(configPath(), '{"bogus": 1}')
    await expect(allowDomains({engine}, ws, ['pypi.org'], {save: true})).rejects.toThrow(/unknown field "bogus"/)
    expect(exec).not.toHaveBeenCalled()
    expect(readFileSync(configPath(), 'utf8')).toBe('{"bogus": 1}')
  })

  it('invalid domains change nothing', async () => {
    await expect(allowDomains({engine}, ws, ['ok.example', 'bad domain'], {save: true})).rejects.toThrow('not a valid allowlist entry: "bad domain"')
    expect(exec).not.toHaveBeenCalled()
    expect(inspect).not.toHaveBeenCalled()
  })

  it('a failure inside the sandbox is reported and nothing is saved', async () => {
    exec.mockResolvedValueOnce({exitCode: 1, stdout: '', stderr: 'firewall-allow: dnsmasq failed to start: bad config\n'})
    await expect(allowDomains({engine}, ws, ['pypi.org'], {save: true})).rejects.toThrow(/firewall-allow failed in .* \(exit 1\): firewall-allow: dnsmasq failed to start: bad config/)
    expect(JSON.parse(readFileSync(configPath(), 'utf8')).allowDomains).toEqual(['github.com'])
  })

  it('not running: an error naming `agent-sandbox start`; with --save only the config changes', async () => {
    inspect.mockResolvedValue({id: 'id1', running: false, status: 'exited', labels: {}})
    await expect(allowDomains({engine}, ws, ['pypi.org'])).rejects.toMatchObject({
      message: expect.stringContaining('is exited'),
      hint: expect.stringContaining('agent-sandbox start'),
    })
    const saved = await allowDomains({engine}, ws, ['pypi.org'], {save: true})
    expect(saved).toMatchObject({live: false, added: [], saved: {added: ['pypi.org']}})
    expect(exec).not.toHaveBeenCalled()
  })

  it('refuses a sandbox without a firewall', async () => {
    inspect.mockResolvedValue({id: 'id1', running: true, status: 'running', labels: {'dev.agent-sandbox.network': 'open'}})
    await expect(allowDomains({engine}, ws, ['pypi.org'])).rejects.toThrow(/network mode "open": there is no firewall allowlist/)
    expect(exec).not.toHaveBeenCalled()
  })

  describe('with --methods / --paths (an httpRule)', () => {
    const gateway = (rules: unknown[]) =>
      exec.mockImplementation(async (_id: string, cmd: string[]): Promise<ExecResult> => {
        if (cmd.includes('--describe')) return {exitCode: 0, stdout: JSON.stringify({rules, live: [], masked: []}), stderr: ''}
        if (cmd.includes('--rule')) return {exitCode: 0, stdout: '', stderr: ''}
        return {exitCode: 0, stdout: 'firewall-allow: registry.npmjs.org is already allowed\nfirewall-allow: added new.example\n', stderr: ''}
      })
    const env = (state: string) => ({...process.env, XDG_STATE_HOME: state, XDG_CONFIG_HOME: join(state, 'cfg')})
    beforeEach(() => {
      inspect.mockImplementation(async (name: string) =>
        containerInfo({name, id: 'id1', running: true, status: 'running', labels: {[Labels.network]: 'firewall'}, env: ['AGENT_SANDBOX_GATEWAY_UID=65532'], startedAt: '2026-01-01T00:00:00Z'}),
      )
    })

    it('adds the rule beside the rules that restrict the host, live, over an exec into the gateway, and keeps it on the host for a gateway made anew', async () => {
      gateway([{host: 'registry.npmjs.org', methods: ['GET', 'HEAD']}])
      const state = mkdtempSync(join(tmpdir(), 'fw-state-'))
      const result = await allowDomains({engine, env: env(state)}, ws, ['registry.npmjs.org'], {rule: {methods: 'get,HEAD,PUT', paths: '/@myorg/*'}})
      const rule = {host: 'registry.npmjs.org', methods: ['GET', 'HEAD', 'PUT'], paths: ['/@myorg/*']}
      expect(result.rules).toEqual([{rule, action: 'added'}])
      expect(exec).toHaveBeenCalledWith(`${Names.container(ws)}-gateway`, gatewayCommand(['--rule', JSON.stringify(rule)]))
      const kept = JSON.parse(readFileSync(join(state, 'agent-sandbox', 'gateway-ca', Names.container(ws), 'live-rules.json'), 'utf8'))
      expect(kept).toEqual({startedAt: '2026-01-01T00:00:00Z', rules: [rule]})
      rmSync(state, {recursive: true, force: true})
    })

    it('a host already allowed without rules keeps every method and path (the rule would narrow it); a newly allowed one gets it', async () => {
      gateway([])
      const state = mkdtempSync(join(tmpdir(), 'fw-state-'))
      const result = await allowDomains({engine, env: env(state)}, ws, ['registry.npmjs.org', 'new.example'], {rule: {methods: 'GET'}})
      expect(result.rules.map((o) => o.action)).toEqual(['unrestricted', 'added'])
      expect(exec.mock.calls.filter(([, cmd]) => cmd.includes('--rule'))).toHaveLength(1)
      rmSync(state, {recursive: true, force: true})
    })

    it('--save writes the host\'s rules in force below with the new one (a workspace host entry replaces the lower ones)', async () => {
      gateway([{host: 'registry.npmjs.org', methods: ['GET', 'HEAD']}])
      const state = mkdtempSync(join(tmpdir(), 'fw-state-'))
      const result = await allowDomains({engine, env: env(state)}, ws, ['registry.npmjs.org'], {save: true, rule: {methods: 'PUT', paths: '/@myorg/*'}})
      expect(JSON.parse(readFileSync(configPath(), 'utf8')).httpRules).toEqual([
        {host: 'registry.npmjs.org', methods: ['GET', 'HEAD']},
        {host: 'registry.npmjs.org', methods: ['PUT'], paths: ['/@myorg/*']},
      ])
      // loosening a restricted host widens: an untrusted file must be approved first
      expect(result.saved).toMatchObject({rules: [{host: 'registry.npmjs.org', methods: ['PUT'], paths: ['/@myorg/*']}], needsTrust: true})
      rmSync(state, {recursive: true, force: true})
    })

    it('bad methods or paths: one error naming each and the fix, before anything changes', async () => {
      await expect(allowDomains({engine}, ws, ['a.example'], {rule: {methods: 'GET,G3T, PUT X'}})).rejects.toMatchObject({
        message: '--methods: not an HTTP method: "G3T", "PUT X"',
        hint: expect.stringContaining('--methods GET,HEAD,PUT'),
      })
      await expect(allowDomains({engine}, ws, ['a.example'], {rule: {paths: 'myorg/*,/ok/*,/a b'}})).rejects.toMatchObject({
        message: '--paths: not a path pattern: "myorg/*", "/a b"',
        hint: expect.stringContaining("--paths '/myorg/*'"),
      })
      await expect(allowDomains({engine}, ws, ['a.example'], {rule: {methods: ''}})).rejects.toThrow('--methods: not an HTTP method: ""')
      expect(exec).not.toHaveBeenCalled()
      expect(inspect).not.toHaveBeenCalled()
    })

    it('refuses rules for a sandbox made without a gateway', async () => {
      inspect.mockResolvedValue(containerInfo({name: 'x', id: 'id1', running: true, status: 'running', labels: {[Labels.network]: 'firewall'}}))
      await expect(allowDomains({engine}, ws, ['a.example'], {rule: {methods: 'GET'}})).rejects.toThrow(/has no egress gateway/)
      expect(exec).not.toHaveBeenCalled()
    })
  })
})

describe('allowedBy', () => {
  const conn = (destination: string, protocol = 'tcp') => ({time: 't', protocol, source: '10.0.0.2:1', destination, line: ''})
  const resolved = [{address: '10.0.0.9', name: 'db.example.com'}, {address: 'fd00::9', name: 'api.github.com'}, {address: '10.0.0.8', name: 'evil.test'}]
  const allowlist = ['*.example.com', 'github.com', 'github.com:22']
  it('names the entry that would allow a refused port of an allowlisted name', () => {
    expect(allowedBy(conn('10.0.0.9:3128'), allowlist, resolved)).toBe('db.example.com:3128')
    expect(allowedBy(conn('10.0.0.9:443', 'udp'), allowlist, resolved)).toBe('db.example.com:443/udp')
    expect(allowedBy(conn('[fd00::9]:8080'), allowlist, resolved)).toBe('api.github.com:8080')
  })
  it('names nothing for an address no allowlisted name resolved to, or for ICMP', () => {
    expect(allowedBy(conn('10.0.0.8:80'), allowlist, resolved)).toBeUndefined()
    expect(allowedBy(conn('10.0.0.7:80'), allowlist, resolved)).toBeUndefined()
    expect(allowedBy(conn('10.0.0.9', 'icmp'), allowlist, resolved)).toBeUndefined()
  })
})

describe('parseAllowEntry', () => {
  it('reads names, TCP and UDP ports, in one written form', () => {
    expect(parseAllowEntry('GitHub.com:22')).toMatchObject({ok: true, entry: {text: 'github.com:22', base: 'github.com', port: 22, protocol: 'tcp'}})
    expect(parseAllowEntry('*.x.example:53/UDP')).toMatchObject({ok: true, entry: {text: '*.x.example:53/udp', base: 'x.example', protocol: 'udp'}})
    expect(parseAllowEntry('x.example:22/tcp')).toMatchObject({ok: true, entry: {text: 'x.example:22'}})
  })
  it('refuses TCP 80/443 (the bare name), bad ports and non-names, saying why', () => {
    expect(parseAllowEntry('x.example:443')).toEqual({ok: false, reason: 'TCP ports 80 and 443 are what x.example alone allows (through the egress gateway): write x.example'})
    for (const bad of ['x.example:0', 'x.example:65536', '10.0.0.1:22', 'https://x.example', 'x.example:22/sctp']) expect(parseAllowEntry(bad).ok, bad).toBe(false)
  })
})

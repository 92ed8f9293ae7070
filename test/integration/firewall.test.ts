/**
 * The egress firewall on the real engine, against containers this file
 * starts itself on networks it creates (never any other address): every way out
 * the issue lists is tried from a sandbox and must fail at once, while the
 * allowlisted host stays reachable throughout; `firewall status`, `firewall
 * allow` and `doctor` are exercised on the same sandboxes.
 */
import {randomBytes, randomInt} from 'node:crypto'
import {readFileSync, writeFileSync} from 'node:fs'
import {dirname, join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {BASE_IMAGE, cleanupUnder, cli, docker, initWorkspace, inspect, makeWorkspace, removeWorkspace, type Result, sbx, trustWorkspace} from './helpers.js'

const BASE = BASE_IMAGE
/** Unique per run: names, labels and the networks' subnets. */
const RUN = `${(process.env.AGENT_SANDBOX_IT_ID ?? 'main').toLowerCase().replace(/[^a-z0-9]+/g, '-')}-${randomBytes(3).toString('hex')}`
const LABEL = `dev.agent-sandbox.fwit=${RUN}`
const name = (role: string) => `fwit-${role}-${RUN}`

/** A test server: HTTP on 80 and 22 (v4 and v6), UDP echo on 5353; answers with its NAME. */
const SERVER = `const http = require('http'), dgram = require('dgram');
for (const p of [80, 22]) http.createServer((q, r) => r.end('hi from ' + process.env.NAME + '\\n')).listen(p, '::');
const u = dgram.createSocket('udp4'); u.on('message', (m, ri) => u.send('pong', ri.port, ri.address)); u.bind(5353);`
/** `node -e UDP PORT HOST`: prints how a datagram fared: "send EPERM", "reply pong", "no reply". */
const UDP = `const [port, host] = process.argv.slice(1);
const d = require('dgram').createSocket(host.includes(':') ? 'udp6' : 'udp4');
d.on('error', (e) => { console.log('error ' + e.code); process.exit(3) });
d.on('message', (m) => { console.log('reply ' + m); process.exit(0) });
d.send('ping', Number(port), host, (e) => { if (e) { console.log('send ' + e.code); process.exit(2) } });
setTimeout(() => { console.log('no reply'); process.exit(4) }, 3000);`
/** `bash -c TCP HOST PORT`: a bare connect, so that the error is the kernel's own. */
const TCP = 'exec 3<> "/dev/tcp/$0/$1" && echo connected'

interface Net {
  name: string
  prefix: string // first three octets of the IPv4 /24
  gateway: string
  prefix6?: string // the IPv6 /64 without the trailing "::"
  gateway6?: string
}

const networks: Net[] = []
const workspaces: string[] = []

/** A user-defined network on a free /24 (dynamic addresses only in .128-.255; tests pin theirs below). */
async function createNetwork(role: string, ipv6 = false): Promise<Net> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const prefix = `10.${200 + Math.floor(Math.random() * 50)}.${Math.floor(Math.random() * 256)}`
    const net: Net = {name: name(role), prefix, gateway: `${prefix}.1`}
    const args = ['network', 'create', '--label', LABEL, '--subnet', `${prefix}.0/24`, '--ip-range', `${prefix}.128/25`, '--gateway', net.gateway]
    if (ipv6) {
      // Groups 1000-ffff: written the way the kernel prints them (no leading zero, never 0), so tests can match its output.
      const group = () => (0x1000 + randomInt(0xf000)).toString(16)
      net.prefix6 = `fd00:${group()}:${group()}`
      net.gateway6 = `${net.prefix6}::1`
      args.push('--ipv6', '--subnet', `${net.prefix6}::/64`, '--gateway', net.gateway6)
    }
    const r = await docker(...args, net.name)
    if (r.exitCode === 0) {
      networks.push(net)
      return net
    }
    if (!/overlap|in use/i.test(r.stderr)) throw new Error(`docker network create failed: ${r.stderr}`)
  }
  throw new Error('no free 10.x.y.0/24 for a test network')
}

function must(r: Result, what: string): Result {
  if (r.exitCode !== 0) throw new Error(`${what} failed (${r.exitCode}): ${r.stderr || r.stdout}`)
  return r
}

/** Start a test server container with a pinned address, and wait until it listens. */
async function startServer(role: string, net: Net, host: number, options: {ip6?: string; label?: string} = {}): Promise<string> {
  const container = name(role)
  const args = ['run', '-d', '--name', container, '--label', LABEL, '--network', net.name, '--ip', `${net.prefix}.${host}`]
  if (options.ip6) args.push('--ip6', options.ip6)
  args.push('-e', `NAME=${options.label ?? role}`, '--entrypoint', 'node', '--user', 'root', BASE, '-e', SERVER)
  must(await docker(...args), `starting ${container}`)
  await waitListening(container)
  return container
}

async function waitListening(container: string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const r = await docker('exec', container, 'node', '-e', "require('net').connect(80, '127.0.0.1').on('connect', () => process.exit(0)).on('error', () => process.exit(1))")
    if (r.exitCode === 0) return
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`${container} does not listen on port 80`)
}

/** Run a command in a plain, unfiltered container on `net`: the control for every "blocked" assertion. */
function control(net: Net, entrypoint: string, ...args: string[]): Promise<Result> {
  return docker('run', '--rm', '--label', LABEL, '--network', net.name, '--entrypoint', entrypoint, BASE, ...args)
}

/** A workspace with its own config.json (written after init, which writes the template). */
async function workspace(role: string, config: Record<string, unknown>, dockerfileExtra = ''): Promise<string> {
  const path = await makeWorkspace(role)
  workspaces.push(path)
  if (dockerfileExtra) {
    await initWorkspace(path)
    writeFileSync(join(path, '.agent-sandbox', 'Dockerfile'), `${readFileSync(join(path, '.agent-sandbox', 'Dockerfile'), 'utf8')}\n${dockerfileExtra}\n`)
    await trustWorkspace(path)
    must(await cli(['build', path]), `build ${role}`)
  } else {
    await initWorkspace(path)
  }
  // GitHub's published ranges are fetched from the internet by default: not from tests.
  writeFileSync(join(path, '.agent-sandbox', 'config.json'), `${JSON.stringify({...config, env: {AGENT_SANDBOX_GITHUB_META: '0'}}, null, 2)}\n`)
  // The test's own settings (allowDomains, ports, …): approved, as their user would.
  await trustWorkspace(path)
  return path
}

async function start(path: string, ...extra: string[]): Promise<string> {
  const r = await cli(['start', path, '--json', ...extra])
  expect(r.exitCode, r.stderr).toBe(0)
  return JSON.parse(r.stdout).name as string
}

function curl(ws: string, url: string, ...extra: string[]): Promise<Result> {
  return sbx(ws, 'curl', '-sS', '--max-time', '10', ...extra, url)
}

function tcp(ws: string, host: string, port: number): Promise<Result> {
  return sbx(ws, 'bash', '-c', TCP, host, String(port))
}

/** Refused at once by a REJECT: the error kind, never a timeout. */
function expectRefused(r: Result, what: string): void {
  expect(r.exitCode, `${what}: ${r.stdout}`).not.toBe(0)
  expect(r.stdout, what).not.toContain('connected')
  expect(r.stderr, what).toMatch(/Connection refused/)
}

function expectCurlRefused(r: Result, what: string): void {
  expect(r.exitCode, `${what}: ${r.stderr}`).toBe(7) // CURLE_COULDNT_CONNECT; a timeout would be 28
  expect(r.stderr, what).toMatch(/Failed to connect/)
}

async function expectReachable(ws: string, host: string, label: string): Promise<void> {
  const r = await curl(ws, `http://${host}/`)
  expect(r.exitCode, `${host} should be reachable: ${r.stderr}`).toBe(0)
  expect(r.stdout).toBe(`hi from ${label}`)
}

/** `firewall status --json`, polled until `done` holds (NFLOG hands packets to tcpdump about once a second). */
async function statusUntil(ws: string, done: (s: any) => boolean): Promise<any> {
  let status: any
  for (let i = 0; i < 30; i++) {
    const r = await cli(['firewall', 'status', ws, '--json'])
    expect(r.exitCode, r.stderr).toBe(0)
    status = JSON.parse(r.stdout)
    if (done(status)) return status
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
  return status
}

async function doctor(ws: string): Promise<{exitCode: number; report: any; stderr: string}> {
  const r = await cli(['doctor', ws, '--json'])
  return {exitCode: r.exitCode, report: r.stdout ? JSON.parse(r.stdout) : undefined, stderr: r.stderr}
}

function checkOf(report: any, check: string): {status: string; detail: string} {
  const found = report.checks.find((c: any) => c.name === check)
  if (!found) throw new Error(`no check ${check} in ${JSON.stringify(report.checks.map((c: any) => c.name))}`)
  return found
}

afterAll(async () => {
  for (const path of workspaces) {
    await cleanupUnder(dirname(path))
    // the image `init` built before a test changed the Dockerfile and rebuilt it
    const dangling = await docker('images', '-q', '--filter', 'dangling=true', '--filter', `label=dev.agent-sandbox.workspace=${path}`)
    for (const id of new Set(dangling.stdout.split('\n').filter(Boolean))) await docker('rmi', id)
  }
  const mine = await docker('ps', '-aq', '--filter', `label=${LABEL}`)
  const ids = mine.stdout.split('\n').filter(Boolean)
  if (ids.length) await docker('rm', '-f', ...ids)
  for (const net of networks) await docker('network', 'rm', net.name)
  for (const path of workspaces) removeWorkspace(path)
})

describe('a firewalled sandbox on a user-defined network', () => {
  let net: Net
  let ws: string
  let sandbox: string
  const allowed = name('allowed')
  const blocked = name('blocked')
  const resolver = name('dns')
  const later = name('later')
  let ip: Record<'allowed' | 'blocked' | 'dns' | 'later', string>

  beforeAll(async () => {
    net = await createNetwork('net')
    ip = {allowed: `${net.prefix}.10`, blocked: `${net.prefix}.11`, dns: `${net.prefix}.12`, later: `${net.prefix}.13`}
    await startServer('allowed', net, 10)
    await startServer('blocked', net, 11)
    await startServer('later', net, 13)
    // A resolver of our own, which answers a name with the blocked server's address.
    must(
      await docker('run', '-d', '--name', resolver, '--label', LABEL, '--network', net.name, '--ip', ip.dns, '--entrypoint', 'dnsmasq', '--user', 'root', BASE,
        '-k', '--no-resolv', '--user=root', `--address=/fwit-ext.example/${ip.blocked}`, '--address=/#/'),
      'starting the resolver',
    )
    ws = await workspace('fw', {dockerNetwork: net.name, allowDomains: [allowed]})
    sandbox = await start(ws)
  })

  it('reaches the allowlisted host by name; a non-allowlisted name is NXDOMAIN', async () => {
    await expectReachable(ws, allowed, 'allowed')
    for (const host of [blocked, 'fwit-ext.example']) {
      const dig = await sbx(ws, 'dig', '+time=2', '+tries=1', host)
      expect(dig.stdout, host).toMatch(/status: NXDOMAIN/)
      expect(dig.stdout).toMatch(/SERVER: 127\.0\.0\.1#53/)
      expect((await curl(ws, `http://${host}/`)).exitCode, host).toBe(6) // could not resolve
    }
    // control: Docker's DNS does know the blocked container
    expect((await control(net, 'dig', '+short', blocked)).stdout.trim()).toBe(ip.blocked)
  })

  it('refuses TCP to a non-allowlisted container at once, on port 80 and 22, while a plain container gets through', async () => {
    for (const port of [80, 22]) {
      expectRefused(await tcp(ws, ip.blocked, port), `tcp ${ip.blocked}:${port}`)
      expectCurlRefused(await curl(ws, `http://${ip.blocked}:${port}/`), `curl ${ip.blocked}:${port}`)
      const ok = await control(net, 'curl', '-sS', '--max-time', '10', `http://${ip.blocked}:${port}/`)
      expect(ok.stdout, ok.stderr).toBe('hi from blocked')
    }
  })

  it('refuses UDP to a non-allowlisted container (the send fails with EPERM); a plain container gets a reply', async () => {
    const r = await sbx(ws, 'node', '-e', UDP, '5353', ip.blocked)
    expect(r.stdout.trim()).toBe('send EPERM')
    expect((await control(net, 'node', '-e', UDP, '5353', ip.blocked)).stdout.trim()).toBe('reply pong')
  })

  it('refuses the network gateway (the host side of the bridge), TCP and UDP', async () => {
    for (const port of [80, 22]) expectRefused(await tcp(ws, net.gateway, port), `tcp gateway:${port}`)
    expect((await sbx(ws, 'node', '-e', UDP, '53', net.gateway)).stdout.trim()).toBe('send EPERM')
    // the refusals are the sandbox's own: its firewall logged them
    const status = await statusUntil(ws, (s) => [80, 22].every((p) => s.deniedConnections.some((c: any) => c.destination === `${net.gateway}:${p}`)))
    for (const port of [80, 22]) expect(status.deniedConnections.map((c: any) => c.destination)).toContain(`${net.gateway}:${port}`)
  })

  it('allows DNS only through the sandbox resolver: not to 127.0.0.11, not to another resolver, not over TCP', async () => {
    for (const proto of ['+notcp', '+tcp']) {
      const docker11 = await sbx(ws, 'dig', proto, '+time=2', '+tries=1', '@127.0.0.11', allowed)
      expect(docker11.exitCode, `127.0.0.11 ${proto}: ${docker11.stdout}`).toBe(9) // no reply
      expect(docker11.stdout).not.toMatch(/Got answer/)
      expect(docker11.stdout + docker11.stderr).toMatch(/connection refused/i)
      const own = await sbx(ws, 'dig', proto, '+time=2', '+tries=1', `@${ip.dns}`, 'fwit-ext.example')
      expect(own.exitCode, `own resolver ${proto}: ${own.stdout}`).toBe(9)
      expect(own.stdout).not.toMatch(/Got answer/)
      // control: both answer a plain container
      expect((await control(net, 'dig', proto, '+short', `@${ip.dns}`, 'fwit-ext.example')).stdout.trim()).toBe(ip.blocked)
      expect((await control(net, 'dig', proto, '+short', '@127.0.0.11', allowed)).stdout.trim()).toBe(ip.allowed)
    }
    // the upstream is Docker's resolver, and only dnsmasq may use it: names still resolve through it
    expect((await sbx(ws, 'cat', '/run/agent-sandbox/upstream-resolvers')).stdout.trim()).toBe('127.0.0.11')
    expect((await sbx(ws, 'dig', '+short', allowed)).stdout.trim()).toBe(ip.allowed)
  })

  it('gives node no raw sockets and no way to change iptables, ipsets, routes, the resolver or dnsmasq', async () => {
    const attempts: Array<[string, string[]]> = [
      ['raw socket (perl)', ['perl', '-MSocket', '-e', 'socket(my $s, PF_INET, SOCK_RAW, 1) or die "$!\\n"']],
      ['raw socket (python3)', ['python3', '-c', 'import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)']],
      ['iptables -S', ['iptables', '-S']],
      ['iptables -F', ['iptables', '-F']],
      ['iptables -P OUTPUT ACCEPT', ['iptables', '-P', 'OUTPUT', 'ACCEPT']],
      ['iptables-legacy -F', ['iptables-legacy', '-F']],
      ['ip6tables -F', ['ip6tables', '-F']],
      ['ipset list', ['ipset', 'list']],
      ['ipset flush', ['ipset', 'flush']],
      ['ipset add', ['ipset', 'add', 'agent-sandbox-allow4', ip.blocked]],
      ['ip link set lo mtu', ['ip', 'link', 'set', 'lo', 'mtu', '1400']],
      ['ip route add', ['ip', 'route', 'add', `${net.prefix}.0/25`, 'dev', 'eth0']],
      ['write resolv.conf', ['sh', '-c', `echo nameserver ${ip.dns} > /etc/resolv.conf`]],
      ['append resolv.conf', ['sh', '-c', `echo nameserver ${ip.dns} >> /etc/resolv.conf`]],
      ['write allowlist', ['sh', '-c', `echo ${blocked} >> /run/agent-sandbox/allowlist`]],
      ['kill dnsmasq', ['sh', '-c', 'kill "$(cat /run/agent-sandbox/dnsmasq.pid)"']],
      ['kill tcpdump', ['sh', '-c', 'kill "$(cat /run/agent-sandbox/tcpdump.pid)"']],
      ['firewall-allow', ['/usr/local/sbin/firewall-allow', blocked]],
      ['sudo', ['sudo', '-n', 'iptables', '-F']],
    ]
    // One exec as node runs every attempt, each its own process, and reports its exit code.
    const quote = (w: string) => `'${w.replaceAll("'", `'\\''`)}'`
    const script = [
      'printf "user\\t%s\\n" "$(id -un)"',
      'attempt() { what="$1"; shift; "$@" > /dev/null 2>&1; printf "%s\\t%s\\n" "$what" "$?"; }',
      ...attempts.map(([what, command]) => `attempt ${quote(what)} ${command.map(quote).join(' ')}`),
    ].join('\n')
    const r = await sbx(ws, 'bash', '-c', script)
    expect(r.exitCode, r.stderr).toBe(0)
    const codes = new Map(r.stdout.split('\n').map((line) => line.split('\t') as [string, string]))
    for (const [what] of attempts) {
      expect(codes.get(what), `${what} should fail as node`).toMatch(/^[1-9]\d*$/)
    }
    expect(codes.get('user')).toBe('node')
    // and nothing changed: rules, resolver, dnsmasq
    const status = await statusUntil(ws, () => true)
    expect(status.rules).toContain('-P OUTPUT DROP')
    // OUTPUT still ends with the catch-all REJECT (the declared-port chain's rules are listed after OUTPUT's)
    expect(status.rules.filter((rule: string) => rule.startsWith('-A OUTPUT ')).at(-1)).toBe('-A OUTPUT -j REJECT --reject-with icmp-port-unreachable')
    expect((await sbx(ws, 'cat', '/etc/resolv.conf')).stdout).toMatch(/^nameserver 127\.0\.0\.1$/m)
    expect((await sbx(ws, 'cat', '/etc/resolv.conf')).stdout).not.toContain(ip.dns)
    expectRefused(await tcp(ws, ip.blocked, 80), 'blocked after the attempts')
    await expectReachable(ws, allowed, 'allowed')
  })

  it('firewall status shows the rules, the allowlist, and the denied DNS names and connections', async () => {
    const probe = `fwit-denied-${RUN}.example`
    await sbx(ws, 'dig', '+time=2', '+tries=1', probe)
    await tcp(ws, ip.blocked, 22)
    const status = await statusUntil(ws, (s) => s.deniedDns.includes(probe) && s.deniedConnections.some((c: any) => c.destination === `${ip.blocked}:22`))
    expect(status.container).toBe(sandbox)
    expect(status.network).toBe('firewall')
    expect(status.rules).toContain('-P OUTPUT DROP')
    expect(status.allowlist).toContain(allowed)
    expect(status.allowlist).toContain('registry.npmjs.org')
    expect(status.deniedDns).toContain(probe)
    expect(status.deniedConnections).toContainEqual(expect.objectContaining({protocol: 'tcp', destination: `${ip.blocked}:22`}))
    expect(status.ipsets['agent-sandbox-allow4']).toBeGreaterThanOrEqual(1)
    const text = await cli(['firewall', 'status', ws])
    expect(text.exitCode).toBe(0)
    expect(text.stdout).toContain('Rules in force (IPv4):')
    expect(text.stdout).toContain(`  ${allowed}`)
    // A denied name is one approval line, with the command that grants it.
    const q = probe.replaceAll('.', '\\.')
    expect(text.stdout).toMatch(new RegExp(`Denied DNS names \\(most recent last\\):\\n(  .*\\n)*  agent-sandbox firewall: ${q} refused: DNS name not allowlisted; waiting for the user's approval: agent-sandbox firewall allow ${q}\\n`))
    expect(text.stdout).toMatch(new RegExp(`tcp +\\S+ +${ip.blocked.replaceAll('.', '\\.')}:22`))
  })

  it('doctor passes on a healthy sandbox', async () => {
    const {exitCode, report, stderr} = await doctor(ws)
    expect(exitCode, `${stderr}\n${JSON.stringify(report?.checks.filter((c: any) => c.status !== 'pass'))}`).toBe(0)
    expect(report.ok).toBe(true)
    for (const check of ['rules-ipv4', 'rules-ipv6', 'tcp-gateway-80', 'tcp-gateway-22', 'udp-gateway-53', 'dns-nxdomain', 'dns-direct-udp-127.0.0.11', 'dns-direct-tcp-127.0.0.11', 'raw-socket', 'iptables-write', 'ipset-write', 'resolv-conf-write', 'signal-dnsmasq']) {
      expect(checkOf(report, check).status, check).toBe('pass')
    }
    const text = await cli(['doctor', ws])
    expect(text.exitCode).toBe(0)
    expect(text.stdout).toMatch(/^PASS +tcp-gateway-80 +refused at once by the firewall/m)
  })

  it('doctor fails when a rule is removed, and passes again once the firewall is re-installed', async () => {
    // 1. an ACCEPT-everything rule in front of the rest
    must(await docker('exec', '-u', 'root', sandbox, 'iptables', '-I', 'OUTPUT', '1', '-j', 'ACCEPT'), 'inserting the rule')
    let run = await doctor(ws)
    expect(run.exitCode).toBe(1)
    expect(run.report.ok).toBe(false)
    expect(checkOf(run.report, 'rules-ipv4')).toMatchObject({status: 'fail', detail: 'unexpected rule: -A OUTPUT -j ACCEPT'})
    expect(checkOf(run.report, 'tcp-gateway-80')).toMatchObject({status: 'fail', detail: expect.stringContaining('not logged by this sandbox')})
    expect(checkOf(run.report, 'udp-gateway-53')).toMatchObject({status: 'fail', detail: expect.stringContaining('datagram sent')})
    expect(checkOf(run.report, 'dns-direct-udp-127.0.0.11').status).toBe('fail')
    const text = await cli(['doctor', ws])
    expect(text.exitCode).toBe(1)
    expect(text.stdout).toMatch(/^FAIL +rules-ipv4/m)
    expect(text.stdout).toContain('this sandbox does NOT hold')
    must(await docker('exec', '-u', 'root', sandbox, 'iptables', '-D', 'OUTPUT', '1'), 'removing the rule')
    expect((await doctor(ws)).exitCode).toBe(0)

    // 2. OUTPUT policy ACCEPT and the final REJECTs deleted
    for (const args of [['-P', 'OUTPUT', 'ACCEPT'], ['-D', 'OUTPUT', '-p', 'tcp', '-j', 'REJECT', '--reject-with', 'tcp-reset'], ['-D', 'OUTPUT', '-j', 'REJECT', '--reject-with', 'icmp-port-unreachable']]) {
      must(await docker('exec', '-u', 'root', sandbox, 'iptables', ...args), `iptables ${args.join(' ')}`)
    }
    run = await doctor(ws)
    expect(run.exitCode).toBe(1)
    expect(checkOf(run.report, 'rules-ipv4').detail).toContain('OUTPUT policy is ACCEPT, not DROP')
    expect(checkOf(run.report, 'rules-ipv4').detail).toContain('OUTPUT does not end with a REJECT')
    expect(checkOf(run.report, 'udp-gateway-53').status).toBe('fail')
    // re-running init-firewall.sh (as the entrypoint does) puts everything back, atomically
    must(await docker('exec', '-u', 'root', sandbox, '/usr/local/sbin/init-firewall.sh'), 're-running init-firewall.sh')
    expect((await doctor(ws)).exitCode).toBe(0)
    expectRefused(await tcp(ws, ip.blocked, 80), 'blocked after the re-install')
    await expectReachable(ws, allowed, 'allowed')
  })

  it('blocks from the first instant after a restart, and keeps the allowlisted host reachable', async () => {
    for (let round = 0; round < 2; round++) {
      must(await docker('restart', '-t', '1', sandbox), 'docker restart')
      // the very first command after the restart, without the CLI's start-up time in between:
      // sandbox-exec holds it until the firewall is up
      const first = await docker('exec', '-u', 'node', sandbox, '/usr/local/bin/sandbox-exec', 'bash', '-c', TCP, ip.blocked, '80')
      expectRefused(first, `round ${round}: first connection after restart`)
      // The egress gateway served the namespace that went with the restart: web traffic is
      // refused (closed, never direct) until the CLI makes the gateway anew (straight through the engine, nothing does).
      const raw = await docker('exec', '-u', 'node', sandbox, '/usr/local/bin/sandbox-exec', 'curl', '-sS', '--max-time', '10', `http://${allowed}/`)
      expectCurlRefused(raw, `round ${round}: the allowlisted host before the CLI's next exec or start`)
      // The CLI's next exec finds the gateway left in the old namespace, says so on one stderr line,
      // makes it anew, and only then runs the command, which the firewall still refuses.
      const viaCli = await tcp(ws, ip.blocked, 80)
      expectRefused(viaCli, `round ${round}: through the CLI`)
      expect(viaCli.stderr, `round ${round}: the CLI's repair`).toMatch(/^repairing \S+: its egress gateway \S+ was left in the network of an earlier start of the sandbox; making it anew$/m)
      if (round === 1) must(await cli(['start', ws]), 'start after the restart')
      await expectReachable(ws, allowed, 'allowed')
      expect((await curl(ws, `http://${blocked}/`)).exitCode).toBe(6)
      expect((await sbx(ws, 'node', '-e', UDP, '5353', ip.blocked)).stdout.trim()).toBe('send EPERM')
    }
  })

  it('keeps an allowlisted host reachable when it comes back with a new address under the same name', async () => {
    await expectReachable(ws, allowed, 'allowed')
    must(await docker('rm', '-f', allowed), 'removing the allowed host')
    await startServer('allowed', net, 20, {label: 'allowed again'})
    expect((await control(net, 'dig', '+short', allowed)).stdout.trim()).toBe(`${net.prefix}.20`)
    await expectReachable(ws, allowed, 'allowed again')
    expect((await sbx(ws, 'dig', '+short', allowed)).stdout.trim()).toBe(`${net.prefix}.20`)
  })

  it('firewall allow opens a blocked name live; --save writes config.json for the next start', async () => {
    expect((await curl(ws, `http://${later}/`)).exitCode).toBe(6)
    expectRefused(await tcp(ws, ip.later, 80), 'later before allow')
    const startedAt = (await inspect(sandbox)).State.StartedAt

    const bad = await cli(['firewall', 'allow', 'ok.example', 'https://bad.example/x', ws])
    expect(bad.exitCode).toBe(2)
    expect(bad.stderr.trim()).toBe(
      'agent-sandbox: error: not a valid allowlist entry: "https://bad.example/x" (hint: expected a host name such as example.com or *.example.com, optionally with :PORT or :PORT/udp (e.g. github.com:22) (no scheme, path or IP address))',
    )

    const allow = await cli(['firewall', 'allow', later, ws])
    expect(allow.exitCode, allow.stderr).toBe(0)
    expect(allow.stdout).toBe(`allowed ${later} in ${sandbox} (live)`)
    await expectReachable(ws, later, 'later')
    expect((await inspect(sandbox)).State.StartedAt).toBe(startedAt) // no restart
    expectRefused(await tcp(ws, ip.blocked, 80), 'blocked stays blocked')
    expect((await statusUntil(ws, () => true)).allowlist).toContain(later)

    const configPath = join(ws, '.agent-sandbox', 'config.json')
    const before = JSON.parse(readFileSync(configPath, 'utf8'))
    const save = await cli(['firewall', 'allow', later, ws, '--save'])
    expect(save.exitCode, save.stderr).toBe(0)
    expect(save.stdout).toBe(`${later} was already allowed in ${sandbox}\nsaved ${later} to ${configPath}`)
    const text = readFileSync(configPath, 'utf8')
    expect(text).toBe(`${JSON.stringify({...before, allowDomains: [allowed, later]}, null, 2)}\n`)
    expect((await cli(['config', ws, '--json'])).stdout).toContain(later)

    // A live addition lasts until the container restarts; the saved one applies from the next start.
    must(await docker('restart', '-t', '1', sandbox), 'docker restart')
    expect((await curl(ws, `http://${later}/`)).exitCode).toBe(6)
    must(await cli(['stop', ws]), 'stop')
    const started = await cli(['start', ws])
    expect(started.exitCode, started.stderr).toBe(0)
    expect(started.stderr).toMatch(/settings changed/)
    await expectReachable(ws, later, 'later')
    await expectReachable(ws, allowed, 'allowed again')
    expectRefused(await tcp(ws, ip.blocked, 80), 'blocked after the saved allow')
  })

  it('status, allow and doctor on a stopped sandbox say to start it; allow --save still saves', async () => {
    must(await cli(['stop', ws]), 'stop')
    for (const args of [['firewall', 'status', ws], ['doctor', ws], ['firewall', 'allow', 'x.example', ws]]) {
      const r = await cli(args)
      expect(r.exitCode, args.join(' ')).toBe(1)
      expect(r.stderr.trim().split('\n')).toHaveLength(1)
      expect(r.stderr).toMatch(/^agent-sandbox: error: no running sandbox for .*: .* is exited \(hint: start it first: agent-sandbox start /)
    }
    const save = await cli(['firewall', 'allow', 'x.example', ws, '--save'])
    expect(save.exitCode, save.stderr).toBe(0)
    expect(save.stderr).toContain('is not running: only the config was changed')
    expect(JSON.parse(readFileSync(join(ws, '.agent-sandbox', 'config.json'), 'utf8')).allowDomains).toEqual([allowed, later, 'x.example'])
  })
})

describe('IPv6', () => {
  let net: Net
  let ws: string
  let v6blocked: string
  const v6allowed = name('v6allowed')

  beforeAll(async () => {
    net = await createNetwork('net6', true)
    v6blocked = `${net.prefix6}::11`
    await startServer('v6allowed', net, 10, {ip6: `${net.prefix6}::10`})
    await startServer('v6blocked', net, 11, {ip6: v6blocked})
    ws = await workspace('fw6', {dockerNetwork: net.name, allowDomains: [v6allowed]})
    await start(ws)
  })

  it('blocks IPv6 egress by address, which a plain container on the same network reaches', async () => {
    expect((await sbx(ws, 'ip', '-6', 'route', 'show', 'default')).stdout).toContain(`via ${net.gateway6}`)
    expectRefused(await tcp(ws, v6blocked, 80), 'tcp v6')
    expectRefused(await tcp(ws, v6blocked, 22), 'tcp v6 port 22')
    expectCurlRefused(await curl(ws, `http://[${v6blocked}]/`), 'curl v6')
    expectRefused(await tcp(ws, net.gateway6 as string, 80), 'tcp v6 gateway')
    expect((await sbx(ws, 'node', '-e', UDP, '5353', v6blocked)).stdout.trim()).toBe('send EPERM')
    const ok = await control(net, 'curl', '-sS', '--max-time', '10', `http://[${v6blocked}]/`)
    expect(ok.stdout, ok.stderr).toBe('hi from v6blocked')
  })

  it('reaches an allowlisted host over IPv6 by name (its AAAA answer opens the IPv6 set)', async () => {
    const r = await curl(ws, `http://${v6allowed}/`, '-6')
    expect(r.exitCode, r.stderr).toBe(0)
    expect(r.stdout).toBe('hi from v6allowed')
    await expectReachable(ws, v6allowed, 'v6allowed') // and over IPv4
  })

  it('doctor passes and tries IPv6 through the IPv6 gateway', async () => {
    const {exitCode, report} = await doctor(ws)
    expect(exitCode, JSON.stringify(report?.checks.filter((c: any) => c.status !== 'pass'))).toBe(0)
    expect(checkOf(report, 'ipv6-egress').detail).toContain(`refused at once by the firewall (${net.gateway6} port 80`)
    expect(checkOf(report, 'rules-ipv6').status).toBe('pass')
  })
})

describe('network modes none and open', () => {
  let net: Net
  const target = name('target')
  let targetIp: string

  beforeAll(async () => {
    net = await createNetwork('netmodes')
    targetIp = `${net.prefix}.10`
    await startServer('target', net, 10)
  })

  it('none: no route at all, so not even the host a firewall would allow is reachable', async () => {
    const ws = await workspace('none', {dockerNetwork: net.name, allowDomains: [target]})
    await start(ws, '--network', 'none')
    expect((await sbx(ws, 'ip', '-4', 'route', 'show')).stdout.trim()).toBe('')
    expect((await sbx(ws, 'ip', '-6', 'route', 'show')).stdout.trim()).toBe('')
    const r = await tcp(ws, targetIp, 80)
    expect(r.exitCode).not.toBe(0)
    expect(r.stderr).toMatch(/Network is unreachable/)
    expect((await curl(ws, `http://${target}/`)).exitCode).toBe(6)
    const status = await cli(['firewall', 'status', ws])
    expect(status.stdout).toMatch(/network mode "none": no network at all/)
    const {exitCode, report} = await doctor(ws)
    expect(exitCode, JSON.stringify(report?.checks)).toBe(0)
    expect(checkOf(report, 'no-route').status).toBe('pass')
  })

  it('open: warns loudly on stderr and reaches a host the firewall would block (control)', async () => {
    const ws = await workspace('open', {dockerNetwork: net.name})
    const r = await cli(['start', ws, '--network', 'open'])
    expect(r.exitCode, r.stderr).toBe(0)
    expect(r.stderr).toMatch(/warning: network mode "open": egress from this sandbox is NOT filtered/)
    await expectReachable(ws, target, 'target')
    const status = await cli(['firewall', 'status', ws])
    expect(status.stdout).toMatch(/egress is NOT filtered/)
    const allow = await cli(['firewall', 'allow', 'x.example', ws])
    expect(allow.exitCode).toBe(1)
    expect(allow.stderr).toMatch(/network mode "open": there is no firewall allowlist/)
    const {exitCode, report} = await doctor(ws)
    expect(exitCode).toBe(1)
    expect(checkOf(report, 'egress')).toMatchObject({status: 'fail', detail: expect.stringContaining('not filtered')})
  })
})

describe('a firewall that cannot be installed', () => {
  it('makes start fail (exit 6) with the reason on one line, and leaves no container behind', async () => {
    // Both iptables backends' restore tools replaced by /bin/false (they are symlinks in Debian).
    const ws = await workspace('broken', {}, 'RUN ln -sf /bin/false /usr/sbin/iptables-restore && ln -sf /bin/false /usr/sbin/iptables-legacy-restore')
    const r = await cli(['start', ws])
    expect(r.exitCode, r.stderr).toBe(6)
    const errors = r.stderr.split('\n').filter((l) => l.startsWith('agent-sandbox: error:'))
    expect(errors).toHaveLength(1)
    expect(errors[0]).toMatch(
      /did not become ready: firewall set-up failed: init-firewall: cannot load IPv4 rules \(nft: iptables-restore exited with status 1; legacy: iptables-legacy-restore exited with status 1\)/,
    )
    const left = await docker('ps', '-a', '--filter', `label=dev.agent-sandbox.workspace=${ws}`, '--format', '{{.Names}} {{.Status}}')
    expect(left.stdout.trim()).toBe('')
    // and nothing runs in it either
    const exec = await sbx(ws, 'true')
    expect(exec.exitCode).toBe(6)
    expect((await docker('ps', '-a', '--filter', `label=dev.agent-sandbox.workspace=${ws}`, '-q')).stdout.trim()).toBe('')
  })
})

describe('a workspace owned by the resolver’s uid (999, dnsmasq in the image)', () => {
  it('moves dnsmasq to another uid, so DNS filtering still applies to node', async () => {
    const path = await makeWorkspace('uid999', {owner: 999})
    workspaces.push(path)
    await initWorkspace(path)
    writeFileSync(join(path, '.agent-sandbox', 'config.json'), `${JSON.stringify({env: {AGENT_SANDBOX_GITHUB_META: '0'}}, null, 2)}\n`)
    const container = await start(path)
    expect((await sbx(path, 'id', '-u')).stdout.trim()).toBe('999')
    const dnsUid = (await docker('exec', container, 'id', '-u', 'dnsmasq')).stdout.trim()
    expect(dnsUid).toMatch(/^\d+$/)
    expect(dnsUid).not.toBe('999')
    // node cannot use the upstream resolver directly, nor signal the resolver.
    const direct = await sbx(path, 'dig', '+notcp', '+time=2', '+tries=1', '@127.0.0.11', 'registry.npmjs.org')
    expect(direct.exitCode, direct.stdout).toBe(9)
    const {exitCode, report, stderr} = await doctor(path)
    expect(exitCode, `${stderr}\n${JSON.stringify(report?.checks.filter((c: any) => c.status !== 'pass'))}`).toBe(0)
    for (const check of ['dns-direct-udp-127.0.0.11', 'dns-direct-tcp-127.0.0.11', 'signal-dnsmasq', 'dns-nxdomain']) expect(checkOf(report, check).status, check).toBe('pass')
  })
})

/**
 * Every way out decided by name and port, on the real engine, against
 * containers this file starts on networks it creates (never any other
 * address). Each way out is shown open from a plain container (the control)
 * and closed from the sandbox, beside its legitimate twin: an allowlisted name
 * over TCP, a declared `name:PORT`, a declared `name:PORT/udp`, git to a
 * declared host, and the user reaching a published port from the host.
 * A peer's spoofed ICMP redirect, and on an IPv6 network its router
 * advertisement, reroute the control and not the sandbox.
 * `doctor` passes, and fails once a rule opens one of them again.
 */
import {randomBytes, randomInt} from 'node:crypto'
import {writeFileSync} from 'node:fs'
import {dirname, join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {BASE_IMAGE, cleanupUnder, cli, configuredWorkspace, docker, freePort, initWorkspace, makeWorkspace, removeWorkspace, run, type Result, sbx, trustWorkspace} from './helpers.js'

const RUN = `${(process.env.AGENT_SANDBOX_IT_ID ?? 'main').toLowerCase().replace(/[^a-z0-9]+/g, '-')}-${randomBytes(3).toString('hex')}`
const LABEL = `dev.agent-sandbox.fwports=${RUN}`
const name = (role: string) => `fwp-${role}-${RUN}`

/** HTTP on 80, 3128 and 5432; a git daemon's port 9418 as plain TCP; UDP echo on 443 (QUIC's) and 5353. */
const SERVER = `const http = require('http'), dgram = require('dgram');
for (const p of [80, 3128, 5432, 9418]) http.createServer((q, r) => r.end('hi from ' + process.env.NAME + ' on ' + p + '\\n')).listen(p, '0.0.0.0');
for (const p of [443, 5353]) { const u = dgram.createSocket('udp4'); u.on('message', (m, ri) => u.send('pong', ri.port, ri.address)); u.bind(p); }`
/** `node -e UDP PORT HOST`: "send EPERM", "reply pong" or "no reply". */
const UDP = `const [port, host] = process.argv.slice(1);
const d = require('dgram').createSocket('udp4');
d.on('error', (e) => { console.log('error ' + e.code); process.exit(3) });
d.on('message', (m) => { console.log('reply ' + m); process.exit(0) });
d.send('ping', Number(port), host, (e) => { if (e) { console.log('send ' + e.code); process.exit(2) } });
setTimeout(() => { console.log('no reply'); process.exit(4) }, 3000);`
const TCP = 'exec 3<> "/dev/tcp/$0/$1" && echo connected'
const VSOCK = 'socket(my $s, 40, 1, 0) and print "opened\\n" and exit 0; print "refused: $!\\n"; exit 1'
/**
 * `python3 -c REDIRECT GATEWAY VICTIM NEW_GATEWAY DESTINATION SPORT DPORT COUNT`:
 * COUNT ICMP host redirects (type 5, code 1) that claim to come from GATEWAY,
 * telling VICTIM to reach DESTINATION via NEW_GATEWAY, about VICTIM's UDP
 * datagram SPORT -> DESTINATION:DPORT.
 */
const REDIRECT = `import socket, struct, sys, time
gw, victim, new_gw, dst = sys.argv[1:5]
sport, dport, count = (int(a) for a in sys.argv[5:8])
def csum(b):
    s = sum(struct.unpack('!%dH' % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xffff)
    return ~(s + (s >> 16)) & 0xffff
def ip(src, dst, proto, length):
    h = struct.pack('!BBHHHBBH4s4s', 0x45, 0, 20 + length, 0, 0, 64, proto, 0, socket.inet_aton(src), socket.inet_aton(dst))
    return h[:10] + struct.pack('!H', csum(h)) + h[12:]
inner = ip(victim, dst, 17, 12) + struct.pack('!HHHH', sport, dport, 12, 0)
icmp = struct.pack('!BBH4s', 5, 1, 0, socket.inet_aton(new_gw)) + inner
icmp = icmp[:2] + struct.pack('!H', csum(icmp)) + icmp[4:]
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
for _ in range(count):
    s.sendto(ip(gw, victim, 1, len(icmp)) + icmp, (victim, 0))
    time.sleep(0.2)`
/** `python3 -c DATAGRAMS DESTINATION DPORT SPORT`: a UDP datagram from SPORT every half second, for a few minutes. */
const DATAGRAMS = `import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(('0.0.0.0', int(sys.argv[3])))
for _ in range(600):
    s.sendto(b'ping', (sys.argv[1], int(sys.argv[2])))
    time.sleep(0.5)`
/**
 * `python3 -c ADVERTISE TARGET COUNT`: COUNT router advertisements (ICMPv6 type
 * 134, hop limit 255, router lifetime 1800 s, no options) to TARGET, a
 * link-local address on eth0, so from this container's own link-local address.
 * The kernel fills in the checksum of a raw ICMPv6 socket.
 */
const ADVERTISE = `import socket, struct, sys, time
target, count = sys.argv[1], int(sys.argv[2])
s = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_UNICAST_HOPS, 255)
ra = struct.pack('!BBHBBHII', 134, 0, 0, 0, 0, 1800, 0, 0)
for _ in range(count):
    s.sendto(ra, (target, 0, 0, socket.if_nametoindex('eth0')))
    time.sleep(0.2)`
/** A server on port 3000 that answers "served". */
const LISTEN = "require('http').createServer((q, r) => r.end('served')).listen(3000, '0.0.0.0')"

const workspaces: string[] = []
let netName = ''
let farNet = ''
let net6 = ''

function must(r: Result, what: string): Result {
  if (r.exitCode !== 0) throw new Error(`${what} failed (${r.exitCode}): ${r.stderr || r.stdout}`)
  return r
}

async function until<T>(what: string, probe: () => Promise<T>, done: (v: T) => boolean): Promise<T> {
  let last = await probe()
  for (let i = 0; i < 60 && !done(last); i++) {
    await new Promise((resolve) => setTimeout(resolve, 250))
    last = await probe()
  }
  if (!done(last)) throw new Error(`${what}: ${JSON.stringify(last)}`)
  return last
}

function control(...args: string[]): Promise<Result> {
  return docker('run', '--rm', '--label', LABEL, '--network', netName, '--entrypoint', args[0], BASE_IMAGE, ...args.slice(1))
}

async function gatewayOf(net: string): Promise<string> {
  return must(await docker('network', 'inspect', '-f', '{{(index .IPAM.Config 0).Gateway}}', net), 'network inspect').stdout.trim()
}

async function addressOf(container: string): Promise<string> {
  return must(await docker('inspect', '-f', `{{(index .NetworkSettings.Networks "${netName}").IPAddress}}`, container), 'inspect').stdout.trim()
}

/**
 * Containers inherit the host's net.ipv4.conf.all.accept_redirects, 0 wherever
 * forwarding is on (as on every engine host), so the kernel ignores redirects
 * already. A helper in the container's network namespace turns it on, so that
 * only a firewall rule stands between. /proc/sys is read-only in containers:
 * Docker unmasks it with systempaths=unconfined, Podman with unmask=ALL.
 */
async function acceptRedirects(container: string): Promise<void> {
  const unmask = process.env.AGENT_SANDBOX_ENGINE === 'podman' ? 'unmask=ALL' : 'systempaths=unconfined'
  must(await docker('run', '--rm', '--label', LABEL, '--network', `container:${container}`, '--user', 'root', '--cap-add', 'NET_ADMIN', '--security-opt', unmask, '--entrypoint', 'sysctl', BASE_IMAGE, '-w', 'net.ipv4.conf.all.accept_redirects=1'), 'accept_redirects')
}

/** Packets counted by the first rule of the sandbox's INPUT chain (`iptables` or `ip6tables`) whose listing matches. */
async function inputPackets(container: string, tool: 'iptables' | 'ip6tables', rule: RegExp): Promise<number> {
  const table = must(await docker('exec', '-u', 'root', container, tool, '-L', 'INPUT', '-v', '-x', '-n'), `${tool} -L`).stdout
  const line = table.split('\n').find((l) => rule.test(l))
  if (!line) throw new Error(`no rule matching ${rule} in INPUT:\n${table}`)
  return Number(line.trim().split(/\s+/)[0])
}

/** Packets counted by the sandbox's INPUT rule that drops ICMP redirects. */
function redirectsDropped(container: string): Promise<number> {
  return inputPackets(container, 'iptables', /\bDROP\b.*\bicmptype 5\b/)
}

/** A container's link-local address on eth0, once duplicate address detection is done with it. */
async function linkLocal(container: string): Promise<string> {
  const out = await until(
    `a usable link-local address in ${container}`,
    async () => must(await docker('exec', container, 'ip', '-6', '-o', 'addr', 'show', 'dev', 'eth0', 'scope', 'link'), 'ip addr').stdout,
    (o) => /inet6 fe80:/.test(o) && !/tentative/.test(o),
  )
  return (/inet6 (fe80:[0-9a-f:]+)\//.exec(out) as RegExpExecArray)[1]
}

/** ICMP redirects the kernel itself received (InRedirects in /proc/net/snmp). */
async function redirectsSeen(container: string): Promise<number> {
  const snmp = must(await docker('exec', container, 'cat', '/proc/net/snmp'), 'snmp').stdout.split('\n').filter((l) => l.startsWith('Icmp:'))
  const names = snmp[0].split(/\s+/)
  return Number(snmp[1].split(/\s+/)[names.indexOf('InRedirects')])
}

afterAll(async () => {
  for (const path of workspaces) await cleanupUnder(dirname(path))
  const mine = await docker('ps', '-aq', '--filter', `label=${LABEL}`)
  const ids = mine.stdout.split('\n').filter(Boolean)
  if (ids.length) await docker('rm', '-f', ...ids)
  for (const net of [netName, farNet, net6]) if (net) await docker('network', 'rm', net)
  for (const path of workspaces) removeWorkspace(path)
})

describe('ways out by name and port', () => {
  const web = name('web')
  const peer = name('peer')
  let ws = ''
  let sandboxIp = ''
  let hostPort = 0
  let container = ''

  beforeAll(async () => {
    netName = name('net')
    must(await docker('network', 'create', '--label', LABEL, netName), 'network create')
    for (const role of ['web', 'peer']) {
      must(await docker('run', '-d', '--name', name(role), '--label', LABEL, '--network', netName, '-e', `NAME=${role}`, '--entrypoint', 'node', '--user', 'root', BASE_IMAGE, '-e', SERVER), `starting ${role}`)
    }
    await until('the web server listens', () => control('curl', '-sS', '--max-time', '5', `http://${web}/`), (r) => r.exitCode === 0)
    hostPort = await freePort()
    ws = await makeWorkspace('fwports')
    workspaces.push(ws)
    await initWorkspace(ws)
    const config = {
      dockerNetwork: netName,
      allowDomains: [web, `${web}:5432`, `${web}:5353/udp`, `${peer}:9418`],
      ports: [`127.0.0.1:${hostPort}:3000`],
      env: {AGENT_SANDBOX_GITHUB_META: '0'},
    }
    writeFileSync(join(ws, '.agent-sandbox', 'config.json'), `${JSON.stringify(config, null, 2)}\n`)
    await trustWorkspace(ws)
    const started = await cli(['start', ws, '--json'])
    must(started, 'start')
    container = JSON.parse(started.stdout).name as string
    const ip = await docker('inspect', '-f', `{{(index .NetworkSettings.Networks "${netName}").IPAddress}}`, container)
    sandboxIp = ip.stdout.trim()
  })

  it('an allowlisted name is reached over TCP through the gateway', async () => {
    const r = await sbx(ws, 'curl', '-sS', '--max-time', '10', `http://${web}/`)
    expect(r.stdout, r.stderr).toBe('hi from web on 80')
  })

  it('another port of an allowlisted address is refused (a plain container reaches it), and status names the entry that would allow it', async () => {
    const ctl = await control('curl', '-sS', '--max-time', '10', `http://${web}:3128/`)
    expect(ctl.stdout, ctl.stderr).toBe('hi from web on 3128')
    const r = await sbx(ws, 'bash', '-c', TCP, web, '3128')
    expect(r.exitCode).not.toBe(0)
    expect(r.stderr).toMatch(/Connection refused/)
    const status = await until(
      'the refusal in firewall status',
      async () => JSON.parse(must(await cli(['firewall', 'status', ws, '--json']), 'status').stdout),
      (s) => s.deniedConnections.some((c: any) => c.destination.endsWith(':3128')),
    )
    const denied = status.deniedConnections.find((c: any) => c.destination.endsWith(':3128'))
    expect(denied.allowedBy).toBe(`${web}:3128`)
    const text = must(await cli(['firewall', 'status', ws]), 'status').stdout
    expect(text).toMatch(/ALLOWED BY/)
    expect(text).toContain(`${web}:3128`)
  })

  it('a declared name:PORT is reached directly', async () => {
    const r = await sbx(ws, 'curl', '-sS', '--max-time', '10', `http://${web}:5432/`)
    expect(r.stdout, r.stderr).toBe('hi from web on 5432')
  })

  it('UDP (QUIC) to an allowlisted address fails at the send; a declared UDP port answers', async () => {
    expect((await control('node', '-e', UDP, '443', web)).stdout.trim()).toBe('reply pong')
    const quic = await sbx(ws, 'node', '-e', UDP, '443', web)
    expect(quic.stdout.trim()).toBe('send EPERM')
    const declared = await sbx(ws, 'node', '-e', UDP, '5353', web)
    expect(declared.stdout.trim(), declared.stderr).toBe('reply pong')
  })

  it('curl asked for HTTP/3 falls back to TCP at once', async () => {
    const r = await sbx(ws, 'curl', '-sS', '--max-time', '10', '--http3', `https://${web}/`)
    // Without HTTP/3 in curl, --http3 is refused outright; either way nothing leaves over UDP.
    expect(r.stderr).not.toMatch(/timed out|Timeout/i)
  })

  it('git to a declared host:port is reached; the same port of an undeclared host is refused', async () => {
    const ok = await sbx(ws, 'bash', '-c', TCP, peer, '9418')
    expect(ok.stdout.trim(), ok.stderr).toBe('connected')
    const other = await sbx(ws, 'bash', '-c', TCP, web, '9418')
    expect(other.stderr).toMatch(/Connection refused/)
  })

  it('a published port answers the user on the host, never a peer container on the network', async () => {
    must(await sbx(ws, 'bash', '-c', `nohup node -e "${LISTEN}" > /dev/null 2>&1 &`), 'server in the sandbox')
    const host = await until('the published port from the host', () => run('curl', ['-sS', '--max-time', '5', `http://127.0.0.1:${hostPort}/`]), (r) => r.stdout === 'served')
    expect(host.stdout).toBe('served')
    // control: a peer reaches a plain container's port 3128 on the same network
    expect((await docker('exec', peer, 'curl', '-sS', '--max-time', '5', `http://${web}:3128/`)).exitCode).toBe(0)
    const fromPeer = await docker('exec', peer, 'curl', '-sS', '--max-time', '5', `http://${sandboxIp}:3000/`)
    expect(fromPeer.exitCode, fromPeer.stdout).toBe(7)
  })

  it('AF_VSOCK is refused by the seccomp profile; a plain container opens it', async () => {
    const ctl = await control('perl', '-e', VSOCK)
    expect(ctl.stdout.trim()).toBe('opened')
    const r = await sbx(ws, 'perl', '-e', VSOCK)
    expect(r.stdout.trim()).toBe('refused: Operation not permitted')
  })

  it("a peer's spoofed ICMP redirect reroutes a plain container; the sandbox's rule drops it, and only that rule", async () => {
    // The route to be redirected must have a gateway, so the destination is off-link: the host's own address on
    // another network of ours, reached via this network's gateway. A flow the host accepts (and tracks) matters on
    // rootful Podman, whose bridge firewall forwards the spoofed packet only as related to a tracked flow; a
    // container on the other network would be cut off by the engines' network isolation. Nothing listens there.
    // Podman brings a network's bridge (and so that address) up with its first container: without one, the
    // address is not the host's and the datagrams would leave by the host's default route.
    farNet = name('far')
    must(await docker('network', 'create', '--label', LABEL, farNet), 'network create')
    must(await docker('run', '-d', '--name', name('far'), '--label', LABEL, '--network', farNet, '--entrypoint', 'sleep', BASE_IMAGE, 'infinity'), 'starting a container on the far network')
    const dst = await gatewayOf(farNet)
    const gw = await gatewayOf(netName)
    const router = name('router')
    must(await docker('run', '-d', '--name', router, '--label', LABEL, '--network', netName, '--cap-add', 'NET_RAW', '--user', 'root', '--entrypoint', 'sleep', BASE_IMAGE, 'infinity'), 'starting the router')
    const routerIp = await addressOf(router)
    const redirect = async (victimIp: string, count: number) => {
      must(await docker('exec', router, 'python3', '-c', REDIRECT, gw, victimIp, routerIp, dst, '40000', '5353', String(count)), 'sending redirects')
    }
    const route = async (c: string) => must(await docker('exec', c, 'ip', 'route', 'get', dst), 'ip route get').stdout
    const rerouted = (r: string) => r.includes(`via ${routerIp} `)

    // control: a plain container sending datagrams to the destination takes the redirect
    const ctl = name('victim')
    must(await docker('run', '-d', '--name', ctl, '--label', LABEL, '--network', netName, '--entrypoint', 'python3', BASE_IMAGE, '-c', DATAGRAMS, dst, '5353', '40000'), 'starting the control')
    await acceptRedirects(ctl)
    expect(await route(ctl)).toContain(`via ${gw} `)
    const ctlIp = await addressOf(ctl)
    await until('the control rerouted via the peer', async () => { await redirect(ctlIp, 3); return route(ctl) }, rerouted)

    // the sandbox, in the same state: the same flow (its address in a declared port's set, as dnsmasq adds one)
    await acceptRedirects(container)
    must(await docker('exec', '-u', 'root', container, 'ipset', 'add', 'agent-sandbox-udp5353-4', dst), 'ipset add')
    const pid = must(await sbx(ws, 'bash', '-c', 'nohup python3 -c "$0" "$1" 5353 40000 > /dev/null 2>&1 & echo $!', DATAGRAMS, dst), 'datagrams from the sandbox').stdout.trim()
    const rules = must(await docker('exec', '-u', 'root', container, 'iptables', '-S', 'INPUT'), 'iptables -S').stdout
    try {
      await until('the flow tracked in the sandbox', async () => must(await docker('exec', '-u', 'root', container, 'cat', '/proc/net/nf_conntrack'), 'conntrack').stdout, (t) => t.includes(`dst=${dst} sport=40000 dport=5353`))
      const dropped = await redirectsDropped(container)
      const seen = await redirectsSeen(container)
      await redirect(sandboxIp, 5)
      await until('the redirects counted by the DROP rule', () => redirectsDropped(container), (n) => n >= dropped + 5)
      expect(await redirectsDropped(container)).toBe(dropped + 5)
      expect(await redirectsSeen(container)).toBe(seen)
      expect(await route(container)).toContain(`via ${gw} `)
      // without the rule, the redirect is related to the flow and taken: the rule is what holds
      must(await docker('exec', '-u', 'root', container, 'iptables', '-D', 'INPUT', '-p', 'icmp', '-m', 'icmp', '--icmp-type', 'redirect', '-j', 'DROP'), 'removing the rule')
      await until('the sandbox rerouted once the rule is gone', async () => { await redirect(sandboxIp, 3); return route(container) }, rerouted)
    } finally {
      if ((await docker('exec', '-u', 'root', container, 'iptables', '-C', 'INPUT', '-p', 'icmp', '-m', 'icmp', '--icmp-type', 'redirect', '-j', 'DROP')).exitCode !== 0) {
        must(await docker('exec', '-u', 'root', container, 'iptables', '-I', 'INPUT', '2', '-p', 'icmp', '-m', 'icmp', '--icmp-type', 'redirect', '-j', 'DROP'), 'restoring the rule')
      }
      await docker('exec', '-u', 'root', container, 'kill', pid)
      await docker('exec', '-u', 'root', container, 'ipset', 'del', 'agent-sandbox-udp5353-4', dst)
    }
    expect(must(await docker('exec', '-u', 'root', container, 'iptables', '-S', 'INPUT'), 'iptables -S').stdout).toBe(rules)
  })

  it('doctor passes, and fails once UDP or inbound is opened again', async () => {
    const ok = await cli(['doctor', ws, '--json'])
    const report = JSON.parse(ok.stdout)
    for (const check of ['rules-ipv4', 'socket-families', 'io-uring']) {
      expect(report.checks.find((c: any) => c.name === check)?.status, check).toBe('pass')
    }
    expect(ok.exitCode, JSON.stringify(report.checks.filter((c: any) => c.status === 'fail'))).toBe(0)
    must(await docker('exec', '-u', 'root', container, 'iptables', '-I', 'INPUT', '1', '-p', 'tcp', '--dport', '3000', '-j', 'ACCEPT'), 'opening inbound')
    const broken = JSON.parse((await cli(['doctor', ws, '--json'])).stdout)
    expect(broken.checks.find((c: any) => c.name === 'rules-ipv4')).toMatchObject({status: 'fail', detail: expect.stringContaining('inbound rule open to any peer')})
    must(await docker('exec', '-u', 'root', container, 'iptables', '-D', 'INPUT', '-p', 'tcp', '--dport', '3000', '-j', 'ACCEPT'), 'closing inbound')
    must(await docker('exec', '-u', 'root', container, 'iptables', '-I', 'OUTPUT', '1', '-p', 'udp', '-m', 'set', '--match-set', 'agent-sandbox-allow4', 'dst', '-j', 'ACCEPT'), 'opening UDP')
    const udp = JSON.parse((await cli(['doctor', ws, '--json'])).stdout)
    expect(udp.checks.find((c: any) => c.name === 'rules-ipv4')).toMatchObject({status: 'fail', detail: expect.stringContaining('unexpected rule')})
    must(await docker('exec', '-u', 'root', container, 'iptables', '-D', 'OUTPUT', '-p', 'udp', '-m', 'set', '--match-set', 'agent-sandbox-allow4', 'dst', '-j', 'ACCEPT'), 'closing UDP')
  })
})

describe('router advertisements from a peer on an IPv6 network', () => {
  const router = name('router6')
  const ctl = name('control6')
  let ws = ''
  let container = ''
  let routerLl = ''

  beforeAll(async () => {
    net6 = name('net6')
    const group = () => randomInt(0x10000).toString(16)
    must(await docker('network', 'create', '--label', LABEL, '--ipv6', '--subnet', `fd00:${group()}:${group()}::/64`, net6), 'network create --ipv6')
    must(await docker('run', '-d', '--name', router, '--label', LABEL, '--network', net6, '--cap-add', 'NET_RAW', '--user', 'root', '--entrypoint', 'sleep', BASE_IMAGE, 'infinity'), 'starting the router')
    must(await docker('run', '-d', '--name', ctl, '--label', LABEL, '--network', net6, '--entrypoint', 'sleep', BASE_IMAGE, 'infinity'), 'starting the control')
    ws = await configuredWorkspace('fwports6', {dockerNetwork: net6})
    workspaces.push(ws)
    const started = must(await cli(['start', ws, '--json']), 'start')
    container = JSON.parse(started.stdout).name as string
    routerLl = await linkLocal(router)
  })

  it("a peer's router advertisement adds a default route to a plain container; the sandbox's rule drops it, and its firewall is what holds", async () => {
    const advertise = async (target: string, count: number) => {
      must(await docker('exec', router, 'python3', '-c', ADVERTISE, target, String(count)), 'sending router advertisements')
    }
    const routes = async (c: string) => must(await docker('exec', c, 'ip', '-6', 'route', 'show', 'default'), 'ip -6 route').stdout
    const fromRouter = (r: string) => r.includes(`default via ${routerLl} dev eth0 proto ra `)
    const sysctl = async (c: string, key: string) => must(await docker('exec', c, 'cat', `/proc/sys/net/ipv6/conf/${key}`), 'sysctl').stdout.trim()

    // control: the engine's defaults accept router advertisements, and the container takes the peer as a router
    const ctlLl = await linkLocal(ctl)
    expect(await routes(ctl)).not.toContain('proto ra')
    await until('the control routed via the peer', async () => { await advertise(ctlLl, 1); return routes(ctl) }, fromRouter)

    // the sandbox: the same defaults, the IPv6 rules loaded (IPv6 is on in it), and the advertisements counted by the DROP rule
    for (const key of ['all/accept_ra', 'eth0/accept_ra']) expect(await sysctl(container, key), key).toBe('1')
    for (const key of ['all/forwarding', 'eth0/forwarding']) expect(await sysctl(container, key), key).toBe('0')
    const sandboxLl = await linkLocal(container)
    const rules = must(await docker('exec', '-u', 'root', container, 'ip6tables', '-S', 'INPUT'), 'ip6tables -S').stdout
    const position = rules.split('\n').filter((l) => l.startsWith('-A INPUT')).indexOf('-A INPUT -p ipv6-icmp -m icmp6 --icmpv6-type 134 -j DROP') + 1
    expect(position, rules).toBeGreaterThan(0)
    const drop = ['INPUT', '-p', 'ipv6-icmp', '-m', 'icmp6', '--icmpv6-type', 'router-advertisement', '-j', 'DROP']
    const accept = [...drop.slice(0, -1), 'ACCEPT']
    const ip6tables = async (...args: string[]) => docker('exec', '-u', 'root', container, 'ip6tables', ...args)
    const dropped = () => inputPackets(container, 'ip6tables', /\bDROP\b.*\bipv6-icmptype 134\b/)
    const rejected = () => inputPackets(container, 'ip6tables', /\bREJECT\b.*icmp6-port-unreachable/)
    try {
      const before = await dropped()
      await advertise(sandboxLl, 5)
      await until('the advertisements counted by the DROP rule', dropped, (n) => n >= before + 5)
      expect(await dropped()).toBe(before + 5)
      expect(await routes(container)).not.toContain('proto ra')

      // without it, the chain's last rule refuses them: conntrack leaves neighbour discovery untracked, never RELATED
      must(await ip6tables('-D', ...drop), 'removing the rule')
      const refused = await rejected()
      await advertise(sandboxLl, 5)
      await until('the advertisements refused by the last rule', rejected, (n) => n >= refused + 5)
      expect(await routes(container)).not.toContain('proto ra')

      // a rule that lets them in, and the sandbox's kernel takes the peer as its router: the rules are what holds
      must(await ip6tables('-I', accept[0], String(position), ...accept.slice(1)), 'accepting advertisements')
      await until('the sandbox routed via the peer once they are let in', async () => { await advertise(sandboxLl, 1); return routes(container) }, fromRouter)
    } finally {
      if ((await ip6tables('-C', ...accept)).exitCode === 0) must(await ip6tables('-D', ...accept), 'removing the accepting rule')
      if ((await ip6tables('-C', ...drop)).exitCode !== 0) must(await ip6tables('-I', drop[0], String(position), ...drop.slice(1)), 'restoring the rule')
    }
    expect(must(await ip6tables('-S', 'INPUT'), 'ip6tables -S').stdout).toBe(rules)
  })
})

/**
 * Robust DNS: a network connected to a running sandbox makes the
 * engine rewrite its /etc/resolv.conf (Docker: to its own 127.0.0.11; Podman:
 * the new network's DNS, its gateway, in front). The sandbox must point it back
 * at its own resolver and take the new resolvers as upstreams, so that an
 * allowlisted container on the new network resolves, while the agent still
 * cannot ask any resolver but the sandbox's, nor reach what is not allowlisted.
 * Runs on Docker and on Podman; the only destinations are this file's own
 * containers, on a network it creates.
 */
import {randomBytes} from 'node:crypto'
import {writeFileSync} from 'node:fs'
import {dirname, join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {BASE_IMAGE, cleanupUnder, cli, docker, initWorkspace, makeWorkspace, removeWorkspace, type Result, sbx, trustWorkspace} from './helpers.js'

const PODMAN = process.env.AGENT_SANDBOX_ENGINE === 'podman'
const RUN = `${(process.env.AGENT_SANDBOX_IT_ID ?? 'main').toLowerCase().replace(/[^a-z0-9]+/g, '-')}-${randomBytes(3).toString('hex')}`
const LABEL = `dev.agent-sandbox.dnsit=${RUN}`
const name = (role: string) => `dnsit-${role}-${RUN}`
const SERVER = "require('http').createServer((q, r) => r.end('hi from ' + process.env.NAME)).listen(80)"
const TCP = 'exec 3<> "/dev/tcp/$0/$1" && echo connected'

const networks: string[] = []
let workspacePath = ''

function must(r: Result, what: string): Result {
  if (r.exitCode !== 0) throw new Error(`${what} failed (${r.exitCode}): ${r.stderr || r.stdout}`)
  return r
}

/** A user-defined network on a free 10.x.y.0/24; servers are pinned high, away from dynamic addresses. */
async function createNetwork(role: string): Promise<{name: string; prefix: string; gateway: string}> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const prefix = `10.${150 + Math.floor(Math.random() * 50)}.${Math.floor(Math.random() * 256)}`
    const net = {name: name(role), prefix, gateway: `${prefix}.1`}
    const r = await docker('network', 'create', '--label', LABEL, '--subnet', `${prefix}.0/24`, '--gateway', net.gateway, net.name)
    if (r.exitCode === 0) {
      networks.push(net.name)
      return net
    }
    if (!/overlap|in use|already/i.test(r.stderr)) throw new Error(`docker network create failed: ${r.stderr}`)
  }
  throw new Error('no free 10.x.y.0/24 for a test network')
}

async function startServer(role: string, network: string, ip: string): Promise<void> {
  must(await docker('run', '-d', '--name', name(role), '--label', LABEL, '--network', network, '--ip', ip, '-e', `NAME=${role}`, '--entrypoint', 'node', '--user', 'root', BASE_IMAGE, '-e', SERVER), `starting ${role}`)
  for (let i = 0; i < 100; i++) {
    const r = await docker('exec', name(role), 'node', '-e', "require('net').connect(80, '127.0.0.1').on('connect', () => process.exit(0)).on('error', () => process.exit(1))")
    if (r.exitCode === 0) return
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`${role} does not listen on port 80`)
}

/** A plain, unfiltered container on the network: the control for every refusal. */
function control(network: string, ...args: string[]): Promise<Result> {
  return docker('run', '--rm', '--label', LABEL, '--network', network, '--entrypoint', args[0], BASE_IMAGE, ...args.slice(1))
}

/** Polls `dig +short NAME` in the sandbox until it answers WANT (or 20 s pass); returns the last answer. */
async function resolvesTo(ws: string, host: string, want: string): Promise<string> {
  let got = ''
  for (let i = 0; i < 100; i++) {
    got = (await sbx(ws, 'dig', '+short', '+time=1', '+tries=1', host)).stdout.trim()
    if (got === want) break
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
  return got
}

async function doctor(ws: string): Promise<{exitCode: number; checks: Array<{name: string; status: string; detail: string}>}> {
  const r = await cli(['doctor', ws, '--json'])
  return {exitCode: r.exitCode, checks: r.stdout ? JSON.parse(r.stdout).checks : []}
}

function check(checks: Array<{name: string; status: string; detail: string}>, wanted: string): {status: string; detail: string} {
  const found = checks.find((c) => c.name === wanted)
  if (!found) throw new Error(`no check ${wanted} in ${checks.map((c) => c.name).join(', ')}`)
  return found
}

afterAll(async () => {
  if (workspacePath) await cleanupUnder(dirname(workspacePath))
  const mine = (await docker('ps', '-aq', '--filter', `label=${LABEL}`)).stdout.split('\n').filter(Boolean)
  if (mine.length) await docker('rm', '-f', ...mine)
  for (const net of networks) await docker('network', 'rm', net)
  if (workspacePath) removeWorkspace(workspacePath)
})

describe('a network connected to a running sandbox (docker network connect)', () => {
  let net: {name: string; prefix: string; gateway: string}
  let ws: string
  let sandbox: string
  /** The resolver the engine writes into resolv.conf for the new network. */
  let engineDns: string
  const allowed = name('allowed')
  const blocked = name('blocked')
  let ip: {allowed: string; blocked: string}

  beforeAll(async () => {
    net = await createNetwork('db')
    engineDns = PODMAN ? net.gateway : '127.0.0.11'
    ip = {allowed: `${net.prefix}.200`, blocked: `${net.prefix}.201`}
    await startServer('allowed', net.name, ip.allowed)
    await startServer('blocked', net.name, ip.blocked)
    ws = await makeWorkspace('dns')
    workspacePath = ws
    await initWorkspace(ws)
    // GitHub's published ranges are fetched from the internet by default: not from tests.
    writeFileSync(join(ws, '.agent-sandbox', 'config.json'), `${JSON.stringify({allowDomains: [allowed], env: {AGENT_SANDBOX_GITHUB_META: '0'}})}\n`)
    await trustWorkspace(ws)
    // On the engine's default network: the test network comes later.
    const r = must(await cli(['start', ws, '--json']), 'start')
    sandbox = JSON.parse(r.stdout).name
    must(await docker('network', 'connect', net.name, sandbox), 'docker network connect')
  })

  it('resolves and reaches the allowlisted container on the new network; a name not allowlisted is NXDOMAIN', async () => {
    expect(await resolvesTo(ws, allowed, ip.allowed)).toBe(ip.allowed)
    const curl = await sbx(ws, 'curl', '-sS', '--max-time', '10', `http://${allowed}/`)
    expect(curl.stdout, curl.stderr).toBe('hi from allowed')
    const dig = await sbx(ws, 'dig', '+time=2', '+tries=1', blocked)
    expect(dig.stdout).toMatch(/status: NXDOMAIN/)
    expect(dig.stdout).toMatch(/SERVER: 127\.0\.0\.1#53/)
    // control: the new network's DNS does know the blocked container
    expect((await control(net.name, 'dig', '+short', `@${engineDns}`, blocked)).stdout.trim()).toBe(ip.blocked)
  })

  it("refuses DNS straight to the new network's resolver, UDP and TCP, which answers a plain container", async () => {
    for (const proto of ['+notcp', '+tcp']) {
      const direct = await sbx(ws, 'dig', proto, '+time=2', '+tries=1', `@${engineDns}`, allowed)
      expect(direct.exitCode, `${engineDns} ${proto}: ${direct.stdout}`).toBe(9) // no reply
      expect(direct.stdout).not.toMatch(/Got answer/)
      expect(direct.stdout + direct.stderr).toMatch(/connection refused/i)
      expect((await control(net.name, 'dig', proto, '+short', `@${engineDns}`, allowed)).stdout.trim()).toBe(ip.allowed)
    }
  })

  it('keeps the new interface default-deny: the container that is not allowlisted is refused, and reachable from a plain container', async () => {
    const tcp = await sbx(ws, 'bash', '-c', TCP, ip.blocked, '80')
    expect(tcp.exitCode).not.toBe(0)
    expect(tcp.stderr).toMatch(/Connection refused/)
    expect((await control(net.name, 'curl', '-sS', '--max-time', '10', `http://${ip.blocked}/`)).stdout).toBe('hi from blocked')
  })

  it("points resolv.conf back at 127.0.0.1, root's and 0644, with the new resolver first among the upstreams; node can change none of it", async () => {
    const resolv = must(await docker('exec', sandbox, 'cat', '/etc/resolv.conf'), 'cat resolv.conf').stdout
    expect(resolv.split('\n').filter((l) => l.startsWith('nameserver'))).toEqual(['nameserver 127.0.0.1'])
    expect(must(await docker('exec', sandbox, 'stat', '-c', '%u %g %a', '/etc/resolv.conf'), 'stat').stdout.trim()).toBe('0 0 644')
    const upstreams = must(await docker('exec', sandbox, 'cat', '/run/agent-sandbox/upstream-resolvers'), 'upstreams').stdout.trim().split('\n')
    expect(upstreams[0]).toBe(engineDns)
    const log = must(await docker('exec', sandbox, 'cat', '/run/agent-sandbox/firewall.log'), 'firewall.log').stdout
    expect(log).toMatch(/dns-watch: resolv\.conf rewritten \(nameservers: [^)]*\): reloading the firewall/)
    expect(log).toMatch(/dns-watch: resolv\.conf points at 127\.0\.0\.1 again/)
    // The engine's rewrite is seen by inotify on resolv.conf, not by the timed check every 10 s.
    expect(log).toMatch(/reloading the firewall for them \(seen by an event \(/)
    expect(log).not.toMatch(/seen by the check every/)
    const script = [
      `echo nameserver ${engineDns} > /etc/resolv.conf; echo "write $?"`,
      `echo nameserver ${engineDns} >> /etc/resolv.conf; echo "append $?"`,
      `echo ${ip.blocked} >> /run/agent-sandbox/upstream-resolvers; echo "upstreams $?"`,
      'kill "$(cat /run/agent-sandbox/mount-watch.pid)"; echo "kill $?"',
    ].join('\n')
    const r = await sbx(ws, 'bash', '-c', script)
    for (const what of ['write', 'append', 'upstreams', 'kill']) expect(r.stdout, what).toMatch(new RegExp(`^${what} [1-9]\\d*$`, 'm'))
    expect(must(await docker('exec', sandbox, 'cat', '/etc/resolv.conf'), 'cat').stdout).not.toContain(engineDns)
  })

  it('doctor passes, with the watcher running and the new resolver refused directly', async () => {
    const {exitCode, checks} = await doctor(ws)
    expect(exitCode, JSON.stringify(checks.filter((c) => c.status === 'fail'))).toBe(0)
    for (const wanted of ['dns-watch', 'resolv-conf', 'dns-nxdomain', `dns-direct-udp-${engineDns}`, `dns-direct-tcp-${engineDns}`]) {
      expect(check(checks, wanted).status, wanted).toBe('pass')
    }
  })

  it('a rewrite is put right at once while the watcher runs; with the watcher gone it sticks, names fail and doctor says so', async () => {
    // As the engine does it: in place, as root.
    const rewrite = `printf 'nameserver ${engineDns}\\n' > /etc/resolv.conf`
    must(await docker('exec', '-u', 'root', sandbox, 'sh', '-c', rewrite), 'rewriting resolv.conf')
    expect(await resolvesTo(ws, allowed, ip.allowed)).toBe(ip.allowed)
    expect(must(await docker('exec', sandbox, 'cat', '/etc/resolv.conf'), 'cat').stdout).toMatch(/^nameserver 127\.0\.0\.1$/m)
    const reloads = must(await docker('exec', sandbox, 'grep', 'reloading the firewall for them', '/run/agent-sandbox/firewall.log'), 'firewall.log').stdout.trim().split('\n')
    expect(reloads.at(-1)).toMatch(/\(seen by an event \(CLOSE_WRITE/)
    // The control: without the watcher, the same rewrite stays and nothing resolves.
    must(await docker('exec', '-u', 'root', sandbox, 'sh', '-c', 'kill "$(cat /run/agent-sandbox/mount-watch.pid)"'), 'stopping mount-watch')
    must(await docker('exec', '-u', 'root', sandbox, 'sh', '-c', rewrite), 'rewriting resolv.conf')
    await new Promise((resolve) => setTimeout(resolve, 1000))
    expect(must(await docker('exec', sandbox, 'cat', '/etc/resolv.conf'), 'cat').stdout.trim()).toBe(`nameserver ${engineDns}`)
    expect((await sbx(ws, 'curl', '-sS', '--max-time', '10', `http://${allowed}/`)).exitCode).toBe(6) // could not resolve
    const {exitCode, checks} = await doctor(ws)
    expect(exitCode).toBe(1)
    expect(check(checks, 'dns-watch')).toMatchObject({status: 'fail', detail: expect.stringContaining('not running')})
    expect(check(checks, 'resolv-conf')).toMatchObject({status: 'fail', detail: expect.stringContaining(`lists '${engineDns}', not only 127.0.0.1`)})
  })

  it('a restart (the engine writes resolv.conf again) leaves the sandbox usable: names resolve, direct DNS is refused, the DNS checks pass', async () => {
    must(await docker('restart', '-t', '1', sandbox), 'docker restart')
    expect(await resolvesTo(ws, allowed, ip.allowed)).toBe(ip.allowed)
    // The egress gateway served the namespace that went with the restart: web traffic stays
    // refused (closed, never direct) until the CLI's next exec or `start` makes the gateway anew (gateway-ops.test.ts).
    must(await cli(['start', ws]), 'start after the restart')
    const curl = await sbx(ws, 'curl', '-sS', '--max-time', '10', `http://${allowed}/`)
    expect(curl.stdout, curl.stderr).toBe('hi from allowed')
    const direct = await sbx(ws, 'dig', '+notcp', '+time=2', '+tries=1', `@${engineDns}`, allowed)
    expect(direct.exitCode).toBe(9)
    expect(direct.stdout).not.toMatch(/Got answer/)
    expect((await sbx(ws, 'dig', '+time=2', '+tries=1', blocked)).stdout).toMatch(/status: NXDOMAIN/)
    // Only the DNS rows: the push gate shares the old network namespace and does not survive a `docker restart`.
    const {checks} = await doctor(ws)
    for (const wanted of ['dns-watch', 'resolv-conf', 'dns-nxdomain', `dns-direct-udp-${engineDns}`, `dns-direct-tcp-${engineDns}`, 'rules-ipv4']) {
      expect(check(checks, wanted).status, wanted).toBe('pass')
    }
  })
})

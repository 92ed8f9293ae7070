/**
 * Containers inside the sandbox. Against the real engine and the
 * built CLI: a sandbox started with --nested gives `node` rootless Podman
 * (`docker`, DOCKER_HOST) with no capabilities and no sudo; `docker run` and
 * `docker build` of a workspace Dockerfile work on images made in the sandbox
 * itself (no registry is reachable); the nested containers' traffic meets the
 * sandbox's firewall (an allowlisted test site of ours is reached, a blocked
 * one is not, by name or IP; direct DNS is refused) and they cannot change it;
 * doctor passes; images survive a restart and `rm --volumes` removes them.
 * Without --nested everything is as before: user namespaces refused, /proc
 * masked, `docker` says nested containers are off (the control).
 */
import {randomBytes} from 'node:crypto'
import {chownSync, mkdirSync, writeFileSync} from 'node:fs'
import {dirname, join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {cleanupUnder, cli, configuredWorkspace, docker, initWorkspace, inspect, makeWorkspace, removeWorkspace, type Result, run, sbx, TEST_GID, TEST_UID} from './helpers.js'

const BASE = `agent-sandbox-base:${process.env.AGENT_SANDBOX_BASE_TAG || 'latest'}`
const RUN = `${(process.env.AGENT_SANDBOX_IT_ID ?? 'main').toLowerCase().replace(/[^a-z0-9]+/g, '-')}-${randomBytes(3).toString('hex')}`
const LABEL = `dev.agent-sandbox.nestit=${RUN}`
const name = (role: string) => `nestit-${role}-${RUN}`
/** The nested image: the sandbox's own bash, curl, dig, cat, true, sleep and iptables with their libraries. */
const TOOLS = 'localhost/nestit-tools:1'
const MAKE_TOOLS = `set -e
bins="/usr/bin/bash /usr/bin/curl /usr/bin/dig /usr/bin/cat /usr/bin/true /usr/bin/sleep /usr/sbin/iptables"
libs=$(ldd $bins | grep -o '/[^ ]*' | sort -u)
xt=$(dirname "$(ldd /usr/bin/bash | grep -o '/[^ ]*libc.so[^ ]*')")/xtables
tar -ch $bins $libs "$xt" 2>/dev/null | docker import --change 'CMD ["/usr/bin/bash"]' - ${TOOLS} > /dev/null`
const SERVER = `require('http').createServer((q, r) => r.end('hi from ' + process.env.NAME + '\\n')).listen(80, '0.0.0.0')`

const workspaces: string[] = []
let netName = ''
let prefix = ''

function must(r: Result, what: string): Result {
  if (r.exitCode !== 0) throw new Error(`${what} failed (${r.exitCode}): ${r.stderr || r.stdout}`)
  return r
}

async function createNetwork(): Promise<void> {
  for (let attempt = 0; attempt < 20; attempt++) {
    prefix = `10.${200 + Math.floor(Math.random() * 50)}.${Math.floor(Math.random() * 256)}`
    netName = name('net')
    const r = await docker('network', 'create', '--label', LABEL, '--subnet', `${prefix}.0/24`, '--ip-range', `${prefix}.128/25`, '--gateway', `${prefix}.1`, netName)
    if (r.exitCode === 0) return
    if (!/overlap|in use/i.test(r.stderr)) throw new Error(`docker network create failed: ${r.stderr}`)
  }
  throw new Error('no free 10.x.y.0/24 for a test network')
}

async function startServer(role: string, host: number): Promise<void> {
  must(await docker('run', '-d', '--name', name(role), '--label', LABEL, '--network', netName, '--ip', `${prefix}.${host}`, '-e', `NAME=${role}`, '--entrypoint', 'node', '--user', 'root', BASE, '-e', SERVER), `starting ${role}`)
  for (let i = 0; i < 100; i++) {
    const r = await docker('exec', name(role), 'node', '-e', "require('net').connect(80, '127.0.0.1').on('connect', () => process.exit(0)).on('error', () => process.exit(1))")
    if (r.exitCode === 0) return
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`${role} does not listen`)
}

/** An unfiltered container on the test network: the control for every "blocked". */
function control(entrypoint: string, ...args: string[]): Promise<Result> {
  return docker('run', '--rm', '--label', LABEL, '--network', netName, '--entrypoint', entrypoint, BASE, ...args)
}

async function workspace(role: string, config: Record<string, unknown>): Promise<string> {
  const path = await configuredWorkspace(role, config)
  workspaces.push(path)
  return path
}

async function start(path: string, ...extra: string[]): Promise<string> {
  const r = await cli(['start', path, '--json', ...extra])
  expect(r.exitCode, r.stderr).toBe(0)
  return JSON.parse(r.stdout).name as string
}

/** A command in a nested container (the sandbox's `docker run --rm`). */
function nested(ws: string, ...args: string[]): Promise<Result> {
  return sbx(ws, 'docker', 'run', '--rm', ...args)
}

afterAll(async () => {
  for (const path of workspaces) await cleanupUnder(dirname(path))
  const mine = await docker('ps', '-aq', '--filter', `label=${LABEL}`)
  const ids = mine.stdout.split('\n').filter(Boolean)
  if (ids.length) await docker('rm', '-f', ...ids)
  if (netName) await docker('network', 'rm', netName)
  for (const path of workspaces) removeWorkspace(path)
})

describe('nested containers', () => {
  let ws: string
  let plain: string
  let sandbox: string
  let plainSandbox: string
  const allowed = name('allowed')
  const blocked = name('blocked')
  const ip = {allowed: '', blocked: '', dns: ''}

  beforeAll(async () => {
    await createNetwork()
    ip.allowed = `${prefix}.10`
    ip.blocked = `${prefix}.11`
    ip.dns = `${prefix}.12`
    await startServer('allowed', 10)
    await startServer('blocked', 11)
    // A resolver of our own on the test network: the target of direct DNS.
    must(
      await docker('run', '-d', '--name', name('dns'), '--label', LABEL, '--network', netName, '--ip', ip.dns, '--entrypoint', 'dnsmasq', '--user', 'root', BASE,
        '-k', '--no-resolv', '--user=root', `--address=/nestit.example/${ip.blocked}`),
      'starting the resolver',
    )
    ws = await workspace('nest', {dockerNetwork: netName, allowDomains: [allowed]})
    plain = await workspace('plain', {dockerNetwork: netName, allowDomains: [allowed]})
    sandbox = await start(ws, '--nested')
    plainSandbox = await start(plain)
    must(await sbx(ws, 'bash', '-c', MAKE_TOOLS), 'making the nested tools image')
    const dir = join(ws, 'tc')
    mkdirSync(dir)
    // The web image: the sandbox's own node, its libraries and the built-ins Debian's node keeps outside
    // itself, serving one line on port 8080.
    writeFileSync(join(dir, 'mkweb.sh'), `set -e
libs=$(ldd /usr/bin/node | grep -o '/[^ ]*' | sort -u)
libnode=$(ldd /usr/bin/node | grep -o '/[^ ]*libnode[^ ]*')
ext=$(grep -ao '/usr/share/nodejs/[a-z@/_.-]*[.][a-z]*js' "$libnode" | sort -u | while read -r f; do [ ! -e "$f" ] || echo "$f"; done)
tar -ch /usr/bin/node $libs $ext 2>/dev/null | docker import --change 'CMD ["/usr/bin/node", "/srv/web.js"]' - localhost/nestit-node:1 > /dev/null
cd "$(dirname "$0")" && printf 'FROM localhost/nestit-node:1\\nCOPY web.js /srv/web.js\\n' | docker build -q -t localhost/nestit-web:1 -f - . > /dev/null
`)
    writeFileSync(join(dir, 'web.js'), "require('http').createServer((q, r) => r.end('hi from the nested web')).listen(8080)\n")
    for (const f of ['', 'mkweb.sh', 'web.js']) chownSync(join(dir, f), TEST_UID, TEST_GID)
    must(await sbx(ws, 'bash', `/workspace/${ws.split('/').pop()}/tc/mkweb.sh`), 'making the web image')
  })

  it('without --nested nothing changes: user namespaces refused, /proc masked, docker says nested is off', async () => {
    const userns = await sbx(plain, 'unshare', '--user', 'true')
    expect(userns.exitCode).not.toBe(0)
    expect(userns.stderr).toMatch(/Operation not permitted/)
    const masked = await sbx(plain, 'grep', '-c', ' /proc/sys ', '/proc/self/mountinfo')
    expect(masked.stdout.trim()).not.toBe('0')
    const dockerOff = await sbx(plain, 'docker', 'ps')
    expect(dockerOff.exitCode).toBe(125)
    expect(dockerOff.stderr).toContain('nested containers are off in this sandbox; start it with --nested')
    const info = await inspect(plainSandbox)
    // Every sandbox has our default seccomp profile (AF_VSOCK refused, no user namespaces), never the nested one.
    const opts = info.HostConfig.SecurityOpt as string[]
    expect(opts[0]).toBe('no-new-privileges')
    expect(opts).toHaveLength(2)
    expect(opts[1]).toMatch(/^seccomp=\{/)
    expect(opts[1]).toContain('AF_VSOCK')
    expect(info.HostConfig.Devices ?? []).toEqual([])
    // the twin: the nested sandbox can, and its /proc is not masked
    expect((await sbx(ws, 'unshare', '--user', 'true')).exitCode).toBe(0)
    expect((await sbx(ws, 'grep', '-c', ' /proc/sys ', '/proc/self/mountinfo')).stdout.trim()).toBe('0')
  })

  it('the agent in a nested sandbox still has no capabilities and no sudo; its container no more than before', async () => {
    const status = await sbx(ws, 'grep', '^CapEff', '/proc/self/status')
    expect(status.stdout).toMatch(/CapEff:\s+0+$/)
    expect((await sbx(ws, 'sudo', '-n', 'true')).exitCode).not.toBe(0)
    const info = await inspect(sandbox)
    expect(info.HostConfig.Privileged).toBe(false)
    expect(info.HostConfig.SecurityOpt).toContain('no-new-privileges')
    expect(info.HostConfig.SecurityOpt.some((o: string) => o.startsWith('seccomp='))).toBe(true)
    expect(info.HostConfig.CapAdd).toEqual((await inspect(plainSandbox)).HostConfig.CapAdd)
    expect(info.HostConfig.Devices.map((d: any) => d.PathOnHost).sort()).toEqual(['/dev/fuse', '/dev/net/tun'])
    const devices = await sbx(ws, 'stat', '-c', '%U %a', '/dev/fuse', '/dev/net/tun')
    expect(devices.stdout.trim().split('\n')).toEqual(['node 600', 'node 600'])
  })

  it('docker run --rm of a local image and docker build of a workspace Dockerfile work', async () => {
    const ran = await nested(ws, TOOLS, '/usr/bin/true')
    expect(ran.exitCode, ran.stderr).toBe(0)
    const dir = join(ws, 'img')
    mkdirSync(dir)
    writeFileSync(join(dir, 'Dockerfile'), `FROM ${TOOLS}\nRUN ["/usr/bin/bash", "-c", "echo built > /built"]\nCOPY hello.txt /hello.txt\n`)
    writeFileSync(join(dir, 'hello.txt'), 'hello from the workspace\n')
    for (const f of ['', 'Dockerfile', 'hello.txt']) chownSync(join(dir, f), TEST_UID, TEST_GID)
    const build = await sbx(ws, 'docker', 'build', '-t', 'localhost/nestit-built:1', `/workspace/${ws.split('/').pop()}/img`)
    expect(build.exitCode, build.stderr).toBe(0)
    const out = await nested(ws, 'localhost/nestit-built:1', '/usr/bin/cat', '/built', '/hello.txt')
    expect(out.stdout).toBe('built\nhello from the workspace')
    // DOCKER_HOST answers too (what SDKs and testcontainers use)
    const ping = await sbx(ws, 'bash', '-c', 'curl -sf --unix-socket "${DOCKER_HOST#unix://}" http://d/_ping')
    expect(ping.stdout).toBe('OK')
  })

  it('a nested container reaches the allowlisted site by name, not the blocked one by name or IP; a plain container reaches both', async () => {
    const ok = await nested(ws, TOOLS, '/usr/bin/curl', '-sS', '--max-time', '10', `http://${allowed}/`)
    expect(ok.stdout, ok.stderr).toBe('hi from allowed')
    // It went through the sandbox's egress gateway, as the agent's own requests do.
    const log = await cli(['firewall', 'log', ws, '--json'])
    expect(log.exitCode, log.stderr).toBe(0)
    expect(log.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l) as {host: string; decision: string})).toContainEqual(expect.objectContaining({host: allowed, decision: 'allowed'}))
    const byIp = await nested(ws, TOOLS, '/usr/bin/curl', '-sS', '--max-time', '10', `http://${ip.blocked}/`)
    expect(byIp.exitCode, byIp.stderr).not.toBe(0)
    expect(byIp.stdout).not.toContain('hi from')
    const byName = await nested(ws, TOOLS, '/usr/bin/curl', '-sS', '--max-time', '10', `http://${blocked}/`)
    expect(byName.exitCode).toBe(6) // could not resolve: the sandbox's resolver answers NXDOMAIN
    const viaHost = await nested(ws, '--network', 'host', TOOLS, '/usr/bin/curl', '-sS', '--max-time', '10', `http://${ip.blocked}/`)
    expect(viaHost.exitCode).toBe(7)
    // controls: the blocked site answers an unfiltered container, by name and by IP
    expect((await control('curl', '-sS', '--max-time', '10', `http://${blocked}/`)).stdout).toBe('hi from blocked')
    expect((await control('curl', '-sS', '--max-time', '10', `http://${ip.blocked}/`)).stdout).toBe('hi from blocked')
  })

  it('direct DNS from a nested container gets no answer; the resolver answers an unfiltered container', async () => {
    for (const extra of [[], ['--network', 'host']]) {
      const dig = await nested(ws, ...extra, TOOLS, '/usr/bin/dig', '+time=2', '+tries=1', `@${ip.dns}`, 'nestit.example')
      expect(dig.stdout, extra.join(' ')).not.toContain(ip.blocked)
      expect(dig.exitCode, extra.join(' ')).not.toBe(0)
    }
    const viaDocker = await nested(ws, '--network', 'host', TOOLS, '/usr/bin/dig', '+time=2', '+tries=1', '@127.0.0.11', blocked)
    expect(viaDocker.stdout).not.toContain(ip.blocked)
    expect((await control('dig', '+short', `@${ip.dns}`, 'nestit.example')).stdout.trim()).toBe(ip.blocked)
  })

  it("a nested container cannot change the sandbox's firewall; in its own network namespace iptables works", async () => {
    const own = await nested(ws, '--cap-add', 'NET_ADMIN', TOOLS, '/usr/sbin/iptables', '-F', 'OUTPUT')
    expect(own.exitCode, own.stderr).toBe(0)
    const theirs = await nested(ws, '--network', 'host', '--cap-add', 'NET_ADMIN', TOOLS, '/usr/sbin/iptables', '-F', 'OUTPUT')
    expect(theirs.exitCode).not.toBe(0)
    expect(theirs.stderr).toMatch(/Permission denied|Operation not permitted/)
    const still = await nested(ws, TOOLS, '/usr/bin/curl', '-sS', '--max-time', '10', `http://${ip.blocked}/`)
    expect(still.stdout).not.toContain('hi from')
  })

  it('docker compose: two services talk by name over their network; a container on a nested network meets the firewall too', async () => {
    const dir = join(ws, 'compose')
    mkdirSync(dir)
    writeFileSync(
      join(dir, 'compose.yaml'),
      `services:
  web:
    image: localhost/nestit-web:1
  client:
    image: ${TOOLS}
    command: ["/usr/bin/curl", "-sS", "--retry", "20", "--retry-all-errors", "--retry-delay", "1", "http://web:8080/"]
    depends_on: [web]
`,
    )
    for (const f of ['', 'compose.yaml']) chownSync(join(dir, f), TEST_UID, TEST_GID)
    const inside = `/workspace/${ws.split('/').pop()}/compose`
    try {
      const up = await sbx(ws, 'bash', '-c', `cd ${inside} && docker compose up --abort-on-container-exit --exit-code-from client`)
      expect(up.exitCode, up.stderr).toBe(0)
      expect(up.stdout).toContain('hi from the nested web')
    } finally {
      await sbx(ws, 'bash', '-c', `cd ${inside} && docker compose down`)
    }
    // A user-defined nested network (netavark, as compose and the Docker API use): the same firewall.
    must(await sbx(ws, 'docker', 'network', 'create', 'nestit-inner'), 'docker network create')
    try {
      const ok = await nested(ws, '--network', 'nestit-inner', TOOLS, '/usr/bin/curl', '-sS', '--max-time', '10', `http://${allowed}/`)
      expect(ok.stdout, ok.stderr).toBe('hi from allowed')
      const no = await nested(ws, '--network', 'nestit-inner', TOOLS, '/usr/bin/curl', '-sS', '--max-time', '10', `http://${ip.blocked}/`)
      expect(no.exitCode).not.toBe(0)
      expect(no.stdout).not.toContain('hi from')
    } finally {
      await sbx(ws, 'docker', 'network', 'rm', 'nestit-inner')
    }
  })

  it('testcontainers (npm) starts a container from a locally built image, talks to it over its mapped port, and stops it', async () => {
    const dir = join(ws, 'tc')
    writeFileSync(
      join(dir, 'tc.cjs'),
      `const {GenericContainer, Wait} = require('/tmp/tc/node_modules/testcontainers')
;(async () => {
  const c = await new GenericContainer('localhost/nestit-web:1').withExposedPorts(8080).withWaitStrategy(Wait.forHttp('/', 8080)).start()
  const res = await fetch('http://' + c.getHost() + ':' + c.getMappedPort(8080) + '/')
  console.log(await res.text())
  const id = c.getId()
  await c.stop()
  console.log('stopped ' + id)
})().catch((e) => { console.error(e.message); process.exit(1) })
`,
    )
    chownSync(join(dir, 'tc.cjs'), TEST_UID, TEST_GID)
    const inside = `/workspace/${ws.split('/').pop()}/tc`
    // testcontainers from the npm registry (allowlisted by default); 11.x, the last for the image's
    // node 20 (12.x needs node 22). Ryuk, its reaper, is an image on Docker Hub, which no test may
    // reach: it is turned off (TESTCONTAINERS_RYUK_DISABLED); the test stops its container itself.
    must(await sbx(ws, 'bash', '-c', 'mkdir -p /tmp/tc && cd /tmp/tc && npm init -y > /dev/null && npm install --no-audit --no-fund --loglevel=error testcontainers@11 > /dev/null'), 'npm install testcontainers')
    const r = await sbx(ws, 'env', 'TESTCONTAINERS_RYUK_DISABLED=true', 'node', `${inside}/tc.cjs`)
    expect(r.exitCode, r.stderr).toBe(0)
    const [body, stopped] = r.stdout.trim().split('\n')
    expect(body).toBe('hi from the nested web')
    const id = stopped.replace('stopped ', '')
    expect(id).toMatch(/^[0-9a-f]{12,}$/)
    // stopped and removed: the nested engine no longer knows it
    const ps = await sbx(ws, 'docker', 'ps', '-a', '--no-trunc', '--format', '{{.ID}}')
    expect(ps.exitCode).toBe(0)
    expect(ps.stdout).not.toContain(id)
  })

  it('run --nested: a one-shot container runs nested containers on a store of its own (a tmpfs), not the sandbox\'s volume', async () => {
    const r = await cli(['run', ws, '--nested', '--', 'bash', '-c', `${MAKE_TOOLS} && docker run --rm ${TOOLS} /usr/bin/true && findmnt -no FSTYPE /home/node/.local/share/containers`])
    expect(r.exitCode, r.stderr).toBe(0)
    expect(r.stdout.trim().split('\n').pop()).toBe('tmpfs')
    // the control: without --nested the same run has no nested engine
    const off = await cli(['run', ws, '--', 'docker', 'ps'])
    expect(off.exitCode).toBe(125)
  })

  it('doctor passes on the nested sandbox and names the storage driver', async () => {
    const r = await cli(['doctor', ws, '--json'])
    expect(r.exitCode, r.stdout + r.stderr).toBe(0)
    const checks = JSON.parse(r.stdout).checks as Array<{name: string; status: string; detail: string}>
    const storage = checks.find((c) => c.name === 'nested-storage')
    expect(storage?.status).toBe('pass')
    expect(storage?.detail).toMatch(/with the (overlay|fuse-overlayfs|vfs) driver/)
    expect(checks.find((c) => c.name === 'nested-engine')?.status).toBe('pass')
    const plainChecks = JSON.parse((await cli(['doctor', plain, '--json'])).stdout).checks as Array<{name: string; status: string}>
    expect(plainChecks.find((c) => c.name === 'userns')?.status).toBe('pass')
  })

  it('show-run --nested prints the container start made', async () => {
    const r = await cli(['show-run', ws, '--nested'])
    expect(r.exitCode, r.stderr).toBe(0)
    expect(r.stdout).toMatch(/--security-opt seccomp=\S+seccomp-nested\.json --security-opt systempaths=unconfined --device \/dev\/fuse --device \/dev\/net\/tun/)
    const info = await inspect(sandbox)
    expect(r.stdout).toContain(`dev.agent-sandbox.spec=${info.Config.Labels['dev.agent-sandbox.spec']}`)
    const without = await cli(['show-run', ws])
    expect(without.stdout).toMatch(/--security-opt seccomp=\S+seccomp-default\.json/)
    expect(without.stdout).not.toContain('seccomp-nested.json')
    expect(without.stdout).not.toContain('systempaths=unconfined')
  })

  it('registry presets are off by default; --registry allowlists a registry\'s domains; an unknown one is a usage error', async () => {
    const env = (out: string) => /AGENT_SANDBOX_ALLOW_DOMAINS=(\S+)/.exec(out)?.[1].split(',') ?? []
    const none = await cli(['show-run', ws, '--nested'])
    expect(env(none.stdout)).toEqual([allowed])
    const hub = await cli(['show-run', ws, '--nested', '--registry', 'docker.io', '--registry', 'quay.io'])
    expect(hub.exitCode, hub.stderr).toBe(0)
    expect(env(hub.stdout)).toEqual(expect.arrayContaining([allowed, 'registry-1.docker.io', 'auth.docker.io', 'production.cloudflare.docker.com', 'quay.io', 'cdn.quay.io']))
    expect(env(hub.stdout)).not.toContain('ghcr.io')
    const bad = await cli(['show-run', ws, '--registry', 'registry.example'])
    expect(bad.exitCode).toBe(2)
    expect(bad.stderr).toContain('registry.example')
  })

  it('nested images survive a restart; rm --volumes removes their volume', async () => {
    must(await cli(['stop', ws]), 'stop')
    await start(ws, '--nested')
    const images = await sbx(ws, 'docker', 'images', '--format', '{{.Repository}}:{{.Tag}}')
    expect(images.stdout).toContain(TOOLS)
    const volumes = async () => (await docker('volume', 'ls', '--format', '{{.Name}}')).stdout.split('\n')
    const volume = (await inspect(sandbox)).Mounts.find((m: any) => m.Destination === '/home/node/.local/share/containers').Name as string
    expect(await volumes()).toContain(volume)
    must(await cli(['rm', ws, '--volumes', '--yes']), 'rm --volumes')
    expect(await volumes()).not.toContain(volume)
  })
})

describe('Podman as the host engine', () => {
  const PODMAN = 'unix:///run/podman/podman.sock'

  it('start --nested is refused with one line and exit 3 before anything is created; without --nested the same start goes on (to the image missing there, exit 4: the control)', async () => {
    const path = await makeWorkspace('podnest')
    workspaces.push(path)
    await initWorkspace(path)
    const r = await cli(['start', path, '--nested'], {env: {DOCKER_HOST: PODMAN}})
    expect(r.exitCode, r.stderr).toBe(3)
    expect(r.stderr.trim().split('\n')).toHaveLength(1)
    expect(r.stderr).toContain('nested containers (--nested, nestedContainers) need Docker as the host engine')
    const made = await run('docker', ['-H', PODMAN, 'ps', '-a', '--filter', `label=dev.agent-sandbox.workspace=${path}`, '--format', '{{.Names}}'])
    const vols = await run('docker', ['-H', PODMAN, 'volume', 'ls', '--filter', `label=dev.agent-sandbox.workspace=${path}`, '--format', '{{.Name}}'])
    expect(`${made.stdout}${vols.stdout}`.trim()).toBe('')
    // the control: the refusal is about --nested, not this workspace or engine (the image is not built there: exit 4 names it)
    const plainStart = await cli(['start', path], {env: {DOCKER_HOST: PODMAN}})
    expect(plainStart.stderr).not.toContain('nested containers')
    expect(plainStart.stderr).toContain('is missing')
    expect(plainStart.exitCode).toBe(4)
  })
})


/**
 * The egress gateway on the real engine, against test sites
 * this file starts itself on a network it creates (never any other address).
 * Fronting by Host and by SNI is refused while the legitimate request works;
 * a plain container on the same network (the control) shows each fronting
 * attempt would get through without the gateway. A killed gateway fails
 * closed and doctor says so; every request is in the gateway's log.
 */
import {randomBytes} from 'node:crypto'
import {execFileSync, spawn} from 'node:child_process'
import {mkdtempSync, readFileSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {BASE_IMAGE, BIN, cli, docker, initWorkspace, makeWorkspace, type Result, sbx, TEST_STATE_HOME, trustWorkspace} from './helpers.js'
import {createTestNetwork, must, removeTestSites, startTestSite} from './test-sites.js'

const RUN = `${(process.env.AGENT_SANDBOX_IT_ID ?? 'main').toLowerCase().replace(/[^a-z0-9]+/g, '-')}-${randomBytes(3).toString('hex')}`
const LABEL = `dev.agent-sandbox.gwit=${RUN}`
const name = (role: string) => `gwit-${role}-${RUN}`

/**
 * A test site: HTTP on 80 and HTTPS on 443 (HTTP/2 or 1.1 by ALPN; the cert from CERT/KEY); answers with its NAME and the Host
 * it was sent. /big streams 200 MiB made on the fly, /chunked answers in chunks, /echo counts the body
 * it got, and an Upgrade is switched and echoed back.
 */
const SITE = `const http = require('http'), http2 = require('http2');
const MIB = 1 << 20;
const answer = (q, r) => {
  if (q.url === '/big') {
    const chunk = Buffer.alloc(MIB, 120); let n = 0;
    r.writeHead(200, {'content-length': 200 * MIB});
    const more = () => { while (n < 200) { n++; if (!r.write(chunk)) return r.once('drain', more) } r.end() };
    return more();
  }
  if (q.url === '/chunked') { r.write('a'); return setTimeout(() => { r.write('b'); r.end('c') }, 50) }
  if (q.url === '/echo') { let n = 0; q.on('data', (c) => (n += c.length)); return q.on('end', () => r.end('got ' + n + ' ' + (q.headers['transfer-encoding'] || 'no-te'))) }
  r.end('hi from ' + process.env.NAME + ' host=' + (q.headers.host || q.headers[':authority']) + '\\n');
};
const upgrade = (q, s) => { s.write('HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: echo\\r\\nConnection: Upgrade\\r\\n\\r\\n'); s.pipe(s) };
http.createServer(answer).on('upgrade', upgrade).listen(80, '::');
http2.createSecureServer({cert: process.env.CERT, key: process.env.KEY, allowHTTP1: true}, answer).listen(443, '::');`

/** `node -e UPGRADE HOST [HOST-HEADER]`: an Upgrade request on port 80, then "ping" over the switched connection. */
const UPGRADE = `const [host, header] = process.argv.slice(1);
const q = require('http').request({host, port: 80, headers: {Connection: 'Upgrade', Upgrade: 'echo', Host: header || host}});
q.on('upgrade', (res, s) => { s.write('ping'); s.on('data', (d) => { console.log(res.statusCode + ' ' + d); process.exit(0) }) });
q.on('response', (res) => { console.log('refused ' + res.statusCode); process.exit(1) });
q.on('error', (e) => { console.log('error ' + e.code); process.exit(2) });
q.end(); setTimeout(() => { console.log('timeout'); process.exit(3) }, 5000);`

const workspaces: string[] = []
let network = ''
let certDir = ''

async function createNetwork(): Promise<{name: string; prefix: string}> {
  return createTestNetwork(name('net'), LABEL, 150)
}

async function startSite(role: string, ip: string, cert: string, key: string): Promise<string> {
  const container = name(role)
  await startTestSite({container, label: LABEL, network, role, ip, cert, key, program: SITE})
  return container
}

/** A plain, unfiltered container on the test network: the control for each refusal. */
function control(...args: string[]): Promise<Result> {
  return docker('run', '--rm', '--label', LABEL, '--network', network, '--entrypoint', 'curl', BASE_IMAGE, '-sS', '--max-time', '10', ...args)
}

function curl(ws: string, ...args: string[]): Promise<Result> {
  return sbx(ws, 'curl', '-sS', '--max-time', '10', ...args)
}

async function workspace(role: string, config: Record<string, unknown>, dockerfileExtra = ''): Promise<string> {
  const path = await makeWorkspace(role)
  workspaces.push(path)
  await initWorkspace(path)
  if (dockerfileExtra) writeFileSync(join(path, '.agent-sandbox', 'Dockerfile'), `${readFileSync(join(path, '.agent-sandbox', 'Dockerfile'), 'utf8')}\n${dockerfileExtra}\n`)
  writeFileSync(join(path, '.agent-sandbox', 'config.json'), `${JSON.stringify({...config, env: {AGENT_SANDBOX_GITHUB_META: '0'}}, null, 2)}\n`)
  await trustWorkspace(path)
  if (dockerfileExtra) must(await cli(['build', path]), `build ${role}`)
  return path
}

async function requests(ws: string): Promise<any[]> {
  const r = await cli(['firewall', 'log', ws, '--json', '--lines', '500'])
  expect(r.exitCode, r.stderr).toBe(0)
  return r.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l))
}

afterAll(() => removeTestSites(LABEL, network, workspaces, certDir))

describe('the egress gateway of a firewalled sandbox', () => {
  const allowed = name('allowed')
  const blocked = name('blocked')
  let ip: {allowed: string; blocked: string}
  let ws: string

  beforeAll(async () => {
    const net = await createNetwork()
    network = net.name
    ip = {allowed: `${net.prefix}.200`, blocked: `${net.prefix}.201`}
    // One self-signed certificate for both sites: the test is about where a connection goes, not about trust.
    certDir = mkdtempSync(join(tmpdir(), 'gwit-cert-'))
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=gwit', '-addext', `subjectAltName=DNS:${allowed},DNS:${blocked}`,
      '-keyout', join(certDir, 'key.pem'), '-out', join(certDir, 'cert.pem')], {stdio: 'ignore'})
    const [cert, key] = ['cert.pem', 'key.pem'].map((f) => readFileSync(join(certDir, f), 'utf8'))
    await startSite('allowed', ip.allowed, cert, key)
    await startSite('blocked', ip.blocked, cert, key)
    ws = await workspace('gw', {dockerNetwork: network, allowDomains: [allowed]})
    const r = await cli(['start', ws, '--json'])
    expect(r.exitCode, r.stderr).toBe(0)
  })

  it('runs the gateway as its own container: the sandbox\'s network namespace only, no capabilities, read-only root, its own uid', async () => {
    const sandbox = JSON.parse((await cli(['start', ws, '--json'])).stdout).name as string
    const info = JSON.parse(must(await docker('container', 'inspect', `${sandbox}-gateway`), 'inspect').stdout)[0]
    expect(info.State.Running).toBe(true)
    expect(info.HostConfig.NetworkMode).toBe(`container:${(JSON.parse((await docker('container', 'inspect', sandbox)).stdout)[0].Id)}`)
    // No capability at all, whatever the engine reports in inspect (Podman lists the dropped ones).
    const status = must(await docker('exec', `${sandbox}-gateway`, 'cat', '/proc/1/status'), 'read its status').stdout
    for (const set of ['CapEff', 'CapPrm', 'CapBnd']) expect(status, set).toMatch(new RegExp(`^${set}:\\s+0+$`, 'm'))
    expect(status).toMatch(/^NoNewPrivs:\s+1$/m)
    expect(info.HostConfig.ReadonlyRootfs).toBe(true)
    expect(info.Config.User).toBe('65532:65532')
    expect(info.Config.Labels['dev.agent-sandbox.kind']).toBe('gateway')
    // The agent cannot see it: no process of uid 65532 in the sandbox's PID namespace.
    const ps = await sbx(ws, 'ps', '-eo', 'uid=')
    expect(ps.stdout.split('\n').map((l) => l.trim())).not.toContain('65532')
  })

  it('passes allowlisted names through, over HTTP and TLS', async () => {
    const http = await curl(ws, `http://${allowed}/`)
    expect(http.stdout, http.stderr).toBe(`hi from allowed host=${allowed}`)
    const tls = await curl(ws, '-k', `https://${allowed}/`)
    expect(tls.stdout, tls.stderr).toBe(`hi from allowed host=${allowed}`)
  })

  it('passes HTTP/2 through: ALPN is the client\'s and the site\'s to agree', async () => {
    const r = await curl(ws, '-k', '--http2', '-w', ' %{http_version}', `https://${allowed}/`)
    expect(r.stdout, r.stderr).toBe(`hi from allowed host=${allowed}\n 2`)
  })

  it('refuses fronting by Host: a request to an allowlisted address for another name', async () => {
    // control: without the gateway the allowlisted site serves the other name's request
    const open = await control('-H', `Host: ${blocked}`, `http://${allowed}/`)
    expect(open.stdout, open.stderr).toBe(`hi from allowed host=${blocked}`)
    const r = await curl(ws, '-i', '-H', `Host: ${blocked}`, `http://${allowed}/`)
    expect(r.stdout, r.stderr).toMatch(/^HTTP\/1\.1 403 /)
    expect(r.stdout).toContain(`agent-sandbox gateway: ${blocked} refused: not allowlisted`)
    expect(r.stdout).not.toContain('hi from')
    // an address is no name either
    const byIp = await curl(ws, '-i', `http://${ip.allowed}/`)
    expect(byIp.stdout).toMatch(/^HTTP\/1\.1 403 /)
    expect(byIp.stdout).not.toContain('hi from')
    // the legitimate twin, on the same connection target
    expect((await curl(ws, `http://${allowed}/`)).stdout).toBe(`hi from allowed host=${allowed}`)
  })

  it('refuses fronting by SNI: a TLS connection to an allowlisted address for another name', async () => {
    const sni = ['--resolve', `${blocked}:443:${ip.allowed}`, '-k', `https://${blocked}/`]
    const open = await control(...sni)
    expect(open.stdout, open.stderr).toBe(`hi from allowed host=${blocked}`)
    const r = await curl(ws, ...sni)
    expect(r.exitCode, r.stdout).not.toBe(0)
    expect(r.stderr).toMatch(/unrecognized name|alert/i)
    expect(r.stdout).not.toContain('hi from')
    // and the SNI decides, not the address: the allowlisted name dialled at the blocked site's address is refused by the firewall
    const wrongAddress = await curl(ws, '--resolve', `${allowed}:443:${ip.blocked}`, '-k', `https://${allowed}/`)
    expect(wrongAddress.exitCode).toBe(7)
    const twin = await curl(ws, '--resolve', `${allowed}:443:${ip.allowed}`, '-k', `https://${allowed}/`)
    expect(twin.stdout, twin.stderr).toBe(`hi from allowed host=${allowed}`)
  })

  it('keeps client connections alive, streams chunked bodies both ways, and switches an Upgrade (WebSocket-style) for an allowed name only', async () => {
    const two = await curl(ws, '-o', '/dev/null', '-o', '/dev/null', '-w', '%{num_connects}\\n', `http://${allowed}/a`, `http://${allowed}/b`)
    expect(two.stdout.trim().split('\n'), two.stderr).toEqual(['1', '0']) // the second request reused the connection
    expect((await curl(ws, `http://${allowed}/chunked`)).stdout).toBe('abc')
    const up = await sbx(ws, 'bash', '-c', `head -c 100000 /dev/zero | curl -sS --max-time 10 -H 'Transfer-Encoding: chunked' --data-binary @- http://${allowed}/echo`)
    expect(up.stdout, up.stderr).toBe('got 100000 chunked')
    expect((await sbx(ws, 'node', '-e', UPGRADE, allowed)).stdout.trim()).toBe('101 ping')
    const fronted = await sbx(ws, 'node', '-e', UPGRADE, allowed, blocked)
    expect(fronted.stdout.trim()).toBe('refused 403')
  })

  it('downloads 200 MiB through the gateway, over HTTP and over TLS passed through', async () => {
    for (const url of [`http://${allowed}/big`, `https://${allowed}/big`]) {
      const r = await curl(ws, '-k', '--max-time', '120', '-o', '/dev/null', '-w', '%{size_download} %{http_code}', url)
      expect(r.stdout, `${url}: ${r.stderr}`).toBe(`${200 * 1024 * 1024} 200`)
    }
    const log = await requests(ws)
    expect(log.find((e) => e.path === '/big')).toMatchObject({status: 200, bytes: 200 * 1024 * 1024, decision: 'allowed'})
  })

  it('logs every request (without the query): firewall log and firewall status', async () => {
    await curl(ws, `http://${allowed}/logged?token=do-not-log`)
    await curl(ws, '-H', `Host: ${blocked}`, `http://${allowed}/fronted`)
    const log = await requests(ws)
    const ok = log.find((e) => e.path === '/logged')
    expect(ok).toMatchObject({method: 'GET', host: allowed, status: 200, decision: 'allowed', rule: `allowlist ${allowed}`})
    expect(ok.bytes).toBe(`hi from allowed host=${allowed}\n`.length)
    expect(log.find((e) => e.path === '/fronted')).toMatchObject({method: 'GET', host: blocked, status: 403, decision: 'blocked', rule: 'not allowlisted'})
    expect(log.find((e) => e.method === 'TLS' && e.host === blocked)).toMatchObject({decision: 'blocked', rule: 'not allowlisted'})
    expect(log.find((e) => e.method === 'TLS' && e.host === allowed)).toMatchObject({decision: 'allowed'})
    expect(JSON.stringify(log)).not.toContain('do-not-log')
    const text = await cli(['firewall', 'log', ws])
    expect(text.stdout).toMatch(new RegExp(`BLOCK  403  GET  ${blocked}/fronted  0B  \\(not allowlisted\\)`))
    const status = await cli(['firewall', 'status', ws, '--json'])
    const parsed = JSON.parse(status.stdout)
    expect(parsed.gateway).toBe('running')
    expect(parsed.requests.some((e: any) => e.path === '/fronted')).toBe(true)
    expect((await cli(['firewall', 'status', ws])).stdout).toContain('Recent requests through the egress gateway')
  })

  it("a hostile TLS name (escape sequences) reaches the user's terminal inert: firewall log prints escapes, never the controls", async () => {
    const hostile = 'x\u001b]0;pwned\u0007\u001b[2J.example'
    // A ClientHello written by hand (TLS libraries refuse to send such a name; an agent's own bytes need not),
    // to an allowlisted name's address: the gateway judges the name the hello carries.
    const hello = `const name = Buffer.from(process.argv[2], 'latin1');
const u16 = (n) => Buffer.from([n >> 8, n & 255]);
const sni = Buffer.concat([u16(0), u16(name.length + 5), u16(name.length + 3), Buffer.from([0]), u16(name.length), name]);
const body = Buffer.concat([Buffer.from([3, 3]), Buffer.alloc(32, 7), Buffer.from([0]), u16(2), Buffer.from([0x13, 0x01, 1, 0]), u16(sni.length), sni]);
const handshake = Buffer.concat([Buffer.from([1, 0]), u16(body.length), body]);
const record = Buffer.concat([Buffer.from([22, 3, 1]), u16(handshake.length), handshake]);
const s = require('net').connect(443, process.argv[1], () => s.write(record));
s.on('error', (e) => console.log(e.message)); s.on('data', () => {}); s.on('close', () => process.exit(0)); setTimeout(() => process.exit(0), 5000)`
    const sent = await sbx(ws, 'node', '-e', hello, allowed, hostile)
    expect(sent.stdout).toBe('') // connected, and closed by the gateway
    const text = await cli(['firewall', 'log', ws, '--lines', '50'])
    expect(text.exitCode, text.stderr).toBe(0)
    expect(text.stdout).toContain('\\u001b]0;pwned\\u0007\\u001b[2J')
    // eslint-disable-next-line no-control-regex
    expect(text.stdout).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/)
    const json = await cli(['firewall', 'log', ws, '--lines', '50', '--json'])
    // eslint-disable-next-line no-control-regex
    expect(json.stdout).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/)
    expect(json.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l).host)).toContain(hostile)
  })

  it('firewall log --follow shows new requests as they come, and Ctrl-C ends it with 130, nothing on stderr and no follower left in the gateway', async () => {
    const sandbox = JSON.parse((await cli(['start', ws, '--json'])).stdout).name as string
    // The gateway's processes by name (/proc: no ps in a distroless view of it is needed).
    const gatewayProcesses = async () => must(await docker('exec', `${sandbox}-gateway`, 'sh', '-c', 'cat /proc/[0-9]*/comm 2> /dev/null'), 'list its processes').stdout.split('\n')
    const child = spawn(BIN, ['firewall', 'log', ws, '--follow', '--json', '--lines', '0'], {env: {...process.env, XDG_STATE_HOME: TEST_STATE_HOME}})
    let out = ''
    let err = ''
    child.stdout.on('data', (c: Buffer) => (out += c.toString()))
    child.stderr.on('data', (c: Buffer) => (err += c.toString()))
    const ended = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)))
    try {
      await new Promise((resolve) => setTimeout(resolve, 1500))
      await curl(ws, `http://${allowed}/followed`)
      for (let i = 0; i < 50 && !out.includes('/followed'); i++) await new Promise((resolve) => setTimeout(resolve, 100))
      expect(out).toContain('"path":"/followed"')
      expect(out).not.toContain('/logged') // --lines 0: nothing from before
    } finally {
      child.kill('SIGINT')
    }
    expect(await ended).toBe(130)
    expect(err).toBe('')
    // The tail that followed the log ends with the command (the engine closes the exec's input).
    let processes = await gatewayProcesses()
    for (let i = 0; i < 50 && processes.includes('tail'); i++) {
      await new Promise((resolve) => setTimeout(resolve, 100))
      processes = await gatewayProcesses()
    }
    expect(processes).not.toContain('tail')
  })

  it('doctor passes with the gateway up; killed, the next request fails closed and doctor fails; start brings it back', async () => {
    const before = await cli(['doctor', ws, '--json'])
    const report = JSON.parse(before.stdout)
    expect(report.checks.find((c: any) => c.name === 'egress-gateway'), before.stdout).toMatchObject({status: 'pass'})
    const sandbox = report.container as string
    must(await docker('kill', `${sandbox}-gateway`), 'kill the gateway')
    // straight through the engine: the CLI's exec would make the gateway anew first
    for (const url of [`http://${allowed}/`, `https://${allowed}/`]) {
      const r = await docker('exec', '-u', 'node', sandbox, '/usr/local/bin/sandbox-exec', 'curl', '-sS', '--max-time', '10', '-k', url)
      expect(r.exitCode, `${url}: ${r.stdout}`).toBe(7) // refused at once, never a direct connection
      expect(r.stdout).not.toContain('hi from')
    }
    const after = await cli(['doctor', ws, '--json'])
    expect(after.exitCode).not.toBe(0)
    expect(JSON.parse(after.stdout).checks.find((c: any) => c.name === 'egress-gateway')).toMatchObject({status: 'fail'})
    expect((await cli(['firewall', 'log', ws])).exitCode).toBe(6)
    // start makes it anew, with what firewall allow added live since
    must(await cli(['start', ws]), 'start again')
    expect((await curl(ws, `http://${allowed}/`)).stdout).toBe(`hi from allowed host=${allowed}`)
  })

  it('firewall allow reaches the gateway too: a name allowed live is let through', async () => {
    expect((await curl(ws, '-i', `http://${blocked}/`)).exitCode).toBe(6) // not even resolved
    must(await cli(['firewall', 'allow', blocked, ws]), 'firewall allow')
    expect((await curl(ws, `http://${blocked}/`)).stdout).toBe(`hi from blocked host=${blocked}`)
    expect((await curl(ws, '-k', `https://${blocked}/`)).stdout).toBe(`hi from blocked host=${blocked}`)
  })
})

describe('a gateway that does not come up', () => {
  it('start exits 6 with one line naming the gateway, and leaves nothing behind', async () => {
    // A workspace image without the gateway's program (an image of its own making)
    // A masked secret, so that a run with its value gets a gateway too
    const ws = await workspace('nogw', {secretEnv: [{name: 'GW_RUN_TOKEN', hosts: ['api.gw.test']}]}, 'RUN rm /usr/local/lib/agent-sandbox/egress-gateway.cjs')
    const r = await cli(['start', ws])
    expect(r.exitCode, r.stderr).toBe(6)
    const lines = r.stderr.trim().split('\n').filter((l) => l.startsWith('agent-sandbox: error:'))
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(/the egress gateway \S+-gateway did not start: .*Cannot find module/)
    const left = await docker('ps', '-aq', '--filter', `label=dev.agent-sandbox.workspace=${ws}`)
    expect(left.stdout.trim()).toBe('')
    // A one-shot run with a masked secret fails closed the same way: its command never starts, nothing is left
    const run = await cli(['run', ws, '--', 'sh', '-c', 'echo COMMAND-RAN'], {env: {GW_RUN_TOKEN: 'sk-gw-run-token'}})
    expect(run.exitCode, run.stderr).toBe(6)
    expect(run.stdout + run.stderr).not.toContain('COMMAND-RAN')
    expect(run.stderr).toMatch(/the egress gateway agent-sandbox-run-\S+-gateway did not start: .*Cannot find module/)
    expect((await docker('ps', '-aq', '--filter', `label=dev.agent-sandbox.workspace=${ws}`)).stdout.trim()).toBe('')
    // control: the same run without the secret's value (no gateway: the firewall alone) runs its command
    const plainRun = await cli(['run', ws, '--', 'sh', '-c', 'echo COMMAND-RAN'], {env: {GW_RUN_TOKEN: undefined}})
    expect(plainRun.exitCode, plainRun.stderr).toBe(0)
    expect(plainRun.stdout).toContain('COMMAND-RAN')
  })
})

/**
 * The gateway intercepts hosts that have httpRules, with a
 * per-sandbox CA made on the host, against test sites this file starts itself
 * on a network it creates (never any other address but the npm registry). The
 * sites' certificates come from a test CA that the workspace image trusts, so
 * the gateway verifies them as it would a public site. Every refusal is paired
 * with the request that works.
 */
import {randomBytes} from 'node:crypto'
import {execFileSync} from 'node:child_process'
import {mkdtempSync, readFileSync, readdirSync, realpathSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {execa} from 'execa'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {BASE_IMAGE, BIN, cli, docker, initWorkspace, makeWorkspace, type Result, sbx, TEST_STATE_HOME, trustWorkspace} from './helpers.js'
import {createTestNetwork, must, removeTestSites, startTestSite} from './test-sites.js'

const RUN = `${(process.env.AGENT_SANDBOX_IT_ID ?? 'main').toLowerCase().replace(/[^a-z0-9]+/g, '-')}-${randomBytes(3).toString('hex')}`
const LABEL = `dev.agent-sandbox.gwiit=${RUN}`
const name = (role: string) => `gwiit-${role}-${RUN}`

/**
 * A test site: HTTPS on 443 and HTTP on 80 with the cert from CERT/KEY; answers with its NAME, the method, the path, the Host
 * and the Authorization it got, and logs every request's headers (what it received, for the secret tests).
 */
const SITE = `const http = require('http'), https = require('https');
const answer = (q, r) => {
  console.log(JSON.stringify(q.headers));
  r.end('hi from ' + process.env.NAME + ' ' + q.method + ' ' + q.url + ' host=' + q.headers.host + (q.headers.authorization ? ' auth=' + q.headers.authorization : '') + '\\n');
};
// WebSocket: accept, then answer each short text frame with 'echo:<text> auth=<Authorization of the upgrade>'; a close frame is answered and ends it.
const ws = (q, s) => {
  const accept = require('crypto').createHash('sha1').update(q.headers['sec-websocket-key'] + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest('base64');
  s.write('HTTP/1.1 101 Switching Protocols\\r\\nupgrade: websocket\\r\\nconnection: Upgrade\\r\\nsec-websocket-accept: ' + accept + '\\r\\n\\r\\n');
  s.on('data', (d) => {
    if ((d[0] & 0x0f) === 8) return s.end(Buffer.from([0x88, 0]));
    const mask = d.subarray(2, 6), text = Buffer.from(d.subarray(6, 6 + (d[1] & 0x7f)).map((b, i) => b ^ mask[i % 4]));
    const out = Buffer.from('echo:' + text + ' auth=' + (q.headers.authorization || ''));
    s.write(Buffer.concat([Buffer.from([0x81, out.length]), out]));
  });
  s.on('error', () => {});
};
http.createServer(answer).on('upgrade', ws).listen(80, '::');
https.createServer({cert: process.env.CERT, key: process.env.KEY}, answer).on('upgrade', ws).listen(443, '::');`

/** `node -e ISSUER URL`: GET with node's https (trust from NODE_EXTRA_CA_CERTS), printing the body and the certificate's issuer O. */
const ISSUER = `require('https').get(process.argv[1], (res) => {
  const issuer = res.socket.getPeerCertificate().issuer.O;
  let b = ''; res.on('data', (c) => (b += c)); res.on('end', () => console.log(res.statusCode + ' ' + issuer + ' ' + b.trim()));
}).on('error', (e) => { console.log('error ' + (e.code || e.message)); process.exit(1) });`

/** `node --experimental-websocket -e WS URL`: node's own WebSocket client; prints the first message, or `error` when the upgrade is refused. */
const WS = `const w = new WebSocket(process.argv[1]);
w.onopen = () => w.send('ping');
w.onmessage = (m) => { console.log('message ' + m.data); process.exit(0) };
w.onerror = () => { console.log('error'); process.exit(0) };`
const wsArgs = ['--experimental-websocket', '--no-warnings', '-e', WS]

const workspaces: string[] = []
let network = ''
let certDir = ''

async function createNetwork(): Promise<{name: string; prefix: string}> {
  return createTestNetwork(name('net'), LABEL, 190)
}

async function startSite(role: string, ip: string, cert: string, key: string): Promise<string> {
  const container = name(role)
  await startTestSite({container, label: LABEL, network, role, ip, cert, key, program: SITE})
  return container
}

/** A plain, unfiltered container on the test network that trusts the test CA: the control for each refusal. */
function control(...args: string[]): Promise<Result> {
  return docker('run', '--rm', '--label', LABEL, '--network', network, '-v', `${certDir}/ca.pem:/ca.pem:ro`, '--entrypoint', 'curl', BASE_IMAGE, '-sS', '--max-time', '10', '--cacert', '/ca.pem', ...args)
}

function curl(ws: string, ...args: string[]): Promise<Result> {
  return sbx(ws, 'curl', '-sS', '--max-time', '20', ...args)
}

async function requests(ws: string): Promise<any[]> {
  const r = await cli(['firewall', 'log', ws, '--json', '--lines', '500'])
  expect(r.exitCode, r.stderr).toBe(0)
  return r.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l))
}

afterAll(() => removeTestSites(LABEL, network, workspaces, certDir))

/** The one-shot runs' containers of a workspace (every kind but its started sandbox and that sandbox's gate and gateway). */
async function runContainers(ws: string): Promise<string[]> {
  const r = must(await docker('ps', '-a', '--filter', `label=dev.agent-sandbox.workspace=${realpathSync(ws)}`, '--format', '{{.Names}}'), 'ps')
  return r.stdout.split('\n').filter((n) => n.startsWith('agent-sandbox-run-'))
}

const api = name('api')
const plain = name('plain')
let caPem = ''

/** A workspace whose image trusts the test CA (the gateway verifies the sites against it), with this config; started. */
async function started(role: string, config: Record<string, unknown>, env: Record<string, string> = {}): Promise<{ws: string; sandbox: string; stderr: string}> {
  const path = await makeWorkspace(role)
  workspaces.push(path)
  await initWorkspace(path)
  const dockerfile = join(path, '.agent-sandbox', 'Dockerfile')
  const caLine = caPem.trim().replace(/\n/g, '\\n')
  writeFileSync(dockerfile, `${readFileSync(dockerfile, 'utf8')}\nRUN printf '%b' '${caLine}\\n' > /usr/local/share/ca-certificates/gwiit.crt && update-ca-certificates\n`)
  writeFileSync(join(path, '.agent-sandbox', 'config.json'), `${JSON.stringify({dockerNetwork: network, allowDomains: [api, plain], env: {AGENT_SANDBOX_GITHUB_META: '0'}, ...config}, null, 2)}\n`)
  await trustWorkspace(path)
  must(await cli(['build', path]), 'build')
  const r = must(await cli(['start', path, '--json'], {env}), 'start')
  return {ws: path, sandbox: JSON.parse(r.stdout).name as string, stderr: r.stderr}
}

beforeAll(async () => {
  const net = await createNetwork()
  network = net.name
  // A test CA and one site certificate it signs for both names: the workspace image trusts the CA, as a company image trusts its own.
  certDir = mkdtempSync(join(tmpdir(), 'gwiit-cert-'))
  const sh = (...args: string[]) => execFileSync('openssl', args, {cwd: certDir, stdio: 'ignore'})
  sh('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '2', '-subj', '/CN=gwiit test CA/O=gwiit', '-keyout', 'ca.key', '-out', 'ca.pem')
  sh('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-subj', '/CN=gwiit', '-keyout', 'key.pem', '-out', 'site.csr')
  writeFileSync(join(certDir, 'ext.cnf'), `subjectAltName=DNS:${api},DNS:${plain}`)
  sh('x509', '-req', '-in', 'site.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '1', '-extfile', 'ext.cnf', '-out', 'cert.pem')
  const [cert, key, ca] = ['cert.pem', 'key.pem', 'ca.pem'].map((f) => readFileSync(join(certDir, f), 'utf8'))
  caPem = ca
  await startSite('api', `${net.prefix}.200`, cert, key)
  await startSite('plain', `${net.prefix}.201`, cert, key)
})

describe('interception of hosts with httpRules', () => {
  /** The masked secret's value: a run with it gets a gateway. */
  const RUN_ENV = {GWI_RUN_TOKEN: `sk-gwi-${randomBytes(8).toString('hex')}`}
  let ws = ''
  let sandbox = ''

  beforeAll(async () => {
    // A masked secret: a run with its value set gets a gateway of its own, a run without it the firewall alone
    ;({ws, sandbox} = await started('gwi', {httpRules: [{host: api, methods: ['GET', 'HEAD'], paths: ['/pub/*']}], secretEnv: [{name: 'GWI_RUN_TOKEN', hosts: [api]}]}))
  })

  it('an intercepted HTTPS GET works with curl and with node (trust through the system bundle and NODE_EXTRA_CA_CERTS); the certificate is the sandbox CA\'s', async () => {
    const r = await curl(ws, '-w', ' %{http_code}', `https://${api}/pub/x?q=1`)
    expect(r.stdout, r.stderr).toBe(`hi from api GET /pub/x?q=1 host=${api}\n 200`)
    const node = await sbx(ws, 'node', '-e', ISSUER, `https://${api}/pub/node`)
    expect(node.stdout.trim(), node.stderr).toBe(`200 agent-sandbox hi from api GET /pub/node host=${api}`)
    // a host without rules is passed through: its own certificate, the test CA's
    const through = await sbx(ws, 'node', '-e', ISSUER, `https://${plain}/anything`)
    expect(through.stdout.trim(), through.stderr).toBe(`200 gwiit hi from plain GET /anything host=${plain}`)
  })

  it('refuses a method outside the rules with 403 and one line naming the rule; the allowed method works', async () => {
    const open = await control('-X', 'POST', `https://${api}/pub/x`)
    expect(open.stdout, open.stderr).toBe(`hi from api POST /pub/x host=${api}`)
    const r = await curl(ws, '-X', 'POST', '-w', '%{http_code}', `https://${api}/pub/x`)
    expect(r.stdout).toBe(`agent-sandbox gateway: POST ${api}/pub/x refused: method POST not in httpRules ${api} methods GET,HEAD paths /pub/*; waiting for the user's approval: agent-sandbox firewall allow ${api} --methods POST --paths /pub/x\n403`)
    // plain HTTP to the same host meets the same rules
    const http = await curl(ws, '-X', 'DELETE', '-w', '%{http_code}', `http://${api}/pub/x`)
    expect(http.stdout).toMatch(/refused: method DELETE not in httpRules .*\n403$/)
    expect((await curl(ws, '-I', '-w', '%{http_code}', `https://${api}/pub/x`)).stdout).toMatch(/200$/)
    expect((await curl(ws, `http://${api}/pub/x`)).stdout).toBe(`hi from api GET /pub/x host=${api}`)
  })

  it('refuses a path outside the rules, also one that climbs out with ../ or %2e%2e; the allowed path works', async () => {
    const open = await control(`https://${api}/private`)
    expect(open.stdout, open.stderr).toContain('hi from api GET /private')
    const r = await curl(ws, '-w', '%{http_code}', `https://${api}/private`)
    expect(r.stdout).toBe(`agent-sandbox gateway: GET ${api}/private refused: path /private not in httpRules ${api} methods GET,HEAD paths /pub/*; waiting for the user's approval: agent-sandbox firewall allow ${api} --methods GET --paths /private\n403`)
    for (const sneaky of ['/pub/../private', '/pub/%2e%2e/private']) {
      const s = await curl(ws, '--path-as-is', '-w', '%{http_code}', `https://${api}${sneaky}`)
      expect(s.stdout, sneaky).toMatch(/refused: path \/private not in .*--paths \/private\n403$/)
    }
    expect((await curl(ws, `https://${api}/pub/ok`)).stdout).toBe(`hi from api GET /pub/ok host=${api}`)
  })

  it('refuses a Host inside the TLS that differs from the SNI (fronting inside TLS); the matching Host works', async () => {
    const open = await control('-H', `Host: ${plain}`, `https://${api}/pub/x`)
    expect(open.stdout, open.stderr).toBe(`hi from api GET /pub/x host=${plain}`)
    const r = await curl(ws, '-H', `Host: ${plain}`, '-w', '%{http_code}', `https://${api}/pub/x`)
    expect(r.stdout).toBe(`agent-sandbox gateway: GET ${plain}/pub/x refused: Host ${plain} differs from the TLS name ${api}\n421`)
    expect((await curl(ws, '-H', `Host: ${api}`, `https://${api}/pub/x`)).stdout).toBe(`hi from api GET /pub/x host=${api}`)
  })

  it('speaks HTTP/2 with a client that offers it (ALPN h2) and applies the rules per request: a path outside them is refused over h2, the allowed twin works', async () => {
    const open = await control('--http2', `https://${api}/private-h2`)
    expect(open.stdout, open.stderr).toBe(`hi from api GET /private-h2 host=${api}`) // control: the site answers that path
    const ok = await curl(ws, '--http2', '-w', ' %{http_version} %{http_code}', `https://${api}/pub/h2?q=1`)
    expect(ok.stdout, ok.stderr).toBe(`hi from api GET /pub/h2?q=1 host=${api}\n 2 200`)
    const blocked = await curl(ws, '--http2', '-w', ' %{http_version} %{http_code}', `https://${api}/private-h2`)
    expect(blocked.stdout).toBe(`agent-sandbox gateway: GET ${api}/private-h2 refused: path /private-h2 not in httpRules ${api} methods GET,HEAD paths /pub/*; waiting for the user's approval: agent-sandbox firewall allow ${api} --methods GET --paths /private-h2\n 2 403`)
    const post = await curl(ws, '--http2', '-X', 'POST', '--data', 'x', '-w', ' %{http_version} %{http_code}', `https://${api}/pub/h2`)
    expect(post.stdout).toMatch(/refused: method POST not in httpRules .*\n 2 403$/)
    // several requests on one HTTP/2 connection (curl multiplexes them)
    const many = await curl(ws, '--http2', '-Z', `https://${api}/pub/m1`, `https://${api}/pub/m2`, `https://${api}/pub/m3`)
    expect(many.stdout.split('\n').sort()).toEqual([1, 2, 3].map((i) => `hi from api GET /pub/m${i} host=${api}`))
    const log = await requests(ws)
    expect(log.find((e) => e.path === '/pub/h2' && e.method === 'GET')).toMatchObject({host: api, status: 200, decision: 'allowed', rule: `allowlist ${api}; httpRules ${api} methods GET,HEAD paths /pub/*; HTTP/2`})
    expect(log.find((e) => e.path === '/private-h2')).toMatchObject({host: api, status: 403, decision: 'blocked'})
  })

  it('passes a WebSocket through an intercepted host after applying the rules to its upgrade request (101, logged); a path outside them is refused', async () => {
    const open = must(await docker('run', '--rm', '--label', LABEL, '--network', network, '-v', `${certDir}/ca.pem:/ca.pem:ro`, '-e', 'NODE_EXTRA_CA_CERTS=/ca.pem', '--entrypoint', 'node', BASE_IMAGE, ...wsArgs, `wss://${api}/private-ws`), 'control')
    expect(open.stdout.trim()).toBe('message echo:ping auth=') // control: the site takes a WebSocket on that path
    const ok = await sbx(ws, 'node', ...wsArgs, `wss://${api}/pub/ws`)
    expect(ok.stdout.trim(), ok.stderr).toBe('message echo:ping auth=')
    const blocked = await sbx(ws, 'node', ...wsArgs, `wss://${api}/private-ws`)
    expect(blocked.stdout.trim(), blocked.stderr).toBe('error')
    const log = await requests(ws)
    expect(log.find((e) => e.path === '/pub/ws')).toMatchObject({method: 'GET', host: api, status: 101, decision: 'allowed'})
    expect(log.find((e) => e.path === '/private-ws')).toMatchObject({method: 'GET', host: api, status: 403, decision: 'blocked', rule: `path /private-ws not in httpRules ${api} methods GET,HEAD paths /pub/*`})
  })

  it('logs blocked requests with the rule, and allowed ones with the rule that admitted them', async () => {
    await curl(ws, '-X', 'PUT', `https://${api}/pub/logged`)
    await curl(ws, `https://${api}/pub/logged-ok`)
    const log = await requests(ws)
    expect(log.find((e) => e.path === '/pub/logged')).toMatchObject({method: 'PUT', host: api, status: 403, decision: 'blocked', rule: `method PUT not in httpRules ${api} methods GET,HEAD paths /pub/*`})
    // curl offers h2, which the gateway now speaks on intercepted hosts
    expect(log.find((e) => e.path === '/pub/logged-ok')).toMatchObject({method: 'GET', host: api, status: 200, decision: 'allowed', rule: `allowlist ${api}; httpRules ${api} methods GET,HEAD paths /pub/*; HTTP/2`})
    const text = await cli(['firewall', 'log', ws])
    expect(text.stdout).toContain(`BLOCK  403  PUT  ${api}/pub/logged`)
  })

  it('the CA key is only in the gateway: not in the sandbox env, /proc/1/environ, its files or docker inspect', async () => {
    const caDir = join(TEST_STATE_HOME, 'agent-sandbox', 'gateway-ca', sandbox)
    expect(readdirSync(caDir).sort()).toEqual(['ca.key', 'ca.pem'])
    const key = readFileSync(join(caDir, 'ca.key'), 'utf8')
    // a distinctive piece of the key's base64 (its first line after the header)
    const needle = key.split('\n')[1].slice(8, 48)
    expect(needle).toMatch(/^[A-Za-z0-9+/]{40}$/)
    // control: the gateway does hold it, where the search would find it
    const held = must(await docker('exec', `${sandbox}-gateway`, 'cat', '/tmp/secrets.json'), 'read the gateway secrets')
    expect(held.stdout).toContain(needle)
    expect(must(await sbx(ws, 'env'), 'env').stdout).not.toContain(needle)
    const root = must(await docker('exec', '-u', 'root', sandbox, 'bash', '-c', 'cat /proc/1/environ | tr "\\0" "\\n"; grep -rsl -- "$0" /etc /run /tmp /home /workspace /var/lib/agent-sandbox /usr/local/share/ca-certificates /root || true', needle), 'search the sandbox')
    expect(root.stdout).toContain('AGENT_SANDBOX_GATEWAY_CA=') // the certificate is there, public
    expect(root.stdout).not.toContain(needle)
    for (const c of [sandbox, `${sandbox}-gateway`]) expect(must(await docker('container', 'inspect', c), 'inspect').stdout, c).not.toContain(needle)
    expect(must(await docker('logs', `${sandbox}-gateway`), 'logs').stdout).not.toContain(needle)
  })

  it('keeps the CA across a restart of the gateway (start makes it anew and hands the key over again)', async () => {
    must(await docker('kill', `${sandbox}-gateway`), 'kill the gateway')
    must(await cli(['start', ws]), 'start again')
    expect((await curl(ws, `https://${api}/pub/again`)).stdout).toBe(`hi from api GET /pub/again host=${api}`)
  })

  it('a one-shot run with a masked secret has a gateway of its own: a path outside the rules is refused and listed at the end, the allowed one works; the exit code passes through; nothing is left', async () => {
    const r = await cli(['run', ws, '--', 'bash', '-c', `curl -sS --max-time 20 -w ' %{http_code}\\n' https://${api}/private; curl -sS --max-time 20 -w ' %{http_code}' https://${api}/pub/run; exit 7`], {env: RUN_ENV})
    expect(r.exitCode, r.stderr).toBe(7)
    expect(r.stdout).toBe(`agent-sandbox gateway: GET ${api}/private refused: path /private not in httpRules ${api} methods GET,HEAD paths /pub/*; waiting for the user's approval: agent-sandbox firewall allow ${api} --methods GET --paths /private\n 403\nhi from api GET /pub/run host=${api}\n 200`)
    expect(r.stderr).toMatch(new RegExp(`agent-sandbox: egress gateway refused: \\S+  BLOCK  403  GET  ${api}/private  \\d+B  \\(path /private not in httpRules`))
    expect(r.stderr).not.toContain('/pub/run')
    expect(await runContainers(ws)).toEqual([])
  })

  it('a one-shot run without a masked secret has no gateway (the firewall alone): no gateway container, and a path outside httpRules reaches the site; no refusals listed', async () => {
    const child = execa(BIN, ['run', ws, '--', 'bash', '-c', `curl -sS --max-time 20 -w ' %{http_code}' https://${api}/private-plain; sleep 3`], {env: {XDG_STATE_HOME: TEST_STATE_HOME, GWI_RUN_TOKEN: undefined}, reject: false, stdin: 'ignore'})
    let seen: string[] = []
    for (let i = 0; i < 240 && !seen.length; i++) {
      seen = await runContainers(ws)
      await new Promise((resolve) => setTimeout(resolve, 250))
    }
    expect(seen).toHaveLength(1) // the run container, alone
    expect(seen[0]).not.toMatch(/-gateway$/)
    const r = await child
    expect(r.exitCode, r.stderr).toBe(0)
    expect(r.stdout).toBe(`hi from api GET /private-plain host=${api}\n 200`)
    expect(r.stderr).not.toContain('egress gateway')
    expect(await runContainers(ws)).toEqual([])
  })

  it("a run's gateway goes with it: after a clean exit, a timeout and an interrupt (SIGTERM) of the CLI", async () => {
    const ok = await cli(['run', ws, '--', 'true'], {env: RUN_ENV})
    expect(ok.exitCode, ok.stderr).toBe(0)
    expect(await runContainers(ws)).toEqual([])
    const timedOut = await cli(['run', ws, '--timeout', '3s', '--', 'sleep', '60'], {env: RUN_ENV})
    expect(timedOut.exitCode, timedOut.stderr).toBe(124)
    expect(await runContainers(ws)).toEqual([])
    const child = execa(BIN, ['run', ws, '--', 'sleep', '60'], {env: {XDG_STATE_HOME: TEST_STATE_HOME, ...RUN_ENV}, reject: false, stdin: 'ignore'})
    // control: while it runs, the run and its gateway are there
    let seen: string[] = []
    for (let i = 0; i < 240 && !seen.some((n) => n.endsWith('-gateway')); i++) {
      seen = await runContainers(ws)
      await new Promise((resolve) => setTimeout(resolve, 250))
    }
    expect(seen.filter((n) => n.endsWith('-gateway'))).toHaveLength(1)
    child.kill('SIGTERM')
    const interrupted = await child
    expect(interrupted.exitCode, interrupted.stderr).not.toBe(0)
    expect(await runContainers(ws)).toEqual([])
  })

  it('a run with a masked secret on an image from an older base (runtime label below 2) is refused at once with the rebuild hint, nothing made; without the secret it runs', async () => {
    const image = must(await docker('container', 'inspect', '--format', '{{.Config.Image}}', sandbox), 'image').stdout.trim()
    const original = must(await docker('image', 'inspect', '--format', '{{.Id}}', image), 'image id').stdout.trim()
    expect(must(await docker('image', 'inspect', '--format', '{{index .Config.Labels "dev.agent-sandbox.runtime"}}', image), 'label').stdout.trim()).toBe('2') // control
    const dir = mkdtempSync(join(tmpdir(), 'gwi-old-'))
    writeFileSync(join(dir, 'Dockerfile'), `FROM ${original}\nLABEL dev.agent-sandbox.runtime=1\n`)
    const older = must(await docker('build', '-q', '-t', image, dir), 'an image as an older base made it').stdout.trim()
    try {
      const r = await cli(['run', ws, '--', 'true'], {env: RUN_ENV})
      expect(r.exitCode, r.stderr).toBe(4)
      expect(r.stderr.trim().split('\n')).toHaveLength(1)
      expect(r.stderr).toContain('was built from a base image older than this agent-sandbox')
      expect(r.stderr).toContain(`agent-sandbox build-base && agent-sandbox build ${ws}`)
      expect(await runContainers(ws)).toEqual([])
      const plainRun = await cli(['run', ws, '--', 'true'], {env: {GWI_RUN_TOKEN: undefined}})
      expect(plainRun.exitCode, plainRun.stderr).toBe(0)
    } finally {
      must(await docker('tag', original, image), 'restore the image')
      await docker('rmi', older)
    }
  })

  it("a run's gateway boots node from the base image's snapshot, a sandbox's plainly; an image whose node differs from the one the snapshot was made by boots plainly, and its runs still work", async () => {
    const flags = ['--max-semi-space-size=1', '--optimize-for-size', '/usr/local/lib/agent-sandbox/egress-gateway.cjs', '']
    const cmdline = async (container: string) => must(await docker('exec', container, 'cat', '/proc/1/cmdline'), 'cmdline').stdout.split('\0')
    // The sandbox's own gateway lives as long as the sandbox: memory before start-up time.
    expect(await cmdline(`${sandbox}-gateway`)).toEqual(['/usr/bin/node', ...flags])
    // A run's gateway: its start is on every run's path.
    const child = execa(BIN, ['run', ws, '--', 'sleep', '30'], {env: {XDG_STATE_HOME: TEST_STATE_HOME, ...RUN_ENV}, reject: false, stdin: 'ignore'})
    try {
      let gateway: string | undefined
      for (let i = 0; i < 240 && !gateway; i++) {
        gateway = (await runContainers(ws)).find((n) => n.endsWith('-gateway'))
        if (!gateway) await new Promise((resolve) => setTimeout(resolve, 250))
      }
      expect(gateway).toBeDefined()
      let seen: string[] = []
      for (let i = 0; i < 120 && seen.length < 2; i++) {
        seen = (await docker('exec', gateway as string, 'cat', '/proc/1/cmdline')).stdout.split('\0')
        if (seen.length < 2) await new Promise((resolve) => setTimeout(resolve, 250))
      }
      expect(seen).toEqual(['/usr/bin/node', '--snapshot-blob', '/usr/local/lib/agent-sandbox/node-boot.blob', ...flags])
    } finally {
      child.kill('SIGTERM')
      await child
    }
    const image = must(await docker('container', 'inspect', '--format', '{{.Config.Image}}', sandbox), 'image').stdout.trim()
    const original = must(await docker('image', 'inspect', '--format', '{{.Id}}', image), 'image id').stdout.trim()
    const boot = async (img: string) =>
      must(await docker('run', '--rm', '--network', 'none', '--entrypoint', '/usr/local/bin/node-boot', img, '--max-semi-space-size=1', '--optimize-for-size', '-p', "process.execArgv.slice(0, -2).join(' ')"), 'node-boot').stdout.trim()
    expect(await boot(original)).toBe('--snapshot-blob /usr/local/lib/agent-sandbox/node-boot.blob --max-semi-space-size=1 --optimize-for-size')
    // A workspace image that changes node (here only its time, as an upgrade would change more).
    const dir = mkdtempSync(join(tmpdir(), 'gwi-node-'))
    writeFileSync(join(dir, 'Dockerfile'), `FROM ${original}\nUSER root\nRUN touch -d 2001-01-01 "$(readlink -f /usr/bin/node)"\n`)
    const changed = must(await docker('build', '-q', '-t', image, dir), 'an image with another node').stdout.trim()
    try {
      expect(await boot(changed)).toBe('--max-semi-space-size=1 --optimize-for-size')
      const r = await cli(['run', ws, '--', 'printenv', 'GWI_RUN_TOKEN'], {env: RUN_ENV})
      expect(r.exitCode, r.stderr).toBe(0)
      // Masked: the run got a surrogate, so its gateway came up.
      expect(r.stdout.trim()).toMatch(/^\S+$/)
      expect(r.stdout.trim()).not.toBe(RUN_ENV.GWI_RUN_TOKEN)
    } finally {
      must(await docker('tag', original, image), 'restore the image')
      await docker('rmi', changed)
    }
    // A workspace image with NODE_OPTIONS in its environment (V8 would refuse the snapshot): the gateway's node ignores it.
    writeFileSync(join(dir, 'Dockerfile'), `FROM ${original}\nENV NODE_OPTIONS=--max-old-space-size=4096\n`)
    const optioned = must(await docker('build', '-q', '-t', image, dir), 'an image with NODE_OPTIONS').stdout.trim()
    try {
      expect(await boot(optioned)).toBe('--max-semi-space-size=1 --optimize-for-size') // node-boot alone would not use it
      const r = await cli(['run', ws, '--', 'printenv', 'NODE_OPTIONS'], {env: RUN_ENV})
      expect(r.exitCode, r.stderr).toBe(0)
      expect(r.stdout.trim()).toBe('--max-old-space-size=4096') // the run's own command keeps the image's
    } finally {
      must(await docker('tag', original, image), 'restore the image')
      await docker('rmi', optioned)
    }
  })

  it('the default npm rule: the registry is read-only, intercepted, and a publish (PUT) never reaches it', async () => {
    const get = await curl(ws, '-o', '/dev/null', '-w', '%{http_code}', 'https://registry.npmjs.org/left-pad')
    expect(get.stdout, get.stderr).toBe('200')
    const put = await curl(ws, '-X', 'PUT', '-H', 'content-type: application/json', '--data', '{}', '-w', '%{http_code}', 'https://registry.npmjs.org/left-pad')
    expect(put.stdout).toBe("agent-sandbox gateway: PUT registry.npmjs.org/left-pad refused: method PUT not in httpRules registry.npmjs.org methods GET,HEAD; waiting for the user's approval: agent-sandbox firewall allow registry.npmjs.org --methods PUT --paths /left-pad\n403")
  })
})

describe('masked secrets', () => {
  const REAL = `sk-proj-${randomBytes(18).toString('hex')}`
  const EXPOSED = `exposed-${randomBytes(6).toString('hex')}`
  let ws = ''
  let sandbox = ''
  let startErr = ''
  let surrogate = ''

  beforeAll(async () => {
    // inspectAll: every HTTPS connection intercepted, so that a surrogate is seen (and refused) at hosts it is not declared for too.
    // Without it those are passed through (gateway-smuggling.test.ts): a surrogate leaves as it is there, worthless.
    ;({ws, sandbox, stderr: startErr} = await started('gws', {secretEnv: [{name: 'GWIIT_TOKEN', hosts: [api]}, 'GWIIT_EXPOSED'], gateway: {inspectAll: true}}, {GWIIT_TOKEN: REAL, GWIIT_EXPOSED: EXPOSED}))
    surrogate = must(await sbx(ws, 'printenv', 'GWIIT_TOKEN'), 'printenv').stdout.trim()
  })

  it('start warns that a plain secretEnv is exposed; the masked one holds a surrogate of the same shape inside', () => {
    expect(startErr).toContain('secretEnv GWIIT_EXPOSED is passed in as it is: the agent can read it')
    expect(startErr).not.toContain('secretEnv GWIIT_TOKEN is passed')
    expect(surrogate).toHaveLength(REAL.length)
    expect(surrogate.startsWith('sk-proj-')).toBe(true)
    expect(surrogate).not.toBe(REAL)
    expect(surrogate).toMatch(/^sk-proj-[A-Za-z0-9]+$/)
  })

  it('a one-shot run gets the surrogate and its own gateway: the declared host receives the real value, an undeclared one neither (refused, listed); the plain one is there', async () => {
    const env = {GWIIT_TOKEN: REAL, GWIIT_EXPOSED: EXPOSED}
    const r = await cli(['run', ws, '--', 'bash', '-c', [
      'echo "${#GWIIT_EXPOSED} $GWIIT_TOKEN"',
      `curl -sS --max-time 20 -H "Authorization: Bearer $GWIIT_TOKEN" https://${api}/run-secret`,
      `curl -sS --max-time 20 -w ' %{http_code}' -H "Authorization: Bearer $GWIIT_TOKEN" https://${plain}/run-leak`,
    ].join('; ')], {env})
    expect(r.exitCode, r.stderr).toBe(0)
    const [first, ...rest] = r.stdout.split('\n')
    const [length, held] = first.split(' ')
    expect(length).toBe(String(EXPOSED.length)) // the plain one, in as it is
    expect(held).toHaveLength(REAL.length)
    expect(held.startsWith('sk-proj-')).toBe(true)
    expect(held).not.toBe(REAL)
    expect(rest.join('\n')).toBe(`hi from api GET /run-secret host=${api} auth=Bearer ${REAL}\nagent-sandbox gateway: GET ${plain}/run-leak refused: secret GWIIT_TOKEN is not for ${plain} (declared for ${api})\n 403`)
    expect(r.stderr).not.toContain('no egress gateway')
    expect(r.stderr).toContain(`agent-sandbox: egress gateway refused: `)
    expect(r.stderr).toMatch(new RegExp(`BLOCK  403  GET  ${plain}/run-leak .*secret GWIIT_TOKEN is not for`))
    expect(r.stderr).not.toContain(REAL)
    const seen = must(await docker('logs', name('plain')), 'site log').stdout
    expect(seen).not.toContain(REAL)
    expect(seen).not.toContain(held)
    expect(must(await docker('logs', name('api')), 'site log').stdout).toContain(REAL) // control
    expect(await runContainers(ws)).toEqual([])
  })

  it('the declared host receives the real value (a Bearer token and Basic auth); the sandbox sent only the surrogate', async () => {
    const bearer = await sbx(ws, 'bash', '-c', `curl -sS --max-time 20 -H "Authorization: Bearer $GWIIT_TOKEN" https://${api}/secret`)
    expect(bearer.stdout, bearer.stderr).toBe(`hi from api GET /secret host=${api} auth=Bearer ${REAL}`)
    const basic = await sbx(ws, 'bash', '-c', `curl -sS --max-time 20 -u "me:$GWIIT_TOKEN" https://${api}/basic`)
    expect(basic.stdout, basic.stderr).toBe(`hi from api GET /basic host=${api} auth=Basic ${Buffer.from(`me:${REAL}`).toString('base64')}`)
  })

  it('over HTTP/2 too: the declared host receives the real value, an undeclared one refuses the surrogate (the twin without it works)', async () => {
    const h2 = (args: string) => sbx(ws, 'bash', '-c', `curl -sS --max-time 20 --http2 -w ' %{http_version} %{http_code}' ${args}`)
    const swapped = await h2(`-H "Authorization: Bearer $GWIIT_TOKEN" https://${api}/secret-h2`)
    expect(swapped.stdout, swapped.stderr).toBe(`hi from api GET /secret-h2 host=${api} auth=Bearer ${REAL}\n 2 200`)
    const leak = await h2(`-H "Authorization: Bearer $GWIIT_TOKEN" https://${plain}/leak-h2`)
    expect(leak.stdout).toBe(`agent-sandbox gateway: GET ${plain}/leak-h2 refused: secret GWIIT_TOKEN is not for ${plain} (declared for ${api})\n 2 403`)
    expect((await h2(`-H "Authorization: Bearer nothing-secret" https://${plain}/twin-h2`)).stdout).toBe(`hi from plain GET /twin-h2 host=${plain} auth=Bearer nothing-secret\n 2 200`)
    expect(must(await docker('logs', name('plain')), 'site log').stdout).not.toContain(surrogate)
  })

  it('a surrogate sent to an undeclared allowlisted host is refused (403) and logged; that host never gets the real value; the same request without it works', async () => {
    const r = await sbx(ws, 'bash', '-c', `curl -sS --max-time 20 -w '%{http_code}' -H "Authorization: Bearer $GWIIT_TOKEN" https://${plain}/leak`)
    expect(r.stdout).toBe(`agent-sandbox gateway: GET ${plain}/leak refused: secret GWIIT_TOKEN is not for ${plain} (declared for ${api})\n403`)
    const http = await sbx(ws, 'bash', '-c', `curl -sS --max-time 20 -w '%{http_code}' -H "X-Key: $GWIIT_TOKEN" http://${plain}/leak-http`)
    expect(http.stdout).toMatch(/refused: secret GWIIT_TOKEN is not for .*\n403$/)
    // over plain HTTP even the declared host gets nothing
    const cleartext = await sbx(ws, 'bash', '-c', `curl -sS --max-time 20 -w '%{http_code}' -H "X-Key: $GWIIT_TOKEN" http://${api}/cleartext`)
    expect(cleartext.stdout).toMatch(/refused: secret GWIIT_TOKEN in header X-Key only over HTTPS\n403$/)
    const twin = await curl(ws, '-H', 'Authorization: Bearer nothing-secret', `https://${plain}/twin`)
    expect(twin.stdout, twin.stderr).toBe(`hi from plain GET /twin host=${plain} auth=Bearer nothing-secret`)
    const seen = must(await docker('logs', name('plain')), 'site log').stdout
    expect(seen).toContain('nothing-secret') // control: its log holds what it received
    expect(seen).not.toContain(REAL)
    expect(seen).not.toContain(surrogate)
    expect(must(await docker('logs', name('api')), 'site log').stdout).toContain(REAL) // control
    const log = await requests(ws)
    expect(log.find((e) => e.path === '/leak')).toMatchObject({host: plain, status: 403, decision: 'blocked', rule: `secret GWIIT_TOKEN is not for ${plain} (declared for ${api})`})
    expect(log.find((e) => e.path === '/secret')).toMatchObject({host: api, status: 200, decision: 'allowed', rule: `allowlist ${api}; secrets GWIIT_TOKEN; HTTP/2`})
  })

  it('the real value is absent from the sandbox: env, /proc, files, docker inspect, and from the logs; the gateway alone holds it', async () => {
    expect(must(await docker('exec', `${sandbox}-gateway`, 'cat', '/tmp/secrets.json'), 'gateway secrets').stdout).toContain(REAL) // control
    expect(must(await sbx(ws, 'env'), 'env').stdout).not.toContain(REAL)
    const root = must(await docker('exec', '-u', 'root', sandbox, 'bash', '-c',
      'for f in /proc/[0-9]*/environ; do tr "\\0" "\\n" < "$f"; done 2> /dev/null; grep -rsl -- "$0" /etc /run /tmp /home /workspace /var/lib/agent-sandbox /root || true', REAL), 'search the sandbox')
    expect(root.stdout).toContain(`GWIIT_TOKEN=${surrogate}`) // control: the search reads the environments
    expect(root.stdout).toContain(`GWIIT_EXPOSED=${EXPOSED}`)
    expect(root.stdout).not.toContain(REAL)
    for (const c of [sandbox, `${sandbox}-gateway`]) {
      expect(must(await docker('container', 'inspect', c), 'inspect').stdout, c).not.toContain(REAL)
      const logs = await docker('logs', c)
      expect(`${logs.stdout}${logs.stderr}`, c).not.toContain(REAL)
    }
    expect(must(await cli(['firewall', 'log', ws, '--json', '--lines', '500']), 'firewall log').stdout).not.toContain(REAL)
    expect(must(await docker('exec', `${sandbox}-gateway`, 'cat', '/tmp/requests.jsonl'), 'request log').stdout).not.toContain(REAL)
    expect(must(await cli(['show-run', ws], {env: {GWIIT_TOKEN: REAL, GWIIT_EXPOSED: EXPOSED}}), 'show-run').stdout).not.toContain(REAL)
  })

  it('a gateway made anew by exec without the variable set still refuses the surrogate everywhere, and warns; with it set, the declared host gets the value again', async () => {
    const probe = (path: string) => [
      `curl -sS --max-time 20 -w ' %{http_code}' -H "Authorization: Bearer $GWIIT_TOKEN" https://${plain}/${path}; echo`,
      `curl -sS --max-time 20 -w ' %{http_code}' -H "Authorization: Bearer $GWIIT_TOKEN" https://${api}/${path}`,
    ].join('; ')
    must(await docker('kill', `${sandbox}-gateway`), 'kill the gateway')
    const without = await cli(['exec', ws, '--', 'bash', '-c', probe('remade')], {env: {GWIIT_TOKEN: undefined}})
    expect(without.stderr).toContain(`secretEnv GWIIT_TOKEN is not set here: the new egress gateway of ${sandbox} refuses its surrogate at every host`)
    expect(without.stdout).toBe([
      `agent-sandbox gateway: GET ${plain}/remade refused: secret GWIIT_TOKEN is not for ${plain} (declared for ${api})`,
      ' 403',
      `agent-sandbox gateway: GET ${api}/remade refused: secret GWIIT_TOKEN has no value in this gateway (made anew where GWIIT_TOKEN was not set)`,
      ' 403',
    ].join('\n'))
    for (const site of ['plain', 'api']) expect(must(await docker('logs', name(site)), 'site log').stdout, site).not.toContain(surrogate)
    // the twin: made anew with the variable set, the declared host gets the value
    must(await docker('kill', `${sandbox}-gateway`), 'kill the gateway')
    const withIt = await cli(['exec', ws, '--', 'bash', '-c', probe('restored')], {env: {GWIIT_TOKEN: REAL}})
    expect(withIt.stderr).not.toContain('is not set here')
    expect(withIt.stdout).toBe([
      `agent-sandbox gateway: GET ${plain}/restored refused: secret GWIIT_TOKEN is not for ${plain} (declared for ${api})`,
      ' 403',
      `hi from api GET /restored host=${api} auth=Bearer ${REAL}`,
      ' 200',
    ].join('\n'))
  })
})

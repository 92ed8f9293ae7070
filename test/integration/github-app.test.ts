/**
 * GitHub App credentials, against the real engine, real git and a
 * stand-in GitHub (fixtures/fake-github/server.mjs) in a container of our own
 * on a network of our own. The stand-in checks the App JWT against the public
 * half of a key pair made here, hands out installation tokens that expire
 * after TTL seconds, and serves bare repositories over smart HTTPS (a
 * certificate from a test CA the workspace image trusts) to
 * `x-access-token:<valid token>` only.
 *
 * The token is behind the egress gateway. The sandbox (git's
 * askpass, gh) holds a surrogate; the gateway alone has the token and puts it
 * in requests to the stand-in; renewals reach the gateway; the default rules
 * limit the stand-in (a GitHub Enterprise Server to gh) to the workspace's
 * remote. A second site of ours, allowlisted, shows where the surrogate may
 * not go.
 *
 * The host cannot resolve container names, so the API URL is the stand-in's
 * address (only the host calls the API), and the host's git reaches the git
 * URL (the container name, as the sandbox sees it) through https_proxy, which
 * the stand-in's HTTP port serves (CONNECT to its own HTTPS).
 */
import {execa} from 'execa'
import {execFileSync} from 'node:child_process'
import {generateKeyPairSync} from 'node:crypto'
import {chownSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {BASE_IMAGE, BIN, cleanupUnder, cli, docker, inspect, REPO, run, TEST_ROOT, TEST_UID, trustWorkspace, type Result} from './helpers.js'
import {makeTestCa, tlsRelay} from './tls-helpers.js'

const PREFIX = `asbx-ghapp-${(process.env.AGENT_SANDBOX_IT_ID ?? 'main').toLowerCase().replace(/[^a-z0-9-]/g, '-')}`
const NET = `${PREFIX}-net`
/** The stand-in's container name is also its host name in the git URL. */
const FAKE = `${PREFIX}-gh`
/** Another site of ours, allowlisted: where the surrogate must not go. */
const OTHER = `${PREFIX}-other`
/** A token of the right shape that the stand-in never minted (the control that it checks). */
const BOGUS = `ghs_${'x'.repeat(36)}`
/** An HTTPS site that logs every request's headers and answers with its name and the Authorization it got. */
const OTHER_SITE = `require('https').createServer({cert: process.env.CERT, key: process.env.KEY}, (q, r) => {
  console.log(JSON.stringify(q.headers)); r.end('hi from other ' + q.url + (q.headers.authorization ? ' auth=' + q.headers.authorization : '') + '\\n');
}).listen(443, '0.0.0.0', () => console.log('listening'));`
const APP_ID = 4242
const INSTALLATION_ID = 777
const TTL = 20
const MARGIN = 10
const FIXTURE = join(REPO, 'test', 'integration', 'fixtures', 'fake-github')

let dir: string
let certDir: string
let runtimeDir: string
let surrogate: string
let keyPem: string
let keyMarker: string
let fakeIp: string
let ws: string
let name: string
let tokenDir: string
let env: Record<string, string>
/** Everything the CLI printed, and every token seen on the host. */
const outputs: string[] = []
const tokens = new Set<string>()

async function sandboxCli(args: string[], extraEnv: Record<string, string> = {}): Promise<Result> {
  const r = await cli(args, {env: {...env, ...extraEnv}})
  outputs.push(r.stdout, r.stderr)
  return r
}

/** The real token, which stays on the host (and goes to the gateway). */
function hostToken(): string {
  const token = readFileSync(join(tokenDir, 'token'), 'utf8').trim()
  tokens.add(token)
  return token
}

/** What the stand-in was sent as credentials, ever, and those of them it never minted. */
async function seenByFake(): Promise<{credentials: string[]; unknown: string[]}> {
  return (await fetch(`http://${fakeIp}:8080/_fake/seen`)).json() as Promise<{credentials: string[]; unknown: string[]}>
}

/** The gateway's secrets once they hold the host's current token (a renewal writes the host file first, then hands it over). */
async function gatewayHoldsHostToken(): Promise<string> {
  return until('the gateway to hold the current token', async () => {
    const held = (await docker('exec', `${name}-gateway`, 'cat', '/tmp/secrets.json')).stdout
    return held.includes(hostToken()) ? held : undefined
  }, 30_000)
}

/** The host's git reaches the stand-in's HTTPS through its CONNECT port, trusting the test CA. */
const hostGitEnv = () => ({https_proxy: `http://${fakeIp}:8080`, GIT_SSL_CAINFO: join(certDir, 'ca.pem')})

async function firewallLog(): Promise<any[]> {
  const r = await sandboxCli(['firewall', 'log', ws, '--json', '--lines', '500'])
  expect(r.exitCode, r.stderr).toBe(0)
  return r.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l))
}

function status(): {lastSuccess?: string; expiresAt?: string; lastError?: string; failures: number} {
  return JSON.parse(readFileSync(join(tokenDir, 'status.json'), 'utf8'))
}

async function until<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, timeoutMs = 90_000): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await probe()
    if (value !== undefined && value !== false) return value
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 500))
  }
}

async function fakeApi(path: string, body?: string): Promise<any> {
  const response = await fetch(`http://${fakeIp}:8080${path}`, {method: body === undefined ? 'GET' : 'POST', body})
  return response.json()
}

/** As node inside the sandbox (through the CLI, like an agent). */
function inside(script: string): Promise<Result> {
  return sandboxCli(['exec', ws, '--', 'bash', '-c', script])
}

/** A live process (a zombie left for a non-reaping init counts as gone). */
function processAlive(pid: number): boolean {
  try {
    return !/\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'))
  } catch {
    return false
  }
}

function serverLog(): Promise<Result> {
  return docker('exec', FAKE, '/usr/bin/git', '--git-dir', '/srv/git/acme/widgets.git', 'log', '--format=%s', 'main')
}

beforeAll(async () => {
  mkdirSync(TEST_ROOT, {recursive: true})
  dir = mkdtempSync(join(TEST_ROOT, 'ghapp-'))
  chownSync(dir, TEST_UID, TEST_UID)
  const pair = generateKeyPairSync('rsa', {modulusLength: 2048})
  // PKCS#1, as GitHub hands it out.
  keyPem = pair.privateKey.export({type: 'pkcs1', format: 'pem'}).toString()
  keyMarker = keyPem.split('\n')[5]
  const keyDir = join(dir, 'keys')
  mkdirSync(keyDir, {mode: 0o700})
  writeFileSync(join(keyDir, 'app.pem'), keyPem, {mode: 0o600})
  // A test CA and one certificate for both sites: the workspace image trusts the CA, so the gateway verifies them as it would GitHub.
  certDir = join(dir, 'certs')
  mkdirSync(certDir)
  const sh = (...args: string[]) => execFileSync('openssl', args, {cwd: certDir, stdio: 'ignore'})
  sh('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '2', '-subj', '/CN=ghapp test CA', '-keyout', 'ca.key', '-out', 'ca.pem')
  sh('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-subj', '/CN=ghapp', '-keyout', 'key.pem', '-out', 'site.csr')
  writeFileSync(join(certDir, 'ext.cnf'), `subjectAltName=DNS:${FAKE},DNS:${OTHER}`)
  sh('x509', '-req', '-in', 'site.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '1', '-extfile', 'ext.cnf', '-out', 'cert.pem')
  const [cert, key] = ['cert.pem', 'key.pem'].map((f) => readFileSync(join(certDir, f), 'utf8'))
  await docker('rm', '-f', FAKE, OTHER)
  await docker('network', 'rm', NET)
  const net = await docker('network', 'create', '--label', `dev.agent-sandbox.test=${PREFIX}`, NET)
  expect(net.exitCode, net.stderr).toBe(0)
  const started = await docker(
    'run', '--detach', '--name', FAKE, '--network', NET, '--label', `dev.agent-sandbox.test=${PREFIX}`, '--user', 'root',
    '--mount', `type=bind,source=${FIXTURE},target=/fixture,readonly`,
    '--env', `FAKE_GH_PUBLIC_KEY=${pair.publicKey.export({type: 'spki', format: 'pem'}).toString()}`,
    '--env', `FAKE_GH_APP_ID=${APP_ID}`, '--env', `FAKE_GH_INSTALLATION_ID=${INSTALLATION_ID}`, '--env', `FAKE_GH_TOKEN_TTL=${TTL}`,
    '--env', 'FAKE_GH_REPOS=acme/widgets,acme/other', '--env', `FAKE_GH_CERT=${cert}`, '--env', `FAKE_GH_KEY=${key}`,
    '--entrypoint', 'node', BASE_IMAGE, '/fixture/server.mjs',
  )
  expect(started.exitCode, started.stderr).toBe(0)
  const other = await docker('run', '--detach', '--name', OTHER, '--network', NET, '--label', `dev.agent-sandbox.test=${PREFIX}`, '--user', 'root',
    '--env', `CERT=${cert}`, '--env', `KEY=${key}`, '--entrypoint', 'node', BASE_IMAGE, '-e', OTHER_SITE)
  expect(other.exitCode, other.stderr).toBe(0)
  await until('the other site to listen', async () => (await docker('logs', OTHER)).stdout.includes('listening') || undefined, 60_000)
  await until('the stand-in to listen', async () => (await docker('logs', FAKE)).stdout.includes('listening') || undefined, 60_000)
  fakeIp = (await docker('inspect', '--format', `{{(index .NetworkSettings.Networks "${NET}").IPAddress}}`, FAKE)).stdout.trim()
  expect(fakeIp).toMatch(/^\d+\.\d+\.\d+\.\d+$/)

  const configHome = join(dir, 'config')
  mkdirSync(join(configHome, 'agent-sandbox'), {recursive: true})
  writeFileSync(
    join(configHome, 'agent-sandbox', 'config.json'),
    JSON.stringify({
      github: {appId: APP_ID, installationId: INSTALLATION_ID, privateKeyPath: join(keyDir, 'app.pem'), apiUrl: `http://${fakeIp}:8080`, gitUrl: `https://${FAKE}`, refreshMarginSeconds: MARGIN},
      dockerNetwork: NET,
      allowDomains: [OTHER],
      // Every host intercepted, so that the App token's surrogate is seen (and refused) wherever it is sent;
      // by default a host with neither rules nor a secret is passed through, where a surrogate is worthless.
      gateway: {inspectAll: true},
      // Keep the firewall from fetching GitHub's address ranges: this test talks to its own containers only.
      env: {AGENT_SANDBOX_GITHUB_META: '0'},
    }),
  )
  runtimeDir = join(dir, 'runtime')
  mkdirSync(runtimeDir, {mode: 0o700})
  env = {XDG_CONFIG_HOME: configHome, XDG_RUNTIME_DIR: runtimeDir}
})

afterAll(async () => {
  if (ws) await cli(['rm', ws], {env})
  await cleanupUnder(TEST_ROOT)
  await docker('rm', '-f', FAKE, OTHER)
  await docker('network', 'rm', NET)
  if (dir) rmSync(dir, {recursive: true, force: true})
})

describe('GitHub App credentials', () => {
  it('refuses bad --clone input before creating anything', async () => {
    const bad = await sandboxCli(['init', '--clone', 'not a repo', join(dir, 'x')])
    expect(bad.exitCode).toBe(2)
    expect(bad.stderr).toMatch(/not a GitHub repository.*owner\/repo/)
    expect(existsSync(join(dir, 'x'))).toBe(false)
    const noApp = await cli(['init', '--clone', 'acme/widgets', join(dir, 'y')], {env: {XDG_CONFIG_HOME: join(dir, 'nothing'), XDG_RUNTIME_DIR: runtimeDir}})
    expect(noApp.exitCode).toBe(2)
    expect(noApp.stderr).toMatch(/needs a GitHub App.*github\.appId/)
    expect(existsSync(join(dir, 'y'))).toBe(false)
  })

  it('init --clone clones through askpass on the host, with no token in the remote or git config', async () => {
    ws = join(dir, 'widgets')
    const r = await sandboxCli(['init', '--clone', 'acme/widgets', ws], hostGitEnv())
    expect(r.exitCode, r.stderr).toBe(0)
    expect(readFileSync(join(ws, 'README.md'), 'utf8')).toBe('# acme/widgets\n')
    expect(existsSync(join(ws, '.agent-sandbox', 'Dockerfile'))).toBe(true)
    // Owned by the owner of the directory it was cloned into (we run as root).
    expect(statSync(join(ws, 'README.md')).uid).toBe(TEST_UID)
    const remote = await run('git', ['-C', ws, '-c', `safe.directory=${ws}`, 'config', '--get', 'remote.origin.url'])
    expect(remote.stdout.trim()).toBe(`https://${FAKE}/acme/widgets.git`)
    const stats = await fakeApi('/_fake/stats')
    expect(stats.minted).toBe(1)
    expect(stats.gitAccepted).toBeGreaterThan(0)
    // The workspace image trusts the test CA (as a company image trusts its own), so the gateway verifies the stand-in.
    const dockerfile = join(ws, '.agent-sandbox', 'Dockerfile')
    const caLine = readFileSync(join(certDir, 'ca.pem'), 'utf8').trim().replace(/\n/g, '\\n')
    writeFileSync(dockerfile, `${readFileSync(dockerfile, 'utf8')}\nRUN printf '%b' '${caLine}\\n' > /usr/local/share/ca-certificates/ghapp-test.crt && update-ca-certificates\n`)
    await trustWorkspace(ws, env)
    const built = await sandboxCli(['build', ws])
    expect(built.exitCode, built.stderr).toBe(0)
  })

  // Behind a TLS-inspecting proxy (or with GitHub Enterprise on a private CA) the
  // API's certificate verifies only with the CA in NODE_EXTRA_CA_CERTS, which the
  // launcher keeps out of node's start-up (src/lib/util/tls.ts): minting must trust it anyway.
  it('mints through an API whose certificate only NODE_EXTRA_CA_CERTS trusts', async () => {
    const ca = await makeTestCa(mkdtempSync(join(dir, 'ca-')))
    const relay = await tlsRelay(ca, {host: fakeIp, port: 8080})
    try {
      const apiUrl = `https://127.0.0.1:${relay.port}`
      const before = (await fakeApi('/_fake/stats')).minted
      const untrusted = join(dir, 'untrusted')
      const refused = await sandboxCli(['init', '--clone', 'acme/widgets', untrusted], {AGENT_SANDBOX_GITHUB_API_URL: apiUrl, ...hostGitEnv()})
      expect(refused.exitCode).toBe(1)
      // After the progress line ("cloning … into …"), one line that names the certificate problem and the fix.
      expect(refused.stderr.trim().split('\n').filter((line) => line.startsWith('agent-sandbox:'))).toEqual([
        `agent-sandbox: error: cannot get a GitHub App installation token: cannot reach ${apiUrl}: unable to verify the first certificate (hint: add the CA that signs ${apiUrl}'s certificate (behind a TLS-inspecting proxy: the proxy's) to the file NODE_EXTRA_CA_CERTS names)`,
      ])
      expect(existsSync(untrusted)).toBe(false)
      const trusted = join(dir, 'trusted')
      const r = await sandboxCli(['init', '--clone', 'acme/widgets', trusted], {AGENT_SANDBOX_GITHUB_API_URL: apiUrl, NODE_EXTRA_CA_CERTS: ca.caFile, ...hostGitEnv()})
      expect(r.exitCode, r.stderr).toBe(0)
      expect(readFileSync(join(trusted, 'README.md'), 'utf8')).toBe('# acme/widgets\n')
      expect((await fakeApi('/_fake/stats')).minted).toBe(before + 1)
    } finally {
      await relay.close()
    }
  })

  it('start refuses a git URL the gateway cannot put the token in (not HTTPS on 443), before minting or creating anything', async () => {
    const before = (await fakeApi('/_fake/stats')).minted
    const r = await sandboxCli(['start', ws], {AGENT_SANDBOX_GITHUB_GIT_URL: `http://${FAKE}:8080`})
    expect(r.exitCode).toBe(2)
    expect(r.stderr.trim().split('\n').pop()).toBe(
      `agent-sandbox: error: github.gitUrl http://${FAKE}:8080 is not HTTPS on port 443: the egress gateway, which alone holds the GitHub App token, cannot put it in requests there (hint: set github.gitUrl (or AGENT_SANDBOX_GITHUB_GIT_URL) to an https:// URL on the default port; see docs/github-app.md)`,
    )
    expect((await fakeApi('/_fake/stats')).minted).toBe(before)
    expect((await docker('ps', '-aq', '--filter', `label=dev.agent-sandbox.workspace=${ws}`)).stdout.trim()).toBe('')
  })

  it('start mints a token, keeps it on the host and mounts only a surrogate read-only; git inside pushes through askpass and the stand-in gets the token', async () => {
    const r = await sandboxCli(['start', ws, '--json'])
    expect(r.exitCode, r.stderr).toBe(0)
    name = JSON.parse(r.stdout).name
    tokenDir = join(runtimeDir, 'agent-sandbox', name)
    // The control for the refusal above: the same filter finds what start made.
    expect((await docker('ps', '-aq', '--filter', `label=dev.agent-sandbox.workspace=${ws}`)).stdout.trim()).not.toBe('')
    for (const [path, mode] of [
      [tokenDir, 0o700],
      [join(tokenDir, 'token'), 0o600],
      [join(tokenDir, 'secrets'), 0o700],
      [join(tokenDir, 'secrets', 'ghapp_token'), 0o600],
      [join(tokenDir, 'status.json'), 0o600],
    ] as const) {
      expect((statSync(path).mode & 0o777).toString(8), path).toBe(mode.toString(8))
    }
    // Readable by the sandbox user only: node is renumbered to the workspace owner.
    expect(statSync(join(tokenDir, 'secrets', 'ghapp_token')).uid).toBe(TEST_UID)
    expect(hostToken()).toMatch(/^ghs_[A-Za-z0-9]{36}$/)
    // Inside: a surrogate of the same shape, not the token.
    surrogate = (await inside('cat /run/secrets/ghapp_token')).stdout.trim()
    expect(surrogate).toMatch(/^ghs_[A-Za-z0-9]{36}$/)
    expect(surrogate).not.toBe(hostToken())
    expect(readFileSync(join(tokenDir, 'secrets', 'ghapp_token'), 'utf8')).toBe(`${surrogate}\n`)
    const info = await inspect(name)
    expect(info.Config.Labels['dev.agent-sandbox.ghapp']).toBe('1')
    expect(info.Config.Env).toContain('GIT_ASKPASS=/usr/local/bin/git-askpass-ghapp')
    // The top-level Mounts: Podman's inspect has no HostConfig.Mounts.
    expect(info.Mounts).toContainEqual(expect.objectContaining({Type: 'bind', Source: join(tokenDir, 'secrets'), Destination: '/run/secrets', RW: false}))

    // What askpass answers is the surrogate (the gateway swaps it on the way out).
    const answered = await inside(`git-askpass-ghapp "Password for 'https://x-access-token@${FAKE}': "`)
    expect(answered.stdout.trim(), answered.stderr).toBe(surrogate)
    const push = await inside('echo one > one.txt && git add one.txt && git -c user.name=T -c user.email=t@example.invalid commit -qm "first push" && git push origin main')
    expect(push.exitCode, push.stderr).toBe(0)
    expect((await serverLog()).stdout.split('\n')).toContain('first push')
    // The stand-in was sent installation tokens it minted (the push was accepted with one), never the surrogate.
    const seen = await seenByFake()
    expect(seen.credentials.length).toBeGreaterThan(0)
    expect(seen.unknown).toEqual([])
    expect(seen.credentials).not.toContain(surrogate)
    expect((await firewallLog()).find((e) => e.path === '/acme/widgets.git/git-receive-pack')).toMatchObject({method: 'POST', host: FAKE, status: 200, decision: 'allowed', rule: expect.stringContaining('secrets github-app-token')})
  })

  it('gh inside sends the surrogate, which the gateway swaps: the API answers for the workspace’s repository', async () => {
    const r = await inside('gh api repos/acme/widgets --jq .full_name')
    expect(r.stdout.trim(), r.stderr).toBe('acme/widgets')
    expect((await seenByFake()).credentials).not.toContain(surrogate)
    // The control: gh without the wrapper's token is refused by the stand-in.
    const bare = await inside(`GH_HOST=${FAKE} GH_ENTERPRISE_TOKEN=${BOGUS} /usr/bin/gh api repos/acme/widgets`)
    expect(bare.exitCode).not.toBe(0)
    expect(bare.stdout + bare.stderr).toMatch(/Bad credentials|401/)
  })

  it('a repository outside the workspace’s remotes is refused by the default rules (403, logged with the rule); the workspace’s own works', async () => {
    // The control: acme/other exists on the stand-in, and its log shows what a push would add.
    expect((await docker('exec', FAKE, '/usr/bin/git', '--git-dir', '/srv/git/acme/other.git', 'log', '--format=%s', 'main')).stdout.trim()).toBe('seed')
    const push = await inside(`git push https://${FAKE}/acme/other.git HEAD:main 2>&1`)
    expect(push.exitCode).not.toBe(0)
    expect(push.stdout).toMatch(/403/)
    const fetch = await inside(`git ls-remote https://${FAKE}/acme/other.git 2>&1`)
    expect(fetch.exitCode).not.toBe(0)
    const api = await inside(`curl -sS -w ' %{http_code}' https://${FAKE}/api/v3/repos/acme/other`)
    expect(api.stdout).toMatch(/refused: path \/api\/v3\/repos\/acme\/other not in httpRules [^\n]*\n 403$/)
    const blocked = (await firewallLog()).find((e) => e.path === '/acme/other.git/info/refs')
    expect(blocked).toMatchObject({host: FAKE, status: 403, decision: 'blocked'})
    expect(blocked.rule).toBe(
      `path /acme/other.git/info/refs not in httpRules ${FAKE} paths /acme/widgets,/acme/widgets/*,/acme/widgets.git,/acme/widgets.git/*,/api/v3/repos/acme/widgets,/api/v3/repos/acme/widgets/*`,
    )
    expect((await docker('exec', FAKE, '/usr/bin/git', '--git-dir', '/srv/git/acme/other.git', 'log', '--format=%s', 'main')).stdout.trim()).toBe('seed')
    // The twin: the workspace's own repository by the same URL form.
    const own = await inside(`git ls-remote https://${FAKE}/acme/widgets.git main`)
    expect(own.exitCode, own.stderr).toBe(0)
    expect(own.stdout).toMatch(/refs\/heads\/main/)
  })

  it('the surrogate sent to another allowlisted host is refused and logged; that host gets neither it nor the token; the same request without it works', async () => {
    const r = await inside(`curl -sS -w ' %{http_code}' -H "Authorization: token $(cat /run/secrets/ghapp_token)" https://${OTHER}/leak`)
    expect(r.stdout).toBe(`agent-sandbox gateway: GET ${OTHER}/leak refused: secret github-app-token is not for ${OTHER} (declared for ${FAKE})\n 403`)
    const twin = await inside(`curl -sS -H "Authorization: token nothing-secret" https://${OTHER}/twin`)
    expect(twin.stdout, twin.stderr).toBe('hi from other /twin auth=token nothing-secret')
    const logs = (await docker('logs', OTHER)).stdout
    expect(logs).toContain('nothing-secret') // control: its log holds what it received
    expect(logs).not.toContain(surrogate)
    expect(logs).not.toContain(hostToken())
    expect((await firewallLog()).find((e) => e.path === '/leak')).toMatchObject({host: OTHER, status: 403, decision: 'blocked', rule: `secret github-app-token is not for ${OTHER} (declared for ${FAKE})`})
  })

  it('doctor shows the gateway refusing the App surrogate (read from its file) sent to another host', async () => {
    const r = await sandboxCli(['doctor', ws, '--json'])
    const rows = Object.fromEntries(JSON.parse(r.stdout).checks.map((c: {name: string}) => [c.name, c]))
    expect(rows['gateway-masked-secrets'], JSON.stringify(rows['gateway-masked-secrets'])).toMatchObject({status: 'pass'})
    expect(rows['gateway-masked-secrets'].detail).toContain(`github-app-token's surrogate sent to ${OTHER}: refused (403) and logged: secret github-app-token is not for ${OTHER}`)
  })

  it('cannot write the token file from inside, not even as root', async () => {
    const asNode = await inside('echo forged > /run/secrets/ghapp_token')
    expect(asNode.exitCode).not.toBe(0)
    const asRoot = await docker('exec', '-u', 'root', name, 'sh', '-c', 'echo forged > /run/secrets/ghapp_token; rm -f /run/secrets/ghapp_token')
    expect(asRoot.exitCode).not.toBe(0)
    expect(asRoot.stderr).toMatch(/Read-only file system/)
    expect(hostToken()).toMatch(/^ghs_/)
  })

  it('renews the token before it expires and hands it to the gateway: git keeps working past expiry, and the surrogate inside stays the same', async () => {
    const first = hostToken()
    const firstMintedAt = status().lastSuccess
    // A reader inside, looping over the file across several renewals.
    const seconds = TTL + 2 * MARGIN
    const reader = execa('docker', [
      'exec', '-u', 'node', name, 'node', '-e',
      `const fs = require('fs'); const end = Date.now() + ${seconds * 1000}; let reads = 0, bad = 0; const seen = new Set();
       const pause = new Int32Array(new SharedArrayBuffer(4));
       while (Date.now() < end) {
         let t; try { t = fs.readFileSync('/run/secrets/ghapp_token', 'utf8') } catch { bad++; continue }
         reads++; if (/^ghs_[A-Za-z0-9]{36}\\n$/.test(t)) seen.add(t); else bad++;
         Atomics.wait(pause, 0, 0, 2);
       }
       console.log(JSON.stringify({reads, bad, values: [...seen]}))`,
    ], {reject: false})
    await until('the first token to expire at the stand-in', async () => (await fakeApi('/_fake/check', first)).valid === false || undefined)
    await until('two renewals', () => (new Set([...tokens]).size >= 3 ? true : (hostToken(), undefined)))
    expect(status().lastSuccess).not.toBe(firstMintedAt)
    const push = await inside('echo two > two.txt && git add two.txt && git -c user.name=T -c user.email=t@example.invalid commit -qm "after expiry" && git push origin main')
    expect(push.exitCode, push.stderr).toBe(0)
    expect((await serverLog()).stdout.split('\n')).toContain('after expiry')
    expect((await fakeApi('/_fake/check', first)).valid).toBe(false)
    // The gateway holds the current token (the control for the searches below: where the token is, it is found).
    expect(await gatewayHoldsHostToken()).not.toContain(first)
    expect((await seenByFake()).unknown.filter((t) => t !== BOGUS)).toEqual([])
    const result = await reader
    expect(result.exitCode, result.stderr).toBe(0)
    const counts = JSON.parse(result.stdout)
    expect(counts.bad).toBe(0)
    expect(counts.reads).toBeGreaterThan(100)
    expect(counts.values).toEqual([`${surrogate}\n`])
  })

  it('shows the token state in list --json', async () => {
    const r = await sandboxCli(['list', '--json'])
    expect(r.exitCode, r.stderr).toBe(0)
    const row = JSON.parse(r.stdout).find((x: {name: string}) => x.name === name)
    expect(row.github).toMatchObject({refresher: 'refresher', lastError: null, failures: 0})
    expect(row.github.summary).toMatch(/^ok \(expires in \d+s\)$/)
  })

  it('keeps the private key out of the container and the images', async () => {
    // A control copy proves the search reaches files; nothing else may match.
    const control = await execa('docker', ['exec', '-i', '-u', 'root', name, 'sh', '-c', 'cat > /tmp/key-marker-control'], {input: keyMarker, reject: false})
    expect(control.exitCode, control.stderr).toBe(0)
    const grep = await docker('exec', '-u', 'root', name, 'grep', '-rlsF', '--exclude-dir=proc', '--exclude-dir=sys', '--exclude-dir=dev', keyMarker, '/')
    expect(grep.stdout.trim().split('\n')).toEqual(['/tmp/key-marker-control'])
    await docker('exec', '-u', 'root', name, 'rm', '-f', '/tmp/key-marker-control')
    const info = await inspect(name)
    for (const image of [info.Config.Image, 'agent-sandbox-base:latest']) {
      const history = await docker('history', '--no-trunc', image)
      const imageInfo = await docker('image', 'inspect', image)
      expect(history.exitCode).toBe(0)
      expect(history.stdout + imageInfo.stdout).not.toContain(keyMarker)
      expect(history.stdout + imageInfo.stdout).not.toContain('PRIVATE KEY')
    }
    expect(JSON.stringify(info)).not.toContain(keyMarker)
  })

  it('shows no token in CLI output, docker inspect, argv, environments, history or git config', async () => {
    hostToken()
    const seen: Record<string, string> = {
      'CLI output': outputs.join('\n'),
      'docker inspect': JSON.stringify(await inspect(name)),
      'cmdlines and environments inside': (await docker('exec', '-u', 'root', name, 'sh', '-c', 'for p in /proc/[0-9]*; do tr "\\0" "\\n" < $p/cmdline; tr "\\0" "\\n" < $p/environ; done 2>/dev/null')).stdout,
      'env inside': (await inside('env')).stdout,
      'shell history': (await docker('exec', name, 'cat', '/commandhistory/.bash_history')).stdout,
      'git config inside': (await inside('git config --list --show-origin')).stdout,
      '.git/config': readFileSync(join(ws, '.git', 'config'), 'utf8'),
      'refresher log': readFileSync(join(tokenDir, 'refresher.log'), 'utf8'),
      'status.json': readFileSync(join(tokenDir, 'status.json'), 'utf8'),
      'container log': (await docker('logs', name)).stdout,
      'token file inside': (await inside('cat /run/secrets/ghapp_token')).stdout,
      'files inside': (await docker('exec', '-u', 'root', name, 'sh', '-c', `grep -rlsF --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev -e ${[...tokens].join(' -e ')} / || true`)).stdout,
      'gateway inspect': JSON.stringify(await inspect(`${name}-gateway`)),
      'gateway log': `${(await docker('logs', `${name}-gateway`)).stdout}${(await docker('logs', `${name}-gateway`)).stderr}`,
      'request log': (await sandboxCli(['firewall', 'log', ws, '--json', '--lines', '500'])).stdout,
    }
    // The search sees what it should: GIT_ASKPASS in the environment, the surrogate in its file, the gateway's copy of the token.
    expect(seen['cmdlines and environments inside']).toContain('GIT_ASKPASS=/usr/local/bin/git-askpass-ghapp')
    expect(seen['token file inside'].trim()).toBe(surrogate)
    expect(await gatewayHoldsHostToken()).toContain('github-app-token')
    expect(tokens.size).toBeGreaterThanOrEqual(3)
    for (const token of tokens) {
      for (const [where, text] of Object.entries(seen)) expect(text.includes(token), `${where} holds a token`).toBe(false)
    }
  })

  it('reports a failing refresh and keeps the last token in place', async () => {
    const before = hostToken()
    const stopped = await docker('stop', '--time', '1', FAKE)
    expect(stopped.exitCode, stopped.stderr).toBe(0)
    const failed = await until('a failed refresh', () => (status().failures > 0 ? status() : undefined), 120_000)
    expect(failed.lastError).toMatch(/cannot reach http:\/\//)
    expect(hostToken()).toBe(before)
    const r = await sandboxCli(['list', '--json'])
    const row = JSON.parse(r.stdout).find((x: {name: string}) => x.name === name)
    expect(row.github.lastError).toMatch(/cannot reach/)
    expect(row.github.summary).toMatch(/^error: /)
    const table = await sandboxCli(['list'])
    expect(table.stdout).toMatch(/GITHUB/)
    expect(table.stdout).toMatch(/error: cannot reach/)
  })

  it('rm stops the refresher and deletes the token directory', async () => {
    const pid = Number(readFileSync(join(tokenDir, 'refresher.pid'), 'utf8'))
    expect(processAlive(pid)).toBe(true)
    const r = await sandboxCli(['rm', ws])
    expect(r.exitCode, r.stderr).toBe(0)
    expect(existsSync(tokenDir)).toBe(false)
    await until('the refresher to exit', () => !processAlive(pid) || undefined, 10_000)
    // Still gone a poll interval later: nothing brought the directory back.
    await new Promise((resolve) => setTimeout(resolve, 3000))
    expect(existsSync(tokenDir)).toBe(false)
  })

  it('without an egress gateway (network open) the sandbox gets no App token at all, and start says so', async () => {
    const r = await sandboxCli(['start', ws, '--network', 'open', '--json'])
    expect(r.exitCode, r.stderr).toBe(0)
    expect(r.stderr).toContain('the GitHub App token is not given to this sandbox: with network open it has no egress gateway to hold the token')
    const info = await inspect(JSON.parse(r.stdout).name)
    expect(info.Config.Labels['dev.agent-sandbox.ghapp']).toBeUndefined()
    expect(info.Config.Env.some((e: string) => e.startsWith('GIT_ASKPASS='))).toBe(false)
    expect(info.Mounts.length).toBeGreaterThan(0) // the control: the mounts are there to look into
    expect(JSON.stringify(info.Mounts)).not.toContain('/run/secrets')
    expect(existsSync(tokenDir)).toBe(false)
    const secrets = await inside('ls /run/secrets/ghapp_token')
    expect(secrets.exitCode).not.toBe(0)
    expect((await sandboxCli(['rm', ws])).exitCode).toBe(0)
  })

  it('token-daemon runs in the foreground, once: a second one is refused, SIGTERM stops it', async () => {
    const daemon = execa(BIN, ['token-daemon'], {env, reject: false, stdin: 'ignore'})
    const pidFile = join(runtimeDir, 'agent-sandbox', 'daemon.pid')
    await until('the daemon pid file', () => (existsSync(pidFile) && Number(readFileSync(pidFile, 'utf8')) === daemon.pid) || undefined, 30_000)
    const second = await sandboxCli(['token-daemon'])
    expect(second.exitCode).toBe(7)
    expect(second.stderr).toContain(`a token daemon is already running (pid ${daemon.pid})`)
    daemon.kill('SIGTERM')
    const done = await daemon
    outputs.push(String(done.stdout), String(done.stderr))
    expect(done.exitCode).toBe(0)
    expect(String(done.stderr)).toMatch(/token daemon started[\s\S]*stopped \(SIGTERM\)/)
    expect(existsSync(pidFile)).toBe(false)
  })
})

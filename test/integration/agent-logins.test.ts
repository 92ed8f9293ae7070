/**
 * The agents' logins with the real engine and the real `claude` and `codex`:
 * a stand-in vendor (a container of this test's own, with the vendors' host
 * names as network aliases and a certificate of a test CA the workspace image
 * trusts) plays the token endpoints and the APIs, and records what it gets.
 * Credentials are imported masked; the agents refresh (their tokens are
 * expired) and call the API through the gateway. Then the real tokens must be
 * at the stand-in, in the host's store, and nowhere in the sandbox. Last, each
 * agent signs in anew inside the sandbox (its browser flow, driven by
 * fixtures/browser-login.mjs), and ends with surrogates there too.
 */
import {createHash, randomBytes} from 'node:crypto'
import {execFileSync} from 'node:child_process'
import {mkdirSync, mkdtempSync, readFileSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {BASE_IMAGE, cli, docker, initWorkspace, makeWorkspace, REPO, type Result, TEST_STATE_HOME, trustWorkspace} from './helpers.js'
import {createTestNetwork, must, removeTestSites} from './test-sites.js'

const RUN = `${(process.env.AGENT_SANDBOX_IT_ID ?? 'main').toLowerCase().replace(/[^a-z0-9]+/g, '-')}-${randomBytes(3).toString('hex')}`
const LABEL = `dev.agent-sandbox.loginsit=${RUN}`
const name = (role: string) => `loginsit-${role}-${RUN}`
const VENDOR_NAMES = ['api.anthropic.com', 'platform.claude.com', 'api.openai.com', 'auth.openai.com', 'chatgpt.com']
const OTHER = name('other')

const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url')
const jwt = (claims: object) => `${b64({alg: 'RS256', typ: 'JWT'})}.${b64(claims)}.${randomBytes(256).toString('base64url')}`
const tok = (prefix: string) => `${prefix}${randomBytes(60).toString('base64url').replace(/[-_]/g, 'x')}`
const CODEX_CLAIMS = {email: 'dev@example.invalid', 'https://api.openai.com/auth': {chatgpt_plan_type: 'plus', chatgpt_account_id: 'acct-1'}}

const REAL = {
  claudeAccess: tok('sk-ant-oat01-'),
  claudeRefresh: tok('sk-ant-ort01-'),
  claudeNewAccess: tok('sk-ant-oat01-'),
  claudeNewRefresh: tok('sk-ant-ort01-'),
  codexId: jwt({...CODEX_CLAIMS, exp: 1_000_000_000}),
  codexAccess: jwt({...CODEX_CLAIMS, exp: 1_000_000_000}),
  codexRefresh: tok('rt_'),
  codexNewId: jwt({...CODEX_CLAIMS, exp: 4_000_000_000}),
  codexNewAccess: jwt({...CODEX_CLAIMS, exp: 4_000_000_000}),
  codexNewRefresh: tok('rt_'),
  // What the token endpoints answer to a sign-in (grant_type=authorization_code), and Codex's API key exchange after it.
  claudeLoginAccess: tok('sk-ant-oat01-'),
  claudeLoginRefresh: tok('sk-ant-ort01-'),
  codexLoginId: jwt({...CODEX_CLAIMS, email: 'signed-in@example.invalid', exp: 4_000_000_000}),
  codexLoginAccess: jwt({...CODEX_CLAIMS, email: 'signed-in@example.invalid', exp: 4_000_000_000}),
  codexLoginRefresh: tok('rt_'),
  codexLoginApiKey: tok('sk-proj-'),
}
const ALL_REAL = Object.values(REAL)
const sha = (v: string) => createHash('sha256').update(v).digest('hex')
/** The authorization codes the "browser" brings back from the sign-in page. */
const CODE = {claude: `loginsit-claude-${randomBytes(8).toString('hex')}`, codex: `loginsit-codex-${randomBytes(8).toString('hex')}`}
const BROWSER_LOGIN = readFileSync(join(REPO, 'test', 'integration', 'fixtures', 'browser-login.mjs'), 'utf8')

/**
 * The stand-in vendor: records every request (and upgrade) to /tmp/seen.jsonl;
 * the token endpoints answer with /answers.json, by grant type (a refresh, a
 * sign-in's code, Codex's exchange of its id token for an API key).
 */
const VENDOR = `const https = require('https'), fs = require('fs');
const answers = JSON.parse(fs.readFileSync('/answers.json', 'utf8'));
const grant = (body) => { try { return JSON.parse(body).grant_type } catch { return new URLSearchParams(body).get('grant_type') } };
const note = (q, body) => fs.appendFileSync('/tmp/seen.jsonl', JSON.stringify({host: q.headers.host, method: q.method, url: q.url, auth: q.headers.authorization || q.headers['x-api-key'] || '', body}) + '\\n');
const json = (r, status, o) => { const b = JSON.stringify(o); r.writeHead(status, {'content-type': 'application/json', 'content-length': Buffer.byteLength(b)}); r.end(b) };
const server = https.createServer({cert: process.env.CERT, key: process.env.KEY}, (q, r) => {
  let body = ''; q.on('data', (c) => (body += c));
  q.on('end', () => {
    note(q, body);
    const host = String(q.headers.host || '').split(':')[0];
    if (q.method === 'POST' && host === 'platform.claude.com' && q.url.startsWith('/v1/oauth/token')) return json(r, 200, grant(body) === 'authorization_code' ? answers.claudeLogin : answers.claude);
    if (q.method === 'POST' && host === 'auth.openai.com' && q.url.startsWith('/oauth/token')) {
      const g = grant(body);
      return json(r, 200, g === 'authorization_code' ? answers.codexLogin : g === 'urn:ietf:params:oauth:grant-type:token-exchange' ? answers.codexApiKey : answers.codex);
    }
    json(r, 503, {type: 'error', error: {type: 'overloaded_error', message: 'stand-in vendor'}});
  });
});
server.on('upgrade', (q, s) => { note(q, ''); s.end('HTTP/1.1 503 Service Unavailable\\r\\ncontent-length: 0\\r\\n\\r\\n') });
server.listen(443, '::');`

let network = ''
let certDir = ''
let home = ''
let ws = ''
let sandbox = ''
const workspaces: string[] = []
const vendor = name('vendor')
const env = () => ({HOME: home, XDG_CONFIG_HOME: undefined, CODEX_HOME: undefined, CLAUDE_CONFIG_DIR: undefined, ANTHROPIC_API_KEY: undefined, OPENAI_API_KEY: undefined})
const as = (...args: string[]): Promise<Result> => cli(args, {env: env()})

async function seen(): Promise<Array<{host: string; method: string; url: string; auth: string; body: string}>> {
  const r = await docker('exec', vendor, 'cat', '/tmp/seen.jsonl')
  return r.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l))
}

/** The logins in the host's stores of the workspace's two config volumes. */
async function storedLogins(): Promise<Array<{name: string; value: string; surrogate: string}>> {
  const volumes = must(await as('volume', ws), 'volume').stdout.trim().split('\n')
  return volumes.flatMap((v) => (JSON.parse(readFileSync(join(TEST_STATE_HOME, 'agent-sandbox', 'logins', `${v}.json`), 'utf8')) as {logins: Array<{name: string; value: string; surrogate: string}>}).logins)
}

/** An agent's browser sign-in inside the sandbox (fixtures/browser-login.mjs), the "browser" bringing `code` back. */
async function browserLogin(code: string, ...command: string[]): Promise<{authorize: string; callback: string; exit: number | null; output: string}> {
  const r = must(await as('exec', ws, '--', 'node', '--input-type=module', '-e', BROWSER_LOGIN, code, ...command), `${command.join(' ')} in the sandbox`)
  return JSON.parse(r.stdout)
}

/** Which of these real values the sandbox holds anywhere (files, environments, command lines; as root): none, or their names. */
async function realValuesInside(values: Record<string, string>): Promise<string[]> {
  const script = readFileSync(join(REPO, 'base-image', 'credential-hashes.js'), 'utf8')
  const hashes = new Set(must(await docker('exec', '-u', 'root', sandbox, 'node', '-e', script), 'hashing').stdout.split('\n'))
  expect(hashes.size).toBeGreaterThan(10)
  return Object.entries(values).filter(([, v]) => hashes.has(sha(v))).map(([k]) => k)
}

/** A surrogate of `real`: the same length and `prefix` (a token's, or a JWT's header and claims), and not the value. */
function expectSurrogateOf(held: string, real: string, prefix: string, what: string): void {
  expect(real.startsWith(prefix), what).toBe(true)
  expect(held.startsWith(prefix), what).toBe(true)
  expect(held, what).toHaveLength(real.length)
  expect(held, what).not.toBe(real)
}
const jwtPrefix = (token: string) => token.slice(0, token.lastIndexOf('.') + 1)

afterAll(() => removeTestSites(LABEL, network, workspaces, certDir))

beforeAll(async () => {
  const net = await createTestNetwork(name('net'), LABEL, 150)
  network = net.name
  certDir = mkdtempSync(join(tmpdir(), 'loginsit-cert-'))
  const sh = (...args: string[]) => execFileSync('openssl', args, {cwd: certDir, stdio: 'ignore'})
  sh('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '2', '-subj', '/CN=loginsit test CA/O=loginsit', '-keyout', 'ca.key', '-out', 'ca.pem')
  sh('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-subj', '/CN=loginsit', '-keyout', 'key.pem', '-out', 'site.csr')
  writeFileSync(join(certDir, 'ext.cnf'), `subjectAltName=${[...VENDOR_NAMES, OTHER].map((n) => `DNS:${n}`).join(',')}`)
  sh('x509', '-req', '-in', 'site.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '1', '-extfile', 'ext.cnf', '-out', 'cert.pem')
  const [cert, key, ca] = ['cert.pem', 'key.pem', 'ca.pem'].map((f) => readFileSync(join(certDir, f), 'utf8'))
  writeFileSync(
    join(certDir, 'answers.json'),
    JSON.stringify({
      claude: {token_type: 'Bearer', access_token: REAL.claudeNewAccess, refresh_token: REAL.claudeNewRefresh, expires_in: 28800, scope: 'user:inference user:profile'},
      codex: {id_token: REAL.codexNewId, access_token: REAL.codexNewAccess, refresh_token: REAL.codexNewRefresh},
      claudeLogin: {token_type: 'Bearer', access_token: REAL.claudeLoginAccess, refresh_token: REAL.claudeLoginRefresh, expires_in: 28800, scope: 'user:inference user:profile',
        account: {uuid: '6f1c2a9e-3d4b-4c5a-9e8f-0a1b2c3d4e5f', email_address: 'signed-in@example.invalid'}, organization: {uuid: '0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d', name: 'loginsit'}},
      codexLogin: {id_token: REAL.codexLoginId, access_token: REAL.codexLoginAccess, refresh_token: REAL.codexLoginRefresh},
      codexApiKey: {access_token: REAL.codexLoginApiKey},
    }),
  )
  const aliases = [...VENDOR_NAMES, OTHER].flatMap((n) => ['--network-alias', n])
  must(
    await docker('run', '-d', '--name', vendor, '--label', LABEL, '--network', network, ...aliases, '-e', `CERT=${cert}`, '-e', `KEY=${key}`,
      '-v', `${certDir}/answers.json:/answers.json:ro`, '--entrypoint', 'node', '--user', 'root', BASE_IMAGE, '-e', VENDOR),
    'starting the stand-in vendor',
  )
  // A host home logged in to both agents, with expired access tokens (so both refresh first).
  home = mkdtempSync(join(tmpdir(), 'loginsit-home-'))
  mkdirSync(join(home, '.claude'))
  mkdirSync(join(home, '.codex'))
  writeFileSync(join(home, '.claude', '.credentials.json'), JSON.stringify({claudeAiOauth: {accessToken: REAL.claudeAccess, refreshToken: REAL.claudeRefresh, expiresAt: 1_000_000_000_000, scopes: ['user:inference', 'user:profile'], subscriptionType: 'pro'}}))
  writeFileSync(join(home, '.claude.json'), JSON.stringify({hasCompletedOnboarding: true}))
  writeFileSync(join(home, '.codex', 'auth.json'), JSON.stringify({OPENAI_API_KEY: null, tokens: {id_token: REAL.codexId, access_token: REAL.codexAccess, refresh_token: REAL.codexRefresh, account_id: 'acct-1'}, last_refresh: '2020-01-01T00:00:00Z'}))
  ws = await makeWorkspace('logins')
  workspaces.push(ws)
  await initWorkspace(ws)
  const dockerfile = join(ws, '.agent-sandbox', 'Dockerfile')
  const caLine = ca.trim().replace(/\n/g, '\\n')
  writeFileSync(dockerfile, `${readFileSync(dockerfile, 'utf8')}\nRUN printf '%b' '${caLine}\\n' > /usr/local/share/ca-certificates/loginsit.crt && update-ca-certificates\n`)
  writeFileSync(join(ws, '.agent-sandbox', 'config.json'), `${JSON.stringify({dockerNetwork: network, allowDomains: [OTHER], httpRules: [{host: OTHER, methods: ['GET', 'HEAD', 'POST']}], sharedAgentConfig: false, env: {AGENT_SANDBOX_GITHUB_META: '0'}}, null, 2)}\n`)
  await trustWorkspace(ws)
  must(await as('claude-init-config', ws, '--auth'), 'claude-init-config --auth')
  must(await as('codex-init-config', ws, '--auth'), 'codex-init-config --auth')
  must(await cli(['build', ws]), 'build')
  const r = must(await as('start', ws, '--json'), 'start')
  sandbox = JSON.parse(r.stdout).name as string
})

describe('agent logins through the gateway, with the real agents', () => {
  it('claude refreshes at the token endpoint with the real refresh token, then calls the API with the new real access token', async () => {
    await as('exec', ws, '--', 'bash', '-c', 'timeout 90 claude -p hi </dev/null >/dev/null 2>&1; true')
    const got = await seen()
    const refresh = got.find((s) => s.host === 'platform.claude.com' && s.url.startsWith('/v1/oauth/token'))
    expect(refresh, JSON.stringify(got.map((s) => `${s.method} ${s.host}${s.url}`))).toBeDefined()
    expect(JSON.parse(refresh?.body ?? '{}')).toMatchObject({grant_type: 'refresh_token', refresh_token: REAL.claudeRefresh})
    expect(got.some((s) => s.host === 'api.anthropic.com' && s.auth === `Bearer ${REAL.claudeNewAccess}`)).toBe(true)
    // What the agent wrote back: surrogates of the same shape.
    const creds = JSON.parse((await as('exec', ws, '--', 'cat', '/home/node/.claude/.credentials.json')).stdout) as {claudeAiOauth: {accessToken: string; refreshToken: string}}
    expect(creds.claudeAiOauth.accessToken).toMatch(/^sk-ant-oat01-/)
    expect(creds.claudeAiOauth.accessToken).toHaveLength(REAL.claudeNewAccess.length)
    expect(creds.claudeAiOauth.accessToken).not.toBe(REAL.claudeNewAccess)
  })

  it('codex refreshes with the real refresh token, then calls chatgpt.com with the new real access token', async () => {
    await as('exec', ws, '--', 'bash', '-c', 'cd /tmp && timeout 90 codex exec --skip-git-repo-check hi </dev/null >/dev/null 2>&1; true')
    const got = await seen()
    const refresh = got.find((s) => s.host === 'auth.openai.com' && s.url.startsWith('/oauth/token'))
    expect(refresh, JSON.stringify(got.map((s) => `${s.method} ${s.host}${s.url}`))).toBeDefined()
    expect(refresh?.body).toContain(REAL.codexRefresh)
    expect(got.some((s) => s.host === 'chatgpt.com' && s.auth === `Bearer ${REAL.codexNewAccess}`)).toBe(true)
    const auth = JSON.parse((await as('exec', ws, '--', 'cat', '/home/node/.codex/auth.json')).stdout) as {tokens: {access_token: string; id_token: string}}
    expect(auth.tokens.access_token.split('.').slice(0, 2)).toEqual(REAL.codexNewAccess.split('.').slice(0, 2))
    expect(auth.tokens.access_token).not.toBe(REAL.codexNewAccess)
  })

  it('a surrogate sent to another allowed host the gateway inspects (it has a rule) is refused, and logged with the credential\'s name', async () => {
    const creds = JSON.parse((await as('exec', ws, '--', 'cat', '/home/node/.claude/.credentials.json')).stdout) as {claudeAiOauth: {accessToken: string}}
    const before = (await seen()).length
    const r = await as('exec', ws, '--', 'curl', '-sS', '--max-time', '20', '-o', '/dev/null', '-w', '%{http_code}', '-H', `Authorization: Bearer ${creds.claudeAiOauth.accessToken}`, `https://${OTHER}/collect`)
    expect(r.stdout).toBe('403')
    expect((await seen()).length).toBe(before)
    const log = await cli(['firewall', 'log', ws, '--json', '--lines', '500'])
    // Named as imported from the file, or, once claude refreshed (the first case), as the exchange minted it.
    expect(log.stdout).toMatch(/claude (\.credentials\.json accessToken|access_token) is not for loginsit-other/)
    // The control: the same request without the surrogate reaches it.
    expect((await as('exec', ws, '--', 'curl', '-sS', '--max-time', '20', '-o', '/dev/null', '-w', '%{http_code}', `https://${OTHER}/collect`)).stdout).toBe('503')
  })

  it('no real token is in any file, environment or command line of the sandbox (as root), nor in inspect, logs or show-run', async () => {
    const script = readFileSync(join(REPO, 'base-image', 'credential-hashes.js'), 'utf8')
    const hashes = new Set(must(await docker('exec', '-u', 'root', sandbox, 'node', '-e', script), 'hashing').stdout.split('\n'))
    expect(hashes.size).toBeGreaterThan(10)
    for (const [field, value] of Object.entries(REAL)) expect(hashes.has(sha(value)), field).toBe(false)
    const containers = must(await docker('ps', '-a', '--filter', `label=dev.agent-sandbox.workspace=${ws}`, '--format', '{{.Names}}'), 'ps').stdout.split('\n').filter(Boolean)
    expect(containers.length).toBeGreaterThanOrEqual(2)
    for (const c of containers) {
      const text = (await docker('inspect', c)).stdout + (await docker('logs', c)).stdout + (await docker('logs', c)).stderr
      for (const value of ALL_REAL) expect(text.includes(value), c).toBe(false)
    }
    const shown = await as('show-run', ws)
    for (const value of ALL_REAL) expect(shown.stdout.includes(value)).toBe(false)
    const doctor = await as('doctor', ws, '--json')
    expect(JSON.parse(doctor.stdout).checks).toContainEqual(expect.objectContaining({name: 'agent-logins', status: 'pass'}))
  })

  it('stop brings the refreshed real tokens to the host store; the next start hands them to the new gateway', async () => {
    must(await as('stop', ws), 'stop')
    const store = (volume: string) => readFileSync(join(TEST_STATE_HOME, 'agent-sandbox', 'logins', `${volume}.json`), 'utf8')
    const volumes = must(await as('volume', ws), 'volume').stdout.trim().split('\n')
    const text = volumes.map(store).join('\n')
    for (const value of [REAL.claudeNewAccess, REAL.claudeNewRefresh, REAL.codexNewRefresh, REAL.codexNewAccess]) expect(text.includes(value)).toBe(true)
    must(await as('start', ws), 'start again')
    const before = (await seen()).length
    await as('exec', ws, '--', 'bash', '-c', 'timeout 90 claude -p hi </dev/null >/dev/null 2>&1; true')
    const after = (await seen()).slice(before)
    expect(after.some((s) => s.host === 'api.anthropic.com' && s.auth === `Bearer ${REAL.claudeNewAccess}`)).toBe(true)
  })

  it('a codex sign-in inside the sandbox ends with surrogates inside; the real tokens reach the vendor and, at stop, the host store', async () => {
    const before = (await seen()).length
    const login = await browserLogin(CODE.codex, 'codex', 'login')
    expect(login, login.output).toMatchObject({authorize: 'https://auth.openai.com/oauth/authorize', callback: '302 200', exit: 0})
    // The code went to the token endpoint; then codex exchanged the new id token (the real one, put in by the gateway) for an API key.
    const exchanges = (await seen()).slice(before).filter((s) => s.host === 'auth.openai.com' && s.url.startsWith('/oauth/token')).map((s) => new URLSearchParams(s.body))
    expect(exchanges.map((f) => f.get('grant_type'))).toEqual(['authorization_code', 'urn:ietf:params:oauth:grant-type:token-exchange'])
    expect(exchanges[0].get('code')).toBe(CODE.codex)
    expect(exchanges[1].get('subject_token')).toBe(REAL.codexLoginId)
    // What codex wrote: surrogates of the sign-in's tokens and of the API key.
    const auth = JSON.parse(must(await as('exec', ws, '--', 'cat', '/home/node/.codex/auth.json'), 'reading auth.json').stdout) as {OPENAI_API_KEY: string; tokens: {id_token: string; access_token: string; refresh_token: string}}
    const held = {codexLoginId: auth.tokens.id_token, codexLoginAccess: auth.tokens.access_token, codexLoginRefresh: auth.tokens.refresh_token, codexLoginApiKey: auth.OPENAI_API_KEY}
    expectSurrogateOf(held.codexLoginId, REAL.codexLoginId, jwtPrefix(REAL.codexLoginId), 'id_token')
    expectSurrogateOf(held.codexLoginAccess, REAL.codexLoginAccess, jwtPrefix(REAL.codexLoginAccess), 'access_token')
    expectSurrogateOf(held.codexLoginRefresh, REAL.codexLoginRefresh, 'rt_', 'refresh_token')
    expectSurrogateOf(held.codexLoginApiKey, REAL.codexLoginApiKey, 'sk-proj-', 'OPENAI_API_KEY')
    const signIn = {codexLoginId: REAL.codexLoginId, codexLoginAccess: REAL.codexLoginAccess, codexLoginRefresh: REAL.codexLoginRefresh, codexLoginApiKey: REAL.codexLoginApiKey}
    expect(await realValuesInside(signIn)).toEqual([])
    // The next call of codex reaches the vendor with the real access token of the sign-in.
    const signedIn = (await seen()).length
    await as('exec', ws, '--', 'bash', '-c', 'cd /tmp && timeout 90 codex exec --skip-git-repo-check hi </dev/null >/dev/null 2>&1; true')
    const calls = (await seen()).slice(signedIn)
    expect(calls.some((s) => s.host === 'chatgpt.com' && s.auth === `Bearer ${REAL.codexLoginAccess}`), JSON.stringify(calls.map((s) => `${s.method} ${s.host}${s.url}`))).toBe(true)
    // stop brings them to the host's store, each with the surrogate codex holds.
    must(await as('stop', ws), 'stop')
    const stored = await storedLogins()
    for (const [field, value] of Object.entries(signIn)) expect(stored.find((l) => l.value === value)?.surrogate, field).toBe(held[field as keyof typeof held])
    must(await as('start', ws), 'start again')
  })

  it('a claude sign-in inside the sandbox ends with surrogates inside; the real tokens reach the vendor and, at stop, the host store', async () => {
    const before = (await seen()).length
    const login = await browserLogin(CODE.claude, 'claude', 'auth', 'login')
    expect(login, login.output).toMatchObject({authorize: 'https://claude.com/cai/oauth/authorize', callback: '302', exit: 0})
    // (Holding an expired login, as when this case runs alone, claude refreshes it first.)
    const exchanges = (await seen()).slice(before).filter((s) => s.host === 'platform.claude.com' && s.url.startsWith('/v1/oauth/token')).map((s) => JSON.parse(s.body) as Record<string, string>)
    expect(exchanges.filter((e) => e.grant_type === 'authorization_code')).toEqual([expect.objectContaining({code: CODE.claude})])
    const creds = JSON.parse(must(await as('exec', ws, '--', 'cat', '/home/node/.claude/.credentials.json'), 'reading .credentials.json').stdout) as {claudeAiOauth: {accessToken: string; refreshToken: string}}
    const held = {claudeLoginAccess: creds.claudeAiOauth.accessToken, claudeLoginRefresh: creds.claudeAiOauth.refreshToken}
    expectSurrogateOf(held.claudeLoginAccess, REAL.claudeLoginAccess, 'sk-ant-oat01-', 'accessToken')
    expectSurrogateOf(held.claudeLoginRefresh, REAL.claudeLoginRefresh, 'sk-ant-ort01-', 'refreshToken')
    const signIn = {claudeLoginAccess: REAL.claudeLoginAccess, claudeLoginRefresh: REAL.claudeLoginRefresh}
    expect(await realValuesInside(signIn)).toEqual([])
    const signedIn = (await seen()).length
    await as('exec', ws, '--', 'bash', '-c', 'timeout 90 claude -p hi </dev/null >/dev/null 2>&1; true')
    const calls = (await seen()).slice(signedIn)
    expect(calls.some((s) => s.host === 'api.anthropic.com' && s.auth === `Bearer ${REAL.claudeLoginAccess}`), JSON.stringify(calls.map((s) => `${s.method} ${s.host}${s.url}`))).toBe(true)
    must(await as('stop', ws), 'stop')
    const stored = await storedLogins()
    for (const [field, value] of Object.entries(signIn)) expect(stored.find((l) => l.value === value)?.surrogate, field).toBe(held[field as keyof typeof held])
    must(await as('start', ws), 'start again')
  })
})

/**
 * The agents' logins through the real gateway server (serveGateway) on
 * loopback: a stand-in resolver answers 127.0.0.1 for the vendors' names, a
 * stand-in site plays their token endpoints and APIs with certificates of its
 * own CA. No masked secretEnv: the vendors' hosts are intercepted for the
 * logins alone.
 */
import {randomBytes} from 'node:crypto'
import type {Socket as UdpSocket} from 'node:dgram'
import {mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import http2 from 'node:http2'
import https from 'node:https'
import type {AddressInfo} from 'node:net'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import tls from 'node:tls'
import {gzipSync} from 'node:zlib'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {startDns} from './gateway-site.js'
import {parseRequestLog, REQUEST_LOG} from '../../src/lib/network/gateway/log.js'
import {SECRETS_FILE, serveGateway, type RunningGateway} from '../../src/lib/network/gateway/server.js'
import {createCa, createLeafMinter} from '../../src/lib/network/gateway/certificates.js'
import {mintLoginSurrogate, type AgentLogin, type GatewayLogins} from '../../src/lib/network/gateway/agent-logins.js'
import {MINTED_FILE, type MintedLogins} from '../../src/lib/network/gateway/login-exchange.js'

const KEY = randomBytes(32).toString('hex')
const tok = (prefix: string) => `${prefix}${randomBytes(40).toString('base64url')}`
const ACCESS = tok('sk-ant-oat01-')
const REFRESH = tok('sk-ant-ort01-')
const NEW_ACCESS = tok('sk-ant-oat01-')
const NEW_REFRESH = tok('sk-ant-ort01-')
const CODEX_REFRESH = tok('rt_')
const CODEX_NEW = tok('rt_')
const login = (name: string, vendor: AgentLogin['vendor'], value: string): AgentLogin => ({name, vendor, value, surrogate: mintLoginSurrogate(name, value, KEY)})
const claude = [login('claude accessToken', 'anthropic', ACCESS), login('claude refreshToken', 'anthropic', REFRESH)]
const codex = [login('codex refresh_token', 'openai', CODEX_REFRESH)]
const REALS = [ACCESS, REFRESH, NEW_ACCESS, NEW_REFRESH, CODEX_REFRESH, CODEX_NEW]

let dir = ''
let gateway: RunningGateway
let site: https.Server
let dns: UdpSocket
let tlsPort = 0
let sandboxCa = ''
/** What the stand-in site got: host, path, authorization, body. */
const seen: Array<{host: string; path: string; auth: string; body: string}> = []


/** The vendors' token endpoints (a rotating refresh, gzip-encoded as a CDN would) and an API that says which token it got. */
function answer(host: string, path: string, body: string): {status: number; json: unknown} {
  if (host === 'platform.claude.com' && path === '/v1/oauth/token') {
    const grant = JSON.parse(body) as {refresh_token?: string}
    if (grant.refresh_token !== REFRESH) return {status: 400, json: {error: 'invalid_grant'}}
    return {status: 200, json: {token_type: 'Bearer', access_token: NEW_ACCESS, refresh_token: NEW_REFRESH, expires_in: 28800, scope: 'user:inference'}}
  }
  if (host === 'auth.openai.com' && path === '/oauth/token') {
    const grant = JSON.parse(body) as {refresh_token?: string}
    if (grant.refresh_token !== CODEX_REFRESH) return {status: 401, json: {error: 'refresh_token_invalid'}}
    return {status: 200, json: {refresh_token: CODEX_NEW, id_token: null}}
  }
  return {status: 200, json: {ok: true}}
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'gwlogins-unit-'))
  const siteCa = createCa('site CA')
  const minter = createLeafMinter(siteCa)
  const hosts = ['api.anthropic.com', 'platform.claude.com', 'auth.openai.com', 'other.test']
  const leaves = await Promise.all(hosts.map((h) => minter.leaf(h)))
  site = https.createServer({cert: leaves[0].cert, key: leaves[0].key}, (q, r) => {
    const chunks: Buffer[] = []
    q.on('data', (c: Buffer) => chunks.push(c))
    q.on('end', () => {
      const body = Buffer.concat(chunks).toString()
      const host = String(q.headers.host)
      seen.push({host, path: q.url ?? '', auth: String(q.headers.authorization ?? ''), body})
      const {status, json} = answer(host, q.url ?? '', body)
      r.writeHead(status, {'content-type': 'application/json', 'content-encoding': 'gzip'}).end(gzipSync(JSON.stringify(json)))
    })
  })
  hosts.slice(1).forEach((h, i) => site.addContext(h, {cert: leaves[i + 1].cert, key: leaves[i + 1].key}))
  await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve))
  dns = await startDns()
  const ca = createCa('sandbox CA')
  sandboxCa = ca.cert
  const logins: GatewayLogins = {
    anthropic: {key: KEY, logins: claude, agent: 'claude', volume: 'claude-vol'},
    openai: {key: KEY, logins: codex, agent: 'codex', volume: 'codex-vol'},
  }
  writeFileSync(join(dir, SECRETS_FILE), JSON.stringify({ca, secrets: [], logins}))
  writeFileSync(join(dir, 'domains.txt'), `${hosts.join('\n')}\n`)
  for (let attempt = 0; ; attempt++) {
    const base = 20_000 + Math.floor(Math.random() * 20_000)
    try {
      gateway = await serveGateway({
        httpPort: base,
        tlsPort: base + 1,
        listen: ['127.0.0.1'],
        dnsServer: '127.0.0.1',
        dnsPort: (dns.address() as AddressInfo).port,
        domainFiles: [join(dir, 'domains.txt')],
        allowDomains: [],
        stateDir: dir,
        upstreamHttpPort: 1,
        upstreamTlsPort: (site.address() as AddressInfo).port,
        maxLogBytes: 1024 * 1024,
        // other.test is intercepted for its rule, so a login's surrogate sent there is seen (and refused);
        // a host with neither rules nor a secret is passed through, where a surrogate is worthless.
        rules: [{host: 'other.test', methods: ['GET', 'POST']}],
        upstreamCa: [siteCa.cert],
        masked: [],
      })
      tlsPort = base + 1
      break
    } catch (error) {
      if (attempt > 5) throw error
    }
  }
})

afterAll(async () => {
  await gateway?.close()
  site?.close()
  dns?.close()
  rmSync(dir, {recursive: true, force: true})
})

/** An HTTP/1.1 request through the gateway over TLS, trusting the sandbox CA only. */
function post(host: string, path: string, headers: Record<string, string>, body: string): Promise<{status: number; body: string}> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      {host: '127.0.0.1', port: tlsPort, servername: host, ca: sandboxCa, method: 'POST', path, headers: {host, 'content-type': 'application/json', ...headers}, agent: false},
      (res) => {
        const chunks: Buffer[] = []
        res.on('data', (c: Buffer) => chunks.push(c))
        res.on('end', () => resolve({status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString()}))
      },
    )
    req.on('error', reject)
    req.end(body)
  })
}

function h2Post(host: string, path: string, body: string): Promise<{status: number; body: string}> {
  const session = http2.connect(`https://${host}`, {createConnection: () => tls.connect({host: '127.0.0.1', port: tlsPort, servername: host, ca: sandboxCa, ALPNProtocols: ['h2']})})
  return new Promise((resolve, reject) => {
    const req = session.request({':authority': host, ':method': 'POST', ':path': path, 'content-type': 'application/json'})
    let status = 0
    const chunks: Buffer[] = []
    req.on('response', (h) => (status = Number(h[':status'])))
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      session.close()
      resolve({status, body: Buffer.concat(chunks).toString()})
    })
    req.on('error', reject)
    req.end(body)
  })
}

const log = () => parseRequestLog(readFileSync(join(dir, REQUEST_LOG), 'utf8'))
const minted = () => JSON.parse(readFileSync(join(dir, MINTED_FILE), 'utf8')) as MintedLogins

describe('an agent login through the gateway', () => {
  it('reaches the vendor\'s API with the real token in place of the surrogate', async () => {
    const r = await post('api.anthropic.com', '/v1/messages', {authorization: `Bearer ${claude[0].surrogate}`, 'anthropic-beta': 'oauth-2025-04-20'}, '{}')
    expect(r.status).toBe(200)
    expect(seen.at(-1)).toMatchObject({host: 'api.anthropic.com', auth: `Bearer ${ACCESS}`})
  })

  it('refreshes (HTTP/1.1): the endpoint gets the real refresh token, the agent fresh surrogates, the gateway the new tokens, which then work', async () => {
    const r = await post('platform.claude.com', '/v1/oauth/token', {}, JSON.stringify({grant_type: 'refresh_token', refresh_token: claude[1].surrogate, client_id: 'x'}))
    expect(r.status).toBe(200)
    expect(JSON.parse(seen.at(-1)?.body ?? '{}')).toMatchObject({refresh_token: REFRESH})
    const got = JSON.parse(r.body) as {access_token: string; refresh_token: string; expires_in: number}
    expect(got.expires_in).toBe(28800)
    expect(got.access_token).toMatch(/^sk-ant-oat01-/)
    expect(got.access_token).toHaveLength(NEW_ACCESS.length)
    expect(got.access_token).not.toBe(NEW_ACCESS)
    expect(got.refresh_token).not.toBe(NEW_REFRESH)
    expect(minted().anthropic).toMatchObject({volume: 'claude-vol'})
    expect(minted().anthropic?.logins.map((l) => l.value).sort()).toEqual([NEW_ACCESS, NEW_REFRESH].sort())
    const api = await post('api.anthropic.com', '/v1/messages', {authorization: `Bearer ${got.access_token}`}, '{}')
    expect(api.status).toBe(200)
    expect(seen.at(-1)?.auth).toBe(`Bearer ${NEW_ACCESS}`)
    // The old access token still works until it expires; the new refresh token is swapped at the token endpoint.
    await post('platform.claude.com', '/v1/oauth/token', {}, JSON.stringify({grant_type: 'refresh_token', refresh_token: got.refresh_token}))
    expect(JSON.parse(seen.at(-1)?.body ?? '{}')).toMatchObject({refresh_token: NEW_REFRESH})
  })

  it('refreshes over HTTP/2 too (Codex\'s token endpoint)', async () => {
    const r = await h2Post('auth.openai.com', '/oauth/token', JSON.stringify({client_id: 'app', grant_type: 'refresh_token', refresh_token: codex[0].surrogate}))
    expect(r.status).toBe(200)
    expect(JSON.parse(seen.at(-1)?.body ?? '{}')).toMatchObject({refresh_token: CODEX_REFRESH})
    const got = JSON.parse(r.body) as {refresh_token: string; id_token: null}
    expect(got.id_token).toBeNull()
    expect(got.refresh_token).toMatch(/^rt_/)
    expect(got.refresh_token).not.toBe(CODEX_NEW)
    expect(minted().openai?.logins.map((l) => l.value)).toEqual([CODEX_NEW])
  })

  it('refuses a surrogate sent to another host, or to the other vendor\'s token endpoint, naming the credential; the site never sees it', async () => {
    const before = seen.length
    const r = await post('other.test', '/collect', {authorization: `Bearer ${claude[0].surrogate}`}, '{}')
    expect(r.status).toBe(403)
    expect(r.body).toContain('claude accessToken is not for other.test')
    const cross = await post('auth.openai.com', '/oauth/token', {}, JSON.stringify({refresh_token: claude[1].surrogate}))
    expect(cross.status).toBe(403)
    expect(seen.length).toBe(before)
    expect(log().filter((e) => e.decision === 'blocked').map((e) => e.rule)).toEqual(
      expect.arrayContaining([expect.stringContaining('claude accessToken is not for other.test'), "login claude refreshToken is not for openai's token endpoint"]),
    )
  })

  it('an error answer passes masked-free; no real token is ever in the request log', async () => {
    const r = await post('platform.claude.com', '/v1/oauth/token', {}, JSON.stringify({grant_type: 'refresh_token', refresh_token: 'sk-ant-ort01-unknown'}))
    expect(r.status).toBe(400)
    expect(JSON.parse(r.body)).toEqual({error: 'invalid_grant'})
    const text = readFileSync(join(dir, REQUEST_LOG), 'utf8')
    for (const real of REALS) expect(text).not.toContain(real)
    expect(log().some((e) => e.rule?.includes('claude refreshToken') && e.decision === 'allowed')).toBe(true)
  })
})

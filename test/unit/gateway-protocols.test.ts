/**
 * The gateway's protocols on intercepted hosts, with the real server
 * (serveGateway) on loopback: HTTP/2 from the client (ALPN h2) forwarded to an
 * HTTP/1.1 site, and WebSocket upgrades. A stand-in resolver answers 127.0.0.1
 * for every name; the site's certificate comes from a CA of its own, which the
 * gateway is given as its upstream roots. The engine-level proofs (curl in a
 * sandbox) are in test/integration/gateway-protocols.test.ts.
 */
import {createHash, randomBytes} from 'node:crypto'
import type {Socket as UdpSocket} from 'node:dgram'
import {mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import http2 from 'node:http2'
import https from 'node:https'
import type {AddressInfo} from 'node:net'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import tls from 'node:tls'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {startDns} from './gateway-site.js'
import {parseRequestLog, REQUEST_LOG} from '../../src/lib/network/gateway/log.js'
import {SECRETS_FILE, serveGateway, type RunningGateway} from '../../src/lib/network/gateway/server.js'
import {createCa, createLeafMinter} from '../../src/lib/network/gateway/certificates.js'

const API = 'api.test'
const OTHER = 'other.test'
const REAL = `sk-real-${randomBytes(12).toString('hex')}`
const SURROGATE = `sk-fake-${randomBytes(12).toString('hex')}`

let dir = ''
let gateway: RunningGateway
let site: https.Server
let dns: UdpSocket
let tlsPort = 0
let sandboxCa = ''
const seen: string[] = []
/** What the gateway handed to onRecord (a one-shot run's gateway copies it to stdout). */
const recorded: string[] = []


/** The site: HTTP/1.1 over TLS; answers with what it got, streams /big (chunked), echoes WebSocket-style upgrades. */
function startSite(cert: string, key: string): Promise<https.Server> {
  const server = https.createServer({cert, key}, (q, r) => {
    seen.push(JSON.stringify(q.headers))
    if (q.url === '/pub/big') {
      let left = 8
      const chunk = Buffer.alloc(1024 * 1024, 'x')
      const more = () => {
        while (left > 0) {
          left--
          if (!r.write(chunk)) return void r.once('drain', more)
        }
        r.end()
      }
      return more()
    }
    if (q.url === '/pub/upload') {
      let n = 0
      q.on('data', (c: Buffer) => (n += c.length))
      return void q.on('end', () => r.end(`got ${n}`))
    }
    r.end(`${q.method} ${q.url} host=${q.headers.host}${q.headers.authorization ? ` auth=${q.headers.authorization}` : ''}`)
  })
  server.on('upgrade', (q, socket) => {
    seen.push(JSON.stringify(q.headers))
    const accept = createHash('sha1').update(`${q.headers['sec-websocket-key']}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64')
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\nsec-websocket-accept: ${accept}\r\nx-auth: ${q.headers.authorization ?? ''}\r\n\r\n`)
    socket.on('data', (d: Buffer) => socket.write(Buffer.concat([Buffer.from('echo:'), d])))
  })
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)))
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'gwproto-unit-'))
  const siteCa = createCa('site CA')
  const siteLeaf = await createLeafMinter(siteCa).leaf(API)
  const other = await createLeafMinter(siteCa).leaf(OTHER)
  site = await startSite(`${siteLeaf.cert}`, siteLeaf.key)
  // The other name on the same port: its own certificate by SNI.
  site.addContext(OTHER, {cert: other.cert, key: other.key})
  dns = await startDns()
  const ca = createCa('sandbox CA')
  sandboxCa = ca.cert
  writeFileSync(join(dir, SECRETS_FILE), JSON.stringify({ca, secrets: [{name: 'TOKEN', hosts: [API], surrogate: SURROGATE, value: REAL}]}))
  writeFileSync(join(dir, 'domains.txt'), `${API}\n${OTHER}\n`)
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
        // OTHER has a rule that restricts little, so that it is intercepted too (a host with neither rules nor secrets is passed through).
        rules: [{host: API, paths: ['/pub/*']}, {host: OTHER, methods: ['GET', 'POST']}],
        upstreamCa: [siteCa.cert],
        masked: ['TOKEN'],
        onRecord: (line) => recorded.push(line),
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

/** An HTTP/2 session to the gateway for `servername`, trusting the sandbox CA only. */
function h2(servername: string): http2.ClientHttp2Session {
  const session = http2.connect(`https://${servername}`, {
    createConnection: () => tls.connect({host: '127.0.0.1', port: tlsPort, servername, ca: sandboxCa, ALPNProtocols: ['h2']}),
  })
  names.set(session, servername)
  return session
}
/** The name each session was opened for: its :authority (node's own would add `:443`, which curl does not send). */
const names = new WeakMap<http2.ClientHttp2Session, string>()

function h2Get(session: http2.ClientHttp2Session, headers: http2.OutgoingHttpHeaders, body?: Buffer): Promise<{status: number; body: string; headers: http2.IncomingHttpHeaders}> {
  return new Promise((resolve, reject) => {
    const req = session.request({':authority': names.get(session), ...headers}, {endStream: body === undefined})
    let status = 0
    let got: http2.IncomingHttpHeaders = {}
    const chunks: Buffer[] = []
    req.on('response', (h) => {
      got = h
      status = Number(h[':status'])
    })
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => resolve({status, headers: got, body: Buffer.concat(chunks).toString()}))
    req.on('error', reject)
    if (body) req.end(body)
  })
}

/** A WebSocket-style upgrade over TLS (ALPN http/1.1, as WebSocket clients offer): the status line, the x-auth the site saw, and the echo of `ping`. */
function upgrade(path: string, extra = ''): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = tls.connect({host: '127.0.0.1', port: tlsPort, servername: API, ca: sandboxCa, ALPNProtocols: ['http/1.1']}, () => {
      s.write(`GET ${path} HTTP/1.1\r\nHost: ${API}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nSec-WebSocket-Version: 13\r\n${extra}\r\n`)
    })
    let text = ''
    s.on('data', (d: Buffer) => {
      text += d.toString()
      if (!text.includes('\r\n\r\n')) return
      const status = text.split(' ')[1]
      if (status !== '101') return void (s.destroy(), resolve(status))
      if (!text.includes('echo:')) return void s.write('ping')
      if (text.endsWith('echo:ping')) {
        s.destroy()
        resolve(`101 ${/x-auth: (.*)\r\n/.exec(text)?.[1] ?? ''} ${text.slice(text.indexOf('echo:'))}`)
      }
    })
    s.on('error', reject)
  })
}

const log = () => parseRequestLog(readFileSync(join(dir, REQUEST_LOG), 'utf8'))

afterAll(() => {
  // Every line of the request log went to onRecord too, the same text in the same order.
  expect(recorded.length).toBeGreaterThan(0)
  expect(recorded.join('')).toBe(readFileSync(join(dir, REQUEST_LOG), 'utf8'))
})
const settle = () => new Promise((r) => setTimeout(r, 100))

describe('HTTP/2 on an intercepted host', () => {
  it('negotiates h2 and forwards an allowed path; a path outside the rules is refused (403) over h2 and never reaches the site', async () => {
    const session = h2(API)
    try {
      const ok = await h2Get(session, {':path': '/pub/x?q=1'})
      expect((session.socket as tls.TLSSocket).alpnProtocol).toBe('h2')
      expect(ok).toMatchObject({status: 200, body: `GET /pub/x?q=1 host=${API}`})
      const before = seen.length
      const blocked = await h2Get(session, {':path': '/private'})
      expect(blocked.status).toBe(403)
      expect(blocked.headers['x-agent-sandbox']).toBe('blocked')
      expect(blocked.body).toBe(`agent-sandbox gateway: GET ${API}/private refused: path /private not in httpRules ${API} paths /pub/*; waiting for the user's approval: agent-sandbox firewall allow ${API} --methods GET --paths /private\n`)
      expect(seen.length).toBe(before)
    } finally {
      session.close()
    }
    await settle()
    expect(log().find((e) => e.path === '/private')).toMatchObject({method: 'GET', host: API, status: 403, decision: 'blocked'})
    expect(log().find((e) => e.path === '/pub/x')).toMatchObject({status: 200, decision: 'allowed', rule: `allowlist ${API}; httpRules ${API} paths /pub/*; HTTP/2`})
  })

  it('refuses an :authority (or a host header) other than the SNI with 421; the matching one works', async () => {
    const session = h2(API)
    try {
      expect((await h2Get(session, {':path': '/pub/x', ':authority': OTHER})).status).toBe(421)
      expect((await h2Get(session, {':path': '/pub/x', host: OTHER})).status).toBe(421)
      expect((await h2Get(session, {':path': '/pub/x', ':authority': API})).status).toBe(200)
    } finally {
      session.close()
    }
  })

  it('swaps a masked secret\'s surrogate for the declared host over h2, refuses it for another host; the twin without it works', async () => {
    const api = h2(API)
    const other = h2(OTHER)
    try {
      expect((await h2Get(api, {':path': '/pub/s', authorization: `Bearer ${SURROGATE}`})).body).toBe(`GET /pub/s host=${API} auth=Bearer ${REAL}`)
      const leak = await h2Get(other, {':path': '/leak', authorization: `Bearer ${SURROGATE}`})
      expect(leak).toMatchObject({status: 403, body: `agent-sandbox gateway: GET ${OTHER}/leak refused: secret TOKEN is not for ${OTHER} (declared for ${API})\n`})
      expect((await h2Get(other, {':path': '/twin', authorization: 'Bearer plain'})).body).toBe(`GET /twin host=${OTHER} auth=Bearer plain`)
      expect(seen.join('\n')).not.toContain(SURROGATE)
    } finally {
      api.close()
      other.close()
    }
  })

  it('streams a large response and a request body, and several streams at once on one connection', async () => {
    const session = h2(API)
    try {
      const big = await h2Get(session, {':path': '/pub/big'})
      expect(big.status).toBe(200)
      expect(big.body.length).toBe(8 * 1024 * 1024)
      const up = await h2Get(session, {':path': '/pub/upload', ':method': 'POST'}, Buffer.alloc(3 * 1024 * 1024, 'y'))
      expect(up.body).toBe(`got ${3 * 1024 * 1024}`)
      const many = await Promise.all(Array.from({length: 10}, (_, i) => h2Get(session, {':path': `/pub/${i}`})))
      expect(many.map((r) => r.body)).toEqual(Array.from({length: 10}, (_, i) => `GET /pub/${i} host=${API}`))
    } finally {
      session.close()
    }
  })

  it('still speaks HTTP/1.1 to a client that offers only it', async () => {
    const body = await new Promise<string>((resolve, reject) => {
      const req = https.get({host: '127.0.0.1', port: tlsPort, servername: API, path: '/pub/h1', headers: {host: API}, ca: sandboxCa, agent: false}, (r) => {
        let b = ''
        r.on('data', (c: Buffer) => (b += c))
        r.on('end', () => resolve(`${(r.socket as tls.TLSSocket).alpnProtocol} ${r.httpVersion} ${b}`))
      })
      req.on('error', reject)
    })
    expect(body).toBe(`false 1.1 GET /pub/h1 host=${API}`)
  })
})

describe('WebSocket upgrades on an intercepted host', () => {
  it('applies the rules to the upgrade request: a path outside them is refused, the allowed one switches (101) and passes bytes both ways', async () => {
    const before = seen.length
    expect(await upgrade('/private-ws')).toBe('403')
    expect(seen.length).toBe(before)
    expect(await upgrade('/pub/ws')).toBe('101  echo:ping')
    await settle()
    expect(log().find((e) => e.path === '/pub/ws')).toMatchObject({method: 'GET', host: API, status: 101, decision: 'allowed'})
    expect(log().find((e) => e.path === '/private-ws')).toMatchObject({status: 403, decision: 'blocked'})
  })

  it('swaps the surrogate in the upgrade request\'s headers', async () => {
    expect(await upgrade('/pub/ws-auth', `Authorization: Bearer ${SURROGATE}\r\n`)).toBe(`101 Bearer ${REAL} echo:ping`)
  })
})

/**
 * The egress gateway against request smuggling, with the real server module
 * on loopback and a site of our own that records every raw byte it receives
 * (gateway-site.ts). No bytes reach the site unless they belong to a request
 * the gateway parsed and judged, or to a tunnel the site accepted with a 101.
 * Each case runs over plain HTTP and over intercepted TLS, each refusal is in
 * the request log, the gateway stays up, and each refusal has a legitimate
 * twin that works. The engine-level twin of this file is
 * test/integration/gateway-smuggling.test.ts.
 */
import {randomBytes} from 'node:crypto'
import type {Socket as UdpSocket} from 'node:dgram'
import {mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import http2 from 'node:http2'
import net from 'node:net'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import tls from 'node:tls'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {createCa} from '../../src/lib/network/gateway/certificates.js'
import {parseRequestLog, REQUEST_LOG} from '../../src/lib/network/gateway/log.js'
import {SECRETS_FILE, type RunningGateway} from '../../src/lib/network/gateway/server.js'
import {startDns, startGatewayFor, startSite, type Site} from './gateway-site.js'

/** A secret is declared for API (so its TLS is intercepted); OPEN is allowlisted with neither rules nor secrets; EVIL is not allowlisted. */
const API = 'api.test'
const OPEN = 'open.test'
const EVIL = 'evil.test'
const SURROGATE = `sk-fake-${randomBytes(12).toString('hex')}`
const REAL = `sk-real-${randomBytes(12).toString('hex')}`

let dir = ''
let dirAll = ''
let site: Site
let dns: UdpSocket
let gw: {gateway: RunningGateway; httpPort: number; tlsPort: number}
let gwAll: {gateway: RunningGateway; httpPort: number; tlsPort: number}
let sandboxCa = ''

beforeAll(async () => {
  site = await startSite([API, OPEN])
  dns = await startDns()
  const ca = createCa('sandbox CA')
  sandboxCa = ca.cert
  const gatewayDir = () => {
    const d = mkdtempSync(join(tmpdir(), 'gwsmuggle-unit-'))
    writeFileSync(join(d, SECRETS_FILE), JSON.stringify({ca, secrets: [{name: 'TOKEN', hosts: [API], surrogate: SURROGATE, value: REAL}]}))
    writeFileSync(join(d, 'domains.txt'), `${API}\n${OPEN}\n`)
    return d
  }
  dir = gatewayDir()
  dirAll = gatewayDir()
  const common = {allowDomains: [], rules: [], masked: ['TOKEN']}
  gw = await startGatewayFor(site, dns, {...common, domainFiles: [join(dir, 'domains.txt')], stateDir: dir})
  gwAll = await startGatewayFor(site, dns, {...common, domainFiles: [join(dirAll, 'domains.txt')], stateDir: dirAll, inspectAll: true})
})

afterAll(async () => {
  await gw?.gateway.close()
  await gwAll?.gateway.close()
  site?.close()
  dns?.close()
  for (const d of [dir, dirAll]) if (d) rmSync(d, {recursive: true, force: true})
})

type Mode = 'plain' | 'tls'
const MODES: Mode[] = ['plain', 'tls']

/** Connect to the gateway: port 80's stand-in, or its TLS port for API with the sandbox CA (intercepted). */
function open(mode: Mode): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s =
      mode === 'plain'
        ? net.connect({host: '127.0.0.1', port: gw.httpPort}, () => resolve(s))
        : tls.connect({host: '127.0.0.1', port: gw.tlsPort, servername: API, ca: sandboxCa, ALPNProtocols: ['http/1.1']}, () => resolve(s))
    s.on('error', reject)
  })
}

/** Send `raw` (parts written one after another) and read until the gateway closes the connection; `[open]` if it did not within 10 s. */
async function exchange(mode: Mode, ...parts: string[]): Promise<string> {
  const s = await open(mode)
  return new Promise((resolve) => {
    let text = ''
    const timer = setTimeout(() => {
      s.destroy()
      resolve(`${text}[open]`)
    }, 10_000)
    s.on('data', (d: Buffer) => (text += d.toString('latin1')))
    s.on('close', () => {
      clearTimeout(timer)
      resolve(text)
    })
    s.on('error', () => undefined)
    for (const p of parts) s.write(p)
  })
}
const statuses = (text: string) => [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]))
const log = (d = dir) => parseRequestLog(readFileSync(join(d, REQUEST_LOG), 'utf8'))
/** A marker path no legitimate request uses, for what must never reach the site. */
const marker = (name: string, mode: Mode) => `/smuggled-${name}-${mode}-${randomBytes(4).toString('hex')}`

/** Until the request log has an entry for `path` (it is written as the response ends). */
async function logged(path: string, d = dir): Promise<ReturnType<typeof log>[number]> {
  for (let i = 0; i < 200; i++) {
    const hit = log(d).find((e) => e.path === path || e.rule.includes(path))
    if (hit) return hit
    await new Promise((r) => setTimeout(r, 25))
  }
  throw new Error(`no log entry for ${path}`)
}

describe.each(MODES)('malformed or ambiguous heads are refused with 400 (or 431) and logged, over %s', (mode) => {
  const H = `Host: ${API}\r\n`
  const cases: Array<[string, (m: string) => string, number, string]> = [
    ['CL.TE', (m) => `POST / HTTP/1.1\r\n${H}Content-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET ${m} HTTP/1.1\r\n${H}\r\n`, 400, 'HPE_'],
    ['TE.CL', (m) => `POST / HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n8\r\nGET ${m}\r\n0\r\n\r\n`, 400, 'HPE_'],
    ['TE with a space before the colon', (m) => `POST / HTTP/1.1\r\n${H}Transfer-Encoding : chunked\r\n\r\n0\r\n\r\nGET ${m} HTTP/1.1\r\n${H}\r\n`, 400, 'HPE_'],
    ['TE xchunked', (m) => `POST / HTTP/1.1\r\n${H}Transfer-Encoding: xchunked\r\n\r\n0\r\n\r\nGET ${m} HTTP/1.1\r\n${H}\r\n`, 400, 'Transfer-Encoding'],
    ['two TE headers, chunked last', (m) => `POST / HTTP/1.1\r\n${H}Transfer-Encoding: identity\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET ${m} HTTP/1.1\r\n${H}\r\n`, 400, 'Transfer-Encoding'],
    ['two TE headers, chunked first', (m) => `POST / HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n0\r\n\r\nGET ${m} HTTP/1.1\r\n${H}\r\n`, 400, ''],
    ['TE gzip, chunked', (m) => `POST / HTTP/1.1\r\n${H}Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\nGET ${m} HTTP/1.1\r\n${H}\r\n`, 400, 'Transfer-Encoding'],
    ['two Content-Length, different', (m) => `POST / HTTP/1.1\r\n${H}Content-Length: 0\r\nContent-Length: 40\r\n\r\nGET ${m} HTTP/1.1\r\n${H}\r\n`, 400, 'HPE_'],
    ['two Content-Length, equal', (m) => `POST ${m} HTTP/1.1\r\n${H}Content-Length: 1\r\nContent-Length: 1\r\n\r\nx`, 400, 'HPE_'],
    ['two Host headers', (m) => `GET ${m} HTTP/1.1\r\n${H}Host: ${EVIL}\r\n\r\n`, 400, 'more than one Host'],
    ['two equal Host headers', (m) => `GET ${m} HTTP/1.1\r\n${H}${H}\r\n`, 400, 'more than one Host'],
    ['absolute form naming another host', (m) => `GET http://${EVIL}${m} HTTP/1.1\r\n${H}\r\n`, 400, `request target host ${EVIL}`],
    ['obs-fold', (m) => `GET ${m} HTTP/1.1\r\n${H}X-A: a\r\n b\r\n\r\n`, 400, 'HPE_'],
    ['bare LF', (m) => `GET ${m} HTTP/1.1\n${H}\n`, 400, 'HPE_'],
    ['bare LF inside the head', (m) => `GET ${m} HTTP/1.1\r\n${H}X-A: a\nX-B: b\r\n\r\n`, 400, 'HPE_'],
    ['bare CR inside a value', (m) => `GET ${m} HTTP/1.1\r\n${H}X-A: a\rb\r\n\r\n`, 400, 'HPE_'],
    ['NUL in a value', (m) => `GET ${m} HTTP/1.1\r\n${H}X-A: a\0b\r\n\r\n`, 400, 'HPE_'],
    ['an oversized head', (m) => `GET ${m} HTTP/1.1\r\n${H}X-Big: ${'a'.repeat(20_000)}\r\n\r\n`, 431, 'too large'],
    ['thousands of header fields', (m) => `GET ${m} HTTP/1.1\r\n${H}${'a:b\r\n'.repeat(2500)}\r\n`, 431, ''],
    ['more header fields than the limit', (m) => `GET ${m} HTTP/1.1\r\n${H}${'a:b\r\n'.repeat(600)}\r\n`, 431, 'header fields'],
    ['HTTP/1.0 without Host', (m) => `GET ${m} HTTP/1.0\r\n\r\n`, 400, 'no valid Host'],
    ['HTTP/1.1 without Host', (m) => `GET ${m} HTTP/1.1\r\n\r\n`, 400, 'no valid Host'],
    ['CONNECT', (m) => `CONNECT ${EVIL}:443 HTTP/1.1\r\nHost: ${EVIL}:443\r\n\r\nGET ${m} HTTP/1.1\r\n${H}\r\n`, 400, 'CONNECT'],
    ['a body on an upgrade request', (m) => `GET /ws HTTP/1.1\r\n${H}Connection: Upgrade\r\nUpgrade: websocket\r\nContent-Length: ${m.length + 4}\r\n\r\nGET ${m}`, 400, 'a body on an upgrade'],
  ]
  it.each(cases)('%s', async (_name, make, status, rule) => {
    const m = marker('head', mode)
    const before = log().length
    const text = await exchange(mode, make(m))
    // One answer: the bytes behind a refused head are neither parsed into a second request nor answered.
    expect(statuses(text), text.slice(0, 300)).toEqual([status])
    expect(text).toContain('x-agent-sandbox: blocked')
    expect(text).not.toContain('[open]')
    expect(site.raw()).not.toContain(m)
    await expect.poll(() => log().slice(before).find((e) => e.status === status && e.decision === 'blocked')?.rule ?? '').toContain(rule)
    // The gateway stays up: the legitimate twin on a new connection.
    expect(statuses(await exchange(mode, `GET /twin HTTP/1.1\r\n${H}Connection: close\r\n\r\n`))).toEqual([200])
  })

  it('an absolute form naming the same host is sent in origin form', async () => {
    const m = marker('absolute', mode)
    const text = await exchange(mode, `GET http://${API}${m}?q=1 HTTP/1.1\r\n${H}Connection: close\r\n\r\n`)
    expect(text).toContain(`GET ${m}?q=1 host=${API}`)
    expect(site.raw()).toContain(`GET ${m}?q=1 HTTP/1.1\r\n`)
  })
})

describe.each(MODES)('one connection, one host, every request judged, over %s', (mode) => {
  it('keep-alive reuse to the same host works: both requests reach the site', async () => {
    const [a, b] = [marker('reuse', mode), marker('reuse', mode)]
    const text = await exchange(mode, `GET ${a} HTTP/1.1\r\nHost: ${API}\r\n\r\nGET ${b} HTTP/1.1\r\nHost: ${API}\r\nConnection: close\r\n\r\n`)
    expect(statuses(text)).toEqual([200, 200])
    expect(site.raw()).toContain(a)
    expect(site.raw()).toContain(b)
  })

  it('a pipelined request that switches host is refused (400 on plain HTTP, 421 inside TLS) and never reaches the site', async () => {
    const [a, b] = [marker('switch', mode), marker('switch', mode)]
    const text = await exchange(mode, `GET ${a} HTTP/1.1\r\nHost: ${API}\r\n\r\nGET ${b} HTTP/1.1\r\nHost: ${OPEN}\r\nConnection: close\r\n\r\n`)
    expect(statuses(text)).toEqual([200, mode === 'plain' ? 400 : 421])
    expect(site.raw()).toContain(a)
    expect(site.raw()).not.toContain(b)
    expect((await logged(b)).decision).toBe('blocked')
  })

  it('a pipelined request to a host off the allowlist is refused (403) and never reaches the site', async () => {
    const b = marker('evil', mode)
    const text = await exchange(mode, `GET /first HTTP/1.1\r\nHost: ${API}\r\n\r\nGET ${b} HTTP/1.1\r\nHost: ${EVIL}\r\nConnection: close\r\n\r\n`)
    expect(statuses(text)).toEqual([200, 403])
    expect(site.raw()).not.toContain(b)
  })

  it('a chunked upload is forwarded whole', async () => {
    const chunks = ['a'.repeat(1000), 'b'.repeat(70_000), 'c']
    const body = chunks.map((c) => `${c.length.toString(16)}\r\n${c}\r\n`).join('')
    const text = await exchange(mode, `POST /upload HTTP/1.1\r\nHost: ${API}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n${body}0\r\n\r\n`)
    expect(text).toContain('got 71001')
  })
})

describe.each(MODES)('upgrades, over %s', (mode) => {
  const ws = (path: string, extra = '') => `GET ${path} HTTP/1.1\r\nHost: ${API}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\n${extra}\r\n`

  it('a real WebSocket: 101, then bytes both ways, the ones sent before the 101 included, in order', async () => {
    const s = await open(mode)
    let text = ''
    s.on('data', (d: Buffer) => (text += d.toString('latin1')))
    // The first frame goes with the request: it must wait for the 101, then reach the site.
    s.write(`${ws('/ws')}early`)
    await expect.poll(() => text, {timeout: 10_000}).toContain('echo:early')
    s.write('later')
    await expect.poll(() => text, {timeout: 10_000}).toContain('echo:later')
    s.destroy()
    expect(statuses(text)).toEqual([101])
  })

  it.each(['/nows', '/nows-chunked'])('an Upgrade answered by anything but 101 (%s) leaves the connection in HTTP: the next request is judged, and refused', async (path) => {
    const b = marker('after-upgrade', mode)
    const twin = marker('after-upgrade-twin', mode)
    // A request to a host off the allowlist, then one to the same host (the twin).
    const text = await exchange(mode, ws(path), `GET ${b} HTTP/1.1\r\nHost: ${EVIL}\r\n\r\n`, `GET ${twin} HTTP/1.1\r\nHost: ${API}\r\nConnection: close\r\n\r\n`)
    expect(statuses(text)).toEqual([path === '/nows' ? 200 : 400, 403, 200])
    expect(text).toContain('nope!')
    expect(site.raw()).not.toContain(b)
    expect(site.raw()).toContain(twin)
    expect((await logged(b)).status).toBe(403)
  })

  it('an Upgrade answered 403 with connection: close closes: nothing after it goes anywhere', async () => {
    const b = marker('after-close', mode)
    const text = await exchange(mode, ws('/nows-close'), `GET ${b} HTTP/1.1\r\nHost: ${API}\r\n\r\n`)
    expect(statuses(text)).toEqual([403])
    expect(site.raw()).not.toContain(b)
  })

  it('Upgrade: h2c is sent as a plain request', async () => {
    const m = marker('h2c', mode)
    const text = await exchange(mode, `GET ${m} HTTP/1.1\r\nHost: ${API}\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n`, `GET /next HTTP/1.1\r\nHost: ${API}\r\nConnection: close\r\n\r\n`)
    expect(statuses(text)).toEqual([200, 200])
    expect(text).toContain(`GET ${m} host=${API} upgrade= auth=`)
    expect(site.raw()).not.toMatch(/upgrade: h2c/i)
  })

  it('an upgrade to a host off the allowlist is refused', async () => {
    const text = await exchange(mode, ws('/ws').replace(`Host: ${API}`, `Host: ${EVIL}`))
    expect(statuses(text)).toEqual([403])
  })
})

describe('HTTP/2 on an intercepted host', () => {
  it('refuses CONNECT with 400 and does not offer extended CONNECT (WebSocket over HTTP/2)', async () => {
    const session = http2.connect(`https://${API}`, {createConnection: () => tls.connect({host: '127.0.0.1', port: gw.tlsPort, servername: API, ca: sandboxCa, ALPNProtocols: ['h2']})})
    try {
      await new Promise((r) => session.once('remoteSettings', r))
      expect(session.remoteSettings.enableConnectProtocol).toBe(false)
      const status = await new Promise<number>((resolve, reject) => {
        const req = session.request({':method': 'CONNECT', ':authority': `${EVIL}:443`})
        req.on('response', (h) => resolve(Number(h[':status'])))
        req.on('error', reject)
      })
      expect(status).toBe(400)
    } finally {
      session.close()
    }
    expect((await logged('CONNECT is not forwarded')).status).toBe(400)
  })
})

describe('interception only where it buys something', () => {
  /** A TLS handshake trusting only `ca` (a client with its own pinned store): the certificate's issuer, or the error. */
  const handshake = (port: number, servername: string, ca: string) =>
    new Promise<string>((resolve) => {
      const s = tls.connect({host: '127.0.0.1', port, servername, ca}, () => {
        resolve(`ok ${s.getPeerX509Certificate()?.issuer ?? ''}`)
        s.destroy()
      })
      s.on('error', (e: NodeJS.ErrnoException) => resolve(`error ${e.code}`))
    })

  it('a host with neither rules nor secrets is passed through: a pinned-trust client works, and sees the site\'s own certificate', async () => {
    expect(await handshake(gw.tlsPort, OPEN, site.ca)).toBe('ok CN=site CA\nO=agent-sandbox')
    await expect.poll(() => log().some((e) => e.method === 'TLS' && e.host === OPEN && e.decision === 'allowed')).toBe(true)
  })

  it('a host a masked secret is declared for is intercepted: the pinned-trust client fails there', async () => {
    expect(await handshake(gw.tlsPort, API, site.ca)).toMatch(/^error /)
    expect(await handshake(gw.tlsPort, API, sandboxCa)).toBe('ok CN=sandbox CA\nO=agent-sandbox')
  })

  it('with inspectAll every host is intercepted: the pinned-trust client fails against the open host too', async () => {
    expect(await handshake(gwAll.tlsPort, OPEN, site.ca)).toMatch(/^error /)
    expect(await handshake(gwAll.tlsPort, OPEN, sandboxCa)).toBe('ok CN=sandbox CA\nO=agent-sandbox')
  })

  it('a surrogate sent to a passed-through host leaves as it is (worthless there); with inspectAll it is refused', async () => {
    const get = (port: number) =>
      new Promise<string>((resolve, reject) => {
        const s = tls.connect({host: '127.0.0.1', port, servername: OPEN, ca: [site.ca, sandboxCa]}, () => s.write(`GET /s HTTP/1.1\r\nHost: ${OPEN}\r\nAuthorization: Bearer ${SURROGATE}\r\nConnection: close\r\n\r\n`))
        let text = ''
        s.on('data', (d: Buffer) => (text += d.toString()))
        s.on('close', () => resolve(text))
        s.on('error', reject)
      })
    expect(await get(gw.tlsPort)).toContain(`auth=Bearer ${SURROGATE}`)
    expect(site.raw()).not.toContain(REAL)
    const refused = await get(gwAll.tlsPort)
    expect(statuses(refused)).toEqual([403])
    expect(refused).toContain(`secret TOKEN is not for ${OPEN}`)
  })

  it('the declared host gets the real value in place of the surrogate', async () => {
    const text = await exchange('tls', `GET /s HTTP/1.1\r\nHost: ${API}\r\nAuthorization: Bearer ${SURROGATE}\r\nConnection: close\r\n\r\n`)
    expect(text).toContain(`auth=Bearer ${REAL}`)
  })
})

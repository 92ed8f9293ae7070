/**
 * A loopback stand-in of the world behind the egress gateway, for unit tests
 * of the real server module: a resolver that answers 127.0.0.1 for every
 * name, and a site of our own, over HTTP and over TLS (a certificate per name
 * from a CA of its own), that records every raw byte it receives.
 */
import {createHash} from 'node:crypto'
import {createSocket, type Socket as UdpSocket} from 'node:dgram'
import http from 'node:http'
import https from 'node:https'
import type {AddressInfo, Socket} from 'node:net'
import type {Duplex} from 'node:stream'
import {createCa, createLeafMinter} from '../../src/lib/network/gateway/certificates.js'
import {serveGateway, type GatewayConfig, type RunningGateway} from '../../src/lib/network/gateway/server.js'

/** Resolver stand-in: A 127.0.0.1 for any name, no AAAA. */
export function startDns(): Promise<UdpSocket> {
  const server = createSocket('udp4')
  server.on('message', (q, from) => {
    const header = Buffer.from(q.subarray(0, 12))
    header[2] = 0x81
    header[3] = 0x80
    const type = q.readUInt16BE(q.length - 4)
    header.writeUInt16BE(type === 1 ? 1 : 0, 6)
    const answer = type === 1 ? [Buffer.from([0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 1, 0, 4, 127, 0, 0, 1])] : []
    server.send(Buffer.concat([header, q.subarray(12), ...answer]), from.port, from.address)
  })
  return new Promise((resolve) => server.bind(0, '127.0.0.1', () => resolve(server)))
}

export interface Site {
  http: http.Server
  https: https.Server
  /** The site's CA: what a client with its own pinned trust store trusts. */
  ca: string
  /** Every byte the site received, decrypted, over every connection. */
  raw(): string
  close(): void
}

/**
 * The site: answers `METHOD url host=… upgrade=… auth=…`, counts an upload's
 * body at /upload, and for an Upgrade request: /ws switches (101) and echoes;
 * /nows-chunked answers 400 with a chunked body; /nows-close answers 403 and
 * closes; any other path answers 200 with a body and keeps reading.
 */
export async function startSite(names: string[]): Promise<Site> {
  const received: Buffer[] = []
  const record = (socket: Socket) => socket.on('data', (d: Buffer) => received.push(d))
  const handler = (q: http.IncomingMessage, r: http.ServerResponse) => {
    if (q.url === '/upload') {
      let n = 0
      q.on('data', (c: Buffer) => (n += c.length))
      return void q.on('end', () => r.end(`got ${n}`))
    }
    q.resume()
    r.end(`${q.method} ${q.url} host=${q.headers.host} upgrade=${q.headers.upgrade ?? ''} auth=${q.headers.authorization ?? ''}`)
  }
  const upgrade = (q: http.IncomingMessage, socket: Duplex) => {
    socket.on('error', () => undefined)
    if (q.url === '/ws') {
      const accept = createHash('sha1').update(`${q.headers['sec-websocket-key']}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64')
      socket.write(`HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\nsec-websocket-accept: ${accept}\r\n\r\n`)
      return void socket.on('data', (d: Buffer) => socket.write(Buffer.concat([Buffer.from('echo:'), d])))
    }
    if (q.url === '/nows-chunked') return void socket.write('HTTP/1.1 400 Bad Request\r\ntransfer-encoding: chunked\r\n\r\n5\r\nnope!\r\n0\r\n\r\n')
    if (q.url === '/nows-close') return void socket.end('HTTP/1.1 403 Forbidden\r\ncontent-length: 5\r\nconnection: close\r\n\r\nnope!')
    socket.write('HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nnope!')
  }
  const ca = createCa('site CA')
  const minter = createLeafMinter(ca)
  const [first, ...rest] = await Promise.all(names.map((n) => minter.leaf(n)))
  const plain = http.createServer(handler)
  plain.on('connection', record)
  plain.on('upgrade', upgrade)
  const secure = https.createServer({cert: first.cert, key: first.key}, handler)
  rest.forEach((leaf, i) => secure.addContext(names[i + 1], {cert: leaf.cert, key: leaf.key}))
  secure.on('secureConnection', record)
  secure.on('upgrade', upgrade)
  await Promise.all([plain, secure].map((s) => new Promise<void>((r) => s.listen(0, '127.0.0.1', r))))
  return {
    http: plain,
    https: secure,
    ca: ca.cert,
    raw: () => Buffer.concat(received).toString('latin1'),
    close: () => {
      plain.closeAllConnections()
      secure.closeAllConnections()
      plain.close()
      secure.close()
    },
  }
}

export const portOf = (s: {address(): AddressInfo | string | null}) => (s.address() as AddressInfo).port

/** The real gateway on loopback, on free ports, in front of `site`. */
export async function startGatewayFor(site: Site, dns: UdpSocket, config: Omit<GatewayConfig, 'httpPort' | 'tlsPort' | 'listen' | 'dnsServer' | 'dnsPort' | 'upstreamHttpPort' | 'upstreamTlsPort' | 'maxLogBytes' | 'upstreamCa'>): Promise<{gateway: RunningGateway; httpPort: number; tlsPort: number}> {
  for (let attempt = 0; ; attempt++) {
    const base = 20_000 + Math.floor(Math.random() * 20_000)
    try {
      const gateway = await serveGateway({
        ...config,
        httpPort: base,
        tlsPort: base + 1,
        listen: ['127.0.0.1'],
        dnsServer: '127.0.0.1',
        dnsPort: portOf(dns),
        upstreamHttpPort: portOf(site.http),
        upstreamTlsPort: portOf(site.https),
        maxLogBytes: 1024 * 1024,
        upstreamCa: [site.ca],
      })
      return {gateway, httpPort: base, tlsPort: base + 1}
    } catch (error) {
      if (attempt > 5) throw error
    }
  }
}

/**
 * The egress gateway (docs/design.md, "The egress gateway"): the program of a
 * sandbox's gateway container. The firewall redirects the agent's TCP to ports
 * 80 and 443 of allowlisted addresses here; the gateway decides from the Host
 * header (HTTP) or the SNI (TLS) alone where each request may go, resolves that
 * name itself through the sandbox's resolver, and connects on its own (only its
 * uid may reach ports 80 and 443). The address the client dialled is never
 * used: a name it does not allow goes nowhere, whatever address it was sent to.
 */
import {createWriteStream, readFileSync, renameSync, statSync, type WriteStream} from 'node:fs'
import http from 'node:http'
import net from 'node:net'
import {join} from 'node:path'
import type {Duplex} from 'node:stream'
import {query, TYPE_A, TYPE_AAAA} from './dns.js'
import {REQUEST_LOG, type RequestLogEntry} from './log.js'
import {decideHttp, decideSni, parseDomainList, pathOnly} from './policy.js'
import {ALERT_UNRECOGNIZED_NAME, parseClientHello} from './sni.js'

export interface GatewayConfig {
  httpPort: number
  tlsPort: number
  /** Addresses to listen on; the first must work, the rest (::1) are tried. */
  listen: string[]
  /** The sandbox's resolver (dnsmasq), which also adds the answers to the firewall's ipsets. */
  dnsServer: string
  /** Domain list files (default-domains.txt). */
  domainFiles: string[]
  /** AGENT_SANDBOX_ALLOW_DOMAINS. */
  allowDomains: string[]
  /** Its own writable directory: the request log and live additions (`allowlist`). */
  stateDir: string
  /** The upstream ports (what the firewall redirected). */
  upstreamHttpPort: number
  upstreamTlsPort: number
  /** Rotate the request log past this size. */
  maxLogBytes: number
  onError?: (message: string) => void
}

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'proxy-authorization', 'te', 'trailer', 'transfer-encoding', 'upgrade'])
const HELLO_TIMEOUT_MS = 10_000

/** The live allowlist: the files and env at start, plus `<stateDir>/allowlist` (firewall allow), re-read when it changes. */
class Allowlist {
  private base: string[]
  private extra: string[] = []
  private extraStamp = ''
  constructor(private readonly config: GatewayConfig) {
    this.base = [...config.domainFiles.flatMap((f) => parseDomainList(readFileSync(f, 'utf8'))), ...config.allowDomains]
  }

  get size(): number {
    return this.entries().length
  }

  entries(): string[] {
    const file = join(this.config.stateDir, 'allowlist')
    let stamp = ''
    try {
      const st = statSync(file)
      stamp = `${st.mtimeMs}:${st.size}`
    } catch {
      stamp = ''
    }
    if (stamp !== this.extraStamp) {
      this.extraStamp = stamp
      try {
        this.extra = stamp ? parseDomainList(readFileSync(file, 'utf8')) : []
      } catch {
        this.extra = []
      }
    }
    return this.extra.length ? [...this.base, ...this.extra] : this.base
  }
}

/** Appends entries to requests.jsonl, rotating it (one old file kept) past maxLogBytes. */
class RequestLog {
  private stream: WriteStream
  private written: number
  private readonly path: string
  constructor(private readonly config: GatewayConfig) {
    this.path = join(config.stateDir, REQUEST_LOG)
    this.written = sizeOf(this.path)
    this.stream = this.open()
  }

  private open(): WriteStream {
    const s = createWriteStream(this.path, {flags: 'a', mode: 0o600})
    s.on('error', (e) => this.config.onError?.(`request log: ${e.message}`))
    return s
  }

  write(entry: RequestLogEntry): void {
    const line = `${JSON.stringify(entry)}\n`
    if (this.written + line.length > this.config.maxLogBytes) {
      this.stream.end()
      try {
        renameSync(this.path, `${this.path}.1`)
      } catch {
        // nothing to rotate
      }
      this.written = 0
      this.stream = this.open()
    }
    this.written += line.length
    this.stream.write(line)
  }
}

function sizeOf(path: string): number {
  try {
    return statSync(path).size
  } catch {
    return 0
  }
}

export interface RunningGateway {
  close(): Promise<void>
  allowlistSize: number
}

export async function startGateway(config: GatewayConfig): Promise<RunningGateway> {
  const allowlist = new Allowlist(config)
  const log = new RequestLog(config)
  const agent = new http.Agent({keepAlive: true, maxFreeSockets: 16})

  /** The first address of a name, from the sandbox's resolver, asked every time (dns.ts). */
  const resolve = async (host: string): Promise<string> => {
    const v4 = await query(config.dnsServer, host, TYPE_A).catch((error: unknown) => error)
    if (Array.isArray(v4) && v4[0]) return v4[0]
    const v6 = await query(config.dnsServer, host, TYPE_AAAA).catch(() => [] as string[])
    if (v6[0]) return v6[0]
    throw v4 instanceof Error ? v4 : Object.assign(new Error(`no address for ${host}`), {code: 'ENODATA'})
  }

  const record = (e: Omit<RequestLogEntry, 'time'>) => log.write({time: new Date().toISOString(), ...e})

  const refuse = (res: http.ServerResponse, status: number, why: string) => {
    const body = `agent-sandbox gateway: ${why}\n`
    res.writeHead(status, {'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(body), 'x-agent-sandbox': 'blocked'})
    res.end(body)
  }

  // ---- HTTP (port 80): HTTP/1.1 with keep-alive, chunked bodies and Upgrade ----
  const httpServer = http.createServer({keepAlive: true, noDelay: true})
  httpServer.on('request', (req, res) => {
    const target = req.url ?? '/'
    const path = pathOnly(target)
    const verdict = decideHttp(req.headers.host, target, allowlist.entries())
    const host = verdict.host ?? String(req.headers.host ?? '')
    if (!verdict.allowed) {
      refuse(res, verdict.status, `${host || 'request'} refused: ${verdict.rule}`)
      record({method: req.method ?? '', host, path, status: verdict.status, bytes: 0, decision: 'blocked', rule: verdict.rule})
      req.resume()
      return
    }
    resolve(host).then(
      (address) => {
        const headers: Record<string, string | string[]> = {}
        for (const [k, v] of Object.entries(req.headers)) if (v !== undefined && !HOP_BY_HOP.has(k)) headers[k] = v
        const upstream = http.request({host: address, port: config.upstreamHttpPort, method: req.method, path: originForm(target), headers, agent, setHost: false})
        let bytes = 0
        upstream.on('response', (up) => {
          res.writeHead(up.statusCode ?? 502, up.statusMessage, filterRaw(up.rawHeaders))
          up.on('data', (c: Buffer) => (bytes += c.length))
          up.pipe(res)
          up.on('end', () => record({method: req.method ?? '', host, path, status: up.statusCode ?? 0, bytes, decision: 'allowed', rule: verdict.rule}))
        })
        upstream.on('error', (e) => {
          if (!res.headersSent) refuse(res, 502, `${host}: ${e.message}`)
          else res.destroy()
          record({method: req.method ?? '', host, path, status: 502, bytes, decision: 'allowed', rule: `${verdict.rule}; upstream error ${errCode(e)}`})
        })
        res.on('close', () => {
          if (!res.writableFinished) upstream.destroy()
        })
        req.pipe(upstream)
      },
      (e: unknown) => {
        refuse(res, 502, `cannot resolve ${host}: ${errCode(e)}`)
        record({method: req.method ?? '', host, path, status: 502, bytes: 0, decision: 'blocked', rule: `cannot resolve: ${errCode(e)}`})
        req.resume()
      },
    )
  })
  httpServer.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    const target = req.url ?? '/'
    const path = pathOnly(target)
    const verdict = decideHttp(req.headers.host, target, allowlist.entries())
    const host = verdict.host ?? String(req.headers.host ?? '')
    socket.on('error', () => undefined)
    if (!verdict.allowed) {
      socket.end(`HTTP/1.1 ${verdict.status} Refused\r\nconnection: close\r\ncontent-length: 0\r\nx-agent-sandbox: blocked\r\n\r\n`)
      record({method: req.method ?? '', host, path, status: verdict.status, bytes: 0, decision: 'blocked', rule: verdict.rule})
      return
    }
    resolve(host).then(
      (address) => {
        const upstream = net.connect({port: config.upstreamHttpPort, host: address, noDelay: true})
        let bytes = 0
        upstream.on('connect', () => {
          const lines = [`${req.method} ${originForm(target)} HTTP/1.1`]
          for (let i = 0; i < req.rawHeaders.length; i += 2) lines.push(`${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}`)
          upstream.write(`${lines.join('\r\n')}\r\n\r\n`)
          if (head.length) upstream.write(head)
          upstream.on('data', (c: Buffer) => (bytes += c.length))
          upstream.pipe(socket)
          socket.pipe(upstream)
        })
        upstream.on('error', () => socket.destroy())
        upstream.on('close', () => {
          socket.destroy()
          record({method: req.method ?? '', host, path, status: 101, bytes, decision: 'allowed', rule: `${verdict.rule}; upgrade`})
        })
        socket.on('close', () => upstream.destroy())
      },
      (e: unknown) => {
        socket.end(`HTTP/1.1 502 Bad Gateway\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`)
        record({method: req.method ?? '', host, path, status: 502, bytes: 0, decision: 'blocked', rule: `cannot resolve: ${errCode(e)}`})
      },
    )
  })
  // A transparent gateway is no forward proxy: CONNECT goes nowhere.
  httpServer.on('connect', (req: http.IncomingMessage, socket: Duplex) => {
    socket.on('error', () => undefined)
    socket.end('HTTP/1.1 405 Method Not Allowed\r\nconnection: close\r\ncontent-length: 0\r\n\r\n')
    record({method: 'CONNECT', host: String(req.url ?? ''), path: '', status: 405, bytes: 0, decision: 'blocked', rule: 'CONNECT is not forwarded'})
  })
  httpServer.on('clientError', (_e, socket) => socket.destroy())

  // ---- TLS (port 443): the SNI decides; passed through without interception ----
  // noDelay both ways: a TLS handshake is small writes answered in turn, which Nagle's
  // algorithm against the peer's delayed ACK would hold back by tens of milliseconds.
  const tlsServer = net.createServer({noDelay: true}, (client) => {
    client.on('error', () => undefined)
    let buffered = Buffer.alloc(0)
    const timer = setTimeout(() => client.destroy(), HELLO_TIMEOUT_MS)
    const onData = (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk])
      const hello = parseClientHello(buffered)
      if (hello.state === 'need-more') return
      client.off('data', onData)
      client.pause()
      clearTimeout(timer)
      if (hello.state === 'not-tls') {
        client.destroy()
        record({method: 'TLS', host: '', path: '', status: 0, bytes: 0, decision: 'blocked', rule: hello.reason})
        return
      }
      const verdict = decideSni(hello.sni, allowlist.entries())
      const host = verdict.host ?? hello.sni ?? ''
      if (!verdict.allowed) {
        client.end(ALERT_UNRECOGNIZED_NAME)
        record({method: 'TLS', host, path: '', status: 0, bytes: 0, decision: 'blocked', rule: verdict.rule})
        return
      }
      resolve(host).then(
        (address) => passThrough(client, buffered, address, host, verdict.rule),
        (e: unknown) => {
          client.end(ALERT_UNRECOGNIZED_NAME)
          record({method: 'TLS', host, path: '', status: 0, bytes: 0, decision: 'blocked', rule: `cannot resolve: ${errCode(e)}`})
        },
      )
    }
    client.on('data', onData)
    client.on('close', () => clearTimeout(timer))
  })

  const passThrough = (client: net.Socket, hello: Buffer, address: string, host: string, rule: string) => {
    const upstream = net.connect({port: config.upstreamTlsPort, host: address, noDelay: true})
    let bytes = 0
    let failed = ''
    upstream.on('connect', () => {
      upstream.write(hello)
      upstream.on('data', (c: Buffer) => (bytes += c.length))
      upstream.pipe(client)
      client.pipe(upstream)
      client.resume()
    })
    upstream.on('error', (e) => {
      failed = errCode(e)
      client.destroy()
    })
    upstream.on('close', () => {
      client.destroy()
      record({method: 'TLS', host, path: '', status: 0, bytes, decision: 'allowed', rule: failed ? `${rule}; upstream error ${failed}` : rule})
    })
    client.on('close', () => upstream.destroy())
  }

  await listenAll(httpServer, config.httpPort, config.listen)
  await listenAll(tlsServer, config.tlsPort, config.listen)
  return {
    allowlistSize: allowlist.size,
    close: async () => {
      agent.destroy()
      await Promise.all([new Promise((r) => httpServer.close(r)), new Promise((r) => tlsServer.close(r))])
    },
  }
}

/** Listen on the first address (must work), then on the others where the address exists (::1 only with IPv6). */
async function listenAll(server: net.Server, port: number, addresses: string[]): Promise<void> {
  const [first, ...rest] = addresses
  await listenOn(server, port, first)
  for (const address of rest) {
    const extra = net.createServer()
    extra.on('connection', (s) => server.emit('connection', s))
    await listenOn(extra, port, address).catch(() => undefined)
  }
}

function listenOn(server: net.Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen({port, host, exclusive: true}, () => {
      server.off('error', reject)
      resolve()
    })
  })
}

/** `http://host/p?q` → `/p?q`: upstream gets origin-form (the gateway is no forward proxy). */
function originForm(target: string): string {
  if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(target)) return target
  try {
    const u = new URL(target)
    return `${u.pathname}${u.search}`
  } catch {
    return '/'
  }
}

/** Raw response headers less the hop-by-hop ones (node frames the body for the client itself). */
function filterRaw(raw: string[]): string[] {
  const out: string[] = []
  for (let i = 0; i < raw.length; i += 2) if (!HOP_BY_HOP.has(raw[i].toLowerCase())) out.push(raw[i], raw[i + 1])
  return out
}

function errCode(e: unknown): string {
  const err = e as NodeJS.ErrnoException
  return err?.code ?? (err instanceof Error ? err.message : String(e))
}

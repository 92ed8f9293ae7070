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
import https from 'node:https'
import net from 'node:net'
import tls from 'node:tls'
import {join} from 'node:path'
import type {Duplex} from 'node:stream'
import {query, TYPE_A, TYPE_AAAA} from './dns.js'
import {REQUEST_LOG, type RequestLogEntry} from './log.js'
import {decideHttp, decideSni, parseDomainList, pathOnly} from './policy.js'
import {checkRules, normaliseRequestPath, parseRuleLines, rulesFor, type HttpRule} from './rules.js'
import {LIVE_ALLOWLIST, LIVE_RULES, watchedFile} from './live.js'
import {ALERT_UNRECOGNIZED_NAME, parseClientHello} from './sni.js'
import type {Minter} from './x509.js'
import {swapSecrets, type MaskedSecret} from './secrets.js'
import {SECRETS_FILE} from './ports.js'

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
  /** httpRules: hosts they restrict are intercepted (TLS terminated with a leaf of the sandbox's CA). */
  rules: HttpRule[]
  /** Certificates upstreams are verified against when the gateway re-originates TLS (node's roots and the image's bundle). */
  upstreamCa: string[]
  /** Names of masked secrets: then every TLS connection is intercepted (a surrogate is looked for in every request), and nothing passes before their values arrive. */
  masked: string[]
  onError?: (message: string) => void
}

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'proxy-authorization', 'te', 'trailer', 'transfer-encoding', 'upgrade'])
const HELLO_TIMEOUT_MS = 10_000
export {SECRETS_FILE} from './ports.js'

export interface GatewaySecrets {
  ca: {cert: string; key: string}
  /** Masked secretEnv entries: surrogate, real value, declared hosts. */
  secrets?: MaskedSecret[]
}

/** The live allowlist: the files and env at start, plus `<stateDir>/allowlist` (firewall allow), re-read when it changes. */
class Allowlist {
  private base: string[]
  private readonly extra: () => string[]
  constructor(config: GatewayConfig) {
    this.base = [...config.domainFiles.flatMap((f) => parseDomainList(readFileSync(f, 'utf8'))), ...config.allowDomains]
    this.extra = watchedFile(join(config.stateDir, LIVE_ALLOWLIST), parseDomainList, [])
  }

  get size(): number {
    return this.entries().length
  }

  entries(): string[] {
    const extra = this.extra()
    return extra.length ? [...this.base, ...extra] : this.base
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
  // httpRules added live (firewall allow --methods/--paths): besides the configured ones, re-read when the file changes.
  const liveRules = watchedFile(join(config.stateDir, LIVE_RULES), parseRuleLines, [] as HttpRule[])
  const rules = (): HttpRule[] => {
    const live = liveRules()
    return live.length ? [...config.rules, ...live] : config.rules
  }
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

  const httpsAgent = new https.Agent({keepAlive: true, maxFreeSockets: 16, ca: config.upstreamCa})
  /** The names intercepted TLS connections were opened for (their SNI), by the decrypted socket. */
  const sniOf = new WeakMap<object, string>()
  let minter: Promise<Minter> | undefined
  let secrets: GatewaySecrets | undefined
  // They arrive after the gateway starts (an exec's stdin, before start probes it ready): read when first needed, until there.
  const getSecrets = (): GatewaySecrets | undefined => {
    if (!secrets) {
      try {
        secrets = JSON.parse(readFileSync(join(config.stateDir, SECRETS_FILE), 'utf8')) as GatewaySecrets
      } catch {
        secrets = undefined
      }
    }
    return secrets
  }
  const intercepts = (host: string) => config.masked.length > 0 || rulesFor(host, rules()).length > 0
  const getMinter = (): Promise<Minter> => {
    if (!minter) {
      const made = (async () => {
        const secrets = getSecrets()
        if (!secrets) throw new Error('no CA yet')
        const {createMinter} = await import('./x509.js')
        return createMinter(secrets.ca)
      })()
      made.catch(() => (minter = undefined))
      minter = made
    }
    return minter
  }

  /**
   * The checks past the allowlist: inside intercepted TLS the Host must be the
   * SNI (else fronting by Host inside TLS); surrogates of masked secrets are
   * swapped for their values (declared hosts, TLS) or refuse the request
   * (anywhere else); then the host's httpRules. Returns the headers and the
   * path to forward (normalised for restricted hosts: what was judged is what
   * is sent) or a refusal.
   */
  type Checked = {forward: string; headers: Array<[string, string]>; rule?: string} | {status: number; rule: string}
  const checkRequest = (req: http.IncomingMessage, host: string, target: string): Checked => {
    const sni = sniOf.get(req.socket)
    if (sni !== undefined && sni !== host) return {status: 421, rule: `Host ${host} differs from the TLS name ${sni}`}
    const masked = config.masked.length ? getSecrets()?.secrets : []
    if (!masked) return {status: 503, rule: 'the gateway has not got its secrets yet'}
    const pairs: Array<[string, string]> = []
    // All of them: an Upgrade is passed on with its hop-by-hop headers (headerObject drops them for other requests).
    for (let i = 0; i < req.rawHeaders.length; i += 2) pairs.push([req.rawHeaders[i], req.rawHeaders[i + 1]])
    const swap = swapSecrets(host, sni !== undefined, target, pairs, masked)
    if (!swap.ok) return {status: 403, rule: swap.rule}
    const secretsRule = swap.swapped.length ? `secrets ${swap.swapped.join(',')}` : undefined
    const inForce = rules()
    if (!rulesFor(host, inForce).length) return {forward: originForm(target), headers: swap.headers, rule: secretsRule}
    const normal = normaliseRequestPath(originForm(target))
    if (!normal) return {status: 400, rule: 'request target is not a path'}
    const ruled = checkRules(host, req.method ?? '', normal.path, inForce)
    if (!ruled.allowed) return {status: 403, rule: ruled.rule}
    return {forward: `${normal.path}${normal.search}`, headers: swap.headers, rule: [ruled.rule, secretsRule].filter(Boolean).join('; ')}
  }

  // ---- HTTP (port 80), and the decrypted side of intercepted TLS: HTTP/1.1 with keep-alive, chunked bodies and Upgrade ----
  const onRequest = (req: http.IncomingMessage, res: http.ServerResponse) => {
    const target = req.url ?? '/'
    const path = pathOnly(target)
    const verdict = decideHttp(req.headers.host, target, allowlist.entries())
    const host = verdict.host ?? String(req.headers.host ?? '')
    const checked = verdict.allowed ? checkRequest(req, host, target) : {status: verdict.status, rule: verdict.rule}
    if ('status' in checked) {
      refuse(res, checked.status, verdict.allowed ? `${req.method ?? ''} ${host}${path} refused: ${checked.rule}` : `${host || 'request'} refused: ${checked.rule}`)
      record({method: req.method ?? '', host, path, status: checked.status, bytes: 0, decision: 'blocked', rule: checked.rule})
      req.resume()
      return
    }
    const rule = [verdict.rule, checked.rule].filter(Boolean).join('; ')
    const secure = sniOf.has(req.socket)
    resolve(host).then(
      (address) => {
        const headers = headerObject(checked.headers)
        const upstream = secure
          ? https.request({host: address, servername: host, port: config.upstreamTlsPort, method: req.method, path: checked.forward, headers, agent: httpsAgent, setHost: false})
          : http.request({host: address, port: config.upstreamHttpPort, method: req.method, path: checked.forward, headers, agent, setHost: false})
        let bytes = 0
        upstream.on('response', (up) => {
          res.writeHead(up.statusCode ?? 502, up.statusMessage, filterRaw(up.rawHeaders))
          up.on('data', (c: Buffer) => (bytes += c.length))
          up.pipe(res)
          up.on('end', () => record({method: req.method ?? '', host, path, status: up.statusCode ?? 0, bytes, decision: 'allowed', rule}))
        })
        upstream.on('error', (e) => {
          if (!res.headersSent) refuse(res, 502, `${host}: ${e.message}`)
          else res.destroy()
          record({method: req.method ?? '', host, path, status: 502, bytes, decision: 'allowed', rule: `${rule}; upstream error ${errCode(e)}`})
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
  }
  const onUpgrade = (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    const target = req.url ?? '/'
    const path = pathOnly(target)
    const verdict = decideHttp(req.headers.host, target, allowlist.entries())
    const host = verdict.host ?? String(req.headers.host ?? '')
    socket.on('error', () => undefined)
    const checked = verdict.allowed ? checkRequest(req, host, target) : {status: verdict.status, rule: verdict.rule}
    if ('status' in checked) {
      socket.end(`HTTP/1.1 ${checked.status} Refused\r\nconnection: close\r\ncontent-length: 0\r\nx-agent-sandbox: blocked\r\n\r\n`)
      record({method: req.method ?? '', host, path, status: checked.status, bytes: 0, decision: 'blocked', rule: checked.rule})
      return
    }
    const rule = [verdict.rule, checked.rule].filter(Boolean).join('; ')
    const secure = sniOf.has(req.socket)
    resolve(host).then(
      (address) => {
        const upstream = secure
          ? tls.connect({port: config.upstreamTlsPort, host: address, servername: host, ca: config.upstreamCa, ALPNProtocols: ['http/1.1']})
          : net.connect({port: config.upstreamHttpPort, host: address, noDelay: true})
        let bytes = 0
        upstream.on(secure ? 'secureConnect' : 'connect', () => {
          const lines = [`${req.method} ${checked.forward} HTTP/1.1`]
          for (const [k, v] of checked.headers) lines.push(`${k}: ${v}`)
          upstream.write(`${lines.join('\r\n')}\r\n\r\n`)
          if (head.length) upstream.write(head)
          upstream.on('data', (c: Buffer) => (bytes += c.length))
          upstream.pipe(socket)
          socket.pipe(upstream)
        })
        upstream.on('error', () => socket.destroy())
        upstream.on('close', () => {
          socket.destroy()
          record({method: req.method ?? '', host, path, status: 101, bytes, decision: 'allowed', rule: `${rule}; upgrade`})
        })
        socket.on('close', () => upstream.destroy())
      },
      (e: unknown) => {
        socket.end(`HTTP/1.1 502 Bad Gateway\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`)
        record({method: req.method ?? '', host, path, status: 502, bytes: 0, decision: 'blocked', rule: `cannot resolve: ${errCode(e)}`})
      },
    )
  }
  // A transparent gateway is no forward proxy: CONNECT goes nowhere.
  const onConnect = (req: http.IncomingMessage, socket: Duplex) => {
    socket.on('error', () => undefined)
    socket.end('HTTP/1.1 405 Method Not Allowed\r\nconnection: close\r\ncontent-length: 0\r\n\r\n')
    record({method: 'CONNECT', host: String(req.url ?? ''), path: '', status: 405, bytes: 0, decision: 'blocked', rule: 'CONNECT is not forwarded'})
  }
  // Plain HTTP and decrypted TLS are served alike (one server each, so each keeps its own connections).
  const serveHttp = () => {
    const server = http.createServer({keepAlive: true, noDelay: true})
    server.on('request', onRequest)
    server.on('upgrade', onUpgrade)
    server.on('connect', onConnect)
    server.on('clientError', (_e, socket) => socket.destroy())
    return server
  }
  const httpServer = serveHttp()
  const interceptServer = serveHttp()

  // ---- TLS (port 443): the SNI decides; passed through, or intercepted for hosts with httpRules ----
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
      if (intercepts(host)) {
        intercept(client, buffered, host)
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

  /**
   * Terminate the client's TLS with a leaf for its SNI (the buffered
   * ClientHello is handed back to the TLS socket), and serve the decrypted
   * stream as HTTP/1.1, where the Host must equal the SNI and the rules apply.
   */
  const intercept = (client: net.Socket, hello: Buffer, host: string) => {
    getMinter()
      .then((m) => m.leaf(host))
      .then(
        ({cert, key}) => {
          client.unshift(hello)
          const secure = new tls.TLSSocket(client, {isServer: true, cert, key, ALPNProtocols: ['http/1.1']})
          secure.on('error', () => secure.destroy())
          sniOf.set(secure, host)
          interceptServer.emit('connection', secure)
        },
        (e: unknown) => {
          client.destroy()
          record({method: 'TLS', host, path: '', status: 0, bytes: 0, decision: 'blocked', rule: `interception not ready: ${errCode(e)}`})
        },
      )
  }

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
      httpsAgent.destroy()
      await Promise.all([new Promise((r) => httpServer.close(r)), new Promise((r) => tlsServer.close(r)), new Promise((r) => interceptServer.close(r))])
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

/** Request headers as http.request takes them, less the hop-by-hop ones: repeated names as arrays. */
function headerObject(pairs: Array<[string, string]>): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {}
  for (const [k, v] of pairs) {
    const key = k.toLowerCase()
    if (HOP_BY_HOP.has(key)) continue
    const had = out[key]
    out[key] = had === undefined ? v : Array.isArray(had) ? [...had, v] : [had, v]
  }
  return out
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

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
import type * as Http2 from 'node:http2'
import https from 'node:https'
import net from 'node:net'
import tls from 'node:tls'
import {join} from 'node:path'
import type {Duplex} from 'node:stream'
import {query, TYPE_A, TYPE_AAAA} from './dns.js'
import {REQUEST_LOG, type RequestLogEntry} from './log.js'
import {decideHttp, decideSni, normaliseHost, parseDomainList, pathOnly} from './policy.js'
import {checkRules, normaliseRequestPath, parseRuleLines, rulesFor, type HttpRule} from './rules.js'
import {LIVE_ALLOWLIST, LIVE_RULES, watchedFile} from './live.js'
import {ALERT_UNRECOGNIZED_NAME, parseClientHello} from './sni.js'
import {createLeafMinter, type Minter} from './certificates.js'
import {swapSecrets, type MaskedSecret} from './secrets.js'
import {SECRETS_FILE} from './ports.js'
import type {GatewayLogins, Vendor} from './agent-logins.js'
import {LoginBook, relayTokenExchange, type ExchangeIo} from './login-exchange.js'

export interface GatewayConfig {
  httpPort: number
  tlsPort: number
  /** Addresses to listen on; the first must work, the rest (::1) are tried. */
  listen: string[]
  /** The sandbox's resolver (dnsmasq), which also adds the answers to the firewall's ipsets. */
  dnsServer: string
  /** Its port (53; the unit tests' stand-in listens elsewhere). */
  dnsPort?: number
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
  /** Each request log line as it is written (a one-shot run's gateway copies them to its stdout). */
  onRecord?: (line: string) => void
}

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'proxy-authorization', 'te', 'trailer', 'transfer-encoding', 'upgrade'])
const HELLO_TIMEOUT_MS = 10_000
/** HTTP/2 flow-control window for what clients send (uploads): node's default 64 KiB would stall a fast upload on round trips. */
const H2_WINDOW = 1024 * 1024
/** The SNI of an intercepted TLS socket, as a property (an HTTP/2 session hands out only a proxy of its socket). */
const SNI = Symbol('agent-sandbox.sni')

interface Interception {
  minter: Minter
  h2: Http2.Http2Server
}
export {SECRETS_FILE} from './ports.js'

export interface GatewaySecrets {
  ca: {cert: string; key: string}
  /** Masked secretEnv entries: surrogate, real value, declared hosts. */
  secrets?: MaskedSecret[]
  /** The agents' logins (agent-logins.ts), per vendor: absent for a vendor whose logins this gateway does not mask. */
  logins?: GatewayLogins
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
    this.config.onRecord?.(line)
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
    const dns = {port: config.dnsPort ?? 53}
    const v4 = await query(config.dnsServer, host, TYPE_A, dns).catch((error: unknown) => error)
    if (Array.isArray(v4) && v4[0]) return v4[0]
    const v6 = await query(config.dnsServer, host, TYPE_AAAA, dns).catch(() => [] as string[])
    if (v6[0]) return v6[0]
    throw v4 instanceof Error ? v4 : Object.assign(new Error(`no address for ${host}`), {code: 'ENODATA'})
  }

  const record = (e: Omit<RequestLogEntry, 'time'>) => log.write({time: new Date().toISOString(), ...e})

  const refuse = (res: http.ServerResponse, status: number, why: string) => {
    const body = `agent-sandbox gateway: ${why}\n`
    res.writeHead(status, {'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(body), 'x-agent-sandbox': 'blocked'})
    res.end(body)
  }

  /**
   * One TLS context for every upstream the gateway re-originates TLS to, made at the
   * first interception: node's roots plus the image's bundle are ~300 certificates,
   * which `ca` on each connection would parse again (time, and memory per context).
   */
  let upstreamContext: tls.SecureContext | undefined
  const upstreamTls = () => (upstreamContext ??= tls.createSecureContext({ca: config.upstreamCa}))
  let httpsAgent: https.Agent | undefined
  const upstreamAgent = () => (httpsAgent ??= new https.Agent({keepAlive: true, maxFreeSockets: 16, secureContext: upstreamTls()}))
  /** The names intercepted TLS connections were opened for (their SNI), by the decrypted socket (HTTP/1.1). */
  const sniOf = new WeakMap<object, string>()
  let interception: Promise<Interception> | undefined
  let secrets: GatewaySecrets | undefined
  let secretsStamp = ''
  // They arrive after the gateway starts (an exec's stdin, before start probes it ready), and a renewed
  // GitHub App token replaces the file later (gateway.ts --secret): read again whenever the file changed.
  const getSecrets = (): GatewaySecrets | undefined => {
    const path = join(config.stateDir, SECRETS_FILE)
    let stamp = ''
    try {
      const st = statSync(path)
      stamp = `${st.ino}:${st.mtimeMs}:${st.size}`
    } catch {
      stamp = ''
    }
    if (stamp !== secretsStamp) {
      try {
        secrets = JSON.parse(readFileSync(path, 'utf8')) as GatewaySecrets
        secretsStamp = stamp
      } catch {
        // keep what was read last
      }
    }
    return secrets
  }
  // ---- Agent logins (login-exchange.ts): held, every TLS connection is intercepted, as for masked secrets ----
  const logins = new LoginBook(config.stateDir, () => getSecrets()?.logins)
  const intercepts = (host: string) => config.masked.length > 0 || rulesFor(host, rules()).length > 0 || logins.any()
  /** The minter and the HTTP/2 server, loaded at the first interception only (a gateway that passes everything through never loads them). */
  const getInterception = (): Promise<Interception> => {
    if (!interception) {
      const made = (async () => {
        const secrets = getSecrets()
        if (!secrets) throw new Error('no CA yet')
        const http2 = await import('node:http2')
        const h2 = http2.createServer({settings: {initialWindowSize: H2_WINDOW}})
        h2.on('session', (session) => {
          session.on('error', () => undefined)
          // The connection window (65535 by default) would cap uploads from the client below the stream's.
          session.once('connect', () => session.setLocalWindowSize(H2_WINDOW))
        })
        h2.on('stream', onStream)
        return {minter: createLeafMinter(secrets.ca), h2}
      })()
      made.catch(() => (interception = undefined))
      interception = made
    }
    return interception
  }

  /**
   * The checks past the allowlist: inside intercepted TLS the Host must be the
   * SNI (else fronting by Host inside TLS); surrogates of masked secrets are
   * swapped for their values (declared hosts, TLS) or refuse the request
   * (anywhere else); then the host's httpRules. Returns the headers and the
   * path to forward (normalised for restricted hosts: what was judged is what
   * is sent) or a refusal. `sni` is undefined for plain HTTP.
   */
  type Checked = {forward: string; headers: Array<[string, string]>; rule?: string} | {status: number; rule: string}
  const checkRequest = (sni: string | undefined, method: string, host: string, target: string, pairs: Array<[string, string]>): Checked => {
    if (sni !== undefined && sni !== host) return {status: 421, rule: `Host ${host} differs from the TLS name ${sni}`}
    const masked = config.masked.length ? getSecrets()?.secrets : []
    if (!masked) return {status: 503, rule: 'the gateway has not got its secrets yet'}
    const swap = swapSecrets(host, sni !== undefined, target, pairs, [...masked, ...logins.secrets()])
    if (!swap.ok) return {status: 403, rule: swap.rule}
    const secretsRule = swap.swapped.length ? `secrets ${swap.swapped.join(',')}` : undefined
    const inForce = rules()
    if (!rulesFor(host, inForce).length) return {forward: originForm(target), headers: swap.headers, rule: secretsRule}
    const normal = normaliseRequestPath(originForm(target))
    if (!normal) return {status: 400, rule: 'request target is not a path'}
    const ruled = checkRules(host, method, normal.path, inForce)
    if (!ruled.allowed) return {status: 403, rule: ruled.rule}
    return {forward: `${normal.path}${normal.search}`, headers: swap.headers, rule: [ruled.rule, secretsRule].filter(Boolean).join('; ')}
  }
  /** An HTTP/1.1 request's checks: all its headers (an Upgrade is passed on with its hop-by-hop ones; headerObject drops them for other requests). */
  const checkHttp1 = (req: http.IncomingMessage, host: string, target: string): Checked => {
    const pairs: Array<[string, string]> = []
    for (let i = 0; i < req.rawHeaders.length; i += 2) pairs.push([req.rawHeaders[i], req.rawHeaders[i + 1]])
    return checkRequest(sniOf.get(req.socket), req.method ?? '', host, target, pairs)
  }

  /** A checked request to its upstream: TLS (verified, SNI = the name) for intercepted TLS, plain HTTP for port 80; keep-alive both. */
  const upstreamRequest = (secure: boolean, address: string, host: string, method: string, path: string, headers: http.OutgoingHttpHeaders) =>
    secure
      ? https.request({host: address, servername: host, port: config.upstreamTlsPort, method, path, headers, agent: upstreamAgent(), setHost: false})
      : http.request({host: address, port: config.upstreamHttpPort, method, path, headers, agent, setHost: false})

  /** A token exchange of a masked login (login-exchange.ts): relayed whole, both bodies swapped. */
  const relayLogin = (vendor: Vendor, host: string, method: string, checked: {forward: string; headers: Array<[string, string]>; rule?: string}, body: AsyncIterable<Buffer>, reply: ExchangeIo['reply'], refused: ExchangeIo['refuse']) =>
    void relayTokenExchange(vendor, logins, host, {
      headers: checked.headers,
      body,
      open: async (headers) => upstreamRequest(true, await resolve(host), host, method, checked.forward, headers),
      reply,
      refuse: refused,
      record: (status, bytes, why, blocked) => record({method, host, path: pathOnly(checked.forward), status, bytes, decision: blocked ? 'blocked' : 'allowed', rule: [checked.rule, why].filter(Boolean).join('; ')}),
    })

  // ---- HTTP (port 80), and the decrypted side of intercepted TLS: HTTP/1.1 with keep-alive, chunked bodies and Upgrade ----
  const onRequest = (req: http.IncomingMessage, res: http.ServerResponse) => {
    const target = req.url ?? '/'
    const path = pathOnly(target)
    const verdict = decideHttp(req.headers.host, target, allowlist.entries())
    const host = verdict.host ?? String(req.headers.host ?? '')
    const checked = verdict.allowed ? checkHttp1(req, host, target) : {status: verdict.status, rule: verdict.rule}
    if ('status' in checked) {
      refuse(res, checked.status, verdict.allowed ? `${req.method ?? ''} ${host}${path} refused: ${checked.rule}` : `${host || 'request'} refused: ${checked.rule}`)
      record({method: req.method ?? '', host, path, status: checked.status, bytes: 0, decision: 'blocked', rule: checked.rule})
      req.resume()
      return
    }
    const rule = [verdict.rule, checked.rule].filter(Boolean).join('; ')
    const login = sniOf.has(req.socket) ? logins.exchange(host, req.method ?? '', checked.forward) : undefined
    if (login) {
      const reply: ExchangeIo['reply'] = (status, headers, body) => res.writeHead(status, headers).end(body)
      return relayLogin(login, host, req.method ?? '', checked, req, reply, (status, why) => refuse(res, status, why))
    }
    resolve(host).then(
      (address) => {
        const upstream = upstreamRequest(sniOf.has(req.socket), address, host, req.method ?? 'GET', checked.forward, headerObject(checked.headers))
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

  /**
   * HTTP/2 streams on intercepted TLS (ALPN h2): the same checks as HTTP/1.1,
   * with `:authority` as the Host (a `host` header beside it must agree), then
   * upstream over HTTP/1.1 through the same keep-alive agent (docs/design.md:
   * why not HTTP/2 upstream). Bodies are streamed both ways with HTTP/2 flow
   * control to the client and node's back-pressure to the upstream.
   */
  const onStream = (stream: Http2.ServerHttp2Stream, headers: Http2.IncomingHttpHeaders) => {
    stream.on('error', () => undefined)
    const sni = (stream.session?.socket as unknown as Record<symbol, string | undefined> | undefined)?.[SNI]
    const method = String(headers[':method'] ?? '')
    const target = String(headers[':path'] ?? '')
    const path = pathOnly(target)
    const authority = headers[':authority'] ?? headers.host
    const answer = (status: number, why: string) => {
      const body = `agent-sandbox gateway: ${why}\n`
      if (stream.headersSent || stream.destroyed || stream.closed) return void stream.destroy()
      stream.respond({':status': status, 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(body), 'x-agent-sandbox': 'blocked'})
      stream.end(body)
    }
    const verdict =
      method === 'CONNECT'
        ? {allowed: false as const, rule: 'CONNECT is not forwarded', status: 405, host: normaliseHost(authority)}
        : headers.host !== undefined && headers[':authority'] !== undefined && normaliseHost(headers.host) !== normaliseHost(headers[':authority'])
          ? {allowed: false as const, rule: `Host ${headers.host} differs from :authority ${headers[':authority']}`, status: 421, host: normaliseHost(headers[':authority'])}
          : decideHttp(authority, target, allowlist.entries())
    const host = verdict.host ?? String(authority ?? '')
    const pairs: Array<[string, string]> = [['host', String(authority ?? '')]]
    for (const [k, v] of Object.entries(headers)) {
      if (k.startsWith(':') || k === 'host' || v === undefined) continue
      for (const one of Array.isArray(v) ? v : [v]) pairs.push([k, one])
    }
    const checked = verdict.allowed ? checkRequest(sni ?? '', method, host, target, pairs) : {status: verdict.status, rule: verdict.rule}
    if ('status' in checked) {
      answer(checked.status, verdict.allowed ? `${method} ${host}${path} refused: ${checked.rule}` : `${host || 'request'} refused: ${checked.rule}`)
      record({method, host, path, status: checked.status, bytes: 0, decision: 'blocked', rule: checked.rule})
      stream.resume()
      return
    }
    const rule = [verdict.rule, checked.rule, 'HTTP/2'].filter(Boolean).join('; ')
    const login = logins.exchange(host, method, checked.forward)
    if (login) {
      const reply: ExchangeIo['reply'] = (status, headers, body) => {
        if (stream.destroyed || stream.closed) return
        try {
          stream.respond({':status': status, ...headers})
          stream.end(body)
        } catch {
          // A header HTTP/2 refuses: this exchange fails, the gateway goes on.
          stream.destroy()
        }
      }
      return relayLogin(login, host, method, checked, stream, reply, answer)
    }
    resolve(host).then(
      (address) => {
        const upstream = upstreamRequest(true, address, host, method, checked.forward, headerObject(checked.headers))
        let bytes = 0
        upstream.on('response', (up) => {
          const out: Http2.OutgoingHttpHeaders = {':status': up.statusCode ?? 502}
          for (const [k, v] of Object.entries(up.headers)) if (v !== undefined && !HOP_BY_HOP.has(k)) out[k] = v
          if (stream.destroyed || stream.closed) return void up.destroy()
          try {
            stream.respond(out)
          } catch (e) {
            // A header HTTP/2 refuses (node throws on what it cannot send): this request fails, the gateway goes on.
            up.destroy()
            stream.destroy()
            record({method, host, path, status: 502, bytes, decision: 'allowed', rule: `${rule}; response not sendable over HTTP/2: ${errCode(e)}`})
            return
          }
          up.on('data', (c: Buffer) => (bytes += c.length))
          // A HEAD, 204 or 304 ends the stream with its headers (node does): nothing to pipe.
          if (stream.writableEnded) up.resume()
          else up.pipe(stream)
          up.on('end', () => record({method, host, path, status: up.statusCode ?? 0, bytes, decision: 'allowed', rule}))
        })
        upstream.on('error', (e) => {
          if (!stream.headersSent) answer(502, `${host}: ${e.message}`)
          else stream.destroy(e)
          record({method, host, path, status: 502, bytes, decision: 'allowed', rule: `${rule}; upstream error ${errCode(e)}`})
        })
        stream.on('close', () => {
          if (!stream.writableFinished) upstream.destroy()
        })
        stream.pipe(upstream)
      },
      (e: unknown) => {
        answer(502, `cannot resolve ${host}: ${errCode(e)}`)
        record({method, host, path, status: 502, bytes: 0, decision: 'blocked', rule: `cannot resolve: ${errCode(e)}`})
        stream.resume()
      },
    )
  }

  const onUpgrade = (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    const target = req.url ?? '/'
    const path = pathOnly(target)
    const verdict = decideHttp(req.headers.host, target, allowlist.entries())
    const host = verdict.host ?? String(req.headers.host ?? '')
    socket.on('error', () => undefined)
    const checked = verdict.allowed ? checkHttp1(req, host, target) : {status: verdict.status, rule: verdict.rule}
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
          ? tls.connect({port: config.upstreamTlsPort, host: address, servername: host, secureContext: upstreamTls(), ALPNProtocols: ['http/1.1']})
          : net.connect({port: config.upstreamHttpPort, host: address, noDelay: true})
        let bytes = 0
        // What the upstream answered (101 when it switched): the status line of its first bytes.
        let status = 0
        upstream.on(secure ? 'secureConnect' : 'connect', () => {
          const lines = [`${req.method} ${checked.forward} HTTP/1.1`]
          for (const [k, v] of checked.headers) lines.push(`${k}: ${v}`)
          upstream.write(`${lines.join('\r\n')}\r\n\r\n`)
          if (head.length) upstream.write(head)
          upstream.on('data', (c: Buffer) => {
            if (!bytes) status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(c.toString('latin1', 0, 16))?.[1] ?? 0)
            bytes += c.length
          })
          upstream.pipe(socket)
          socket.pipe(upstream)
        })
        upstream.on('error', () => socket.destroy())
        upstream.on('close', () => {
          socket.destroy()
          record({method: req.method ?? '', host, path, status, bytes, decision: 'allowed', rule: `${rule}; upgrade`})
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
   * A TLS context per intercepted name, made once: given `cert` and `key`, each
   * TLSSocket would parse them into an OpenSSL context of its own, which costs
   * a few ms and leaves the heap fragmented (resident memory grew by ~10 MiB
   * over 200 connections).
   */
  const leafContexts = new Map<string, Promise<tls.SecureContext>>()
  const leafContext = (minter: Minter, host: string): Promise<tls.SecureContext> => {
    let made = leafContexts.get(host)
    if (!made) {
      // Names come from the allowlist, but a wildcard entry admits any number of them: keep a bounded set.
      if (leafContexts.size >= 256) leafContexts.clear()
      made = minter.leaf(host).then(({cert, key}) => tls.createSecureContext({cert, key}))
      made.catch(() => leafContexts.delete(host))
      leafContexts.set(host, made)
    }
    return made
  }

  /**
   * Terminate the client's TLS with a leaf for its SNI (the buffered
   * ClientHello is handed back to the TLS socket), offering ALPN `h2` and
   * `http/1.1`, and serve the decrypted stream by what was negotiated: HTTP/2
   * (onStream) or HTTP/1.1 (the port-80 server's twin); either way the Host
   * must equal the SNI and the rules apply.
   */
  const intercept = (client: net.Socket, hello: Buffer, host: string) => {
    getInterception()
      .then(async (i) => ({h2: i.h2, context: await leafContext(i.minter, host)}))
      .then(
        ({h2, context}) => {
          client.unshift(hello)
          const secure = new tls.TLSSocket(client, {isServer: true, secureContext: context, ALPNProtocols: ['h2', 'http/1.1']})
          secure.on('error', () => secure.destroy())
          sniOf.set(secure, host)
          // Read back through the session's socket proxy, which forwards property reads to this socket.
          ;(secure as unknown as Record<symbol, string>)[SNI] = host
          // Synchronously on 'secure': the bytes after the handshake wait in the socket until a server takes it.
          secure.once('secure', () => {
            if (secure.alpnProtocol !== 'h2') return void interceptServer.emit('connection', secure)
            // What tls.Server does for its own sockets once secure (onServerSocketSecure): an HTTP/2
            // session over a socket still marked connecting waits for a 'secureConnect' that a server never emits.
            ;(secure as unknown as {secureConnecting: boolean}).secureConnecting = false
            h2.emit('connection', secure)
          })
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
      httpsAgent?.destroy()
      const h2 = await interception?.then((i) => i.h2).catch(() => undefined)
      if (h2) await new Promise((r) => h2.close(r))
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

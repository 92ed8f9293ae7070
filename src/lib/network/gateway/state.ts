/**
 * The state every protocol module of the egress gateway shares
 * (docs/design.md, "The egress gateway"): its configuration, the live
 * allowlist and httpRules, the masked secrets, its resolver, its request log,
 * the upstream connections it re-originates, and the one judgement every
 * request meets whatever protocol it came in over (judge).
 */
import {readFileSync, statSync} from 'node:fs'
import http from 'node:http'
import https from 'node:https'
import {join} from 'node:path'
import tls from 'node:tls'
import {query, TYPE_A, TYPE_AAAA} from './dns.js'
import {originForm} from './forward.js'
import {GrantBook, parseGrantLines, type Admission, type Grant} from './grants.js'
import {LIVE_GRANTS, LIVE_RULES, watchedFile} from './live.js'
import type {RequestLogEntry} from './log.js'
import type {GatewayLogins, Vendor} from './agent-logins.js'
import {LoginBook, relayTokenExchange, type ExchangeIo} from './login-exchange.js'
import {parseDomainList, pathOnly} from './policy.js'
import {SECRETS_FILE} from './ports.js'
import {RequestLog} from './request-log.js'
import {judgeHttpRules, normaliseRequestPath, parseRuleLines, ruleHostMatches, rulesFor, type HttpRule} from './rules.js'
import {swapSecrets, type MaskedSecret} from './secrets.js'

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
  /** httpRules: the hosts they restrict are intercepted (TLS terminated with a leaf of the sandbox's CA). */
  rules: HttpRule[]
  /** Certificates upstreams are verified against when the gateway re-originates TLS (node's roots and the image's bundle). */
  upstreamCa: string[]
  /** Names of masked secrets: the hosts they are declared for are intercepted, and nothing passes before their values arrive. */
  masked: string[]
  /** Intercept every TLS connection, not only those to hosts with rules or secrets (the user setting gateway.inspectAll). */
  inspectAll?: boolean
  onError?: (message: string) => void
  /** Each request log line as it is written (a one-shot run's gateway copies them to its stdout). */
  onRecord?: (line: string) => void
}

export interface GatewaySecrets {
  ca: {cert: string; key: string}
  /** Masked secretEnv entries: surrogate, real value, declared hosts. */
  secrets?: MaskedSecret[]
  /** The agents' logins (agent-logins.ts), per vendor: absent for a vendor whose logins this gateway does not mask. */
  logins?: GatewayLogins
}

/** A request as every protocol module hands it to judge. */
export interface Asked {
  /** The TLS name the connection was opened for; undefined on plain HTTP. */
  sni: string | undefined
  method: string
  host: string
  target: string
  headers: Array<[string, string]>
}
/** What judge decides: what to forward (the path as judged, the headers with secrets swapped) or a refusal. */
export type Judged = {forward: string; headers: Array<[string, string]>; rule?: string; admission?: Admission} | {status: number; rule: string}

export class GatewayState {
  readonly log: RequestLog
  readonly rules: () => HttpRule[]
  /** The names intercepted TLS connections were opened for (their SNI), by the decrypted socket. */
  readonly sniOf = new WeakMap<object, string>()
  /** The agents' logins it holds (login-exchange.ts): handed over with the secrets, and those it minted since. */
  readonly logins: LoginBook
  /** The grants that let names out (grants.ts): the base allowlist and `firewall allow`'s live ones. */
  readonly grants: GrantBook
  private readonly baseAllowlist: string[]
  private readonly plainAgent = new http.Agent({keepAlive: true, maxFreeSockets: 16})
  private tlsAgent: https.Agent | undefined
  private upstreamContext: tls.SecureContext | undefined
  private secretsRead: GatewaySecrets | undefined
  private secretsStamp = ''

  constructor(readonly config: GatewayConfig) {
    const defaults = config.domainFiles.flatMap((f) => parseDomainList(readFileSync(f, 'utf8')))
    this.baseAllowlist = [...defaults, ...config.allowDomains]
    // `firewall allow` adds grants and rules live, into files of the gateway's own tmpfs: re-read when they change.
    const liveGrants = watchedFile(join(config.stateDir, LIVE_GRANTS), parseGrantLines, [] as Array<Grant | undefined>)
    this.grants = new GrantBook({defaults, config: config.allowDomains}, liveGrants)
    const liveRules = watchedFile(join(config.stateDir, LIVE_RULES), parseRuleLines, [] as HttpRule[])
    this.rules = () => {
      const live = liveRules()
      return live.length ? [...config.rules, ...live] : config.rules
    }
    this.logins = new LoginBook(config.stateDir, () => this.secrets()?.logins)
    this.log = new RequestLog(config.stateDir, config.maxLogBytes, config.onError, config.onRecord)
  }

  /** Every name some grant covers, live grants that expired or were spent included: their refusal names the grant. */
  allowlist(): string[] {
    const extra = this.grants.entries()
    return extra.length ? [...this.baseAllowlist, ...extra] : this.baseAllowlist
  }

  record(entry: Omit<RequestLogEntry, 'time'>): void {
    this.log.write({time: new Date().toISOString(), ...entry})
  }

  /**
   * The CA and masked secrets, read again whenever the file changed: they arrive after
   * the gateway starts (an exec's stdin), and a renewed GitHub App token replaces them.
   */
  secrets(): GatewaySecrets | undefined {
    const path = join(this.config.stateDir, SECRETS_FILE)
    let stamp = ''
    try {
      const st = statSync(path)
      stamp = `${st.ino}:${st.mtimeMs}:${st.size}`
    } catch {
      stamp = ''
    }
    if (stamp !== this.secretsStamp) {
      try {
        this.secretsRead = JSON.parse(readFileSync(path, 'utf8')) as GatewaySecrets
        this.secretsStamp = stamp
      } catch {
        // keep what was read last
      }
    }
    return this.secretsRead
  }

  /**
   * Whether TLS to `host` is terminated: only where it buys something, a host with httpRules
   * (GitHub's defaults among them) or one a masked secret is declared for; every host with
   * gateway.inspectAll. An agent login counts as a masked secret for its vendor's hosts. Anywhere
   * else a surrogate is worthless, and the connection passes through.
   */
  intercepts(host: string): boolean {
    if (this.config.inspectAll) return true
    if (rulesFor(host, this.rules()).length > 0) return true
    return [...(this.secrets()?.secrets ?? []), ...this.logins.secrets()].some((s) => s.hosts.some((h) => ruleHostMatches(h, host)))
  }

  /** The first address of a name, from the sandbox's resolver, asked every time (dns.ts). */
  async resolve(host: string): Promise<string> {
    const dns = {port: this.config.dnsPort ?? 53}
    const v4 = await query(this.config.dnsServer, host, TYPE_A, dns).catch((error: unknown) => error)
    if (Array.isArray(v4) && v4[0]) return v4[0]
    const v6 = await query(this.config.dnsServer, host, TYPE_AAAA, dns).catch(() => [] as string[])
    if (v6[0]) return v6[0]
    throw v4 instanceof Error ? v4 : Object.assign(new Error(`no address for ${host}`), {code: 'ENODATA'})
  }

  /**
   * The checks past the allowlist, alike for every protocol: inside intercepted TLS the Host
   * must be the SNI (else fronting by Host inside TLS); surrogates of masked secrets are swapped
   * for their values (declared hosts, TLS) or refuse the request (anywhere else); then the
   * host's httpRules. For a restricted host the path forwarded is the one judged, normalised.
   */
  judge(asked: Asked): Judged {
    const {sni, method, host, target} = asked
    if (sni !== undefined && sni !== host) return {status: 421, rule: `Host ${host} differs from the TLS name ${sni}`}
    const masked = this.config.masked.length ? this.secrets()?.secrets : []
    if (!masked) return {status: 503, rule: 'the gateway has not got its secrets yet'}
    const swap = swapSecrets(host, sni !== undefined, target, asked.headers, [...masked, ...this.logins.secrets()])
    if (!swap.ok) return {status: 403, rule: swap.rule}
    const secretsRule = swap.swapped.length ? `secrets ${swap.swapped.join(',')}` : undefined
    const inForce = this.rules()
    if (!rulesFor(host, inForce).length) return {forward: originForm(target), headers: swap.headers, rule: secretsRule}
    const normal = normaliseRequestPath(originForm(target))
    if (!normal) return {status: 400, rule: 'request target is not a path'}
    const ruled = judgeHttpRules(host, method, normal.path, inForce)
    if (!ruled.allowed) return {status: 403, rule: ruled.rule}
    return {forward: `${normal.path}${normal.search}`, headers: swap.headers, rule: [ruled.rule, secretsRule].filter(Boolean).join('; ')}
  }

  /**
   * One TLS context for every upstream the gateway re-originates TLS to, made at the first
   * interception: node's roots plus the image's bundle are ~300 certificates, which `ca` on
   * each connection would parse again (time, and memory per context).
   */
  upstreamTls(): tls.SecureContext {
    return (this.upstreamContext ??= tls.createSecureContext({ca: this.config.upstreamCa}))
  }

  /** A judged request to its upstream: TLS (verified, SNI = the name) for intercepted TLS, plain HTTP for port 80; keep-alive both. */
  upstreamRequest(secure: boolean, address: string, host: string, method: string, path: string, headers: http.OutgoingHttpHeaders): http.ClientRequest {
    const {upstreamHttpPort, upstreamTlsPort} = this.config
    if (!secure) return http.request({host: address, port: upstreamHttpPort, method, path, headers, agent: this.plainAgent, setHost: false})
    this.tlsAgent ??= new https.Agent({keepAlive: true, maxFreeSockets: 16, secureContext: this.upstreamTls()})
    return https.request({host: address, servername: host, port: upstreamTlsPort, method, path, headers, agent: this.tlsAgent, setHost: false})
  }

  /** A token exchange of a masked login (login-exchange.ts), over intercepted TLS: relayed whole, both bodies swapped. */
  relayLogin(vendor: Vendor, host: string, method: string, judged: {forward: string; headers: Array<[string, string]>; rule?: string; admission?: Admission}, body: AsyncIterable<Buffer>, reply: ExchangeIo['reply'], refuse: ExchangeIo['refuse']): void {
    void relayTokenExchange(vendor, this.logins, host, {
      headers: judged.headers,
      body,
      open: async (headers) => this.upstreamRequest(true, await this.resolve(host), host, method, judged.forward, headers),
      reply,
      refuse,
      record: (status, bytes, why, blocked) =>
        this.record({method, host, path: pathOnly(judged.forward), status, bytes, decision: blocked ? 'blocked' : 'allowed', rule: [judged.rule, why].filter(Boolean).join('; '), ...(blocked ? {} : grantField(judged.admission))}),
    })
  }

  close(): void {
    this.plainAgent.destroy()
    this.tlsAgent?.destroy()
    this.log.close()
  }
}

/** The `grant` field of an allowed request's log entry: the grant that let it out. */
export function grantField(admission: Admission | undefined): {grant?: string} {
  return admission ? {grant: admission.name()} : {}
}

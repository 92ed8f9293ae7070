/**
 * The gateway's side of the agents' logins (agent-logins.ts): the logins it
 * holds (handed over with its CA, plus those it minted since), and the relay
 * of a token exchange, buffered both ways so that the request body gets real
 * values and the answer surrogates. Tokens it mints are written to
 * `<stateDir>/logins-minted.json`, which the CLI reads back to the host
 * (`egress-gateway --logins`, logins/login-sync.ts).
 */
import {readFileSync, renameSync, writeFileSync} from 'node:fs'
import type http from 'node:http'
import {join} from 'node:path'
import zlib from 'node:zlib'
import {
  addMinted,
  loginSecrets,
  maskTokenResponse,
  MAX_EXCHANGE_BYTES,
  swapRequestBody,
  tokenEndpoint,
  VENDOR_HOSTS,
  type AgentLogin,
  type GatewayLogins,
  type Vendor,
} from './agent-logins.js'
import type {MaskedSecret} from './secrets.js'

export const MINTED_FILE = 'logins-minted.json'

/** Minted logins by vendor with the config volume they belong to, as the gateway writes them and `--logins` prints them. */
export type MintedLogins = Partial<Record<Vendor, {volume: string; logins: AgentLogin[]}>>

export function readMinted(stateDir: string): MintedLogins {
  try {
    return JSON.parse(readFileSync(join(stateDir, MINTED_FILE), 'utf8')) as MintedLogins
  } catch {
    return {}
  }
}

/** The logins a gateway holds: those handed over (re-read when they change) and those it minted. */
export class LoginBook {
  private minted: MintedLogins
  constructor(
    private readonly stateDir: string,
    private readonly handed: () => GatewayLogins | undefined,
  ) {
    this.minted = readMinted(stateDir)
  }

  /** Whether the gateway masks this vendor's logins (a bundle was handed over for it). */
  masks(vendor: Vendor): boolean {
    return this.handed()?.[vendor] !== undefined
  }

  /** Whether the gateway holds any login: then, as for masked secrets, every TLS connection is intercepted, so that a surrogate sent anywhere is seen (and refused). */
  any(): boolean {
    const handed = this.handed()
    return handed !== undefined && Object.keys(handed).length > 0
  }

  logins(vendor: Vendor): AgentLogin[] {
    const bundle = this.handed()?.[vendor]
    return bundle ? addMinted(bundle.logins, this.minted[vendor]?.logins ?? []) : []
  }

  all(): AgentLogin[] {
    return (Object.keys(VENDOR_HOSTS) as Vendor[]).flatMap((v) => this.logins(v))
  }

  /** For the header swap (secrets.ts swapSecrets). */
  secrets(): MaskedSecret[] {
    return loginSecrets(this.all())
  }

  record(vendor: Vendor, minted: AgentLogin[]): void {
    if (!minted.length) return
    const volume = this.handed()?.[vendor]?.volume ?? ''
    this.minted = {...this.minted, [vendor]: {volume, logins: addMinted(this.minted[vendor]?.logins ?? [], minted, 16)}}
    const path = join(this.stateDir, MINTED_FILE)
    writeFileSync(`${path}.new`, JSON.stringify(this.minted), {mode: 0o600})
    renameSync(`${path}.new`, path)
  }

  /** The token exchange a checked request is, when this gateway masks its vendor. */
  exchange(host: string, method: string, target: string): Vendor | undefined {
    const endpoint = tokenEndpoint(host, method, target)
    return endpoint && this.masks(endpoint.vendor) ? endpoint.vendor : undefined
  }

  key(vendor: Vendor): string {
    return this.handed()?.[vendor]?.key ?? ''
  }

  agent(vendor: Vendor): string {
    return this.handed()?.[vendor]?.agent ?? vendor
  }
}

/** What the relay needs of the server: the request as checked, a way upstream, and the two ways back. */
export interface ExchangeIo {
  headers: Array<[string, string]>
  body: AsyncIterable<Buffer | string>
  /** The upstream request with these headers (already resolved and addressed). */
  open: (headers: Record<string, string | string[]>) => Promise<http.ClientRequest>
  reply: (status: number, headers: Record<string, string>, body: Buffer) => void
  refuse: (status: number, why: string) => void
  record: (status: number, bytes: number, rule: string, blocked: boolean) => void
}

const DROPPED = new Set(['content-length', 'accept-encoding', 'transfer-encoding', 'connection', 'keep-alive', 'host', 'te', 'upgrade', 'proxy-connection'])

async function readAll(body: AsyncIterable<Buffer | string>): Promise<Buffer | undefined> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const c of body) {
    const b = typeof c === 'string' ? Buffer.from(c) : c
    size += b.length
    if (size > MAX_EXCHANGE_BYTES) return undefined
    chunks.push(b)
  }
  return Buffer.concat(chunks)
}

function decode(encoding: string | undefined, body: Buffer): Buffer {
  switch ((encoding ?? 'identity').toLowerCase()) {
    case 'gzip':
    case 'x-gzip':
      return zlib.gunzipSync(body)
    case 'deflate':
      return zlib.inflateSync(body)
    case 'br':
      return zlib.brotliDecompressSync(body)
    case 'identity':
    case '':
      return body
    default:
      throw new Error(`content-encoding ${encoding}`)
  }
}

/**
 * Relay one token exchange: the request body with real values in place of
 * the vendor's surrogates, the answer (decoded, identity asked for) with
 * surrogates in place of every token in it. Whatever goes wrong, the agent
 * gets an error, never an answer unmasked.
 */
export async function relayTokenExchange(vendor: Vendor, book: LoginBook, host: string, io: ExchangeIo): Promise<void> {
  const rule = `login exchange with ${vendor}`
  try {
    const body = await readAll(io.body)
    if (!body) return fail(io, 413, `${rule}: request body over ${MAX_EXCHANGE_BYTES} bytes`)
    const swapped = swapRequestBody(vendor, body.toString('utf8'), book.all())
    if (!swapped.ok) return fail(io, 403, swapped.rule)
    const out = Buffer.from(swapped.body, 'utf8')
    const headers: Record<string, string | string[]> = {}
    for (const [k, v] of io.headers) {
      const key = k.toLowerCase()
      if (DROPPED.has(key)) continue
      const had = headers[key]
      headers[key] = had === undefined ? v : Array.isArray(had) ? [...had, v] : [had, v]
    }
    headers.host = host
    headers['accept-encoding'] = 'identity'
    headers['content-length'] = String(out.length)
    const upstream = await io.open(headers)
    const response = await new Promise<http.IncomingMessage>((resolve, reject) => {
      upstream.on('response', resolve)
      upstream.on('error', reject)
      upstream.end(out)
    })
    const raw = await readAll(response)
    if (!raw) return fail(io, 502, `${rule}: answer over ${MAX_EXCHANGE_BYTES} bytes`)
    const status = response.statusCode ?? 502
    const text = decode(response.headers['content-encoding'] as string | undefined, raw).toString('utf8')
    const masked = maskTokenResponse(vendor, status, text, book.logins(vendor), book.key(vendor), book.agent(vendor))
    if (!masked.ok) return fail(io, 502, masked.rule)
    book.record(vendor, masked.minted)
    const back: Record<string, string> = {}
    for (const [k, v] of Object.entries(response.headers)) {
      if (v === undefined || DROPPED.has(k) || k === 'content-encoding') continue
      back[k] = Array.isArray(v) ? v.join(', ') : v
    }
    const reply = Buffer.from(masked.body, 'utf8')
    back['content-length'] = String(reply.length)
    io.reply(status, back, reply)
    const names = [...swapped.swapped, ...masked.minted.map((m) => `${m.name} (new)`)]
    io.record(status, reply.length, names.length ? `${rule}: ${names.join(', ')}` : rule, false)
  } catch (error) {
    fail(io, 502, `${rule}: ${(error as Error).message}`)
  }
}

function fail(io: ExchangeIo, status: number, why: string): void {
  io.refuse(status, why)
  io.record(status, 0, why, true)
}

import {Transform} from 'node:stream'
import type {Admission} from './grants.js'

/**
 * What every protocol module of the gateway shares when it forwards a judged
 * request: the hop-by-hop headers it never passes on, the request target in
 * origin form, and the plain-text refusal it answers with. Pure.
 */

/** Headers that belong to one connection, never forwarded (RFC 9110 7.6.1), plus the proxy ones. */
export const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'proxy-authorization', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'http2-settings'])

/** `http://host/p?q` → `/p?q`: upstream gets origin-form (the gateway is no forward proxy). */
export function originForm(target: string): string {
  if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(target)) return target
  try {
    const u = new URL(target)
    return `${u.pathname}${u.search}`
  } catch {
    return '/'
  }
}

/** Request headers as http.request takes them, less the hop-by-hop ones (but those in `keep`): repeated names as arrays. */
export function headerObject(pairs: Array<[string, string]>, keep: ReadonlySet<string> = new Set()): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {}
  for (const [k, v] of pairs) {
    const key = k.toLowerCase()
    if (HOP_BY_HOP.has(key) && !keep.has(key)) continue
    const had = out[key]
    out[key] = had === undefined ? v : Array.isArray(had) ? [...had, v] : [had, v]
  }
  return out
}

/** Raw response headers less the hop-by-hop ones (the gateway frames the body for the client itself). */
export function filterRaw(raw: string[]): string[] {
  const out: string[] = []
  for (let i = 0; i < raw.length; i += 2) if (!HOP_BY_HOP.has(raw[i].toLowerCase())) out.push(raw[i], raw[i + 1])
  return out
}

/** The text of a refusal: one line naming what was refused and why. */
export const refusalText = (why: string) => `agent-sandbox gateway: ${why}\n`

const REASONS: Record<number, string> = {400: 'Bad Request', 403: 'Forbidden', 421: 'Misdirected Request', 431: 'Request Header Fields Too Large', 502: 'Bad Gateway', 503: 'Service Unavailable'}

/** A whole refusal as raw HTTP/1.1 bytes, closing the connection: for a socket no HTTP server holds any more. */
export function rawRefusal(status: number, why: string): string {
  const body = refusalText(why)
  return `HTTP/1.1 ${status} ${REASONS[status] ?? 'Refused'}\r\nconnection: close\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nx-agent-sandbox: blocked\r\n\r\n${body}`
}

export function errCode(e: unknown): string {
  const err = e as NodeJS.ErrnoException
  return err?.code ?? (err instanceof Error ? err.message : String(e))
}

/** The bytes of a request's head as HTTP/1.1 writes it (request line, fields, blank line): what an upload budget counts first. */
export function requestHeadBytes(method: string, target: string, headers: Array<[string, string]>): number {
  let n = Buffer.byteLength(`${method} ${target} HTTP/1.1\r\n\r\n`)
  for (const [k, v] of headers) n += Buffer.byteLength(k) + Buffer.byteLength(v) + 4
  return n
}

/** A body's length when its head declares it (Content-Length, no Transfer-Encoding); else undefined (counted as it streams). */
export function declaredLength(contentLength: string | string[] | undefined, transferEncoding: string | string[] | undefined): number | undefined {
  if (transferEncoding !== undefined || typeof contentLength !== 'string' || !/^\d+$/.test(contentLength.trim())) return undefined
  return Number(contentLength.trim())
}

/**
 * What the client sends on, counted against its grant's upload budget: each chunk is passed on only
 * if the budget holds it; the first that would cross it is held back and `onSpent` told why (once).
 */
export function uploadMeter(admission: Admission, onSpent: (rule: string) => void): Transform {
  let spent = false
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      if (spent) return done()
      if (admission.charge(chunk.length)) return done(null, chunk)
      spent = true
      onSpent(admission.spentRule(chunk.length))
      done()
    },
  })
}

/**
 * Reads the server name (SNI) and ALPN list from a TLS ClientHello without
 * terminating TLS: the gateway decides where a connection may go from these,
 * never from the address the client dialled. Pure.
 */

export type HelloResult =
  | {state: 'need-more'}
  | {state: 'not-tls'; reason: string}
  | {state: 'done'; sni?: string; alpn: string[]}

/** A ClientHello larger than this is refused (real ones are a few hundred bytes, post-quantum key shares ~2 KB). */
export const MAX_HELLO_BYTES = 64 * 1024

/**
 * Parse the ClientHello at the start of `buf`, which may be spread over several
 * TLS records (a large hello is split). `need-more` until the whole handshake
 * message is in.
 */
export function parseClientHello(buf: Buffer): HelloResult {
  if (buf.length > MAX_HELLO_BYTES) return {state: 'not-tls', reason: 'ClientHello too large'}
  const fragments: Buffer[] = []
  let have = 0
  let offset = 0
  for (;;) {
    if (buf.length - offset < 5) return {state: 'need-more'}
    if (buf[offset] !== 22) return {state: 'not-tls', reason: offset === 0 ? 'not a TLS handshake' : 'ClientHello interrupted by another record'}
    if (buf[offset + 1] !== 3) return {state: 'not-tls', reason: 'unknown TLS record version'}
    const length = buf.readUInt16BE(offset + 3)
    if (buf.length - offset - 5 < length) return {state: 'need-more'}
    fragments.push(buf.subarray(offset + 5, offset + 5 + length))
    have += length
    offset += 5 + length
    if (have < 4) continue
    const hs = fragments.length === 1 ? fragments[0] : Buffer.concat(fragments)
    if (hs[0] !== 1) return {state: 'not-tls', reason: 'first handshake message is not a ClientHello'}
    const bodyLength = hs.readUIntBE(1, 3)
    if (hs.length < 4 + bodyLength) continue
    return parseBody(hs.subarray(4, 4 + bodyLength))
  }
}

function parseBody(body: Buffer): HelloResult {
  const bad = {state: 'not-tls', reason: 'malformed ClientHello'} as const
  let p = 2 + 32 // client version, random
  if (p + 1 > body.length) return bad
  p += 1 + body[p] // session id
  if (p + 2 > body.length) return bad
  p += 2 + body.readUInt16BE(p) // cipher suites
  if (p + 1 > body.length) return bad
  p += 1 + body[p] // compression methods
  if (p === body.length) return {state: 'done', alpn: []} // no extensions at all
  if (p + 2 > body.length) return bad
  const end = p + 2 + body.readUInt16BE(p)
  if (end > body.length) return bad
  p += 2
  let sni: string | undefined
  const alpn: string[] = []
  while (p + 4 <= end) {
    const type = body.readUInt16BE(p)
    const length = body.readUInt16BE(p + 2)
    const data = body.subarray(p + 4, p + 4 + length)
    if (data.length !== length) return bad
    if (type === 0) {
      const name = serverName(data)
      if (name === null) return bad
      sni = name
    } else if (type === 16) {
      let q = 2
      while (q < data.length) {
        const n = data[q]
        alpn.push(data.subarray(q + 1, q + 1 + n).toString('latin1'))
        q += 1 + n
      }
    }
    p += 4 + length
  }
  return {state: 'done', sni, alpn}
}

/** The host_name entry of a server_name extension; undefined if it has none, null if malformed. */
function serverName(data: Buffer): string | undefined | null {
  if (data.length < 2) return null
  const end = 2 + data.readUInt16BE(0)
  if (end > data.length) return null
  let p = 2
  while (p + 3 <= end) {
    const type = data[p]
    const length = data.readUInt16BE(p + 1)
    if (p + 3 + length > end) return null
    if (type === 0) return data.subarray(p + 3, p + 3 + length).toString('latin1')
    p += 3 + length
  }
  return undefined
}

/** A fatal TLS alert (unrecognized_name), so that a refused client says why rather than "connection reset". */
export const ALERT_UNRECOGNIZED_NAME = Buffer.from([21, 3, 1, 0, 2, 2, 112])
/** A fatal TLS alert (access_denied). */
export const ALERT_ACCESS_DENIED = Buffer.from([21, 3, 1, 0, 2, 2, 49])

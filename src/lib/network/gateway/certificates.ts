/**
 * The egress gateway's certificates, written as DER with node's crypto alone
 * (docs/design.md, "The egress gateway"): the CLI makes one CA per sandbox
 * (createCa, on the host), and the gateway, which alone holds that CA's key,
 * issues a leaf per intercepted name (createLeafMinter). Both are one shape
 * each: ECDSA P-256 / SHA-256; the CA with CN and O, a CA for one level
 * (pathLen 0) that signs certificates only; a leaf with CN and one DNS name,
 * serverAuth, not a CA, the CA's key identifier as the authority key
 * identifier. A certificate library (@peculiar/x509 and its ASN.1 schemas)
 * cost the gateway ~14 MiB of resident memory and the CLI ~0.1 s to load for
 * every CA it made (docs/PERFORMANCE.md); node's OpenSSL makes the keys and
 * signatures either way.
 */
import {createHash, createPrivateKey, generateKeyPairSync, randomBytes, sign, X509Certificate, type KeyObject} from 'node:crypto'

export interface CaPair {
  /** The CA certificate (PEM): public, trusted inside the sandbox. */
  cert: string
  /** Its private key (PKCS#8 PEM): the gateway's only. */
  key: string
}

export interface LeafMinter {
  /** A leaf certificate (PEM, followed by the CA's) and key (PEM) for `host`, made once and cached. */
  leaf(host: string): Promise<{cert: string; key: string}>
}

const HOUR = 60 * 60 * 1000
const DAY = 24 * HOUR

// ---- DER, the few types a certificate needs ----
function tlv(tag: number, body: Buffer): Buffer {
  const n = body.length
  const length = n < 0x80 ? Buffer.from([n]) : n < 0x100 ? Buffer.from([0x81, n]) : Buffer.from([0x82, n >> 8, n & 0xff])
  return Buffer.concat([Buffer.from([tag]), length, body])
}
const seq = (...items: Buffer[]) => tlv(0x30, Buffer.concat(items))
const set = (...items: Buffer[]) => tlv(0x31, Buffer.concat(items))
const explicit = (n: number, inner: Buffer) => tlv(0xa0 + n, inner)
const octets = (b: Buffer) => tlv(0x04, b)
const bits = (b: Buffer) => tlv(0x03, Buffer.concat([Buffer.from([0]), b]))
const bool = (v: boolean) => tlv(0x01, Buffer.from([v ? 0xff : 0]))
function integer(b: Buffer): Buffer {
  let i = 0
  while (i < b.length - 1 && b[i] === 0) i++
  const body = b.subarray(i)
  return tlv(0x02, body[0] & 0x80 ? Buffer.concat([Buffer.from([0]), body]) : body)
}
function oid(dotted: string): Buffer {
  const [a, b, ...rest] = dotted.split('.').map(Number)
  const out = [40 * a + b]
  for (const n of rest) {
    const groups = [n & 0x7f]
    for (let v = n >> 7; v > 0; v >>= 7) groups.unshift((v & 0x7f) | 0x80)
    out.push(...groups)
  }
  return tlv(0x06, Buffer.from(out))
}
/** As RFC 5280 asks: UTCTime `YYMMDDHHMMSSZ` for the years 1950-2049, GeneralizedTime `YYYYMMDDHHMMSSZ` from 2050. */
function time(d: Date): Buffer {
  const iso = d.toISOString()
  const rest = `${iso.slice(5, 7)}${iso.slice(8, 10)}${iso.slice(11, 13)}${iso.slice(14, 16)}${iso.slice(17, 19)}Z`
  return d.getUTCFullYear() < 2050 ? tlv(0x17, Buffer.from(`${iso.slice(2, 4)}${rest}`, 'latin1')) : tlv(0x18, Buffer.from(`${iso.slice(0, 4)}${rest}`, 'latin1'))
}
const extension = (id: string, critical: boolean, value: Buffer) => seq(oid(id), ...(critical ? [bool(true)] : []), octets(value))

/** The elements of a DER SEQUENCE (or any constructed value) in `der` at `offset`: [start, end of header, end] of each. */
function children(der: Buffer, offset = 0): Array<{tag: number; start: number; body: number; end: number}> {
  const read = (p: number) => {
    let len = der[p + 1]
    let body = p + 2
    if (len & 0x80) {
      const n = len & 0x7f
      len = 0
      for (let i = 0; i < n; i++) len = len * 256 + der[p + 2 + i]
      body += n
    }
    return {tag: der[p], start: p, body, end: body + len}
  }
  const outer = read(offset)
  const out = []
  for (let p = outer.body; p < outer.end; ) {
    const child = read(p)
    out.push(child)
    p = child.end
  }
  return out
}

const ECDSA_SHA256 = seq(oid('1.2.840.10045.4.3.2'))
const pem = (label: string, der: Buffer) => `-----BEGIN ${label}-----\n${der.toString('base64').replace(/(.{64})/g, '$1\n').replace(/\n$/, '')}\n-----END ${label}-----\n`

/** A key identifier as RFC 5280 4.2.1.2 (1) has it: the SHA-1 of the public key's bits (the BIT STRING of its SubjectPublicKeyInfo). */
function keyIdentifier(spki: Buffer): Buffer {
  const key = children(spki)[1]
  return createHash('sha1').update(spki.subarray(key.body + 1, key.end)).digest()
}

/**
 * A v3 certificate (DER), signed with ECDSA/SHA-256 by `key`: a positive
 * serial of 16 random bytes (RFC 5280: at most 20 octets), the names and the
 * public key as DER, the validity as two dates, and the extensions.
 */
function certificate(c: {issuer: Buffer; subject: Buffer; from: Date; until: Date; spki: Buffer; extensions: Buffer[]}, key: KeyObject): Buffer {
  const tbs = seq(
    explicit(0, integer(Buffer.from([2]))),
    integer(Buffer.concat([Buffer.from([0x40]), randomBytes(15)])),
    ECDSA_SHA256,
    c.issuer,
    seq(time(c.from), time(c.until)),
    c.subject,
    c.spki,
    explicit(3, seq(...c.extensions)),
  )
  return seq(tbs, ECDSA_SHA256, bits(sign('sha256', tbs, key)))
}

/**
 * A new CA for one sandbox: `CN=<commonName>, O=agent-sandbox`, valid from
 * yesterday (clock skew) for ten years, a CA for leaves only (pathLen 0),
 * keyCertSign and cRLSign, with its key identifier. Self-signed.
 */
export function createCa(commonName: string): CaPair {
  const pair = generateKeyPairSync('ec', {namedCurve: 'prime256v1'})
  const spki = pair.publicKey.export({type: 'spki', format: 'der'})
  const name = seq(set(seq(oid('2.5.4.3'), tlv(0x0c, Buffer.from(commonName, 'utf8')))), set(seq(oid('2.5.4.10'), tlv(0x0c, Buffer.from('agent-sandbox', 'utf8')))))
  const now = Date.now()
  const extensions = [
    // cA TRUE, pathLenConstraint 0.
    extension('2.5.29.19', true, seq(bool(true), integer(Buffer.from([0])))),
    // keyCertSign (bit 5) and cRLSign (bit 6): one byte, its last bit unused.
    extension('2.5.29.15', true, tlv(0x03, Buffer.from([1, 0x06]))),
    extension('2.5.29.14', false, octets(keyIdentifier(spki))),
  ]
  const cert = certificate({issuer: name, subject: name, from: new Date(now - DAY), until: new Date(now + 3650 * DAY), spki, extensions}, pair.privateKey)
  return {cert: pem('CERTIFICATE', cert), key: pair.privateKey.export({type: 'pkcs8', format: 'pem'}).toString()}
}

/** The CA's subject (as DER, the leaves' issuer) and key identifier (its SKI extension, else the SHA-1 of its key, as RFC 5280 4.2.1.2 (1)). */
function caParts(caPem: string): {subject: Buffer; keyId: Buffer} {
  const ca = new X509Certificate(caPem)
  const der = ca.raw
  const tbs = children(der)[0]
  const fields = children(der, tbs.start)
  // version [0] is present in every v3 certificate: serial, signature, issuer, validity, subject follow it.
  const first = fields[0].tag === 0xa0 ? 1 : 0
  const subjectField = fields[first + 4]
  const subject = der.subarray(subjectField.start, subjectField.end)
  let keyId: Buffer | undefined
  const exts = fields.find((f) => f.tag === 0xa3)
  if (exts) {
    for (const ext of children(der, children(der, exts.start)[0].start)) {
      const parts = children(der, ext.start)
      if (der.subarray(parts[0].start, parts[0].end).equals(oid('2.5.29.14'))) {
        // OCTET STRING { OCTET STRING keyId }
        const inner = children(der, parts[parts.length - 1].start)[0]
        keyId = der.subarray(inner.body, inner.end)
      }
    }
  }
  keyId ??= keyIdentifier(ca.publicKey.export({type: 'spki', format: 'der'}))
  return {subject, keyId}
}

/** The gateway's minter: one leaf key for every name (as mitmproxy does), one certificate per name. */
export function createLeafMinter(ca: CaPair): LeafMinter {
  const caKey = createPrivateKey(ca.key)
  const {subject: issuer, keyId} = caParts(ca.cert)
  const pair = generateKeyPairSync('ec', {namedCurve: 'prime256v1'})
  const spki = pair.publicKey.export({type: 'spki', format: 'der'})
  const leafKey = pair.privateKey.export({type: 'pkcs8', format: 'pem'}).toString()
  const cache = new Map<string, {cert: string; key: string}>()
  const mint = (host: string) => {
    const now = Date.now()
    const extensions = [
      extension('2.5.29.19', true, seq()),
      // digitalSignature only: bit 0 of a one-byte string with 7 unused bits.
      extension('2.5.29.15', true, tlv(0x03, Buffer.from([7, 0x80]))),
      extension('2.5.29.37', false, seq(oid('1.3.6.1.5.5.7.3.1'))),
      extension('2.5.29.17', false, seq(tlv(0x82, Buffer.from(host, 'latin1')))),
      extension('2.5.29.35', false, seq(tlv(0x80, keyId))),
    ]
    const subject = seq(set(seq(oid('2.5.4.3'), tlv(0x0c, Buffer.from(host, 'utf8')))))
    // Short-lived (clients cap leaf validity), backdated an hour for clock skew.
    const cert = certificate({issuer, subject, from: new Date(now - HOUR), until: new Date(now + 30 * DAY), spki, extensions}, caKey)
    return {cert: `${pem('CERTIFICATE', cert)}\n${ca.cert}`, key: leafKey}
  }
  return {
    leaf(host) {
      let made = cache.get(host)
      if (!made) {
        made = mint(host)
        cache.set(host, made)
      }
      return Promise.resolve(made)
    },
  }
}

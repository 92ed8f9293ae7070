/**
 * The gateway's certificates, with @peculiar/x509 over node's WebCrypto
 * (docs/design.md, "The egress gateway": why this library). The CLI makes one
 * CA per sandbox on the host (createCa); the gateway alone holds its key and
 * mints a leaf certificate per intercepted name (mintLeaf). ECDSA P-256:
 * fast to make and to sign, and every TLS client in the image accepts it.
 */
// tsyringe (under @peculiar/x509) needs the Reflect metadata polyfill loaded first.
import 'reflect-metadata'
import {webcrypto} from 'node:crypto'
import * as x509 from '@peculiar/x509'

const subtle = webcrypto.subtle
const ALG = {name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256'}
const DAY = 24 * 60 * 60 * 1000
x509.cryptoProvider.set(webcrypto)

export interface CaPair {
  /** The CA certificate (PEM): public, trusted inside the sandbox. */
  cert: string
  /** Its private key (PKCS#8 PEM): the gateway's only. */
  key: string
}

function pem(label: string, der: ArrayBuffer): string {
  const body = Buffer.from(der).toString('base64').replace(/(.{64})/g, '$1\n').replace(/\n$/, '')
  return `-----BEGIN ${label}-----\n${body}\n-----END ${label}-----\n`
}

function der(text: string): Buffer {
  return Buffer.from(text.replace(/-----[^-]+-----/g, '').replace(/\s+/g, ''), 'base64')
}

/** A new CA for one sandbox: valid from yesterday (clock skew) for ten years, certificate signing only. */
export async function createCa(commonName: string): Promise<CaPair> {
  const keys = (await subtle.generateKey(ALG, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    name: `CN=${commonName.replace(/[,+="\\<>;]/g, '-')}, O=agent-sandbox`,
    notBefore: new Date(Date.now() - DAY),
    notAfter: new Date(Date.now() + 3650 * DAY),
    keys,
    signingAlgorithm: ALG,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  })
  return {cert: cert.toString('pem'), key: pem('PRIVATE KEY', await subtle.exportKey('pkcs8', keys.privateKey))}
}

export interface Minter {
  /** A leaf certificate and key (PEM) for `host`, made once and cached. */
  leaf(host: string): Promise<{cert: string; key: string}>
}

/** The gateway's minter: one leaf key for every name (as mitmproxy does), one certificate per name. */
export async function createMinter(ca: CaPair): Promise<Minter> {
  const caCert = new x509.X509Certificate(ca.cert)
  const caKey = await subtle.importKey('pkcs8', der(ca.key), ALG, false, ['sign'])
  const keys = (await subtle.generateKey(ALG, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair
  const leafKey = pem('PRIVATE KEY', await subtle.exportKey('pkcs8', keys.privateKey))
  const authority = await x509.AuthorityKeyIdentifierExtension.create(caCert.publicKey)
  const cache = new Map<string, Promise<{cert: string; key: string}>>()
  const mint = async (host: string) => {
    const cert = await x509.X509CertificateGenerator.create({
      subject: `CN=${host}`,
      issuer: caCert.subject,
      // Short-lived (browsers and clients cap leaf validity), backdated an hour for clock skew.
      notBefore: new Date(Date.now() - 60 * 60 * 1000),
      notAfter: new Date(Date.now() + 30 * DAY),
      publicKey: keys.publicKey,
      signingKey: caKey,
      signingAlgorithm: ALG,
      extensions: [
        new x509.BasicConstraintsExtension(false, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
        new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
        new x509.SubjectAlternativeNameExtension([{type: 'dns', value: host}]),
        authority,
      ],
    })
    return {cert: `${cert.toString('pem')}\n${ca.cert}`, key: leafKey}
  }
  return {
    leaf(host) {
      let made = cache.get(host)
      if (!made) {
        made = mint(host)
        made.catch(() => cache.delete(host))
        cache.set(host, made)
      }
      return made
    },
  }
}

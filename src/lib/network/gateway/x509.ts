/**
 * The per-sandbox CA, with @peculiar/x509 over node's WebCrypto (docs/design.md,
 * "The egress gateway": why this library). The CLI makes one CA per sandbox on
 * the host (createCa); the gateway alone holds its key and mints a leaf
 * certificate per intercepted name (leaf.ts, without this library). ECDSA
 * P-256: fast to make and to sign, and every TLS client in the image accepts it.
 */
// tsyringe (under @peculiar/x509) needs the Reflect metadata polyfill loaded first.
import 'reflect-metadata'
import {webcrypto} from 'node:crypto'
import * as x509 from '@peculiar/x509'

const subtle = webcrypto.subtle
const ALG = {name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256'}
const DAY = 24 * 60 * 60 * 1000
x509.cryptoProvider.set(webcrypto)

import type {CaPair} from './leaf.js'

export type {CaPair}

function pem(label: string, der: ArrayBuffer): string {
  const body = Buffer.from(der).toString('base64').replace(/(.{64})/g, '$1\n').replace(/\n$/, '')
  return `-----BEGIN ${label}-----\n${body}\n-----END ${label}-----\n`
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

/**
 * The per-sandbox CA of the egress gateway, kept on the host (docs/design.md,
 * "The egress gateway"): `<state>/agent-sandbox/gateway-ca/<container>/`
 * (0700) holds `ca.pem` and `ca.key` (0600). Made once per sandbox, at its
 * first start, so the certificate the sandbox trusts stays the same across
 * starts (and the spec with it); `rm` removes it. The key goes to the gateway
 * container only, over an exec's stdin (sandbox/gateway-container.ts). The rules `firewall allow`
 * adds live are kept beside them (gateway-live-rules.ts).
 */
import {chmodSync, mkdirSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {homedir} from 'node:os'
import {join} from 'node:path'
import {createCa, type CaPair} from './gateway/certificates.js'

export function gatewayCaDir(container: string, env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_STATE_HOME || join(env.HOME || homedir(), '.local', 'state')
  return join(base, 'agent-sandbox', 'gateway-ca', container)
}

/** The sandbox's CA, made when it has none yet. */
export function ensureGatewayCa(container: string, env: NodeJS.ProcessEnv = process.env): CaPair {
  const dir = gatewayCaDir(container, env)
  try {
    return {cert: readFileSync(join(dir, 'ca.pem'), 'utf8'), key: readFileSync(join(dir, 'ca.key'), 'utf8')}
  } catch {
    // none yet (or half-written): make a new one
  }
  const ca = createCa(`agent-sandbox ${container}`)
  mkdirSync(dir, {recursive: true, mode: 0o700})
  chmodSync(dir, 0o700)
  // The key first and the certificate last: a certificate on disk means a complete pair.
  writeFileSync(join(dir, 'ca.key'), ca.key, {mode: 0o600})
  writeFileSync(join(dir, 'ca.pem'), ca.cert, {mode: 0o644})
  return ca
}

/** A CA for a one-shot run's gateway: in memory only, gone with the run. */
export function ephemeralGatewayCa(container: string): CaPair {
  return createCa(`agent-sandbox ${container}`)
}

export function removeGatewayCa(container: string, env: NodeJS.ProcessEnv = process.env): void {
  rmSync(gatewayCaDir(container, env), {recursive: true, force: true})
}

/** The certificate as one line (base64 DER) for the sandbox's environment; the entrypoint writes it back as PEM. */
export function caCertLine(cert: string): string {
  return cert.replace(/-----[^-]+-----/g, '').replace(/\s+/g, '')
}

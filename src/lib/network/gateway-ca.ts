/**
 * The per-sandbox CA of the egress gateway, kept on the host (docs/design.md,
 * "The egress gateway"): `<state>/agent-sandbox/gateway-ca/<container>/`
 * (0700) holds `ca.pem` and `ca.key` (0600). Made once per sandbox, at its
 * first start, so the certificate the sandbox trusts stays the same across
 * starts (and the spec with it); `rm` removes it. The key goes to the gateway
 * container only, over an exec's stdin (lifecycle.ts). `live-rules.json` beside
 * them keeps the httpRules `firewall allow` added live, so that a gateway made
 * anew gets them again while the sandbox has not restarted.
 */
import {chmodSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync} from 'node:fs'
import {homedir} from 'node:os'
import {join} from 'node:path'
import {createCa, type CaPair} from './gateway/certificates.js'
import {parseRuleLines, type HttpRule} from './gateway/rules.js'

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

/** Live rules are kept per start of the sandbox: they last until it restarts, as live allowlist additions do. */
interface LiveRules {
  startedAt: string
  rules: HttpRule[]
}

function liveRulesFile(container: string, env: NodeJS.ProcessEnv): string {
  return join(gatewayCaDir(container, env), 'live-rules.json')
}

/** The rules added live since the sandbox started at `startedAt` (none after a restart). */
export function liveRules(container: string, startedAt: string, env: NodeJS.ProcessEnv = process.env): HttpRule[] {
  try {
    const saved = JSON.parse(readFileSync(liveRulesFile(container, env), 'utf8')) as LiveRules
    return saved.startedAt === startedAt ? parseRuleLines(saved.rules.map((r) => JSON.stringify(r)).join('\n')) : []
  } catch {
    return []
  }
}

export function recordLiveRule(container: string, startedAt: string, rule: HttpRule, env: NodeJS.ProcessEnv = process.env): void {
  const dir = gatewayCaDir(container, env)
  mkdirSync(dir, {recursive: true, mode: 0o700})
  const saved: LiveRules = {startedAt, rules: [...liveRules(container, startedAt, env), rule]}
  const tmp = `${liveRulesFile(container, env)}.${process.pid}.tmp`
  writeFileSync(tmp, `${JSON.stringify(saved)}\n`, {mode: 0o600})
  renameSync(tmp, liveRulesFile(container, env))
}

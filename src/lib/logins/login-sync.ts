/**
 * The agents' logins between the host's store (login-store.ts) and a
 * sandbox's egress gateway: what the gateway is handed at its start, and the
 * tokens it minted since (a refresh, a login inside), read back over an exec
 * (`egress-gateway --logins`) before the gateway goes (`stop`, `rm`).
 */
import {readdirSync} from 'node:fs'
import type {Engine} from '../engine/index.js'
import {Names, type Workspace} from '../workspace.js'
import type {GatewayLogins, Vendor} from '../network/gateway/agent-logins.js'
import {gatewayCommand} from '../network/gateway/ports.js'
import type {MintedLogins} from '../network/gateway/login-exchange.js'
import {loginStoreDir, readLoginStore, storeLogins} from './login-store.js'

/** What a sandbox's gateway is handed: the stores of its two config volumes (a vendor without one is not masked). */
export function gatewayLogins(ws: Workspace, shared: boolean, env: NodeJS.ProcessEnv = process.env): GatewayLogins | undefined {
  const out: GatewayLogins = {}
  const volumes: Array<{vendor: Vendor; agent: string; volume: string}> = [
    {vendor: 'anthropic', agent: 'claude', volume: Names.claudeVolume(ws, shared)},
    {vendor: 'openai', agent: 'codex', volume: Names.codexVolume(ws, shared)},
  ]
  for (const {vendor, agent, volume} of volumes) {
    const bundle = readLoginStore(volume, env)
    if (bundle) out[vendor] = {...bundle, agent, volume}
  }
  return Object.keys(out).length ? out : undefined
}

/** Whether any login is stored on this host (else there is nothing to read back, and no exec is spent on it). */
export function anyLoginStored(env: NodeJS.ProcessEnv = process.env): boolean {
  try {
    return readdirSync(loginStoreDir(env)).some((f) => f.endsWith('.json'))
  } catch {
    return false
  }
}

/**
 * Read the tokens a running gateway minted into the host's store. Returns how
 * many; 0 when the gateway does not run or has none.
 */
export async function pullGatewayLogins(engine: Engine, gateway: string, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  if (!anyLoginStored(env)) return 0
  const r = await engine.containers.exec(gateway, gatewayCommand(['--logins'])).catch(() => undefined)
  if (!r || r.exitCode !== 0) return 0
  let minted: MintedLogins
  try {
    minted = JSON.parse(r.stdout) as MintedLogins
  } catch {
    return 0
  }
  let count = 0
  for (const entry of Object.values(minted)) {
    const had = entry?.volume ? readLoginStore(entry.volume, env) : undefined
    if (!entry || !had || !entry.logins.length) continue
    storeLogins(entry.volume, had.key, entry.logins, env)
    count += entry.logins.length
  }
  return count
}

/**
 * The host's store of the agents' real logins (docs/agents.md, "Logins"): one
 * file per config volume, 0600 in a 0700 directory of the CLI's state
 * directory (beside the gateways' CAs). The volume holds surrogates; this file
 * holds what they stand for and the volume's surrogate key, and goes to the
 * gateway of every sandbox that mounts the volume. Tokens a gateway got from a
 * refresh come back here (pullGatewayLogins), so they outlive the gateway.
 */
import {randomBytes} from 'node:crypto'
import {mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync} from 'node:fs'
import {homedir} from 'node:os'
import {join} from 'node:path'
import {addMinted, type AgentLogin, type LoginBundle} from '../network/gateway/agent-logins.js'

/** The directory of the login stores: `$XDG_STATE_HOME/agent-sandbox/logins`. */
export function loginStoreDir(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_STATE_HOME || join(env.HOME || homedir(), '.local', 'state')
  return join(base, 'agent-sandbox', 'logins')
}

function storePath(volume: string, env: NodeJS.ProcessEnv): string {
  if (!/^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(volume)) throw new Error(`not a volume name: ${volume}`)
  return join(loginStoreDir(env), `${volume}.json`)
}

/** The volume's logins, or undefined when none were imported masked. */
export function readLoginStore(volume: string, env: NodeJS.ProcessEnv = process.env): LoginBundle | undefined {
  try {
    const parsed = JSON.parse(readFileSync(storePath(volume, env), 'utf8')) as LoginBundle
    return typeof parsed.key === 'string' && Array.isArray(parsed.logins) ? parsed : undefined
  } catch {
    return undefined
  }
}

/** Written whole and renamed into place, 0600 in a 0700 directory. */
export function writeLoginStore(volume: string, bundle: LoginBundle, env: NodeJS.ProcessEnv = process.env): void {
  const dir = loginStoreDir(env)
  mkdirSync(dir, {recursive: true, mode: 0o700})
  const path = storePath(volume, env)
  const tmp = `${path}.${process.pid}.new`
  writeFileSync(tmp, `${JSON.stringify(bundle)}\n`, {mode: 0o600})
  renameSync(tmp, path)
}

/** The volume's surrogate key: the stored one, else a new one (not yet written). */
export function loginKey(volume: string, env: NodeJS.ProcessEnv = process.env): string {
  return readLoginStore(volume, env)?.key ?? randomBytes(32).toString('hex')
}

/** Add logins (an import, or tokens a gateway minted) in front of the stored ones. Returns the bundle written. */
export function storeLogins(volume: string, key: string, logins: readonly AgentLogin[], env: NodeJS.ProcessEnv = process.env): LoginBundle {
  const had = readLoginStore(volume, env)
  const bundle = {key, logins: addMinted(had && had.key === key ? had.logins : [], logins)}
  writeLoginStore(volume, bundle, env)
  return bundle
}

export function removeLoginStore(volume: string, env: NodeJS.ProcessEnv = process.env): void {
  rmSync(storePath(volume, env), {force: true})
}

/** Every stored login on this host, of every volume: what doctor looks for (by hash) in a sandbox. */
export function allStoredLogins(env: NodeJS.ProcessEnv = process.env): AgentLogin[] {
  let files: string[]
  try {
    files = readdirSync(loginStoreDir(env)).filter((f) => f.endsWith('.json'))
  } catch {
    return []
  }
  return files.flatMap((f) => readLoginStore(f.slice(0, -'.json'.length), env)?.logins ?? [])
}

/**
 * The host's record of approved workspaces: per workspace real path, the
 * SHA-256 of every file in .agent-sandbox/ the user approved. Kept in
 * $XDG_STATE_HOME/agent-sandbox/trust.json (default ~/.local/state/…), 0600 in
 * a 0700 directory, replaced atomically.
 */
import {chmodSync, closeSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, unlinkSync, writeSync} from 'node:fs'
import {homedir} from 'node:os'
import {dirname, join} from 'node:path'
import {ConfigError} from '../errors.js'

export interface TrustRecord {
  /** SHA-256 of each file in .agent-sandbox/, by path relative to it. */
  files: Record<string, string>
  approvedAt: string
  /** Who approved: the user (`trust`) or `init`, which wrote the files. */
  by: 'trust' | 'init'
  /** The approved Dockerfile's text, for the diff the next review shows. */
  dockerfile?: string
}

export interface TrustStore {
  version: 1
  workspaces: Record<string, TrustRecord>
}

export function trustStorePath(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_STATE_HOME || join(env.HOME || homedir(), '.local', 'state')
  return join(base, 'agent-sandbox', 'trust.json')
}

export function readTrustStore(env: NodeJS.ProcessEnv = process.env): TrustStore {
  const path = trustStorePath(env)
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return {version: 1, workspaces: {}}
    throw new ConfigError(`cannot read ${path}: ${(error as Error).message}`, {cause: error})
  }
  try {
    const parsed = JSON.parse(text) as TrustStore
    if (parsed?.version !== 1 || typeof parsed.workspaces !== 'object' || parsed.workspaces === null) throw new Error('not a version 1 trust store')
    return parsed
  } catch (error) {
    throw new ConfigError(`${path}: ${(error as Error).message}`, {cause: error, hint: `remove it and approve your workspaces again with agent-sandbox trust`})
  }
}

/** Replace the store atomically: a 0600 temp file in the same 0700 directory, synced, then renamed over. */
export function writeTrustStore(store: TrustStore, env: NodeJS.ProcessEnv = process.env): string {
  const path = trustStorePath(env)
  const dir = dirname(path)
  mkdirSync(dir, {recursive: true, mode: 0o700})
  chmodSync(dir, 0o700)
  const tmp = join(dir, `.trust.json.${process.pid}.${Date.now()}.${Math.random().toString(36).slice(2)}.tmp`)
  try {
    const fd = openSync(tmp, 'wx', 0o600)
    try {
      writeSync(fd, `${JSON.stringify(store, null, 2)}\n`)
      fsyncSync(fd)
    } finally {
      closeSync(fd)
    }
    renameSync(tmp, path)
  } catch (error) {
    try {
      unlinkSync(tmp)
    } catch {
      // nothing to remove
    }
    throw new ConfigError(`cannot write ${path}: ${(error as Error).message}`, {cause: error})
  }
  return path
}

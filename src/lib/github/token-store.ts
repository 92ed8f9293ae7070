/**
 * Where a sandbox's GitHub App token lives on the host, and how it is written.
 *
 *   <runtime>/agent-sandbox/<container>/            0700  token (0600), app.json, status.json, refresher.pid, refresher.log
 *   <runtime>/agent-sandbox/<container>/secrets/    0700  ghapp_token (0600), bind-mounted read-only at /run/secrets
 *
 * `token` is the real installation token: it stays on the host, and the
 * sandbox's egress gateway gets it over an exec's stdin (gateway-container.ts,
 * refresher.ts). `ghapp_token`, the only file the sandbox sees, holds a
 * surrogate of the same shape, the same across renewals, which the gateway
 * swaps for the token in requests to the GitHub hosts (docs/design.md).
 *
 * <runtime> is $XDG_RUNTIME_DIR, or ~/.cache/agent-sandbox/run (0700) when it
 * is unset. The directory, not the file, is mounted: a file bind mount pins the
 * inode, so a token replaced by rename would never be seen inside. Every write
 * is a temp file in the same directory plus rename, so a reader sees the old
 * token or the new one, never a partial one.
 */
import {randomBytes} from 'node:crypto'
import {closeSync, fchownSync, fsyncSync, lstatSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, chmodSync, unlinkSync, writeSync, constants} from 'node:fs'
import {homedir} from 'node:os'
import {basename, dirname, isAbsolute, join} from 'node:path'
import {SandboxError} from '../errors.js'
import type {AppConfig} from './app.js'
import {makeSurrogate, sameShape} from '../network/gateway/secrets.js'

export const TOKEN_FILE = 'ghapp_token'
/** Inside the container. */
export const CONTAINER_SECRETS_DIR = '/run/secrets'
export const CONTAINER_TOKEN_PATH = `${CONTAINER_SECRETS_DIR}/${TOKEN_FILE}`

export interface Owner {
  uid: number
  gid: number
}

/** What `start` leaves in app.json for the refresher (no secrets: a key path, not the key). */
export interface AppRecord {
  config: AppConfig
  owner: Owner
  workspace: string
}

export interface TokenPaths {
  /** Per-container directory (host only, never mounted). */
  dir: string
  /** Mounted read-only at /run/secrets; holds only the surrogate. */
  secretsDir: string
  /** The surrogate the sandbox reads (ghapp_token in secretsDir). */
  token: string
  /** The real token: host only, never mounted. */
  real: string
  status: string
  app: string
  pid: string
  log: string
}

/** `$XDG_RUNTIME_DIR/agent-sandbox`, else `~/.cache/agent-sandbox/run` (XDG_CACHE_HOME honoured). */
export function runtimeBase(env: NodeJS.ProcessEnv = process.env): string {
  const xdg = env.XDG_RUNTIME_DIR
  if (xdg && isAbsolute(xdg)) return join(xdg, 'agent-sandbox')
  const cache = env.XDG_CACHE_HOME && isAbsolute(env.XDG_CACHE_HOME) ? env.XDG_CACHE_HOME : join(env.HOME || homedir(), '.cache')
  return join(cache, 'agent-sandbox', 'run')
}

export function tokenPaths(container: string, env: NodeJS.ProcessEnv = process.env): TokenPaths {
  if (!/^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(container)) throw new SandboxError(`not a container name: ${JSON.stringify(container)}`)
  const dir = join(runtimeBase(env), container)
  const secretsDir = join(dir, 'secrets')
  return {
    dir,
    secretsDir,
    token: join(secretsDir, TOKEN_FILE),
    real: join(dir, 'token'),
    status: join(dir, 'status.json'),
    app: join(dir, 'app.json'),
    pid: join(dir, 'refresher.pid'),
    log: join(dir, 'refresher.log'),
  }
}

export function daemonPidPath(env: NodeJS.ProcessEnv = process.env): string {
  return join(runtimeBase(env), 'daemon.pid')
}

const isRoot = () => process.getuid?.() === 0

/**
 * mkdir -p with mode 0700 for every directory we create, then make sure `path`
 * itself is a real directory (not a link), mode 0700, owned by `owner` when we
 * can give it away (root only).
 */
export function ensurePrivateDir(path: string, owner?: Owner): void {
  const missing: string[] = []
  for (let p = path; ; p = dirname(p)) {
    try {
      lstatSync(p)
      break
    } catch {
      missing.unshift(p)
      if (dirname(p) === p) break
    }
  }
  for (const p of missing) mkdirSync(p, {mode: 0o700})
  const stats = lstatSync(path)
  if (!stats.isDirectory()) {
    throw new SandboxError(`${path} is not a directory (a symbolic link?)`, {hint: 'remove it; agent-sandbox re-creates it with mode 0700'})
  }
  chmodSync(path, 0o700)
  if (owner && isRoot() && stats.uid !== owner.uid) fchownPath(path, owner)
}

function fchownPath(path: string, owner: Owner): void {
  const fd = openSync(path, constants.O_RDONLY)
  try {
    fchownSync(fd, owner.uid, owner.gid)
  } finally {
    closeSync(fd)
  }
}

/** Write `content` to `path` atomically: a new 0600 temp file in the same directory, fsync, rename. */
export function writeFileAtomic(path: string, content: string, owner?: Owner): void {
  const temp = join(dirname(path), `.${basename(path)}.tmp-${process.pid}-${randomBytes(6).toString('hex')}`)
  const fd = openSync(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | (constants.O_NOFOLLOW ?? 0), 0o600)
  try {
    if (owner && isRoot()) fchownSync(fd, owner.uid, owner.gid)
    writeSync(fd, content)
    fsyncSync(fd)
  } catch (error) {
    closeSync(fd)
    unlinkSync(temp)
    throw error
  }
  closeSync(fd)
  try {
    renameSync(temp, path)
  } catch (error) {
    rmSync(temp, {force: true})
    throw error
  }
}

/**
 * Store a new token: the real one in the host-only file, and in the sandbox's
 * file a surrogate of its shape, kept as it is when it fits (so it stays the
 * same across renewals), else a new random one (unique per sandbox).
 * Returns the surrogate.
 */
export function writeToken(paths: TokenPaths, token: string, owner?: Owner): string {
  ensurePrivateDir(paths.dir)
  ensurePrivateDir(paths.secretsDir, owner)
  // Only a surrogate this scheme wrote (beside a host-only token) is kept: an older
  // agent-sandbox put the real token in this file.
  const previous = readToken(paths)
  writeFileAtomic(paths.real, `${token}\n`)
  const kept = previous === undefined ? undefined : readSurrogate(paths)
  if (kept && kept !== previous && kept !== token && sameShape(kept, token)) return kept
  const surrogate = makeSurrogate('github-app', token, randomBytes(32).toString('hex'))
  writeFileAtomic(paths.token, `${surrogate}\n`, owner)
  return surrogate
}

function readLine(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8').trim() || undefined
  } catch {
    return undefined
  }
}

/** The real token (host only). */
export function readToken(paths: TokenPaths): string | undefined {
  return readLine(paths.real)
}

/** The surrogate the sandbox sees. */
export function readSurrogate(paths: TokenPaths): string | undefined {
  return readLine(paths.token)
}

/** What the refresher last did, next to the token (never the token itself). */
export interface TokenStatus {
  /** When the last token was minted (ISO). */
  lastSuccess?: string
  /** When the current token expires (ISO). */
  expiresAt?: string
  /** The last failure's one-line message, cleared by the next success. */
  lastError?: string
  lastErrorAt?: string
  /** Failures in a row. */
  failures: number
  /** When the refresher will try next (ISO). */
  nextAttemptAt?: string
}

export function readTokenStatus(paths: TokenPaths): TokenStatus | undefined {
  try {
    const value = JSON.parse(readFileSync(paths.status, 'utf8')) as TokenStatus
    return typeof value === 'object' && value ? {...value, failures: Number(value.failures) || 0} : undefined
  } catch {
    return undefined
  }
}

export function writeStatus(paths: TokenPaths, status: TokenStatus): void {
  ensurePrivateDir(paths.dir)
  writeFileAtomic(paths.status, `${JSON.stringify(status, null, 2)}\n`)
}

export function writeJson(path: string, value: unknown): void {
  ensurePrivateDir(dirname(path))
  writeFileAtomic(path, `${JSON.stringify(value, null, 2)}\n`)
}

export function readJson<T>(path: string): T | undefined {
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as T
  } catch {
    return undefined
  }
}

export function readPid(path: string): number | undefined {
  try {
    const pid = Number(readFileSync(path, 'utf8').trim())
    return Number.isInteger(pid) && pid > 0 ? pid : undefined
  } catch {
    return undefined
  }
}

/**
 * A live process that is one of ours: on Linux its command line must mention
 * `token-daemon`, so a stale pid reused by an unrelated process is not "alive".
 */
export function refresherAlive(pid: number | undefined): boolean {
  if (!pid) return false
  try {
    process.kill(pid, 0)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return false
  }
  try {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8')
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    if (/\) Z /.test(stat)) return false
    return cmdline.includes('token-daemon')
  } catch {
    return process.platform !== 'linux'
  }
}

/** Remove the whole per-container directory (token, status, logs). */
export function removeTokenDir(paths: TokenPaths): void {
  rmSync(paths.dir, {recursive: true, force: true})
}

/** One line for `list`: how the token of a sandbox is doing. */
export function formatGithubState(status: TokenStatus | undefined, refresher: 'daemon' | 'refresher' | 'none', running: boolean, now: number): string {
  if (!status?.expiresAt) return status?.lastError ? `error: ${status.lastError}` : 'no token'
  const left = Date.parse(status.expiresAt) - now
  const expiry = left > 0 ? `expires in ${humanDuration(left)}` : 'EXPIRED'
  if (!running) return `stopped (token ${expiry.toLowerCase()})`
  if (status.lastError) return `error: ${status.lastError} (${status.failures}x; token ${expiry.toLowerCase()})`
  if (refresher === 'none') return `no refresher (token ${expiry.toLowerCase()})`
  return left > 0 ? `ok (${expiry})` : 'EXPIRED'
}

export function humanDuration(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000))
  if (s < 60) return `${s}s`
  const m = Math.floor(s / 60)
  if (m < 60) return `${m}m`
  return `${Math.floor(m / 60)}h${String(m % 60).padStart(2, '0')}m`
}

/**
 * Keeping installation tokens fresh. One loop serves both forms:
 *  - `agent-sandbox token-daemon`: every running sandbox labelled
 *    dev.agent-sandbox.ghapp=1 (skipping those with their own refresher);
 *  - the per-sandbox refresher `start` launches (detached, `token-daemon
 *    --container NAME`) when no daemon runs; it exits once its container is
 *    gone or stopped.
 * A token is renewed `refreshMarginSeconds` before it expires. A failure is
 * recorded in status.json and retried with backoff; the last token stays in
 * place until a new one replaces it. A new token goes to the host's file and
 * to the sandbox's egress gateway (the only place inside that holds it); the
 * sandbox's surrogate stays as it is.
 */
import {closeSync, existsSync, openSync, rmSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import type {Engine} from '../engine/index.js'
import {SandboxError} from '../errors.js'
import {Labels, Names} from '../workspace.js'
import {gatewayCommand} from '../network/gateway/ports.js'
import {GHAPP_SECRET} from './plan.js'
import {describeMintFailure, GithubAppError, mintInstallationToken, type TokenMinter} from './app.js'
import {
  daemonPidPath,
  ensurePrivateDir,
  formatGithubState,
  readJson,
  readPid,
  readTokenStatus,
  refresherAlive,
  removeTokenDir,
  tokenPaths,
  writeJson,
  writeStatus,
  writeToken,
  type TokenPaths,
  type TokenStatus,
  type AppRecord,
} from './token-store.js'

export interface Target {
  name: string
  paths: TokenPaths
  record: AppRecord
}

const BACKOFF_BASE_MS = 2000
const BACKOFF_MAX_MS = 60_000

/** Retry delay after `failures` failures in a row: 2 s, 4 s, 8 s … capped at 60 s. */
export function backoffMs(failures: number, base = BACKOFF_BASE_MS, max = BACKOFF_MAX_MS): number {
  if (failures <= 0) return 0
  return Math.min(max, base * 2 ** Math.min(failures - 1, 20))
}

/**
 * When to renew a token that was minted at `mintedAt` and expires at
 * `expiresAt`: `margin` before expiry, but never in the first half of the
 * token's life (a margin longer than the lifetime would mint in a loop).
 */
export function refreshDueAt(mintedAt: number, expiresAt: number, marginSeconds: number): number {
  return Math.max(expiresAt - marginSeconds * 1000, mintedAt + (expiresAt - mintedAt) / 2)
}

/** How often the loop wakes: often enough for the margin, at most every 10 s. */
export function pollIntervalMs(marginSeconds: number): number {
  return Math.min(10_000, Math.max(1000, Math.floor((marginSeconds * 1000) / 5)))
}

/** The next time a target needs work, from its status (a missing token: now). */
export function nextAttemptAt(status: TokenStatus | undefined, marginSeconds: number): number {
  if (!status?.expiresAt || !status.lastSuccess) {
    return status?.nextAttemptAt ? Date.parse(status.nextAttemptAt) : 0
  }
  const due = refreshDueAt(Date.parse(status.lastSuccess), Date.parse(status.expiresAt), marginSeconds)
  if (status.failures > 0 && status.nextAttemptAt) return Math.max(due, Date.parse(status.nextAttemptAt))
  return due
}

export interface RefreshDeps {
  mint?: TokenMinter
  now?: () => number
  log?: (line: string) => void
  /** Hand a new token to the sandbox's gateway (deliverToGateway); a failure counts as a failed refresh. */
  deliver?: (name: string, token: string) => Promise<void>
}

/** Put a renewed token in place in a running sandbox's egress gateway: its tmpfs, over an exec's stdin (gateway.ts --secret). */
export async function deliverToGateway(engine: Engine, sandbox: string, token: string): Promise<void> {
  const gateway = Names.gateway(sandbox)
  const r = await engine.containers.exec(gateway, gatewayCommand(['--secret', GHAPP_SECRET]), {stdin: token})
  if (r.exitCode !== 0) {
    const why = r.stderr.trim().split('\n').pop()?.replace(/^egress-gateway: /, '') || `exit ${r.exitCode}`
    throw new GithubAppError(`cannot hand the new token to the egress gateway ${gateway}: ${why}`, {hint: `restart the sandbox: agent-sandbox start`})
  }
}

/**
 * Mint a token for `target` and write it (atomically) with its status. On
 * failure the status records the error and the next try; the token file is
 * left alone. Returns the error message, or undefined on success.
 */
export async function refreshTarget(target: Target, deps: RefreshDeps = {}): Promise<string | undefined> {
  const mint = deps.mint ?? mintInstallationToken
  const now = deps.now ?? Date.now
  const previous = readTokenStatus(target.paths) ?? {failures: 0}
  try {
    const minted = await mint(target.record.config)
    // Removed (agent-sandbox rm) while we were asking: do not bring the directory back.
    if (!existsSync(target.paths.app)) return undefined
    writeToken(target.paths, minted.token, target.record.owner)
    await deps.deliver?.(target.name, minted.token)
    writeStatus(target.paths, {lastSuccess: new Date(now()).toISOString(), expiresAt: minted.expiresAt, failures: 0})
    deps.log?.(`${target.name}: new token, expires ${minted.expiresAt}`)
    return undefined
  } catch (error) {
    const message = error instanceof SandboxError ? error.message : describeMintFailure(error, target.record.config)
    if (!existsSync(target.paths.app)) return undefined
    const failures = previous.failures + 1
    const status: TokenStatus = {
      ...previous,
      lastError: message.replace(/^cannot get a GitHub App installation token: /, ''),
      lastErrorAt: new Date(now()).toISOString(),
      failures,
      nextAttemptAt: new Date(now() + backoffMs(failures)).toISOString(),
    }
    writeStatus(target.paths, status)
    deps.log?.(`${target.name}: refresh failed (${failures} in a row, next try ${status.nextAttemptAt}): ${status.lastError}`)
    return message
  }
}

/** First token for a sandbox, before its container starts: failure is an error. */
export async function provisionToken(name: string, record: AppRecord, env: NodeJS.ProcessEnv, deps: RefreshDeps = {}): Promise<TokenPaths> {
  const paths = tokenPaths(name, env)
  ensurePrivateDir(paths.dir)
  ensurePrivateDir(paths.secretsDir, record.owner)
  writeJson(paths.app, record)
  const mint = deps.mint ?? mintInstallationToken
  const minted = await mint(record.config)
  writeToken(paths, minted.token, record.owner)
  writeStatus(paths, {lastSuccess: new Date((deps.now ?? Date.now)()).toISOString(), expiresAt: minted.expiresAt, failures: 0})
  return paths
}

export function loadTarget(name: string, env: NodeJS.ProcessEnv): Target | undefined {
  const paths = tokenPaths(name, env)
  const record = readJson<AppRecord>(paths.app)
  return record?.config ? {name, paths, record} : undefined
}

export type RefresherKind = 'daemon' | 'refresher' | 'none'

/** Who keeps this sandbox's token fresh. */
export function refresherFor(name: string, env: NodeJS.ProcessEnv): RefresherKind {
  if (refresherAlive(readPid(tokenPaths(name, env).pid))) return 'refresher'
  if (refresherAlive(readPid(daemonPidPath(env)))) return 'daemon'
  return 'none'
}

/**
 * Starts a detached `token-daemon --container NAME` with its output on `log`
 * (a file descriptor) in `cwd`; returns its pid. The caller supplies it (the
 * command layer: src/cli/refresher.ts), so that the library never starts the CLI.
 */
export type RefresherLauncher = (name: string, io: {log: number; cwd: string; env: NodeJS.ProcessEnv}) => number | undefined

/**
 * Make sure someone refreshes `name`'s token: a running daemon or this
 * sandbox's own refresher; otherwise launch one, logging to refresher.log.
 * Returns who does it ('none' when nobody does and there is no launcher).
 */
export function ensureRefresher(name: string, env: NodeJS.ProcessEnv, launch: RefresherLauncher | undefined): RefresherKind | 'spawned' {
  const who = refresherFor(name, env)
  if (who !== 'none' || !launch) return who
  const paths = tokenPaths(name, env)
  ensurePrivateDir(paths.dir)
  const log = openSync(paths.log, 'a', 0o600)
  try {
    const pid = launch(name, {log, cwd: paths.dir, env})
    if (pid) writeFileSync(paths.pid, `${pid}\n`, {mode: 0o600})
  } finally {
    closeSync(log)
  }
  return 'spawned'
}

export interface GithubRowStatus {
  /** One line: `ok (expires in 54m)`, `error: … (3x; token expires in 2m)`, `no refresher (…)`. */
  summary: string
  refresher: RefresherKind
  expiresAt: string | null
  lastSuccess: string | null
  lastError: string | null
  lastErrorAt: string | null
  failures: number
}

/** For `list`: the token's state from status.json and who refreshes it. */
export function githubRowStatus(name: string, running: boolean, env: NodeJS.ProcessEnv, now = Date.now()): GithubRowStatus {
  const status = readTokenStatus(tokenPaths(name, env))
  const refresher = refresherFor(name, env)
  return {
    summary: formatGithubState(status, refresher, running, now),
    refresher,
    expiresAt: status?.expiresAt ?? null,
    lastSuccess: status?.lastSuccess ?? null,
    lastError: status?.lastError ?? null,
    lastErrorAt: status?.lastErrorAt ?? null,
    failures: status?.failures ?? 0,
  }
}

/** Stop this sandbox's own refresher (if any) and delete its token directory. */
export async function removeAppToken(name: string, env: NodeJS.ProcessEnv): Promise<boolean> {
  const paths = tokenPaths(name, env)
  const pid = readPid(paths.pid)
  if (refresherAlive(pid)) {
    try {
      process.kill(pid as number, 'SIGTERM')
    } catch {
      // already gone
    }
    for (let i = 0; i < 50 && refresherAlive(pid); i++) await sleep(100)
    if (refresherAlive(pid)) process.kill(pid as number, 'SIGKILL')
  }
  const existed = readJson(paths.app) !== undefined || readPid(paths.pid) !== undefined
  removeTokenDir(paths)
  return existed
}

export interface LoopOptions {
  engine: Engine
  env: NodeJS.ProcessEnv
  /** Only this sandbox; exit when it is gone or stopped. */
  container?: string
  signal: AbortSignal
  log: (line: string) => void
  deps?: RefreshDeps
}

/** The refresh loop. Resolves when stopped (signal), or in --container mode when the container is gone. */
export async function runRefreshLoop(options: LoopOptions): Promise<void> {
  const {signal, log} = options
  const warned = new Set<string>()
  let margin = (options.container && loadTarget(options.container, options.env)?.record.config.refreshMarginSeconds) || 300
  while (!signal.aborted) {
    try {
      const done = await refreshPass(options, warned)
      if (done === 'exit') return
      margin = done
    } catch (error) {
      // The engine may be restarting: say so and try again on the next pass.
      log(`refresh pass failed: ${(error as Error).message.split('\n')[0]}`)
    }
    await sleep(pollIntervalMs(margin), signal)
  }
}

/** One pass over the targets; returns the smallest margin seen, or 'exit'. */
async function refreshPass(options: LoopOptions, warned: Set<string>): Promise<number | 'exit'> {
  const {engine, env, container, signal, log} = options
  const targets: Target[] = []
  if (container) {
    const info = await engine.containers.inspect(container)
    if (!info?.running) {
      log(`${container}: container ${info ? 'stopped' : 'gone'}; refresher exiting`)
      return 'exit'
    }
    const target = loadTarget(container, env)
    if (!target) {
      log(`${container}: no token directory (removed?); refresher exiting`)
      return 'exit'
    }
    targets.push(target)
  } else {
    for (const row of (await engine.containers.list({[Labels.ghapp]: '1'})).filter((r) => r.state === 'running')) {
      if (refresherAlive(readPid(tokenPaths(row.name, env).pid))) continue
      const target = loadTarget(row.name, env)
      if (target) targets.push(target)
      else if (!warned.has(row.name)) {
        warned.add(row.name)
        log(`${row.name}: no app.json in ${tokenPaths(row.name, env).dir}; run \`agent-sandbox start\` for it again`)
      }
    }
  }
  let margin = 300
  const now = (options.deps?.now ?? Date.now)()
  for (const target of targets) {
    if (signal.aborted) break
    margin = Math.min(margin, target.record.config.refreshMarginSeconds)
    if (nextAttemptAt(readTokenStatus(target.paths), target.record.config.refreshMarginSeconds) <= now) {
      await refreshTarget(target, {deliver: (name, token) => deliverToGateway(engine, name, token), ...options.deps, log})
    }
  }
  return margin
}

/** Take the daemon's pid file, or say who holds it. */
export function claimDaemonPid(env: NodeJS.ProcessEnv): number | undefined {
  const path = daemonPidPath(env)
  const holder = readPid(path)
  if (holder && holder !== process.pid && refresherAlive(holder)) return holder
  ensurePrivateDir(join(path, '..'))
  writeFileSync(path, `${process.pid}\n`, {mode: 0o600})
  return undefined
}

/** Remove a pid file if it still names this process. */
export function releasePid(path: string): void {
  if (readPid(path) === process.pid) rmSync(path, {force: true})
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve()
    const timer = setTimeout(done, ms)
    function done() {
      clearTimeout(timer)
      signal?.removeEventListener('abort', done)
      resolve()
    }
    signal?.addEventListener('abort', done, {once: true})
  })
}

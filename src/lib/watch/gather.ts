/**
 * `watch`'s data: every sandbox on the engine (list.ts's rows, with uptime,
 * CPU and memory), each firewalled sandbox's request log as it is written
 * (the gateway's log, followed), its pending approvals (pending.ts) and each
 * workspace's kept pushes (refs/sandbox/*), as WatchEvents (model.ts). It
 * polls the engine every `intervalMs` and reports only what changed, until
 * the signal aborts.
 */
import type {Context} from '../context.js'
import {cpuPercentBetween, type CpuCounters} from '../engine/stats.js'
import {isSandboxError} from '../errors.js'
import {keptRefs} from '../git/review.js'
import {requestLog} from '../network/firewall.js'
import {pendingApprovals} from '../network/pending.js'
import {listSandboxes, type SandboxRow} from '../sandbox/listing.js'
import {resolveWorkspace, type Workspace} from '../workspace.js'
import type {WatchedSandbox, WatchEvent} from './model.js'

export interface GatherOptions {
  onEvent: (event: WatchEvent) => void
  /** Ends the gathering (and every log it follows). */
  signal: AbortSignal
  /** How often the engine is asked again (default 2 s). */
  intervalMs?: number
  /** How many of each log's last requests come first (default 20). */
  requestLines?: number
}

export interface Gatherer {
  /** Resolves once the signal aborted and every follower ended. */
  done: Promise<void>
  /** Read a sandbox's pending approvals (and its workspace's pushes) again now, not at the next poll. */
  refresh: (sandbox: string) => void
}

/** The workspace of a sandbox (its path must still exist), and the branch that names the container. */
export function workspaceOf(sandbox: Pick<WatchedSandbox, 'path' | 'branch'>): {ws: Workspace; branch?: string} {
  return {ws: resolveWorkspace(sandbox.path), branch: sandbox.branch === '' ? undefined : sandbox.branch}
}

const message = (error: unknown) => (error instanceof Error ? error.message : String(error))

export function startGatherer(ctx: Context, options: GatherOptions): Gatherer {
  const {onEvent, signal} = options
  const followers = new Map<string, AbortController>()
  const followed: Array<Promise<void>> = []
  const usage = new Map<string, Pick<WatchedSandbox, 'cpuPercent' | 'memoryBytes'>>()
  const cpuSamples = new Map<string, CpuCounters>() // the last sample, where the engine gives no previous one
  const sent = new Map<string, string>() // what was last reported per key: only changes are
  let sandboxes: WatchedSandbox[] = []
  let readingUsage = false

  const emitChanged = (key: string, event: WatchEvent) => {
    const text = JSON.stringify(event)
    if (sent.get(key) === text) return
    sent.set(key, text)
    onEvent(event)
  }
  const warn = (sandbox: string | undefined, error: unknown) => {
    if (!signal.aborted) emitChanged(`warning ${sandbox ?? ''}`, {type: 'warning', ...(sandbox ? {sandbox} : {}), message: message(error)})
  }

  const readPending = async (s: WatchedSandbox) => {
    if (!s.running || s.network !== 'firewall') return emitChanged(`pending ${s.name}`, {type: 'pending', sandbox: s.name, pending: []})
    try {
      const {ws, branch} = workspaceOf(s)
      const {pending} = await pendingApprovals(ctx, ws, {branch})
      emitChanged(`pending ${s.name}`, {type: 'pending', sandbox: s.name, pending})
    } catch (error) {
      // One sandbox that cannot be read (stopping, not ready) does not stop the others.
      warn(s.name, error)
    }
  }
  const readPushes = async (path: string) => {
    try {
      const pushes = (await keptRefs(resolveWorkspace(path))).map(([branch, commit]) => ({branch, commit}))
      emitChanged(`pushes ${path}`, {type: 'pushes', workspace: path, pushes})
    } catch (error) {
      if (!isSandboxError(error)) throw error // a path gone or not a repository: nothing to review there
    }
  }

  const follow = (s: WatchedSandbox, key: string) => {
    const own = new AbortController()
    followers.set(key, own)
    const {ws, branch} = workspaceOf(s)
    const run = requestLog({...ctx, signal: AbortSignal.any([signal, own.signal])}, ws, {
      branch,
      lines: options.requestLines ?? 20,
      follow: true,
      onEntry: (entry) => {
        onEvent({type: 'request', sandbox: s.name, entry})
        if (entry.decision === 'blocked') refresh(s.name)
      },
    }).then(
      // The log ended (the gateway stopped): follow it again at the next poll, if it runs.
      () => void followers.delete(key),
      (error: unknown) => {
        followers.delete(key)
        if (!signal.aborted && !own.signal.aborted) warn(s.name, error)
      },
    )
    followed.push(run)
  }

  const pendingRefresh = new Set<string>()
  const refresh = (name: string) => {
    if (pendingRefresh.has(name)) return
    pendingRefresh.add(name)
    // A burst of refusals is read once.
    setTimeout(() => {
      pendingRefresh.delete(name)
      const s = sandboxes.find((x) => x.name === name)
      if (s && !signal.aborted) {
        void readPending(s).catch((error: unknown) => warn(name, error))
        void readPushes(s.path)
      }
    }, 100)
  }

  const readUsage = async (running: readonly WatchedSandbox[]) => {
    // The engine's stats wait for a second sample (about a second): apart from the listing, so they never hold a frame.
    await Promise.all(
      running.map(async (s) => {
        const stats = await ctx.engine.containers.stats(s.name).catch(() => undefined)
        if (!stats) return
        const before = cpuSamples.get(s.name)
        if (stats.cpu) cpuSamples.set(s.name, stats.cpu)
        const cpuPercent = stats.cpuPercent ?? (before && stats.cpu ? cpuPercentBetween(before, stats.cpu) : undefined)
        usage.set(s.name, {cpuPercent, memoryBytes: stats.memoryBytes})
      }),
    )
    if (signal.aborted) return
    sandboxes = sandboxes.map((s) => ({...s, ...usage.get(s.name)}))
    emitChanged('sandboxes', {type: 'sandboxes', sandboxes})
  }

  const poll = async () => {
    const rows = await listSandboxes({engine: ctx.engine, env: ctx.env})
    // The rows at once (a first frame waits for nothing else); their start times follow.
    if (!sent.has('sandboxes')) emitChanged('sandboxes', {type: 'sandboxes', sandboxes: rows.map((row) => watched(row, undefined, undefined))})
    const infos = await Promise.all(rows.map((r) => (r.running ? ctx.engine.containers.inspect(r.name).catch(() => undefined) : undefined)))
    sandboxes = rows.map((row, i) => watched(row, infos[i]?.startedAt, usage.get(row.name)))
    emitChanged('sandboxes', {type: 'sandboxes', sandboxes})
    const live = new Set<string>()
    for (const [i, s] of sandboxes.entries()) {
      const withGateway = (infos[i]?.env ?? []).some((e) => e.startsWith('AGENT_SANDBOX_GATEWAY_UID='))
      if (!s.running || s.network !== 'firewall' || !withGateway) continue
      const key = `${s.name} ${s.startedAt ?? ''}`
      live.add(key)
      if (!followers.has(key)) {
        try {
          follow(s, key)
        } catch (error) {
          warn(s.name, error)
        }
      }
    }
    for (const [key, own] of followers) if (!live.has(key)) (own.abort(), followers.delete(key))
    // One round of stats at a time: Docker's take about a second, and two rounds would interleave their samples.
    if (!readingUsage) {
      readingUsage = true
      void readUsage(sandboxes.filter((s) => s.running))
        .catch((error: unknown) => warn(undefined, error))
        .finally(() => (readingUsage = false))
    }
    await Promise.all([...sandboxes.map((s) => readPending(s)), ...[...new Set(sandboxes.map((s) => s.path))].map((p) => readPushes(p))])
  }

  // Once aborted, a look at the engine still under way is left to finish on its own: quitting does not wait for it.
  const aborted = new Promise<void>((resolve) => (signal.aborted ? resolve() : signal.addEventListener('abort', () => resolve(), {once: true})))
  const done = (async () => {
    while (!signal.aborted) {
      try {
        await Promise.race([poll(), aborted])
      } catch (error) {
        if (signal.aborted) break
        if (!isSandboxError(error)) throw error
        warn(undefined, error)
      }
      if (signal.aborted) break
      await new Promise<void>((resolve) => {
        const onAbort = () => (clearTimeout(timer), resolve())
        const timer = setTimeout(() => (signal.removeEventListener('abort', onAbort), resolve()), options.intervalMs ?? 2000)
        signal.addEventListener('abort', onAbort, {once: true})
      })
    }
    for (const own of followers.values()) own.abort()
    await Promise.race([Promise.allSettled(followed), new Promise((resolve) => setTimeout(resolve, 1000))])
  })()
  return {done, refresh}
}

function watched(row: SandboxRow, startedAt: string | undefined, usage: Pick<WatchedSandbox, 'cpuPercent' | 'memoryBytes'> | undefined): WatchedSandbox {
  return {
    name: row.name,
    repo: row.repo,
    path: row.path,
    mode: row.mode,
    branch: row.branch,
    state: row.running ? 'running' : row.status,
    running: row.running,
    network: row.network || 'firewall',
    ...(row.running && startedAt ? {startedAt} : {}),
    ...(row.running ? usage : {}),
  }
}

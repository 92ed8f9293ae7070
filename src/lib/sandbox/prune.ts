/**
 * `prune`: stopped sandboxes go, with their push gate and egress gateway and
 * the state the host keeps for them (App token, gateway CA); with `volumes`,
 * the volumes of every workspace left without a sandbox. A running sandbox is
 * never touched, nor, without `volumes`, any volume. The plan is computed
 * first (a dry run prints it); removal follows it, each sandbox's sidecars
 * before the sandbox, a workspace's volumes only once none of its sandboxes
 * is left.
 */
import {existsSync} from 'node:fs'
import type {Context} from '../context.js'
import type {ContainerSummary, VolumeInfo} from '../engine/index.js'
import {UsageError} from '../errors.js'
import {removeAppToken} from '../github/refresher.js'
import {removeGatewayCa} from '../network/gateway-ca.js'
import {Labels} from '../workspace.js'
import {engineTime} from './listing.js'

export interface PruneOptions {
  /** Only sandboxes last used at least this long ago (milliseconds). */
  olderThanMs?: number
  /** Also the volumes of workspaces left without a sandbox. */
  volumes?: boolean
  /** Only workspaces at or under this directory (a real path): one workspace, or all of a tree, gone ones included. */
  under?: string
}

export interface SandboxFacts {
  id: string
  name: string
  path: string
  hash: string
  branch: string
  running: boolean
  /** When it was last used: its stop time (ms since the epoch); now for a running one. */
  lastUsed: number
}

export interface PrunedSandbox {
  name: string
  path: string
  branch: string
  lastUsed: string
  /** Why it goes: `stopped`, or `workspace gone` (stopped, and its directory no longer exists). */
  reason: 'stopped' | 'workspace gone'
  /** Its push gate and egress gateway, as far as they exist. */
  sidecars: string[]
}

export interface PrunePlan {
  sandboxes: PrunedSandbox[]
  /** Gates and gateways whose sandbox no longer exists. */
  orphans: string[]
  volumes: string[]
}

/** `7d`, `12h`, `30m`, `90s`, `2w` (a number alone is seconds), as milliseconds. Pure. */
export function parseAge(text: string): number {
  const match = /^(\d+(?:\.\d+)?)(s|m|h|d|w)?$/.exec(text.trim())
  if (!match) throw new UsageError(`--older-than is not a duration: ${JSON.stringify(text)}`, {hint: 'use e.g. 7d, 12h, 30m or 2w'})
  const unit = {s: 1, m: 60, h: 3600, d: 86_400, w: 604_800}[(match[2] ?? 's') as 's' | 'm' | 'h' | 'd' | 'w']
  return Math.round(Number(match[1]) * unit * 1000)
}

/** What prune removes, from what the engine and the file system say. Pure. */
export function planPrune(
  facts: {sandboxes: readonly SandboxFacts[]; sidecars: readonly ContainerSummary[]; volumes: readonly VolumeInfo[]; workspaceExists: (path: string) => boolean; now: number},
  options: PruneOptions,
): PrunePlan {
  const {under} = options
  const mine = (path: string) => under === undefined || path === under || path.startsWith(under.endsWith('/') ? under : `${under}/`)
  const picked = facts.sandboxes.filter(
    (s) => !s.running && mine(s.path) && (options.olderThanMs === undefined || facts.now - s.lastUsed >= options.olderThanMs),
  )
  const names = new Set(facts.sandboxes.map((s) => s.name))
  const sidecarOf = (c: ContainerSummary) => c.labels[Labels.gateOf] ?? c.labels[Labels.gatewayOf] ?? ''
  const sandboxes = picked.map((s) => ({
    name: s.name,
    path: s.path,
    branch: s.branch,
    lastUsed: new Date(s.lastUsed).toISOString(),
    reason: facts.workspaceExists(s.path) ? ('stopped' as const) : ('workspace gone' as const),
    sidecars: facts.sidecars.filter((c) => sidecarOf(c) === s.name).map((c) => c.name).sort(),
  }))
  const orphans = facts.sidecars
    .filter((c) => !names.has(sidecarOf(c)) && c.state !== 'running' && mine(c.labels[Labels.workspace] ?? ''))
    .map((c) => c.name)
    .sort()
  const gone = new Set(picked.map((s) => s.name))
  // A workspace keeps its volumes while any sandbox of its stays.
  const kept = new Set(facts.sandboxes.filter((s) => !gone.has(s.name)).map((s) => s.hash))
  const volumes = options.volumes
    ? facts.volumes.filter((v) => v.labels[Labels.hash] && !kept.has(v.labels[Labels.hash]) && mine(v.labels[Labels.workspace] ?? '')).map((v) => v.name).sort()
    : []
  return {sandboxes: sandboxes.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)), orphans, volumes}
}

/** The plan for this engine and host now. */
export async function prunePlan(ctx: Context, options: PruneOptions): Promise<PrunePlan> {
  const {engine} = ctx
  const [rows, sidecars, volumes] = await Promise.all([
    engine.containers.list({[Labels.managed]: 'true', [Labels.kind]: 'sandbox'}),
    Promise.all([engine.containers.list({[Labels.kind]: 'gate'}), engine.containers.list({[Labels.kind]: 'gateway'})]).then(([a, b]) => [...a, ...b]),
    engine.volumes.list({[Labels.managed]: 'true'}),
  ])
  const now = Date.now()
  const sandboxes = await Promise.all(
    rows.map(async (row): Promise<SandboxFacts> => {
      const running = row.state === 'running'
      const info = running ? undefined : await engine.containers.inspect(row.id)
      return {
        id: row.id,
        name: row.name,
        path: row.labels[Labels.workspace] ?? '',
        hash: row.labels[Labels.hash] ?? '',
        branch: row.labels[Labels.branch] ?? '',
        running: running || info?.running === true,
        // Stopped: when it stopped (a sandbox never started has neither time: the oldest there is).
        lastUsed: running ? now : engineTime(info?.finishedAt) || engineTime(info?.startedAt),
      }
    }),
  )
  return planPrune({sandboxes, sidecars, volumes, workspaceExists: (path) => path !== '' && existsSync(path), now}, options)
}

export interface PruneResult extends PrunePlan {
  /** Sandboxes in the plan that were running by the time of removal, and so kept. */
  skipped: string[]
}

/**
 * Carry out a plan: each sandbox's sidecars, then the sandbox (the engine
 * refuses to remove one that has started since: it is kept), then the host
 * state kept for it; volumes last, each workspace's only when the engine has
 * no container of it left.
 */
export async function prune(ctx: Context, plan: PrunePlan): Promise<PruneResult> {
  const {engine} = ctx
  const env = ctx.env ?? process.env
  const removed: PrunedSandbox[] = []
  const skipped: string[] = []
  for (const sandbox of plan.sandboxes) {
    const info = await engine.containers.inspect(sandbox.name)
    if (info?.running) {
      skipped.push(sandbox.name)
      continue
    }
    for (const sidecar of sandbox.sidecars) await engine.containers.remove(sidecar, {force: true})
    // Not forced: one started since the check is refused by the engine, and kept.
    const gone = info ? await engine.containers.remove(info.id).then(() => true, () => false) : true
    if (!gone) {
      skipped.push(sandbox.name)
      continue
    }
    await removeAppToken(sandbox.name, env)
    removeGatewayCa(sandbox.name, env)
    removed.push(sandbox)
  }
  for (const orphan of plan.orphans) await engine.containers.remove(orphan, {force: true})
  const volumes: string[] = []
  const left = new Map<string, boolean>()
  for (const name of plan.volumes) {
    const volume = await engine.volumes.inspect(name)
    const hash = volume?.labels[Labels.hash]
    if (!volume || !hash) continue
    if (!left.has(hash)) left.set(hash, (await engine.containers.list({[Labels.hash]: hash})).length > 0)
    if (left.get(hash)) continue
    await engine.volumes.remove(name)
    volumes.push(name)
  }
  return {sandboxes: removed, orphans: plan.orphans, volumes, skipped}
}

/**
 * `list`: every sandbox, from one engine call. Kept apart from the lifecycle
 * module so that listing loads nothing but the engine client (it is on the
 * CLI's fast path, src/cli/fast.ts).
 */
import type {Engine} from '../engine/index.js'
import type {GithubRowStatus} from '../github/refresher.js'
import {Labels} from '../workspace.js'

export interface SandboxRow {
  name: string
  repo: string
  path: string
  mode: string
  branch: string
  workdir: string
  status: string
  running: boolean
  image: string
  network: string
  volumes: string[]
  limits: Record<string, unknown>
  /** The GitHub App token's state; null when the sandbox does not use the App. */
  github: GithubRowStatus | null
  /** When it was last used: null while it runs (in use now), else when it stopped (ISO 8601; null if it never ran). */
  lastUsed: string | null
}

/** Every sandbox, running or not, from one engine call: what a row needs is in the labels. */
export async function listSandboxes(ctx: {engine: Engine; env?: NodeJS.ProcessEnv}): Promise<SandboxRow[]> {
  const rows = await ctx.engine.containers.list({[Labels.managed]: 'true', [Labels.kind]: 'sandbox'})
  // The token state reader only when some sandbox uses the App.
  const github = rows.some((row) => row.labels[Labels.ghapp] === '1') ? await import('../github/refresher.js') : undefined
  // The list call has no stop times: one inspect per sandbox that ran and stopped (none for a running
  // one, nor for one created and never started: Docker's `created`, Podman's `configured` too).
  const ranBefore = (state: string) => state !== 'running' && state !== 'created' && state !== 'configured'
  const stopped = await Promise.all(rows.map((row) => (ranBefore(row.state) ? ctx.engine.containers.inspect(row.id).catch(() => undefined) : undefined)))
  return rows
    .map((row, i) => ({
      name: row.name,
      repo: row.labels[Labels.repo] ?? '',
      path: row.labels[Labels.workspace] ?? '',
      mode: row.labels[Labels.mode] ?? 'bind',
      branch: row.labels[Labels.branch] ?? '',
      workdir: row.labels[Labels.workdir] ?? '',
      status: row.status,
      running: row.state === 'running',
      image: row.image,
      network: row.labels[Labels.network] ?? '',
      volumes: (row.labels[`${Labels.volume}s`] ?? '').split(',').filter(Boolean),
      limits: safeJson(row.labels[Labels.limits]),
      github: github && row.labels[Labels.ghapp] === '1' ? github.githubRowStatus(row.name, row.state === 'running', ctx.env ?? process.env) : null,
      lastUsed: stoppedAt(stopped[i]),
    }))
    .sort((a, b) => byCodeUnits(a.path, b.path) || byCodeUnits(a.branch, b.branch))
}

/**
 * Paths and branches in code-unit order, as `ls` orders them in the C locale:
 * the same on every machine, and localeCompare's first call (it loads ICU's
 * collation) would cost `list` about 9 ms, a fifth of its time. Pure.
 */
export function byCodeUnits(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0
}

/** Milliseconds since the epoch of an engine time stamp; 0 for none (Docker's "0001-01-01…"). Pure. */
export function engineTime(stamp: string | undefined): number {
  const ms = stamp ? Date.parse(stamp) : NaN
  return Number.isFinite(ms) && ms > 0 ? ms : 0
}

function stoppedAt(info: {finishedAt: string; startedAt: string} | undefined): string | null {
  const ms = engineTime(info?.finishedAt) || engineTime(info?.startedAt)
  return ms ? new Date(ms).toISOString() : null
}

/** `now` for a running sandbox, else how long ago it was last used: `5 minutes ago`, `3 days ago`. Pure. */
export function formatLastUsed(row: Pick<SandboxRow, 'running' | 'lastUsed'>, now: number): string {
  if (row.running) return 'now'
  if (!row.lastUsed) return 'never'
  const seconds = Math.max(0, Math.round((now - Date.parse(row.lastUsed)) / 1000))
  const [n, unit] = seconds < 60 ? [seconds, 'second'] : seconds < 3600 ? [Math.floor(seconds / 60), 'minute'] : seconds < 86_400 ? [Math.floor(seconds / 3600), 'hour'] : [Math.floor(seconds / 86_400), 'day']
  return `${n} ${unit}${n === 1 ? '' : 's'} ago`
}

/** The `list` table, one string per line. Pure. */
export function formatSandboxTable(rows: readonly SandboxRow[], now = Date.now()): string[] {
  if (rows.length === 0) return ['no sandboxes']
  const table = [
    ['NAME', 'REPO', 'MODE', 'BRANCH', 'STATUS', 'LAST USED', 'WORKDIR', 'LIMITS', 'PATH'],
    ...rows.map((r) => [
      r.name,
      r.repo,
      r.mode,
      r.branch || '-',
      r.running ? 'running' : r.status,
      formatLastUsed(r, now),
      r.workdir,
      Object.entries(r.limits)
        .map(([k, v]) => `${k}=${String(v)}`)
        .join(' ') || '-',
      r.path,
    ]),
  ]
  // The App's token state, only when some sandbox uses it (docs/github-app.md).
  if (rows.some((r) => r.github)) table.forEach((row, i) => row.splice(row.length - 1, 0, i === 0 ? 'GITHUB' : (rows[i - 1].github?.summary ?? '-')))
  const widths = table[0].map((_, i) => Math.max(...table.map((row) => row[i].length)))
  return table.map((row) => row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]))).join('  '))
}

function safeJson(text: string | undefined): Record<string, unknown> {
  try {
    return text ? (JSON.parse(text) as Record<string, unknown>) : {}
  } catch {
    return {}
  }
}

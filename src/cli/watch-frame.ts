/**
 * `watch`'s screen as text: the state (src/lib/watch/model.ts) laid out for a
 * terminal of a given size, as lines of styled segments, and those lines as
 * strings with or without colour (NO_COLOR). Pure; watch-screen.ts puts them
 * on the terminal.
 */
import {inertText} from '../lib/util/inert-text.js'
import {KEY_HELP, selectable, type WatchState} from '../lib/watch/model.js'

export type Style = 'title' | 'header' | 'blocked' | 'allowed' | 'selected' | 'dim' | 'error' | 'ok'
export interface Segment {
  text: string
  style?: Style
}
export type Line = Segment[]

/** Whether to colour: not when NO_COLOR is set to anything but empty (no-color.org), nor for TERM=dumb. Pure. */
export function colorEnabled(env: NodeJS.ProcessEnv): boolean {
  return !env.NO_COLOR && env.TERM !== 'dumb'
}

const SGR: Record<Style, string> = {title: '1', header: '1;4', blocked: '1;31', allowed: '32', selected: '7', dim: '2', error: '31', ok: '32'}

/** A line as a string of at most `width` columns, with SGR colour codes only when `color`; the text's own control characters made inert. Pure. */
export function paint(line: Line, width: number, color: boolean): string {
  let out = ''
  let room = width
  for (const seg of line) {
    if (room <= 0) break
    const text = [...inertText(seg.text)].slice(0, room).join('')
    room -= [...text].length
    out += color && seg.style ? `\x1b[${SGR[seg.style]}m${text}\x1b[0m` : text
  }
  return out
}

/** `42s`, `5m`, `2h05m`, `3d04h`. Pure. */
export function formatUptime(startedAt: string | undefined, now: number): string {
  const start = startedAt ? Date.parse(startedAt) : NaN
  if (!Number.isFinite(start)) return '-'
  const s = Math.max(0, Math.floor((now - start) / 1000))
  if (s < 60) return `${s}s`
  if (s < 3600) return `${Math.floor(s / 60)}m`
  const pad = (n: number) => String(n).padStart(2, '0')
  if (s < 86_400) return `${Math.floor(s / 3600)}h${pad(Math.floor((s % 3600) / 60))}m`
  return `${Math.floor(s / 86_400)}d${pad(Math.floor((s % 86_400) / 3600))}h`
}

const mib = (bytes: number | undefined) => (bytes === undefined ? '-' : `${(bytes / (1024 * 1024)).toFixed(0)}MiB`)
const pct = (p: number | undefined) => (p === undefined ? '-' : `${p.toFixed(1)}%`)

/** Columns padded to the widest cell of each, separated by two spaces. Pure. */
function columns(rows: string[][]): string[] {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => r[i].length))) ?? []
  return rows.map((r) => r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i]))).join('  '))
}

/** The whole screen of `height` lines (paint cuts each to the width). Pure. */
export function buildFrame(state: WatchState, height: number, now: number): Line[] {
  const items = selectable(state)
  const pendingCount = items.filter((i) => i.kind === 'pending').length
  const pushCount = items.length - pendingCount
  const clock = new Date(now).toISOString().slice(11, 19)
  const top: Line[] = [
    [{text: 'agent-sandbox watch', style: 'title'}, {text: `  ${state.sandboxes.length} sandboxes · ${pendingCount} pending · ${pushCount} pushes to review · ${clock} UTC`}],
  ]
  const table = columns([
    ['SANDBOX', 'REPO', 'MODE', 'BRANCH', 'STATE', 'UPTIME', 'CPU', 'MEM'],
    ...state.sandboxes.map((s) => [s.name, s.repo, s.mode, s.branch || '-', s.state, s.running ? formatUptime(s.startedAt, now) : '-', s.running ? pct(s.cpuPercent) : '-', s.running ? mib(s.memoryBytes) : '-']),
  ])
  if (!state.listed) return padTo([...top, [{text: 'reading the engine…', style: 'dim'}]], height)
  top.push([{text: table[0], style: 'header'}], ...table.slice(1).map((text) => [{text}]))
  if (state.sandboxes.length === 0) top.push([{text: 'no sandboxes', style: 'dim'}])

  top.push([], [{text: `PENDING APPROVALS (${pendingCount})`, style: 'header'}])
  items.forEach((item, i) => {
    if (i === pendingCount) top.push([], [{text: `PUSHES TO REVIEW (${pushCount})`, style: 'header'}])
    const chosen = i === state.selected
    const text =
      item.kind === 'pending'
        ? `${item.sandbox.name}  ${item.approval.kind === 'rule' ? `${item.approval.method ?? ''} ${item.approval.host}${item.approval.path ?? ''}` : item.approval.host}  (${item.approval.kind}, ${item.approval.count}×)`
        : `${item.sandbox.repo}  ${item.push.branch}  ${item.push.commit.slice(0, 12)}  (${item.sandbox.path})`
    top.push([{text: chosen ? '> ' : '  '}, {text, ...(chosen ? {style: 'selected' as const} : {})}])
  })
  if (pendingCount === items.length) top.push([], [{text: `PUSHES TO REVIEW (${pushCount})`, style: 'header'}])

  const bottom: Line[] = [
    state.message ? [{text: state.message.text, style: state.message.ok ? 'ok' : 'error'}] : [],
    [{text: KEY_HELP, style: 'dim'}],
  ]
  top.push([], [{text: 'REQUESTS', style: 'header'}])
  // The requests take the rows that are left, newest at the bottom.
  const room = Math.max(0, height - top.length - bottom.length)
  const shown = room ? state.requests.slice(-room) : []
  const requests: Line[] = shown.map(({sandbox, entry}) => {
    const blocked = entry.decision === 'blocked'
    const text = `${entry.time.slice(11, 19)}  ${sandbox}  ${blocked ? 'BLOCKED' : 'allowed'}  ${entry.method} ${entry.host}${entry.path}  ${entry.status || '-'}  ${entry.rule}`
    return [{text, style: blocked ? 'blocked' : 'allowed'}]
  })
  const lines = padTo([...top, ...requests], Math.max(0, height - bottom.length))
  return [...lines, ...bottom].slice(-height)
}

/** Exactly `height` lines: cut, or padded with empty ones. Pure. */
function padTo(lines: Line[], height: number): Line[] {
  const out = lines.slice(0, height)
  while (out.length < height) out.push([])
  return out
}

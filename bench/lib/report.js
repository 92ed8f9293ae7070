// @ts-check
/** The machine description, the results table, and the rewrite of docs/PERFORMANCE.md. */
import {cpus, release, totalmem} from 'node:os'
import {existsSync, readFileSync, writeFileSync} from 'node:fs'
import {sh} from './fixtures.js'

export function machine() {
  const engine = sh('docker', ['version', '--format', '{{.Server.Version}}'], {allowFailure: true}).stdout.trim() || 'unknown'
  const gitVersion = sh('git', ['--version'], {allowFailure: true}).stdout.trim().replace(/^git version /, '') || 'unknown'
  const load = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')
  return {
    cores: cpus().length,
    cpu: cpus()[0]?.model.trim() ?? 'unknown',
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    kernel: release(),
    node: process.version,
    engine: `Docker ${engine}`,
    git: gitVersion,
    load,
    extraCa: process.env.NODE_EXTRA_CA_CERTS ? `set (${process.env.NODE_EXTRA_CA_CERTS})` : 'unset',
  }
}

const ms = (v) => (Number.isFinite(v) ? `${Math.round(v)}` : '–')
const mib = (kib) => (kib ? `${(kib / 1024).toFixed(0)}` : '–')

/**
 * @typedef {{key: string, title: string, ours: string, base: string, target?: number, targetDiffMs?: number,
 *   a?: {min: number, median: number, max: number}, b?: {min: number, median: number, max: number},
 *   ratio?: number, diffMs?: number, rssKiB?: number, runs: number, error?: string, note?: string}} Row
 */

/** @param {Row} row */
export function verdict(row) {
  if (row.error) return 'FAILED'
  if (row.targetDiffMs !== undefined) return (row.diffMs ?? Infinity) <= row.targetDiffMs ? 'meets' : 'MISSES'
  if (row.target !== undefined) return (row.ratio ?? Infinity) <= row.target ? 'meets' : 'MISSES'
  return ''
}

/** @param {Row} row */
function targetText(row) {
  if (row.targetDiffMs !== undefined) return `≤ +${row.targetDiffMs} ms`
  return row.target === undefined ? '' : `≤ ${row.target}×`
}

/** @param {Row[]} rows @param {number} peakKiB */
export function markdownTable(rows, peakKiB) {
  const out = [
    '| scenario | ours | baseline | ours ms (min / median / max) | baseline ms (min / median / max) | median ratio | target | result | peak RSS MiB |',
    '|---|---|---|---|---|---|---|---|---|',
  ]
  for (const r of rows) {
    const ratio = r.ratio === undefined ? '–' : `${r.ratio.toFixed(2)}×${r.diffMs === undefined ? '' : ` (+${Math.round(r.diffMs)} ms)`}`
    const a = r.a ? `${ms(r.a.min)} / **${ms(r.a.median)}** / ${ms(r.a.max)}` : '–'
    const b = r.b ? `${ms(r.b.min)} / **${ms(r.b.median)}** / ${ms(r.b.max)}` : '–'
    const title = r.note ? `${r.title}: ${r.note}` : r.title
    const result = r.error ? `FAILED: ${r.error.replaceAll('|', '\\|').slice(0, 120)}` : verdict(r)
    out.push(`| ${title} | ${r.ours} | ${r.base} | ${a} | ${b} | ${ratio} | ${targetText(r)} | ${result} | ${mib(r.rssKiB)} |`)
  }
  const memOk = peakKiB > 0 && peakKiB <= 150 * 1024
  out.push(`| CLI peak memory | any command above (max RSS of the CLI process tree) | – | – | – | – | ≤ 150 MiB | ${peakKiB ? (memOk ? 'meets' : 'MISSES') : '–'} | ${mib(peakKiB)} |`)
  return out.join('\n')
}

/** @param {Row[]} rows @param {number} peakKiB */
export function textTable(rows, peakKiB) {
  const head = ['scenario', 'ours min/med/max ms', 'base min/med/max ms', 'ratio', 'target', 'result', 'RSS MiB']
  const body = rows.map((r) => [
    r.key,
    r.a ? `${ms(r.a.min)}/${ms(r.a.median)}/${ms(r.a.max)}` : '–',
    r.b ? `${ms(r.b.min)}/${ms(r.b.median)}/${ms(r.b.max)}` : '–',
    r.ratio === undefined ? '–' : `${r.ratio.toFixed(2)}×${r.diffMs === undefined ? '' : ` +${Math.round(r.diffMs)}ms`}`,
    targetText(r),
    r.error ? 'FAILED' : verdict(r),
    mib(r.rssKiB),
  ])
  body.push(['peak memory', '', '', '', '≤ 150 MiB', peakKiB <= 150 * 1024 ? 'meets' : 'MISSES', mib(peakKiB)])
  const widths = head.map((_, i) => Math.max(...[head, ...body].map((row) => row[i].length)))
  return [head, ...body].map((row) => row.map((c, i) => c.padEnd(widths[i])).join('  ')).join('\n')
}

/** @param {Row[]} rows @param {number} runs */
function otherCounts(rows, runs) {
  /** @type {Map<number, string[]>} */
  const byCount = new Map()
  for (const r of rows.filter((row) => row.runs !== runs)) byCount.set(r.runs, [...(byCount.get(r.runs) ?? []), r.key])
  const parts = [...byCount].map(([n, keys]) => `${n} for ${keys.join(', ')}`)
  return parts.length ? ` (${parts.join('; ')})` : ''
}

const BEGIN = '<!-- bench:begin (written by `npm run bench`; do not edit by hand) -->'
const END = '<!-- bench:end -->'

/** Replace the generated block of docs/PERFORMANCE.md (creating the file if needed). */
export function writeDoc(path, {rows, peakKiB, info, command, runs, warmup, startedAt, seconds}) {
  const block = [
    BEGIN,
    `Last full run: ${startedAt.toISOString().replace(/\.\d+Z$/, 'Z')}, ${Math.round(seconds)} s in all; ${warmup} warm-up + ${runs} measured pairs per scenario${otherCounts(rows, runs)}, A/B alternating (ABBA).`,
    '',
    `Machine: ${info.cores} cores (${info.cpu}), ${info.memoryGiB} GiB memory, kernel ${info.kernel}, node ${info.node}, engine ${info.engine}, git ${info.git}; load average at the start ${info.load}. NODE_EXTRA_CA_CERTS in the environment of the other rows: ${info.extraCa}.`,
    '',
    `Reproduce: \`${command}\``,
    '',
    markdownTable(rows, peakKiB),
    END,
  ].join('\n')
  const text = existsSync(path) ? readFileSync(path, 'utf8') : `# Performance\n\n${BEGIN}\n${END}\n`
  const start = text.indexOf(BEGIN)
  const end = text.indexOf(END)
  const next = start === -1 || end === -1 ? `${text.trimEnd()}\n\n${block}\n` : `${text.slice(0, start)}${block}${text.slice(end + END.length)}`
  writeFileSync(path, next)
}

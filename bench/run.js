#!/usr/bin/env node
// @ts-check
/**
 * The benchmark suite: `npm run bench` (full; rewrites the table in
 * docs/PERFORMANCE.md) and `npm run bench:smoke` (a quick subset for CI that
 * fails only if a scenario cannot run, never on a ratio).
 *
 * Each scenario runs our CLI (A) and the raw operation it wraps (B) as whole
 * processes, alternating A/B in the same run (ABBA, so drift in the machine's
 * load falls on both), after a warm-up. It reports min/median/max of each
 * arm and the median of the per-pair ratios A/B. Everything it creates is
 * labelled for this run and removed at the end, also on failure or Ctrl-C.
 *
 * Usage: node bench/run.js [--smoke] [--runs N] [--warmup N] [--only key,key] [--no-doc]
 * Needs: a running engine, agent-sandbox-base:latest, the built CLI (npm run build),
 * /usr/bin/time (Debian package `time`) and `script` (util-linux).
 */
import {existsSync, mkdirSync} from 'node:fs'
import {join} from 'node:path'
import {parseArgs} from 'node:util'
import {BASE_TAG, BIN, OWNER, REPO, benchId, cleanup, cliEnv, cliSync, docker, makeGitWorkspace, sh, writeUserConfig} from './lib/fixtures.js'
import {TIME_BIN, cleanupScratch, runParallel, runSequence, summary} from './lib/measure.js'
import {ensureRepo} from './lib/repo.js'
import {machine, textTable, verdict, writeDoc} from './lib/report.js'
import {scenarios} from './scenarios.js'

const {values: opts} = parseArgs({
  options: {
    smoke: {type: 'boolean', default: false},
    runs: {type: 'string'},
    warmup: {type: 'string'},
    only: {type: 'string'},
    'no-doc': {type: 'boolean', default: false},
    help: {type: 'boolean', short: 'h', default: false},
  },
})
if (opts.help) {
  process.stdout.write('usage: node bench/run.js [--smoke] [--runs N] [--warmup N] [--only startup,exec,...] [--no-doc]\n')
  process.stdout.write(`scenarios: ${scenarios.map((s) => s.key).join(', ')}\n`)
  process.exit(0)
}

const log = (msg) => process.stderr.write(`bench: ${msg}\n`)
const smoke = opts.smoke
const runs = Number(opts.runs ?? (smoke ? 2 : 7))
const warmup = Number(opts.warmup ?? 1)
const only = opts.only ? opts.only.split(',').map((s) => s.trim()) : undefined
if (!Number.isInteger(runs) || runs < 1 || !Number.isInteger(warmup) || warmup < 0) {
  log('--runs must be a positive integer and --warmup a non-negative one')
  process.exit(2)
}
if (only) {
  const unknown = only.filter((k) => !scenarios.some((s) => s.key === k))
  if (unknown.length) {
    log(`unknown scenario: ${unknown.join(', ')} (scenarios: ${scenarios.map((s) => s.key).join(', ')})`)
    process.exit(2)
  }
}
const selected = scenarios.filter((s) => (only ? only.includes(s.key) : smoke ? s.smoke : true))

function preflight() {
  const missing = []
  if (!existsSync(TIME_BIN)) missing.push(`${TIME_BIN} (install Debian's \`time\` package; scripts/setup-engine.sh does)`)
  if (sh('script', ['--version'], {allowFailure: true}).code !== 0) missing.push('`script` (util-linux)')
  if (!existsSync(join(BIN, '..', '..', 'dist', 'commands'))) missing.push(`the built CLI at ${BIN} (run \`npm run build\`)`)
  if (sh('docker', ['info', '--format', '{{.ServerVersion}}'], {allowFailure: true}).code !== 0) missing.push('a running container engine (scripts/setup-engine.sh)')
  else if (sh('docker', ['image', 'inspect', `agent-sandbox-base:${BASE_TAG}`], {allowFailure: true}).code !== 0) missing.push(`the base image agent-sandbox-base:${BASE_TAG} (run \`agent-sandbox build-base\`)`)
  if (missing.length) {
    log(`cannot run: missing ${missing.join('; ')}`)
    process.exit(2)
  }
}

preflight()
const id = benchId()
const root = `/tmp/agent-sandbox-bench-${id}`
let cleaned = false
const finalCleanup = () => {
  if (cleaned) return
  cleaned = true
  log('cleaning up')
  cleanup(id, root, log)
  cleanupScratch()
}
for (const signal of /** @type {const} */ (['SIGINT', 'SIGTERM', 'SIGHUP'])) {
  process.on(signal, () => {
    log(`${signal}: stopping`)
    finalCleanup()
    process.exit(130)
  })
}

const startedAt = new Date()
const info = machine()
/** @type {import('./lib/report.js').Row[]} */
const rows = []
let peakKiB = 0

try {
  cleanup(id, root) // a crashed earlier run with the same id
  writeUserConfig(root)
  log(`run ${id}: ${selected.map((s) => s.key).join(', ')}; ${warmup} warm-up + ${runs} runs per arm${smoke ? ' (smoke)' : ''}`)
  if (BIN !== join(REPO, 'bin', 'agent-sandbox') || BASE_TAG !== 'latest') log(`comparing another build: CLI ${BIN}, base image agent-sandbox-base:${BASE_TAG}`)
  log(`machine: ${info.cores} cores, ${info.memoryGiB} GiB, kernel ${info.kernel}, node ${info.node}, ${info.engine}, load ${info.load}, NODE_EXTRA_CA_CERTS ${info.extraCa}`)

  log('set-up: workspace, image and a running sandbox')
  const ws = makeGitWorkspace(root, 'app')
  cliSync(root, ['init', ws])
  const started = JSON.parse(cliSync(root, ['start', ws, '--json']).stdout)
  const image = docker('inspect', '--format', '{{.Config.Image}}', started.name).stdout.trim()
  /** @type {import('./scenarios.js').Ctx} */
  const ctx = {
    id,
    root,
    env: cliEnv(root),
    smoke,
    ws,
    name: started.name,
    image,
    baseImage: `agent-sandbox-base:${BASE_TAG}`,
    parallel: smoke ? 2 : 8,
    listCount: smoke ? 3 : 30,
    // The keys selected, in order: rows that share a set-up tear it down after the last of them.
    extra: {selected: selected.map((s) => s.key)},
  }
  if (selected.some((s) => s.key === 'provision' || s.key === 'repeat')) {
    const size = smoke ? {files: 500, commits: 50} : {files: 20_000, commits: 2_000}
    ctx.repoCache = await ensureRepo({...size, owner: OWNER}, log)
    ctx.extra.repoSize = `${size.files.toLocaleString('en')} files / ${size.commits.toLocaleString('en')} commits`
  }

  for (const s of selected) {
    const n = s.cheap ? runs * 3 : Math.min(runs, s.runs ?? runs)
    /** @type {import('./lib/report.js').Row} */
    const row = {key: s.key, title: s.title, ours: s.ours, base: s.base, target: s.target, targetDiffMs: s.targetDiffMs, runs: n}
    if ((s.key === 'provision' || s.key === 'repeat') && ctx.extra.repoSize) row.title = `${s.title}, ${String(ctx.extra.repoSize)}`
    if (s.key.startsWith('parallel')) row.title = `${ctx.parallel} ${s.title}`
    rows.push(row)
    const a = []
    const b = []
    const ratios = []
    const diffs = []
    try {
      log(`${s.key}: set-up`)
      await s.setup?.(ctx)
      for (let i = 0; i < warmup + n; i++) {
        const measured = i >= warmup
        /** @type {Record<'a' | 'b', import('./lib/measure.js').Sample>} */
        const pair = /** @type {any} */ ({})
        for (const arm of i % 2 === 0 ? /** @type {const} */ (['a', 'b']) : /** @type {const} */ (['b', 'a'])) {
          const def = s[arm]
          def.before?.(ctx)
          try {
            const steps = def.steps(ctx)
            pair[arm] = def.parallel ? await runParallel(steps) : await runSequence(steps)
          } finally {
            def.after?.(ctx)
          }
        }
        log(`${s.key}: ${measured ? `run ${i - warmup + 1}/${n}` : 'warm-up'}: ours ${Math.round(pair.a.ms)} ms, baseline ${Math.round(pair.b.ms)} ms`)
        if (!measured) continue
        a.push(pair.a.ms)
        b.push(pair.b.ms)
        ratios.push(pair.a.ms / pair.b.ms)
        diffs.push(pair.a.ms - pair.b.ms)
        row.rssKiB = Math.max(row.rssKiB ?? 0, pair.a.rssKiB)
      }
      row.a = summary(a)
      row.b = summary(b)
      row.ratio = summary(ratios).median
      if (s.targetDiffMs !== undefined) row.diffMs = summary(diffs).median
      row.note = s.note?.(ctx)
      peakKiB = Math.max(peakKiB, row.rssKiB ?? 0)
    } catch (error) {
      row.error = error instanceof Error ? error.message : String(error)
      log(`${s.key}: FAILED: ${row.error}`)
      const output = /** @type {{output?: string}} */ (error).output
      if (output) log(`${s.key}: last output:\n${output.trim().split('\n').slice(-15).join('\n')}`)
    } finally {
      try {
        s.teardown?.(ctx)
      } catch (error) {
        log(`${s.key}: tear-down failed: ${error instanceof Error ? error.message : String(error)}`)
      }
    }
  }
} catch (error) {
  log(`set-up failed: ${error instanceof Error ? error.message : String(error)}`)
  rows.push({key: 'set-up', title: 'set-up', ours: '', base: '', runs: 0, error: error instanceof Error ? error.message : String(error)})
} finally {
  finalCleanup()
}

const seconds = (Date.now() - startedAt.getTime()) / 1000
process.stdout.write(`\n${textTable(rows, peakKiB)}\n\n`)
for (const r of rows) if (r.note) process.stdout.write(`${r.key}: ${r.note}\n`)
process.stdout.write(`${rows.length} scenarios in ${Math.round(seconds)} s; ratios are medians of per-pair ratios (ours / baseline)\n`)
const failed = rows.filter((r) => r.error)
const missed = rows.filter((r) => verdict(r) === 'MISSES')
if (missed.length) process.stdout.write(`below target (reported, not a failure): ${missed.map((r) => r.key).join(', ')}\n`)

if (!smoke && !only && !opts['no-doc'] && failed.length === 0 && BIN === join(REPO, 'bin', 'agent-sandbox') && BASE_TAG === 'latest') {
  const doc = join(REPO, 'docs', 'PERFORMANCE.md')
  writeDoc(doc, {rows, peakKiB, info, command: 'npm run bench', runs, warmup, startedAt, seconds})
  log(`wrote ${doc}`)
}
if (failed.length) {
  log(`${failed.length} scenario(s) failed to run: ${failed.map((r) => r.key).join(', ')}`)
  process.exit(1)
}

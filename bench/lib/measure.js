// @ts-check
/**
 * Timing whole processes, as a user feels them: wall time from spawn to exit,
 * and peak memory (max resident set) from `/usr/bin/time -f %M` wrapped
 * around every process, ours and the baseline alike so that both pay the same.
 * A pty session (the shell scenarios) runs under util-linux `script`, which
 * gives the child a real terminal; we answer the first prompt with `exit`.
 */
import {spawn} from 'node:child_process'
import {existsSync, mkdtempSync, readFileSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

export const TIME_BIN = '/usr/bin/time'
const DEFAULT_TIMEOUT_MS = 10 * 60_000

/**
 * A pty step answers once when its output (without escape codes) first matches `answer.when`:
 * by default a shell prompt, with `exit`. With `answer.timed`, its time is from spawn to that
 * match (a first frame), not to its exit; it must still exit 0.
 * @typedef {{argv: string[], env?: Record<string, string | undefined>, cwd?: string, pty?: boolean, timeoutMs?: number, answer?: {when: RegExp, send: string, timed?: boolean}}} Step
 */
/** untimedMs: the part of the wall time after a timed answer (0 for other steps). @typedef {{ms: number, rssKiB: number, untimedMs?: number}} Sample */

export class StepFailed extends Error {
  /** @param {string} message @param {string} output */
  constructor(message, output) {
    super(message)
    this.output = output
  }
}

let scratch
function scratchDir() {
  scratch ??= mkdtempSync(join(tmpdir(), 'agent-sandbox-bench-time-'))
  return scratch
}

export function cleanupScratch() {
  if (scratch) rmSync(scratch, {recursive: true, force: true})
  scratch = undefined
}

let counter = 0

/** POSIX shell quoting, for `script -c`. */
export function shq(word) {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`
}

const ANSI = /\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r/g

/**
 * Run one step to completion. Resolves with its wall time and peak RSS;
 * rejects with StepFailed on a non-zero exit, a timeout, or (pty) no prompt.
 * @param {Step} step
 * @returns {Promise<Sample>}
 */
export function runStep(step) {
  const rssFile = join(scratchDir(), `rss-${process.pid}-${counter++}`)
  const timed = [TIME_BIN, '-f', '%M', '-o', rssFile, ...step.argv]
  const env = {...process.env, ...step.env}
  for (const [k, v] of Object.entries(env)) if (v === undefined) delete env[k]
  const [command, args] = step.pty ? ['script', ['-qfec', timed.map(shq).join(' '), '/dev/null']] : [timed[0], timed.slice(1)]
  if (step.pty) env.TERM = env.TERM && env.TERM !== 'dumb' ? env.TERM : 'xterm'
  return new Promise((resolve, reject) => {
    let output = ''
    let prompted = false
    let answeredMs = 0
    const started = process.hrtime.bigint()
    const child = spawn(command, args, {cwd: step.cwd, env, stdio: [step.pty ? 'pipe' : 'ignore', 'pipe', 'pipe']})
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      finish(new StepFailed(`timed out after ${(step.timeoutMs ?? DEFAULT_TIMEOUT_MS) / 1000} s: ${step.argv.join(' ')}`, output))
    }, step.timeoutMs ?? DEFAULT_TIMEOUT_MS)
    const onData = (chunk) => {
      // What is matched: this chunk whole (a frame can be larger than the tail kept), after the end of the last.
      const seen = output.slice(-256) + chunk.toString('utf8')
      output = (output + chunk.toString('utf8')).slice(-8192)
      // A prompt is a line ending in "$ " (or "# ") with nothing after it yet.
      const answer = step.answer ?? {when: /[$#] $/, send: 'exit\n'}
      if (step.pty && !prompted && answer.when.test(seen.replace(ANSI, ''))) {
        prompted = true
        answeredMs = Number(process.hrtime.bigint() - started) / 1e6
        child.stdin?.write(answer.send)
      }
    }
    child.stdout.on('data', onData)
    child.stderr.on('data', onData)
    let done = false
    const finish = (error, sample) => {
      if (done) return
      done = true
      clearTimeout(timer)
      if (error) reject(error)
      else resolve(sample)
    }
    child.on('error', (error) => finish(new StepFailed(`cannot run ${command}: ${error.message}`, output)))
    child.on('close', (code, signal) => {
      const wallMs = Number(process.hrtime.bigint() - started) / 1e6
      const ms = step.answer?.timed ? answeredMs : wallMs
      let rssKiB = 0
      if (existsSync(rssFile)) {
        const lines = readFileSync(rssFile, 'utf8').trim().split('\n')
        rssKiB = Number(lines.at(-1)) || 0
        rmSync(rssFile, {force: true})
      }
      if (code !== 0) return finish(new StepFailed(`exit ${code ?? signal}: ${step.argv.join(' ')}`, output))
      if (step.pty && !prompted) return finish(new StepFailed(`no prompt seen: ${step.argv.join(' ')}`, output))
      finish(undefined, {ms, rssKiB, untimedMs: wallMs - ms})
    })
  })
}

/**
 * Steps one after another (a baseline made of two commands), timed together.
 * @param {Step[]} steps
 * @returns {Promise<Sample>}
 */
export async function runSequence(steps) {
  const started = process.hrtime.bigint()
  let rssKiB = 0
  let untimedMs = 0
  for (const step of steps) {
    const sample = await runStep(step)
    rssKiB = Math.max(rssKiB, sample.rssKiB)
    untimedMs += sample.untimedMs ?? 0
  }
  return {ms: Number(process.hrtime.bigint() - started) / 1e6 - untimedMs, rssKiB}
}

/**
 * Steps all at once; the time is the wall time until the last one exits.
 * @param {Step[]} steps
 * @returns {Promise<Sample>}
 */
export async function runParallel(steps) {
  const started = process.hrtime.bigint()
  const results = await Promise.allSettled(steps.map((s) => runStep(s)))
  const ms = Number(process.hrtime.bigint() - started) / 1e6
  const failed = results.find((r) => r.status === 'rejected')
  if (failed && failed.status === 'rejected') throw failed.reason
  return {ms, rssKiB: Math.max(...results.map((r) => (r.status === 'fulfilled' ? r.value.rssKiB : 0)))}
}

/** @param {number[]} values */
export function summary(values) {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length / 2
  const median = sorted.length % 2 ? sorted[Math.floor(mid)] : (sorted[mid - 1] + sorted[mid]) / 2
  return {min: sorted[0], median, max: sorted.at(-1) ?? NaN}
}

/**
 * The one subprocess wrapper (docker CLI, host git, npm), on node:child_process
 * (execa cost more start-up time than the rest of a warm `exec`; see
 * docs/PERFORMANCE.md). Failures carry the command, the exit code and stderr.
 * Children still running when this process exits, or is ended by SIGTERM or
 * SIGHUP, are ended with it.
 */
import {spawn, type ChildProcess, type StdioOptions} from 'node:child_process'
import {constants} from 'node:os'
import {CommandFailedError} from '../errors.js'

export interface RunOptions {
  cwd?: string
  env?: Record<string, string | undefined>
  input?: string
  /** Inherit the terminal (interactive shells, streamed builds). */
  inherit?: boolean
  /** Stream stdout/stderr to our stderr while capturing them (builds). */
  streamToStderr?: boolean
  /** Do not throw on a non-zero exit. */
  allowFailure?: boolean
  timeoutMs?: number
}

export interface RunResult {
  exitCode: number
  stdout: string
  stderr: string
  signal?: string
}

/** After a timeout's SIGTERM, SIGKILL follows this much later. */
const FORCE_KILL_AFTER_MS = 2000

const live = new Set<ChildProcess>()
let hooked = false

function endChildren(): void {
  for (const child of live) child.kill('SIGTERM')
}

/** Like execa's clean-up: our children do not outlive us. */
function hookExit(): void {
  if (hooked) return
  hooked = true
  process.on('exit', endChildren)
  for (const signal of ['SIGTERM', 'SIGHUP'] as const) {
    const onSignal = () => {
      endChildren()
      // Keep the default behaviour (die by the signal) unless someone else handles it.
      if (process.listenerCount(signal) === 1) {
        process.removeListener(signal, onSignal)
        process.kill(process.pid, signal)
      }
    }
    process.on(signal, onSignal)
  }
}

interface Outcome {
  code: number | null
  signal: NodeJS.Signals | null
  error?: NodeJS.ErrnoException
  stdout: string
  stderr: string
}

function spawnAndWait(command: string, args: readonly string[], options: RunOptions): Promise<Outcome> {
  const out = options.inherit ? 'inherit' : 'pipe'
  const stdin = options.input !== undefined ? 'pipe' : options.inherit ? 'inherit' : 'ignore'
  const stdio: StdioOptions = [stdin, out, out]
  return new Promise((resolve) => {
    const stdout: Buffer[] = []
    const stderr: Buffer[] = []
    let settled = false
    let child: ChildProcess
    const done = (outcome: Omit<Outcome, 'stdout' | 'stderr'>) => {
      if (settled) return
      settled = true
      live.delete(child)
      clearTimeout(timer)
      clearTimeout(killer)
      resolve({...outcome, stdout: Buffer.concat(stdout).toString('utf8'), stderr: Buffer.concat(stderr).toString('utf8')})
    }
    let timer: NodeJS.Timeout | undefined
    let killer: NodeJS.Timeout | undefined
    try {
      child = spawn(command, args, {cwd: options.cwd, env: {...process.env, ...options.env}, stdio})
    } catch (error) {
      // Invalid arguments (e.g. a NUL byte) throw synchronously.
      resolve({code: null, signal: null, error: error as NodeJS.ErrnoException, stdout: '', stderr: ''})
      return
    }
    live.add(child)
    hookExit()
    child.stdout?.on('data', (chunk: Buffer) => {
      stdout.push(chunk)
      if (options.streamToStderr) process.stderr.write(chunk)
    })
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr.push(chunk)
      if (options.streamToStderr) process.stderr.write(chunk)
    })
    if (child.stdin) {
      child.stdin.on('error', () => undefined) // the child may exit without reading its input
      child.stdin.end(options.input)
    }
    if (options.timeoutMs !== undefined && options.timeoutMs > 0) {
      timer = setTimeout(() => {
        child.kill('SIGTERM')
        killer = setTimeout(() => child.kill('SIGKILL'), FORCE_KILL_AFTER_MS)
        killer.unref()
      }, options.timeoutMs)
    }
    child.on('error', (error: NodeJS.ErrnoException) => {
      // Failed to start (ENOENT, EACCES): no exit event follows.
      if (child.pid === undefined) done({code: null, signal: null, error})
    })
    child.on('close', (code, signal) => done({code, signal}))
  })
}

export async function run(command: string, args: readonly string[], options: RunOptions = {}): Promise<RunResult> {
  const result = await spawnAndWait(command, args, options)
  if (result.error) {
    // The binary could not be started at all (ENOENT, EACCES).
    const code = result.error.code
    throw new CommandFailedError(command, undefined, code === 'ENOENT' ? `${command}: command not found` : `${command}: ${result.error.message}`, {
      cause: result.error,
      hint: code === 'ENOENT' ? `install ${command}, or put it on PATH` : undefined,
    })
  }
  const out: RunResult = {
    exitCode: result.code ?? (result.signal ? signalExitCode(result.signal) : 1),
    stdout: result.stdout,
    stderr: result.stderr,
    signal: result.signal ?? undefined,
  }
  if (out.exitCode !== 0 && !options.allowFailure) {
    throw new CommandFailedError([command, ...args.slice(0, 2)].join(' '), out.exitCode, out.stderr || out.stdout)
  }
  return out
}

/** A shell's exit code for a child killed by SIGNAL: 128 + its number (SIGKILL: 137). */
export function signalExitCode(signal: NodeJS.Signals): number {
  return 128 + (constants.signals[signal] ?? 0)
}

/**
 * The one subprocess wrapper (docker CLI, host git, npm), on node:child_process
 * (execa cost more start-up time than the rest of a warm `exec`; see
 * docs/PERFORMANCE.md). Failures carry the command, the exit code and stderr.
 * Running children are registered (children.ts), so that the command layer ends
 * them when it exits; an aborted signal ends a child at once.
 */
import {spawn, type ChildProcess, type StdioOptions} from 'node:child_process'
import {CommandFailedError} from '../errors.js'
import {liveChildren, signalExitCode} from './children.js'

export interface ProcOptions {
  cwd?: string
  env?: Record<string, string | undefined>
  input?: string
  /** Inherit the terminal (interactive shells, streamed builds). */
  inherit?: boolean
  /** Each chunk of stdout and stderr as it comes, while capturing them (streamed builds). */
  onOutput?: (chunk: Buffer) => void
  /** Do not throw on a non-zero exit. */
  allowFailure?: boolean
  timeoutMs?: number
  /** Ends the child (SIGTERM) when aborted. */
  signal?: AbortSignal
  /** Run the child as this user (only root may): its uid and gid, and no supplementary groups. */
  user?: {uid: number; gid: number}
}

export interface ProcResult {
  exitCode: number
  stdout: string
  stderr: string
  signal?: string
}

/** After a timeout's SIGTERM, SIGKILL follows this much later. */
const FORCE_KILL_AFTER_MS = 2000

interface Outcome {
  code: number | null
  signal: NodeJS.Signals | null
  error?: NodeJS.ErrnoException
  stdout: string
  stderr: string
}

function spawnAndWait(command: string, args: readonly string[], options: ProcOptions): Promise<Outcome> {
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
      liveChildren.delete(child)
      options.signal?.removeEventListener('abort', onAbort)
      clearTimeout(timer)
      clearTimeout(killer)
      resolve({...outcome, stdout: Buffer.concat(stdout).toString('utf8'), stderr: Buffer.concat(stderr).toString('utf8')})
    }
    let timer: NodeJS.Timeout | undefined
    let killer: NodeJS.Timeout | undefined
    const onAbort = () => child.kill('SIGTERM')
    try {
      child = spawn(command, args, {cwd: options.cwd, env: {...process.env, ...options.env}, stdio, ...(options.user ? {uid: options.user.uid, gid: options.user.gid} : {})})
    } catch (error) {
      // Invalid arguments (e.g. a NUL byte) throw synchronously.
      resolve({code: null, signal: null, error: error as NodeJS.ErrnoException, stdout: '', stderr: ''})
      return
    }
    liveChildren.add(child)
    if (options.signal?.aborted) onAbort()
    options.signal?.addEventListener('abort', onAbort, {once: true})
    child.stdout?.on('data', (chunk: Buffer) => {
      stdout.push(chunk)
      options.onOutput?.(chunk)
    })
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr.push(chunk)
      options.onOutput?.(chunk)
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

export async function run(command: string, args: readonly string[], options: ProcOptions = {}): Promise<ProcResult> {
  const result = await spawnAndWait(command, args, options)
  if (result.error) {
    // The binary could not be started at all (ENOENT, EACCES).
    const code = result.error.code
    throw new CommandFailedError(command, undefined, code === 'ENOENT' ? `${command}: command not found` : `${command}: ${result.error.message}`, {
      cause: result.error,
      hint: code === 'ENOENT' ? `install ${command}, or put it on PATH` : undefined,
    })
  }
  const out: ProcResult = {
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

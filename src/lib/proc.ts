/**
 * The one subprocess wrapper (docker CLI, host git, npm). execa is loaded lazily.
 * Failures carry the command, the exit code and stderr.
 */
import {CommandFailedError} from './errors.js'

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

export async function run(command: string, args: readonly string[], options: RunOptions = {}): Promise<RunResult> {
  const {execa} = await import('execa')
  const stdio = options.inherit ? 'inherit' : 'pipe'
  const child = execa(command, args, {
    cwd: options.cwd,
    env: options.env,
    extendEnv: true,
    input: options.input,
    stdin: options.input === undefined ? (options.inherit ? 'inherit' : 'ignore') : undefined,
    stdout: stdio,
    stderr: stdio,
    reject: false,
    stripFinalNewline: false,
    timeout: options.timeoutMs,
    forceKillAfterDelay: 2000,
  })
  if (options.streamToStderr && !options.inherit) {
    child.stdout?.on('data', (chunk: Buffer) => process.stderr.write(chunk))
    child.stderr?.on('data', (chunk: Buffer) => process.stderr.write(chunk))
  }
  const result = await child
  if (result.failed && result.exitCode === undefined && !result.signal) {
    // The binary could not be started at all (ENOENT, EACCES).
    const code = (result.cause as {code?: string} | undefined)?.code
    throw new CommandFailedError(command, undefined, code === 'ENOENT' ? `${command}: command not found` : String(result.message), {
      cause: result.cause,
      hint: code === 'ENOENT' ? `install ${command}, or put it on PATH` : undefined,
    })
  }
  const out: RunResult = {
    exitCode: result.exitCode ?? (result.signal ? 128 : 1),
    stdout: typeof result.stdout === 'string' ? result.stdout : '',
    stderr: typeof result.stderr === 'string' ? result.stderr : '',
    signal: result.signal ?? undefined,
  }
  if (out.exitCode !== 0 && !options.allowFailure) {
    throw new CommandFailedError([command, ...args.slice(0, 2)].join(' '), out.exitCode, out.stderr || out.stdout)
  }
  return out
}

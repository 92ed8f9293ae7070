/**
 * `run`: one command in a fresh sandbox container. The checks of its input, the
 * output and the exit code, shared by the oclif command (src/commands/run.ts)
 * and the CLI's fast path (src/cli/fast.ts), so that both behave alike. The
 * work itself is runOnce (src/lib/sandbox/runner.ts).
 */
import type {Engine} from '../lib/engine/index.js'
import type {NetworkMode} from '../lib/config/schema.js'
import {LimitsSchema} from '../lib/config/schema.js'
import {parseDuration} from '../lib/sandbox/ephemeral.js'
import {ExitCode, UsageError} from '../lib/errors.js'
import type {Reporter} from '../lib/reporter.js'
import {runOnce} from '../lib/sandbox/runner.js'
import {resolveWorkspace} from '../lib/workspace.js'
import {limitsFrom} from './limits.js'
import {StreamRedactor} from './redact-stream.js'

export interface OneShotFlags {
  'allow-host-network'?: boolean
  branch?: string
  cpus?: string
  env?: string[]
  keep?: boolean
  memory?: string
  network?: string
  'pids-limit'?: number
  timeout?: string
}

export interface OneShotIo {
  engine: () => Promise<Engine>
  reporter: Reporter
  /** Values never to print: the secret env values are added here as soon as they are known. */
  secrets: string[]
}

/** The usage error for a `run` without a command after `--`. */
export function noCommand(): UsageError {
  return new UsageError('no command given', {hint: 'put the command after --, e.g. agent-sandbox run -- npm test'})
}

/** Check the input, run the command once, report what happened; resolves to the exit code. */
export async function runOneShot(path: string | undefined, command: string[], flags: OneShotFlags, io: OneShotIo): Promise<number> {
  if (command.length === 0) throw noCommand()
  let timeoutMs: number | undefined
  if (flags.timeout !== undefined) {
    try {
      timeoutMs = parseDuration(flags.timeout)
    } catch {
      throw new UsageError(`--timeout is not a duration: ${flags.timeout}`, {hint: 'use e.g. 30s, 10m or 1h'})
    }
  }
  const limits = limitsFrom(flags)
  const checked = LimitsSchema.safeParse(limits ?? {})
  if (!checked.success) throw new UsageError(`invalid limit: ${checked.error.issues[0].path.join('.')}: ${checked.error.issues[0].message}`, {hint: 'e.g. --memory 512m --cpus 1.5 --pids-limit 256'})
  for (const name of flags.env ?? []) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw new UsageError(`--env takes a variable name, not ${JSON.stringify(name)}`, {hint: 'export NAME=value, then pass --env NAME'})
    if (process.env[name] === undefined) throw new UsageError(`--env ${name}: ${name} is not set in this environment`, {hint: `export ${name} first`})
  }
  const ws = resolveWorkspace(path)
  const engine = await io.engine()
  let out: StreamRedactor | undefined
  let err: StreamRedactor | undefined
  const result = await runOnce({engine, reporter: io.reporter}, ws, {
    command,
    branch: flags.branch,
    network: flags.network as NetworkMode | undefined,
    limits,
    envNames: flags.env,
    timeoutMs,
    keep: flags.keep,
    allowHostNetwork: flags['allow-host-network'],
    onCreated: ({secrets}) => {
      io.secrets.push(...secrets)
      out = new StreamRedactor(secrets, (t) => process.stdout.write(t))
      err = new StreamRedactor(secrets, (t) => process.stderr.write(t))
    },
    onStdout: (c) => out?.push(c),
    onStderr: (c) => err?.push(c),
  })
  out?.end()
  err?.end()
  if (result.kept) io.reporter.info(`kept container ${result.name}`)
  if (result.timedOut) {
    if (result.atPidsLimit) process.stderr.write(`agent-sandbox: the pids limit was reached (the sandbox was at its limit of ${limits?.pids ?? 'its'} processes)\n`)
    process.stderr.write(`agent-sandbox: timed out after ${flags.timeout}; the container was killed\n`)
    return ExitCode.timeout
  }
  if (result.oomKilled) process.stderr.write(`agent-sandbox: the command was killed: out of memory${limits?.memory ? ` (limit ${limits.memory})` : ''}\n`)
  if (result.pidsLimitHits > 0) process.stderr.write(`agent-sandbox: the pids limit was reached (${result.pidsLimitHits} forks refused)\n`)
  return result.exitCode
}

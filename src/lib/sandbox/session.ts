/**
 * Attaching to a sandbox: `exec` (non-interactive) and `shell` (a TTY login
 * shell). Both go through the engine CLI so that TTY size, raw mode and
 * signals are handled by the tool built for it, and both go through
 * sandbox-exec inside, so nothing runs before the firewall is ready.
 */
import type {NetworkMode} from '../config/schema.js'
import {ConflictError, NotReadyError, throwIfAborted} from '../errors.js'
import {compromisedReason, SANDBOX_EXEC_REFUSED} from './compromised-marker.js'
import type {Context} from '../context.js'
import {SANDBOX_EXEC, SANDBOX_USER} from '../contract.js'
import {Labels, Names, type Workspace} from '../workspace.js'
import {isNotRunning} from '../engine/containers.js'
import {GATEWAY_DEFAULTS} from '../network/gateway/ports.js'
import type {Readable, Writable} from 'node:stream'

/** The streams a non-interactive session reads and writes (the command layer gives its own). */
export interface SessionIo {
  /** `bytesRead` (a net.Socket's, or a tty's): tells whether a refused exec used any input. */
  stdin: Readable & {bytesRead?: number}
  stdout: Writable
  stderr: Writable
}

export interface SessionOptions {
  branch?: string
  baseTag?: string
  build?: boolean
  network?: NetworkMode
  /** --allow-host-network, for a sandbox this session has to create. */
  allowHostNetwork?: boolean
  /**
   * Interactive: the engine CLI runs the command on our terminal, with a TTY
   * when `tty` is set (the caller's stdin and stdout are terminals) and TERM.
   * Otherwise the command reads and writes `io`.
   */
  attach: {tty: boolean; term?: string} | {io: SessionIo}
}

/** Build the `docker exec` argv. Pure. */
export function execArgs(name: string, command: string[], options: {tty: boolean; env?: Record<string, string>}): string[] {
  const args = ['exec', '--interactive']
  if (options.tty) args.push('--tty')
  args.push('--user', SANDBOX_USER)
  for (const [k, v] of Object.entries(options.env ?? {})) args.push('--env', `${k}=${v}`)
  args.push(name, SANDBOX_EXEC, ...command)
  return args
}

export async function ensureRunning(ctx: Context, ws: Workspace, options: Omit<SessionOptions, 'attach'>): Promise<string> {
  const name = Names.container(ws, options.branch)
  const info = await ctx.engine.containers.inspect(name)
  if (info?.running) {
    const current = info.labels[Labels.network]
    if (options.network && current && current !== options.network) {
      throw new ConflictError(`${name} is running with network mode "${current}", not "${options.network}"`, {
        hint: 'stop it first (agent-sandbox stop), then start again with the new --network',
      })
    }
    // A stale image is rebuilt, and a sandbox on an older one named (a warm `exec` goes straight to the container instead).
    const {checkRunningImage} = await import('../images/stale.js')
    await checkRunningImage(ctx, ws, info, options)
    return name
  }
  // Only now the lifecycle module (settings, the schema, images, shelf): a warm exec needs one inspect and nothing else.
  const {startSandbox} = await import('./lifecycle.js')
  await startSandbox(ctx, ws, options)
  return name
}

/**
 * Run `command` in the sandbox with our stdin, stdout and stderr; resolves to its exit code.
 * `exec` talks to the engine API directly (no `docker` process to start: it is
 * the largest part of a warm exec); an interactive shell goes through the
 * engine CLI, which owns the terminal (raw mode, resizes, signals).
 */
export async function execInSandbox(ctx: Context, ws: Workspace, command: string[], options: SessionOptions): Promise<number> {
  const bytesRead = () => ('io' in options.attach ? (options.attach.io.stdin.bytesRead ?? 0) : 0)
  const stdinRead = bytesRead()
  const code = await execOnce(ctx, ws, command, options)
  if (code !== SANDBOX_EXEC_REFUSED) return code
  // sandbox-exec refused before running anything: if mount-watch marked the
  // sandbox compromised, restart it (the mounts come back) and run the command;
  // if a sidecar does not serve it (sandbox-exec checks that each listens), start repairs it (health.ts).
  const name = Names.container(ws, options.branch)
  const reason = (await compromisedReason(ctx.engine, name)) ?? (await sidecarsDown(ctx, name))
  if (reason === undefined) return code
  const {startSandbox} = await import('./lifecycle.js')
  await startSandbox(ctx, ws, options)
  if (bytesRead() !== stdinRead) {
    throw new NotReadyError(`${name} was restarted (${reason}), but the command's input was already read`, {hint: 'run the command again'})
  }
  return execOnce(ctx, ws, command, options)
}

/** Which sidecars do not serve the running sandbox, if any; undefined when all do (the 125 was the command's own). */
async function sidecarsDown(ctx: Context, name: string): Promise<string | undefined> {
  const info = await ctx.engine.containers.inspect(name)
  if (!info?.running) return undefined
  const {sidecarFaults} = await import('./health.js')
  const faults = await sidecarFaults(ctx, info)
  return faults.length ? `${faults.map((f) => f.name).join(' and ')} did not serve it` : undefined
}

/**
 * What every exec asks of sandbox-exec, which refuses (125, quietly: the CLI
 * says why) a compromised sandbox, and one whose egress gateway or push gate
 * does not listen in its network namespace: a /dev/tcp connect of bash (about
 * 0.1 ms each), where an inspect of the sidecars would cost a round trip to the
 * engine on every exec. Both are unset before the command runs.
 */
const EXEC_CHECKS: Record<string, string> = {AGENT_SANDBOX_QUIET_REFUSAL: 'compromised', AGENT_SANDBOX_CHECK_GATEWAY: String(GATEWAY_DEFAULTS.tlsPort)}

async function execOnce(ctx: Context, ws: Workspace, command: string[], options: SessionOptions): Promise<number> {
  const {attach} = options
  if ('io' in attach && options.network === undefined) {
    // A warm exec is the common case: go straight to the sandbox, and start it
    // only when the engine says it is missing or not running (nothing has run then).
    const code = await execStreaming(ctx, Names.container(ws, options.branch), command, attach.io).catch((error: unknown) => {
      if (isNotRunning(error)) return undefined
      throw error
    })
    if (code !== undefined) return code
  }
  const name = await ensureRunning(ctx, ws, options)
  if ('io' in attach) return execStreaming(ctx, name, command, attach.io)
  const env: Record<string, string> = {...EXEC_CHECKS}
  if (attach.tty && attach.term) env.TERM = attach.term
  // The child owns the terminal now: Ctrl-C is for it, not for us.
  const release = ctx.foreground?.()
  try {
    const result = await ctx.engine.cli.run(execArgs(name, command, {tty: attach.tty, env}), {inherit: true, allowFailure: true, signal: ctx.signal})
    return result.exitCode
  } finally {
    release?.()
  }
}

/**
 * A non-interactive exec over the API, as `docker exec --interactive` does it:
 * stdin piped in (end of input passed on), stdout and stderr kept apart and
 * written as they come, the process's exit code. An abort (Ctrl-C) ends the
 * session with the signal's reason, as it ends the docker CLI; like there, the
 * process in the sandbox is not signalled.
 */
async function execStreaming(ctx: Context, name: string, command: string[], io: SessionIo): Promise<number> {
  const result = await ctx.engine.containers.exec(name, [SANDBOX_EXEC, ...command], {
    user: SANDBOX_USER,
    // Refused in a compromised sandbox: say nothing, execInSandbox restarts it and says why.
    env: Object.entries(EXEC_CHECKS).map(([k, v]) => `${k}=${v}`),
    stdin: io.stdin,
    collect: false,
    signal: ctx.signal,
    stdout: io.stdout,
    stderr: io.stderr,
  })
  throwIfAborted(ctx.signal)
  return result.exitCode
}

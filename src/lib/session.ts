/**
 * Attaching to a sandbox: `exec` (non-interactive) and `shell` (a TTY login
 * shell). Both go through the engine CLI so that TTY size, raw mode and
 * signals are handled by the tool built for it, and both go through
 * sandbox-exec inside, so nothing runs before the firewall is ready.
 */
import type {NetworkMode} from './config/schema.js'
import {ConflictError} from './errors.js'
import type {Context} from './sandbox.js'
import {SANDBOX_USER} from './spec.js'
import {Names, type Workspace} from './workspace.js'

export interface SessionOptions {
  branch?: string
  baseTag?: string
  build?: boolean
  network?: NetworkMode
  interactive: boolean
}

/** Build the `docker exec` argv. Pure. */
export function execArgs(name: string, command: string[], options: {tty: boolean; env?: Record<string, string>}): string[] {
  const args = ['exec', '--interactive']
  if (options.tty) args.push('--tty')
  args.push('--user', SANDBOX_USER)
  for (const [k, v] of Object.entries(options.env ?? {})) args.push('--env', `${k}=${v}`)
  args.push(name, '/usr/local/bin/sandbox-exec', ...command)
  return args
}

export async function ensureRunning(ctx: Context, ws: Workspace, options: Omit<SessionOptions, 'interactive'>): Promise<string> {
  const name = Names.container(ws, options.branch)
  const info = await ctx.engine.containers.inspect(name)
  if (info?.running) {
    const current = info.labels['dev.agent-sandbox.network']
    if (options.network && current && current !== options.network) {
      throw new ConflictError(`${name} is running with network mode "${current}", not "${options.network}"`, {
        hint: 'stop it first (agent-sandbox stop), then start again with the new --network',
      })
    }
    return name
  }
  // Only now the lifecycle module (settings, zod, images, shelf): a warm exec needs one inspect and nothing else.
  const {startSandbox} = await import('./sandbox.js')
  await startSandbox(ctx, ws, options)
  return name
}

/** Run `command` in the sandbox with the terminal attached; resolves to its exit code. */
export async function execInSandbox(ctx: Context, ws: Workspace, command: string[], options: SessionOptions): Promise<number> {
  const name = await ensureRunning(ctx, ws, options)
  const tty = options.interactive && Boolean(process.stdin.isTTY && process.stdout.isTTY)
  const env: Record<string, string> = {}
  if (tty && process.env.TERM) env.TERM = process.env.TERM
  // The child owns the terminal now: Ctrl-C is for it, not for us.
  const ignore = () => {}
  process.on('SIGINT', ignore)
  process.on('SIGQUIT', ignore)
  try {
    const result = await ctx.engine.cli.run(execArgs(name, command, {tty, env}), {inherit: true, allowFailure: true})
    return result.exitCode
  } finally {
    process.removeListener('SIGINT', ignore)
    process.removeListener('SIGQUIT', ignore)
  }
}

/**
 * One-shot runs: a fresh container per command, streamed output, the exit
 * code passed through, a timeout that kills, and a report of what the kernel
 * did to it (OOM kill, pids limit). Fail-secure: if the firewall cannot be
 * set up, the entrypoint never starts the command.
 */
import type {NetworkMode} from '../config/schema.js'
import {NotReadyError} from '../errors.js'
import {createEphemeral, type Limits, type EphemeralOptions} from './ephemeral.js'
import type {Context} from '../context.js'
import type {Workspace} from '../workspace.js'

export interface OneShotOptions {
  command: string[]
  branch?: string
  baseTag?: string
  network?: NetworkMode
  limits?: Limits
  envNames?: string[]
  timeoutMs?: number
  keep?: boolean
  allowHostNetwork?: boolean
  /** --nested and --registry (EphemeralOptions.shape). */
  shape?: EphemeralOptions['shape']
  onStdout?: (chunk: Buffer) => void
  onStderr?: (chunk: Buffer) => void
  /** Called once the container exists, with the values to mask in output. */
  onCreated?: (info: {name: string; secrets: string[]}) => void
}

export interface OneShotResult {
  name: string
  exitCode: number
  timedOut: boolean
  oomKilled: boolean
  /** How many forks the pids limit refused (from the sandbox itself), when it did. */
  pidsLimitHits: number
  /** At the time out, the sandbox was at its pids limit (a fork bomb). */
  atPidsLimit: boolean
  kept: boolean
}

/** The entrypoint's last words, when set-up failed before the command ran. */
export const SETUP_FAILED_EXIT = 125
const SETUP_MARKER = /^agent-sandbox: (.+)$/m
const OOM_MARKER = /^agent-sandbox: out of memory: \d+ process/m
const PIDS_MARKER = /^agent-sandbox: pids limit reached: (\d+) forks? refused/m

export async function runOneShot(ctx: Context, ws: Workspace, options: OneShotOptions): Promise<OneShotResult> {
  const created = await createEphemeral(ctx, ws, {
    kind: 'run',
    branch: options.branch,
    baseTag: options.baseTag,
    network: options.network,
    limits: options.limits,
    envNames: options.envNames,
    cmd: options.command,
    allowHostNetwork: options.allowHostNetwork,
    shape: options.shape,
  })
  options.onCreated?.({name: created.name, secrets: created.secrets})
  const {engine} = ctx
  let tail = ''
  let timedOut = false
  let atPidsLimit = false
  let timer: NodeJS.Timeout | undefined
  // Interrupted (Ctrl-C): kill the command; its exit code is passed through as usual.
  const interrupt = () => {
    void engine.containers.kill(created.id).catch(() => undefined)
  }
  if (ctx.signal?.aborted) interrupt()
  ctx.signal?.addEventListener('abort', interrupt, {once: true})
  try {
    const {ended} = await engine.containers.attach(created.id, {
      onStdout: (c) => options.onStdout?.(c),
      onStderr: (c) => {
        tail = (tail + c.toString('utf8')).slice(-4096)
        options.onStderr?.(c)
      },
    })
    await engine.containers.start(created.id)
    if (options.timeoutMs) {
      timer = setTimeout(() => {
        timedOut = true
        // Sample before killing: a fork bomb shows as processes at the limit.
        void engine.containers
          .stats(created.id)
          .then((s) => {
            // Podman's stats carry no limit: fall back to the one we set.
            const limit = s.pidsLimit || created.spec.limits.pids || 0
            atPidsLimit = limit > 0 && s.pids >= limit - 2
          })
          .catch(() => undefined)
          .finally(() => engine.containers.kill(created.id))
      }, options.timeoutMs)
    }
    const exitCode = await engine.containers.wait(created.id)
    await ended
    const info = await engine.containers.inspect(created.id)
    if (exitCode === SETUP_FAILED_EXIT && !timedOut) {
      const reason = SETUP_MARKER.exec(tail)?.[1]
      if (reason && !/pids limit reached|out of memory/.test(reason)) {
        throw new NotReadyError(`run aborted before the command started: ${reason}`, {hint: 'nothing ran; fix the sandbox set-up (see `agent-sandbox doctor`)'})
      }
    }
    return {
      name: created.name,
      exitCode,
      timedOut,
      // The engine's flag (Docker), or the sandbox's own count from its memory cgroup (any engine).
      oomKilled: (info?.oomKilled ?? false) || OOM_MARKER.test(tail),
      pidsLimitHits: Number(PIDS_MARKER.exec(tail)?.[1] ?? 0),
      atPidsLimit,
      kept: Boolean(options.keep),
    }
  } finally {
    if (timer) clearTimeout(timer)
    ctx.signal?.removeEventListener('abort', interrupt)
    if (!options.keep) await engine.containers.remove(created.id, {force: true}).catch(() => undefined)
  }
}

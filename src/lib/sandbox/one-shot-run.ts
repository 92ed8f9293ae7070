/**
 * One-shot runs: a fresh container per command, streamed output, the exit
 * code passed through, a timeout that kills, and a report of what the kernel
 * did to it (OOM kill, pids limit). Fail-secure: if the firewall or, with
 * network firewall, the run's own egress gateway cannot be set up, the
 * entrypoint never starts the command.
 */
import type {NetworkMode} from '../config/schema.js'
import {NotReadyError, untilAborted} from '../errors.js'
import {parseRequestLog, type RequestLogEntry} from '../network/gateway/log.js'
import {createGateway, startRunGateway} from './gateway-container.js'
import {removeCompanion} from './remove-companion.js'
import {pullGatewayLogins} from '../logins/login-sync.js'
import {createEphemeral, type Limits, type EphemeralOptions} from './ephemeral-container.js'
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
  /** What the run's egress gateway refused (its request log), oldest first; none without a gateway. */
  blocked: RequestLogEntry[]
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
  // The gateway's container is made while the run container starts (it joins that one's network namespace).
  const gatewayCreated = created.gateway ? createGateway(ctx, created.gateway) : undefined
  // Whatever happens next, the end waits for this before removing the gateway (none is left half-made).
  let gatewaying: Promise<unknown> | undefined = gatewayCreated
  // Its failure is told where it is awaited (startRunGateway), not as an unhandled rejection before that.
  gatewayCreated?.catch(() => undefined)
  // Asked now, used at the end: whether the run and its gateway may be removed at once (below).
  const kind = created.gateway ? engine.kind().catch(() => 'podman' as const) : undefined
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
    // Its entrypoint waits for the gateway (fail closed): started in the run's network namespace, then the run goes on.
    if (created.gateway && gatewayCreated) {
      try {
        await untilAborted(ctx.signal, (gatewaying = startRunGateway(ctx, created.gateway, created.gatewaySecrets, gatewayCreated)))
      } catch (error) {
        // The run ended first (its own set-up failed, e.g. the firewall): that reason is the one to tell, below.
        if (ctx.signal?.aborted || (await engine.containers.inspect(created.id))?.running !== false) throw error
      }
    }
    if (options.timeoutMs) {
      timer = setTimeout(() => {
        timedOut = true
        // Sample before killing: a fork bomb shows as processes at the limit. Its processes come
        // and go (bash retries a refused fork, subshells exit), so up to three samples are taken.
        void (async () => {
          for (let sample = 0; sample < 3 && !atPidsLimit; sample++) {
            if (sample > 0) await new Promise((resolve) => setTimeout(resolve, 250))
            const s = await engine.containers.stats(created.id).catch(() => undefined)
            // Podman's stats carry no limit: fall back to the one we set.
            const limit = s?.pidsLimit || created.spec.limits.pids || 0
            atPidsLimit = s !== undefined && limit > 0 && s.pids >= limit - 2
          }
        })()
          .finally(() => engine.containers.kill(created.id))
          .catch(() => undefined)
      }, options.timeoutMs)
    }
    const exitCode = await engine.containers.wait(created.id)
    await ended
    const info = await engine.containers.inspect(created.id)
    // What the gateway refused, from its request log before it goes with the run: a run's gateway copies the log to its stdout (one call, no exec).
    const blocked = created.gateway ? parseRequestLog(await engine.containers.logs(created.gateway.name, 'all').catch(() => '')).filter((e) => e.decision === 'blocked') : []
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
      blocked,
    }
  } finally {
    if (timer) clearTimeout(timer)
    ctx.signal?.removeEventListener('abort', interrupt)
    const removeRun = async () => {
      if (!options.keep) await engine.containers.remove(created.id, {force: true}).catch(() => undefined)
    }
    // The gateway goes with the run, --keep or not (it would serve a stopped container). Podman keeps a
    // container that another one's network depends on, so there the gateway goes first; Docker takes both at once.
    if (created.gateway) {
      const gateway = created.gateway.name
      await gatewaying?.catch(() => undefined)
      // Tokens its gateway minted (a refresh during the run) go to the host's store before it goes.
      await pullGatewayLogins(engine, gateway, ctx.env ?? process.env)
      const gatewayGone = removeCompanion(ctx, gateway).catch(() => undefined)
      if ((await kind) === 'docker') await Promise.all([gatewayGone, removeRun()])
      else await gatewayGone.then(removeRun)
    } else await removeRun()
  }
}

/**
 * A sandbox's lifecycle: `start` (create, start or leave alone a running one,
 * with its push gate and egress gateway, repairing those that do not serve),
 * waiting until the entrypoint says it is ready, and removal. The creation
 * steps one-shot containers share are here too: volumes, the create call, the
 * check that the engine applied the limits. One sandbox per workspace (and per
 * branch).
 */
import {loadSettings} from '../config/load.js'
import type {ContainerInfo} from '../engine/index.js'
import {isNameInUse} from '../engine/containers.js'
import {EngineError, NotInitialisedError, NotReadyError, SandboxError, throwIfAborted, untilAborted} from '../errors.js'
import {buildRepoImage} from '../images/build.js'
import {olderImageNotice, refreshRepoImage, sameImageId} from '../images/stale.js'
import {withLock} from '../util/lock.js'
import {compromisedReason, lostMount, MountsNotRestoredError, restartNotice} from './compromised-marker.js'
import {provisionBranch} from './repo-shelf.js'
import {createPlaceholders} from '../git/protected.js'
import {silentReporter} from '../reporter.js'
import {repairLine, sidecarFaults} from './health.js'
import {NESTED_STORE, SANDBOX_EXEC} from '../contract.js'
import type {SandboxSpec} from './spec.js'
import {toCreateOptions} from './spec-render.js'
import {removeGatewayCa} from '../network/gateway-ca.js'
import {pullGatewayLogins} from '../logins/login-sync.js'
import {Labels, Names, requireInitialised, sanitizeBranch, type Workspace} from '../workspace.js'
import {quoteArg} from '../util/shell-quote.js'
import {ensureRefresher, provisionToken, removeAppToken} from '../github/refresher.js'
import type {Context} from '../context.js'
import {engineTraits, prepareSandbox, reportSecrets, type PreparedSandbox, type SandboxOptions} from './prepare.js'
import {checkGate, remakeGate, startGate} from './gate.js'
import {remakeGateway, startGatewayContainer} from './gateway-container.js'
import {removeCompanion} from './remove-companion.js'

export interface StartResult {
  name: string
  action: 'created' | 'started' | 'running' | 'repaired'
  container: ContainerInfo
}

/** Idempotent: a running container is left alone, a stopped one is started, a missing one created. */
export async function startSandbox(ctx: Context, ws: Workspace, options: SandboxOptions & {build?: boolean} = {}): Promise<StartResult> {
  let reporter = ctx.reporter ?? silentReporter
  requireInitialised(ws)
  // Before anything else, even for a running sandbox: a workspace file that now widens it is refused, not ignored.
  loadSettings({workspacePath: ws.path, flags: options.flags, env: ctx.env})
  if (ws.uid === 0) reporter.warn(`${ws.path} is owned by root: the sandbox user (uid 1000) may not be able to write to it`)
  const name = Names.container(ws, options.branch)
  const lockName = `${ws.hash}-${options.branch === undefined ? 'bind' : sanitizeBranch(options.branch)}`
  return withLock(
    lockName,
    async () => {
      // The image first: a stale one is rebuilt (an untrusted Dockerfile refused) before anything is made.
      const imageId = await refreshRepoImage(ctx, ws, options)
      const existing = await ctx.engine.containers.inspect(name)
      let restoring: string | undefined
      if (existing?.running) {
        const lost = await readyOrCompromised(ctx, existing)
        if (lost === undefined) {
          if (existing.labels[Labels.git] === undefined && existing.labels[Labels.kind] === 'sandbox') {
            reporter.warn(`${name} was started by an older agent-sandbox, in which the agent can write the host's .git; restart it: agent-sandbox stop && agent-sandbox start`)
          }
          // A whole sandbox (health.ts): each sidecar that does not serve it is made anew, one line each.
          const faults = await sidecarFaults(ctx, existing)
          for (const fault of faults) {
            reporter.info(repairLine(name, fault))
            await (fault.sidecar === 'gate' ? remakeGate(ctx, ws, existing, options) : remakeGateway(ctx, ws, existing, options))
          }
          if (existing.labels[Labels.ghapp] === '1') ensureRefresher(name, ctx.env ?? process.env, ctx.launchRefresher)
          const older = olderImageNotice(ws, existing, imageId, options.branch)
          if (older) reporter.warn(older)
          return {name, action: faults.length ? ('repaired' as const) : ('running' as const), container: existing}
        }
        // The host detached a protected mount (compromised-marker.ts): a restart mounts it again (and makes the gate anew).
        reporter.info(restartNotice(name, lost))
        reporter = {...reporter, step: (_label, work) => work()}
        ctx = {...ctx, reporter}
        await ctx.engine.containers.stop(existing.id)
        restoring = lostMount(lost) ?? lost
      }
      if (options.branch !== undefined) {
        await provisionBranch(ctx, ws, options.branch, {baseTag: options.baseTag, network: options.network, allowHostNetwork: options.allowHostNetwork})
      }
      const prepared = await prepareSandbox(ws, {...options, ...(await engineTraits(ctx))}, ctx.env)
      for (const s of prepared.skipped) reporter.warn(`protected path ${s.relative} not mounted: ${s.reason}`)
      reportSecrets(reporter, prepared)
      if (restoring !== undefined) assertRestores(prepared, restoring, name)
      const {ghapp} = prepared
      // The first token is minted here, so git works as soon as the sandbox is up; a refresher keeps it fresh.
      if (ghapp) await reporter.step('Getting a GitHub App installation token', () => provisionToken(ghapp.name, ghapp.record, ctx.env ?? process.env))
      const keepFresh = <T>(result: T): T => {
        if (ghapp) ensureRefresher(ghapp.name, ctx.env ?? process.env, ctx.launchRefresher)
        return result
      }
      if (existing) {
        const sameImage = imageId === undefined || sameImageId(existing.imageId, imageId)
        if (sameImage && existing.labels[Labels.spec] === prepared.spec.labels[Labels.spec]) {
          // A protected path removed on the host since: the engine would create its mount point as root.
          createPlaceholders(ws.path, prepared.placeholders, ws)
          await reporter.step(`Starting ${name}`, () => ctx.engine.containers.start(existing.id))
          const [container] = await Promise.all([
            waitReady(ctx, existing),
            prepared.gate ? startGate(ctx, prepared.gate) : undefined,
            prepared.gateway ? startGatewayContainer(ctx, prepared.gateway, prepared.gatewaySecrets, prepared.ghapp) : undefined,
          ])
          if (prepared.gate) await checkGate(ctx, prepared.gate.name)
          return keepFresh({name, action: 'started' as const, container})
        }
        reporter.info(`${sameImage ? 'settings' : 'its image'} changed since ${name} was created; recreating it (volumes are kept)`)
        // Its gate and gateway first: Podman keeps a container that another one's network depends on.
        await Promise.all([removeCompanion(ctx, Names.gate(name)), removeCompanion(ctx, Names.gateway(name))])
        await ctx.engine.containers.remove(existing.id, {force: true})
      }
      return keepFresh(await createAndStart(ctx, ws, prepared, options))
    },
    ctx.env,
  )
}

/** Wait for a running sandbox; the compromised marker's reason if mount-watch found a protected mount gone. */
async function readyOrCompromised(ctx: Context, container: ContainerInfo): Promise<string | undefined> {
  try {
    await waitReady(ctx, container)
    return undefined
  } catch (error) {
    const reason = error instanceof NotReadyError ? await compromisedReason(ctx.engine, container.id) : undefined
    if (reason === undefined) throw error
    return reason
  }
}

/** Refuse (exit 6) when the new plan would not mount the lost path read-only again, e.g. it is now a symbolic link. */
function assertRestores(prepared: PreparedSandbox, lost: string, name: string): void {
  const mounts = prepared.spec.env.find((e) => e.name === 'AGENT_SANDBOX_PROTECTED_MOUNTS')?.value.split('\n') ?? []
  if (mounts.some((m) => lost === m || lost.startsWith(`${m}/`))) return
  const why = prepared.skipped.map((s) => `${s.relative}: ${s.reason}`).join('; ')
  throw new MountsNotRestoredError(`cannot restore the read-only mount of ${lost} in ${name}${why ? ` (${why})` : ''}; the sandbox is stopped`, {
    hint: 'put the path back on the host as a regular file or directory, then run the command again',
  })
}

async function createAndStart(ctx: Context, ws: Workspace, prepared: PreparedSandbox, options: SandboxOptions & {build?: boolean}): Promise<StartResult> {
  const reporter = ctx.reporter ?? silentReporter
  const {spec, settings} = prepared
  await assertNestedEngine(ctx, spec)
  if (!(await ctx.engine.images.inspect(spec.image))) {
    if (!options.build) {
      throw new NotInitialisedError(`image ${spec.image} is missing`, {hint: `build it with: agent-sandbox build ${quoteArg(ws.path)} (or pass --build)`})
    }
    await buildRepoImage(ctx, ws, {baseTag: options.baseTag ?? settings.baseTag})
  }
  await ensureVolumes(ctx, ws, spec)
  createPlaceholders(ws.path, prepared.placeholders, ws)
  throwIfAborted(ctx.signal)
  let id: string | undefined
  let creating: Promise<string> | undefined
  let starting: Promise<void> | undefined
  let gating: Promise<void> | undefined
  let gatewaying: Promise<void> | undefined
  try {
    id = await untilAborted(ctx.signal, reporter.step(`Creating ${spec.name}`, () => (creating = createContainer(ctx, spec))))
    await untilAborted(ctx.signal, (starting = ctx.engine.containers.start(id)))
    const created = id
    const {gate, gateway} = prepared
    // The gate and the gateway join the sandbox's network namespace, so they start once the sandbox has one.
    const [container] = await untilAborted(
      ctx.signal,
      reporter.step('Waiting for the firewall and set-up', () =>
        Promise.all([
          waitReady(ctx, {id: created, name: spec.name}),
          gate ? (gating = startGate(ctx, gate)) : undefined,
          gateway ? (gatewaying = startGatewayContainer(ctx, gateway, prepared.gatewaySecrets, prepared.ghapp)) : undefined,
        ]),
      ),
    )
    if (gate) await checkGate(ctx, gate.name)
    return {name: spec.name, action: 'created', container}
  } catch (error) {
    // Never leave it half-made: remove the gate and the gateway, then the sandbox; the next start recreates them.
    // An interrupted create, start or gate is waited for first: Podman, with the request abandoned
    // or the container removed while it starts, can keep the name taken by a container it no longer
    // knows, and the gate joins the sandbox's namespaces.
    const created = id ?? (await creating?.catch(() => undefined))
    await Promise.all([starting?.catch(() => undefined), gating?.catch(() => undefined), gatewaying?.catch(() => undefined)])
    if (prepared.gate) await removeCompanion(ctx, prepared.gate.name).catch(() => undefined)
    if (prepared.gateway) await removeCompanion(ctx, prepared.gateway.name).catch(() => undefined)
    if (created) await ctx.engine.containers.remove(created, {force: true}).catch(() => undefined)
    throw error
  }
}

/**
 * Nested containers are built for Docker's handling of the sandbox's security
 * options (our seccomp profile, an unmasked /proc, devices for node); Podman
 * as the host engine is refused before anything is created (docs/podman.md).
 */
export async function assertNestedEngine(ctx: Context, spec: SandboxSpec): Promise<void> {
  if (spec.labels[Labels.nested] !== '1' || (await ctx.engine.kind()) !== 'podman') return
  throw new EngineError('unsupported', 'nested containers (--nested, nestedContainers) need Docker as the host engine; Podman is not supported for them yet', {
    hint: 'use a Docker engine (DOCKER_HOST), or start without --nested',
  })
}

/**
 * Create the container, and make sure the engine applied the limits asked for:
 * rootless Podman on cgroup v1 accepts memory, CPU and pids limits and drops
 * them without an error (only its own log says so). Never run with less
 * isolation than asked for: such a container is removed again.
 */
export async function createContainer(ctx: Context, spec: SandboxSpec): Promise<string> {
  const id = await createNamed(ctx, spec)
  if (!spec.limits.memoryBytes && !spec.limits.nanoCpus && !spec.limits.pids) return id
  const dropped = droppedLimits(spec, await ctx.engine.containers.inspect(id))
  if (dropped.length === 0) return id
  await ctx.engine.containers.remove(id, {force: true})
  throw new EngineError('unsupported', `the engine accepted but does not enforce the ${dropped.join(', ')} limit (rootless Podman cannot on a cgroup v1 host)`, {
    hint: 'drop --memory/--cpus/--pids-limit and the config limits, or use rootful Podman, Docker, or a cgroup v2 host that delegates controllers to your user',
  })
}

/**
 * Create, where a container of the same name may be left from a start that was
 * interrupted while its create call was in flight (it was never ours to remove):
 * that one is removed and the create tried again, a few times, since Podman
 * may still be taking it down (its name in use, the container "not known").
 */
async function createNamed(ctx: Context, spec: SandboxSpec): Promise<string> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await ctx.engine.containers.create(toCreateOptions(spec, await ctx.engine.kind()))
    } catch (error) {
      if (!isNameInUse(error) || attempt >= 10) throw error
      await ctx.engine.containers.remove(spec.name, {force: true}).catch(() => undefined)
      await new Promise((resolve) => setTimeout(resolve, 200))
    }
  }
}

/** Which requested limits the created container does not have. Pure. */
export function droppedLimits(spec: Pick<SandboxSpec, 'limits'>, applied: {memory: number; nanoCpus: number; pidsLimit: number} | undefined): string[] {
  const {memoryBytes, nanoCpus, pids} = spec.limits
  return [memoryBytes && !applied?.memory ? 'memory' : '', nanoCpus && !applied?.nanoCpus ? 'cpus' : '', pids && !applied?.pidsLimit ? 'pids' : ''].filter(Boolean)
}

function volumeKind(target: string): string {
  if (target === '/repo-shelf') return 'shelf'
  if (target === '/commandhistory') return 'history'
  if (target.endsWith('/.git')) return 'git'
  if (target === NESTED_STORE) return 'containers'
  return 'agent-config'
}

export async function ensureVolumes(ctx: Context, ws: Workspace, spec: SandboxSpec): Promise<void> {
  const base = {[Labels.managed]: 'true'}
  await Promise.all(
    spec.mounts
      .filter((m) => m.type === 'volume')
      .map((m) => {
        const shared = !m.source.includes(ws.hash)
        const labels = shared
          ? {...base, [Labels.volume]: 'agent-config'}
          : {...base, [Labels.workspace]: ws.path, [Labels.hash]: ws.hash, [Labels.volume]: volumeKind(m.target)}
        return ctx.engine.volumes.ensure(m.source, labels)
      }),
  )
}

/**
 * Readiness is the entrypoint's own signal: `sandbox-exec true` returns once
 * /run/agent-sandbox/ready exists, and fails with the reason if set-up failed.
 */
export async function waitReady(ctx: Context, container: {id: string; name: string}): Promise<ContainerInfo> {
  let result
  try {
    result = await ctx.engine.containers.exec(container.id, [SANDBOX_EXEC, 'true'])
  } catch (error) {
    if (!(error instanceof SandboxError)) return failedStart(ctx, container, error)
    throw error
  }
  if (result.exitCode !== 0) return failedStart(ctx, container, new Error(result.stderr.trim()))
  const info = await ctx.engine.containers.inspect(container.id)
  if (!info) throw new NotReadyError(`container ${container.name} disappeared while starting`)
  return info
}

async function failedStart(ctx: Context, container: {id: string; name: string}, cause: unknown): Promise<never> {
  const info = await ctx.engine.containers.inspect(container.id).catch(() => undefined)
  const logs = info ? await ctx.engine.containers.logs(container.id, 20).catch(() => '') : ''
  const reason =
    logs
      .split('\n')
      .filter((l) => l.startsWith('agent-sandbox: ') && !l.includes('ready'))
      .pop()
      ?.replace(/^agent-sandbox: /, '') ??
    (cause instanceof Error && cause.message ? cause.message.split('\n').pop() : undefined) ??
    'unknown reason'
  throw new NotReadyError(`sandbox ${container.name} did not become ready: ${reason}`, {
    cause,
    hint: 'fix the cause and run start again; `agent-sandbox doctor` checks a running sandbox',
  })
}

export interface RemoveResult {
  container: 'removed' | 'missing'
  volumes: string[]
}

/** Remove the container; with `volumes`, also the workspace's own volumes (history, and the shelf when no branch sandbox remains). */
export async function removeSandbox(ctx: Context, ws: Workspace, options: {branch?: string; volumes?: boolean} = {}): Promise<RemoveResult> {
  const name = Names.container(ws, options.branch)
  const info = await ctx.engine.containers.inspect(name)
  const result: RemoveResult = {container: info ? 'removed' : 'missing', volumes: []}
  await pullGatewayLogins(ctx.engine, Names.gateway(name), ctx.env ?? process.env)
  await Promise.all([removeCompanion(ctx, Names.gate(name)), removeCompanion(ctx, Names.gateway(name))])
  if (info) {
    await ctx.engine.containers.remove(info.id, {force: true})
  }
  // Its token refresher and token directory go with it, and its gateway's CA.
  await removeAppToken(name, ctx.env ?? process.env)
  removeGatewayCa(name, ctx.env ?? process.env)
  if (options.volumes) {
    const others = await ctx.engine.containers.list({[Labels.workspace]: ws.path})
    if (others.length === 0) {
      for (const volume of await ctx.engine.volumes.list({[Labels.hash]: ws.hash})) {
        await ctx.engine.volumes.remove(volume.name)
        result.volumes.push(volume.name)
      }
    }
  }
  return result
}

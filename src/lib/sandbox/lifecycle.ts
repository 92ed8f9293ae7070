/**
 * The sandbox lifecycle: ensure (create / start / leave alone), readiness,
 * exec, stop, rm and list. One container per workspace (and per branch).
 */
import type {ConfigFile, NetworkMode, Settings} from '../config/schema.js'
import {loadSettings} from '../config/load.js'
import type {ContainerInfo} from '../engine/index.js'
import {isNameInUse} from '../engine/containers.js'
import {EngineError, NotInitialisedError, NotReadyError, SandboxError, throwIfAborted, untilAborted, UsageError} from '../errors.js'
import {hostGitIdentity} from '../git/identity.js'
import {buildRepoImage} from '../images/build.js'
import {olderImageNotice, refreshRepoImage, sameImageId} from '../images/stale.js'
import {withLock} from '../util/lock.js'
import {nestedSeccompProfile} from '../util/assets.js'
import {compromisedReason, lostMount, MountsNotRestoredError, restartNotice} from './compromised-marker.js'
import {provisionBranch} from './repo-shelf.js'
import {createPlaceholders, fsKindOf, planProtectedPaths} from '../git/protected.js'
import {detectHookConfig, fsHookProbe, hooksDirOf, hooksPathFromConfig, hookConfigLabel, type HookConfigReport} from '../git/hook-config.js'
import {silentReporter, type Reporter} from '../reporter.js'
import {repairLine, sidecarFaults} from './health.js'
import {NESTED_STORE, SANDBOX_EXEC, STATE_DIR} from '../contract.js'
import {checkDockerNetwork, type SandboxSpec} from './spec.js'
import {buildSpec} from './spec-sandbox.js'
import {buildGateSpec, buildGatewaySpec} from './spec-companions.js'
import {toCreateOptions} from './spec-render.js'
import {GATEWAY_DEFAULTS, SECRETS_FILE} from '../network/gateway/ports.js'
import type {GatewaySecrets} from '../network/gateway/server.js'
import {caCertLine, ensureGatewayCa, ephemeralGatewayCa, removeGatewayCa} from '../network/gateway-ca.js'
import {liveRules} from '../network/gateway-live-rules.js'
import {gatewayAddRule, gatewayAllow} from '../network/firewall.js'
import {isMasked, makeSurrogate, type MaskedSecret} from '../network/gateway/secrets.js'
import {maskVendorKeys} from '../network/gateway/agent-logins.js'
import {gatewayLogins, pullGatewayLogins} from '../logins/login-sync.js'
import {Labels, Names, requireInitialised, sanitizeBranch, type Workspace} from '../workspace.js'
import {quoteArg} from '../util/shell-quote.js'
import {assertGatewayCanCarry, GHAPP_SECRET, ghappSecret, planGhapp, type GhappPlan} from '../github/plan.js'
import {readToken, tokenPaths} from '../github/token-store.js'
import {deliverToGateway, ensureRefresher, provisionToken, removeAppToken} from '../github/refresher.js'
import type {Context} from '../context.js'


export interface SandboxOptions {
  branch?: string
  baseTag?: string
  network?: NetworkMode
  allowDomains?: string[]
  /** Settings given as flags (highest layer). */
  flags?: ConfigFile
  /** For one-shot and API containers: their own name, command and labels. */
  name?: string
  cmd?: string[]
  labels?: Record<string, string>
  /** The engine's user namespace mode (Engine.userns()). */
  userns?: string
  /** The engine's host uses SELinux labels (Engine.selinux()). */
  selinux?: boolean
  /** Allow dockerNetwork `host` (with network `open` only): --allow-host-network. */
  allowHostNetwork?: boolean
  /** A one-shot container that may get an egress gateway of its own (`run`, when it has masked secrets; not the API's idle containers). */
  oneShotGateway?: boolean
  /**
   * The masked secrets a running sandbox holds (heldSecrets: names, hosts and
   * surrogates from its labels and env), for a gateway made anew: it knows every
   * one of them, whether or not this command's environment has the value.
   */
  held?: HeldSecret[]
}

/** A masked secret as a running sandbox holds it: no value, only its surrogate (spec.ts Labels.masked and the env). */
export type HeldSecret = Omit<MaskedSecret, 'value'>

export interface PreparedSandbox {
  spec: SandboxSpec
  /** The push gate that goes with a `start`-ed sandbox that has a repository (buildGateSpec). */
  gate?: SandboxSpec
  /** The egress gateway that goes with a `start`-ed sandbox with network `firewall` (buildGatewaySpec). */
  gateway?: SandboxSpec
  /** What only the gateway may hold (its CA's key, masked secrets' values), handed to it over an exec's stdin, never in a spec. */
  gatewaySecrets?: GatewaySecrets
  /** `secretEnv` names given in as they are (the plain form): the agent can read and send them anywhere allowed. */
  exposedSecrets: string[]
  /** Masked `secretEnv` names left out: this container has no gateway to swap them (network none or open, the API's containers). */
  unmasked: string[]
  /** Masked names the gateway knows without a value (held, not set here): their surrogates are refused at every host. */
  unvalued: string[]
  settings: Settings
  placeholders: Array<{relative: string; kind: 'file' | 'dir'}>
  skipped: Array<{relative: string; reason: string}>
  /** The GitHub App token this sandbox gets (the workspace's own sandboxes with an egress gateway only): a surrogate inside, the token in the gateway. */
  ghapp?: GhappPlan
  /** A GitHub App is configured, but this sandbox has no gateway to hold its token (network open or none): it gets none. */
  ghappWithheld?: NetworkMode
  /** Hook frameworks found and their configuration, mounted read-only in bind mode (absent: protectHookConfig false). */
  hookConfig?: HookConfigReport
}

/** What a container does with its secretEnv: plain values the agent can read, masked ones left out for want of a gateway. */
export function reportSecrets(reporter: Reporter, prepared: Pick<PreparedSandbox, 'exposedSecrets' | 'unmasked' | 'ghappWithheld'>): void {
  if (prepared.ghappWithheld) {
    reporter.warn(`the GitHub App token is not given to this sandbox: with network ${prepared.ghappWithheld} it has no egress gateway to hold the token, so git and gh inside get no GitHub credentials; use network firewall`)
  }
  for (const n of prepared.exposedSecrets) {
    reporter.warn(`secretEnv ${n} is passed in as it is: the agent can read it and send it to any allowed host; declare {"name": "${n}", "hosts": [...]} to mask it`)
  }
  for (const n of prepared.unmasked) reporter.warn(`secretEnv ${n} is masked, but this container has no egress gateway (sandboxes and runs with network firewall have one): it is not set`)
}

/**
 * Everything `start` would create, computed without touching the engine or the
 * host, but for the egress gateway's CA, made once per sandbox in the user's
 * state directory (its certificate is part of the spec).
 */
export async function prepareSandbox(ws: Workspace, options: SandboxOptions, env: NodeJS.ProcessEnv = process.env): Promise<PreparedSandbox> {
  const loaded = loadSettings({workspacePath: ws.path, flags: options.flags, env}).settings
  // ANTHROPIC_API_KEY and OPENAI_API_KEY are masked for their vendor's hosts, however they are handed in.
  const settings = {...loaded, secretEnv: maskVendorKeys(loaded.secretEnv)}
  checkDockerNetwork(settings.dockerNetwork, options.network ?? settings.network, options.allowHostNetwork)
  const kindOf = fsKindOf(ws.path)
  const git = hostGitKind(ws, kindOf)
  const branchMode = options.branch !== undefined
  // Without a repository of its own to give the agent (no .git, an empty one, a
  // gitdir: file), the workspace's .git itself is protected, so that the agent
  // cannot make one that the host's git would then read.
  // With a repository, the host's .git is out of the agent's reach as a whole
  // (its own git directory over it, or branch mode's read-only checkout), so
  // paths under it need no mounts of their own.
  const paths = git === 'repository' || branchMode ? settings.protectedPaths.filter((p) => !/^(\.\/)*\.git(\/|$)/.test(p)) : [...settings.protectedPaths, '.git']
  // Hook frameworks' configuration: existing files only, so no placeholders come of it.
  // Branch mode's checkout of the host is read-only as a whole: the detection only tells the gate what to flag.
  const probe = fsHookProbe(ws.path)
  const hookConfig = settings.protectHookConfig ? detectHookConfig(probe, ws.path) : undefined
  // The host's own hooks directory in the work tree (core.hooksPath, e.g. .githooks) runs
  // on the host and in the gate: read-only whatever protectHookConfig says, a placeholder
  // when it does not exist yet (the agent must not create it either).
  const hooksDir = git === 'repository' ? hooksDirOf(hooksPathFromConfig(probe.read('.git/config') ?? ''), ws.path) : undefined
  const hostHooks = hooksDir && hooksDir !== '.git' && !hooksDir.startsWith('.git/') ? [hooksDir] : []
  const plan = planProtectedPaths([...paths, ...(branchMode ? [] : [...hostHooks, ...(hookConfig?.protect ?? [])])], kindOf)
  const oneShot = options.name !== undefined
  const ownGit = git === 'repository' && !branchMode ? (oneShot ? 'tmpfs' : 'volume') : undefined
  const plannedGhapp = options.name === undefined ? planGhapp(ws, settings.github, Names.container(ws, options.branch), env) : undefined
  const plainSecrets = settings.secretEnv.filter((e): e is string => !isMasked(e)).filter((n) => env[n] !== undefined)
  const secretValues = Object.fromEntries(plainSecrets.map((n) => [n, env[n] as string]))
  const maskedEntries = settings.secretEnv.filter(isMasked).filter((e) => env[e.name] !== undefined)
  // A sandbox gets a gateway. A one-shot `run` only when it has something only a gateway can give it: masked
  // secrets with a value (runs get no App token: planGhapp is for sandboxes); a plain run keeps the firewall
  // alone, and its speed. The API's idle containers never (they have no companion containers).
  // The agents' logins imported masked (logins/login-store.ts): the gateway holds them, the volumes surrogates.
  const logins = gatewayLogins(ws, settings.sharedAgentConfig, env)
  const runGateway = oneShot && options.oneShotGateway === true && (maskedEntries.length > 0 || logins !== undefined)
  const gatewayOn = (!oneShot || runGateway) && (options.network ?? settings.network) === 'firewall'
  // The App token is held by the gateway alone (a surrogate inside): without a gateway the sandbox gets none (fail closed).
  const ghapp = gatewayOn ? plannedGhapp : undefined
  if (ghapp) assertGatewayCanCarry(ghapp.record.config)
  // A run's CA lives as long as the run: made in memory, never written to the host.
  const gatewayCa = gatewayOn ? (oneShot ? ephemeralGatewayCa(options.name as string) : ensureGatewayCa(Names.container(ws, options.branch), env)) : undefined
  // Masked secrets need the gateway: a container without one gets neither the value nor a surrogate.
  const masked: MaskedSecret[] = !gatewayCa
    ? []
    : options.held
      ? options.held.map((h) => ({...h, ...(env[h.name] === undefined ? {} : {value: env[h.name] as string})}))
      : maskedEntries.map((e) => ({name: e.name, hosts: e.hosts, value: env[e.name] as string, surrogate: makeSurrogate(e.name, env[e.name] as string, gatewayCa.key)}))
  const spec = buildSpec(ws, settings, {
    gateway: gatewayOn,
    runGateway: runGateway && gatewayOn,
    gatewayCa: gatewayCa && caCertLine(gatewayCa.cert),
    branch: options.branch,
    network: options.network,
    protectedPaths: plan.mounts,
    gitIdentity: await hostGitIdentity(),
    secretValues,
    surrogates: Object.fromEntries(masked.map((m) => [m.name, m.surrogate])),
    extraAllowDomains: options.allowDomains,
    name: options.name,
    cmd: options.cmd,
    // What doctor checks: the mounts of bind mode (branch mode's shelf has none of them).
    labels: hookConfig?.frameworks.length && !branchMode ? {[Labels.hookConfig]: hookConfigLabel(hookConfig), ...options.labels} : options.labels,
    ghapp: ghapp?.spec,
    masked: masked.map((m) => ({name: m.name, hosts: m.hosts})),
    userns: options.userns,
    selinux: options.selinux,
    ownGit,
    nestedSeccomp: nestedSeccompProfile,
    nestedStore: oneShot ? 'tmpfs' : 'volume',
  })
  const gate = !oneShot && (ownGit === 'volume' || branchMode) ? buildGateSpec(ws, spec, settings, {...options, gateFiles: hookConfig?.protect}) : undefined
  const gateway = gatewayOn ? buildGatewaySpec(ws, spec, {branch: options.branch, userns: options.userns, httpRules: settings.httpRules, inspectAll: settings.gateway.inspectAll, oneShot: runGateway, masked: [...masked.map((m) => m.name), ...(ghapp ? [GHAPP_SECRET] : [])]}) : undefined
  return {
    spec,
    gate,
    gateway,
    gatewaySecrets: gatewayCa && {ca: gatewayCa, secrets: masked, ...(logins ? {logins} : {})},
    exposedSecrets: plainSecrets,
    unmasked: gatewayCa ? [] : maskedEntries.map((e) => e.name),
    unvalued: masked.filter((m) => m.value === undefined).map((m) => m.name),
    settings,
    placeholders: plan.placeholders,
    skipped: plan.skipped,
    ghapp,
    ghappWithheld: plannedGhapp && !ghapp ? (options.network ?? settings.network) : undefined,
    hookConfig,
  }
}

/** What the workspace's .git is: a repository the agent gets its own view of, or something to protect. */
function hostGitKind(ws: Workspace, kindOf: ReturnType<typeof fsKindOf>): 'repository' | 'other' {
  const kind = kindOf('.git')
  if (kind === 'symlink') {
    throw new UsageError(`${ws.path}/.git is a symbolic link, which the sandbox cannot keep the agent from replacing`, {
      hint: 'move the repository into the workspace (or use a `gitdir:` file), or work in branch mode with --branch',
    })
  }
  return kind === 'dir' && kindOf('.git/HEAD') === 'file' ? 'repository' : 'other'
}

const GATEWAY_PORTS = [GATEWAY_DEFAULTS.httpPort, GATEWAY_DEFAULTS.tlsPort]

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
 * (Re)create and start a sandbox's push gate. It joins the sandbox's network
 * namespace as it starts, so it is made anew whenever the sandbox (re)starts.
 */
async function startGate(ctx: Context, gate: SandboxSpec): Promise<void> {
  await removeCompanion(ctx, gate.name)
  const id = await ctx.engine.containers.create(toCreateOptions(gate))
  await ctx.engine.containers.start(id)
}

/** Remove a gate or gateway (a run's too) by name: missing is fine. */
export async function removeCompanion(ctx: Context, name: string): Promise<void> {
  const existing = await ctx.engine.containers.inspect(name)
  if (existing) await ctx.engine.containers.remove(existing.id, {force: true})
}

/** The gate must be serving: if its program stopped, say why (its last log line). */
async function checkGate(ctx: Context, name: string): Promise<void> {
  const info = await ctx.engine.containers.inspect(name)
  if (info?.running) return
  const logs = info ? await ctx.engine.containers.logs(info.id, 5).catch(() => '') : ''
  const reason = logs.split('\n').filter((l) => l.startsWith('git-gate: ')).pop()?.replace(/^git-gate: /, '') ?? 'it exited'
  throw new NotReadyError(`the push gate ${name} did not start: ${reason}`, {hint: 'fix the cause and run start again'})
}

/** A running sandbox's gate, made anew (it does not serve the sandbox: health.ts). */
async function remakeGate(ctx: Context, ws: Workspace, sandbox: ContainerInfo, options: SandboxOptions): Promise<void> {
  const name = Names.gate(sandbox.name)
  const prepared = await prepareSandbox(ws, {...options, ...(await engineTraits(ctx))}, ctx.env)
  if (!prepared.gate) return
  await startGate(ctx, prepared.gate)
  await checkGate(ctx, name)
}

/**
 * (Re)create and start a sandbox's egress gateway, and wait until it serves:
 * the sandbox's web traffic is redirected to it, so a sandbox without it has
 * no web at all (fail closed). If it does not come up, start fails (exit 6)
 * with its last message.
 */
async function startGatewayContainer(ctx: Context, gateway: SandboxSpec, secrets: GatewaySecrets | undefined, ghapp: GhappPlan | undefined, created?: Promise<string>): Promise<void> {
  const id = await (created ?? createGateway(ctx, gateway))
  await ctx.engine.containers.start(id)
  const env = ctx.env ?? process.env
  // The App token as it is on the host now (the refresher may renew it at any time: see below).
  const app = ghapp && ghappSecret(ghapp, env)
  const all = secrets && {...secrets, secrets: [...(secrets.secrets ?? []), ...(app ? [app] : [])]}
  const [httpPort, tlsPort] = GATEWAY_PORTS
  // One exec, no node of its own: first the secrets, before it is probed ready, into its tmpfs over stdin (so
  // neither docker inspect nor the sandbox sees them; renamed into place, so that the gateway never reads half
  // of them); then bash's /dev/tcp, retried (the gateway's own uid may connect to itself).
  const file = `${GATEWAY_DEFAULTS.stateDir}/${SECRETS_FILE}`
  const hand = all ? `(umask 077 && cat > ${file}.new && mv -f ${file}.new ${file}) || exit 3; ` : ''
  // Every 20 ms for 10 s: node boots in about 0.1 s here, and a coarser step would add up to its length to every start.
  const probe = `${hand}for i in $(seq 500); do (: < /dev/tcp/127.0.0.1/${httpPort} && : < /dev/tcp/127.0.0.1/${tlsPort}) 2> /dev/null && exit 0; sleep 0.02; done; exit 1`
  const result = await ctx.engine.containers
    .exec(id, ['bash', '-c', probe], all ? {stdin: JSON.stringify(all)} : {})
    .catch((error: unknown) => ({exitCode: -1, stdout: '', stderr: String(error)}))
  const handed = {exitCode: result.exitCode === 3 ? 3 : 0, stderr: result.stderr}
  if (result.exitCode === 0) {
    // A renewal between reading the token and handing it over went to the gateway this one replaced: hand it again.
    const now = ghapp && app ? readToken(tokenPaths(ghapp.name, env)) : undefined
    if (ghapp && now && now !== app?.value) await deliverToGateway(ctx.engine, ghapp.name, now)
    return
  }
  const info = await ctx.engine.containers.inspect(id)
  const logs = info ? await ctx.engine.containers.logs(id, 20).catch(() => '') : ''
  const lines = [...logs.split('\n'), ...handed.stderr.split('\n')].map((l) => l.trim())
  // Its own last word, else node's error line (node ends a crash with its version, which says nothing).
  const reason =
    lines.filter((l) => l.startsWith('egress-gateway: ')).pop()?.replace(/^egress-gateway: /, '') ??
    lines.find((l) => /^\w*Error: /.test(l)) ??
    (info?.running ? (handed.exitCode === 0 ? 'it does not listen' : 'it did not take its secrets') : 'it exited')
  throw new NotReadyError(`the egress gateway ${gateway.name} did not start: ${reason}`, {hint: 'without it the sandbox has no web access; fix the cause and run start again'})
}

/**
 * Create a gateway container (any left with its name goes first). The container
 * whose network namespace it joins must exist, not yet run: a run creates its
 * gateway while the run container starts.
 */
export async function createGateway(ctx: Context, gateway: SandboxSpec): Promise<string> {
  await removeCompanion(ctx, gateway.name)
  return ctx.engine.containers.create(toCreateOptions(gateway))
}

/**
 * A one-shot run's gateway: started in the run container's network namespace
 * while its entrypoint waits (entrypoint.sh wait_gateway) for the gateway's TLS
 * port to accept. The gateway listens only once it holds its CA and secrets
 * (src/gateway.ts), and before the command starts nothing else in that
 * namespace listens there: the command so never starts before the gateway is
 * ready.
 */
export async function startRunGateway(ctx: Context, gateway: SandboxSpec, secrets: GatewaySecrets | undefined, created: Promise<string>): Promise<void> {
  await startGatewayContainer(ctx, gateway, secrets, undefined, created)
}

/**
 * A running sandbox's gateway, made anew (it does not serve the sandbox:
 * health.ts), with what `firewall allow` added live since the sandbox started.
 */
async function remakeGateway(ctx: Context, ws: Workspace, sandbox: ContainerInfo, options: SandboxOptions): Promise<void> {
  // Every surrogate the sandbox holds, whatever this command's environment has: those sent elsewhere stay refused.
  const prepared = await prepareSandbox(ws, {...options, held: heldSecrets(sandbox), ...(await engineTraits(ctx))}, ctx.env)
  if (!prepared.gateway) return
  const reporter = ctx.reporter ?? silentReporter
  for (const n of prepared.unvalued) {
    reporter.warn(`secretEnv ${n} is not set here: the new egress gateway of ${sandbox.name} refuses its surrogate at every host, its own too; set ${n} and run the command again to restore it`)
  }
  if (sandbox.labels[Labels.spec] !== prepared.spec.labels[Labels.spec]) {
    reporter.warn(`the settings or secretEnv variables differ from those ${sandbox.name} was started with: its new gateway follows the current ones; restart the sandbox (agent-sandbox stop, then start) to bring both in line`)
  }
  await startGatewayContainer(ctx, prepared.gateway, prepared.gatewaySecrets, prepared.ghapp)
  // Domains added live since the sandbox started (firewall allow) are in its firewall's allowlist only.
  const saved = await ctx.engine.containers.exec(sandbox.id, ['cat', `${STATE_DIR}/allowlist`])
  const domains = saved.exitCode === 0 ? saved.stdout.split('\n').filter(Boolean) : []
  if (domains.length) await gatewayAllow(ctx, sandbox.name, domains)
  // Its live httpRules are kept on the host, per start of the sandbox (gateway-ca.ts).
  for (const rule of liveRules(sandbox.name, sandbox.startedAt, ctx.env)) await gatewayAddRule(ctx, sandbox.name, rule)
}

/**
 * The masked secrets a running sandbox holds: names and hosts from its
 * Labels.masked, surrogates from its environment. Undefined for a sandbox
 * made before the label (its gateway is made from the current settings).
 */
export function heldSecrets(sandbox: Pick<ContainerInfo, 'labels' | 'env'>): HeldSecret[] | undefined {
  const label = sandbox.labels[Labels.masked]
  if (label === undefined) return undefined
  let declared: Array<{name: string; hosts: string[]}>
  try {
    declared = JSON.parse(label) as typeof declared
  } catch {
    return undefined
  }
  const env = new Map(sandbox.env.map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)]))
  return declared.flatMap((d) => {
    const surrogate = env.get(d.name)
    return surrogate ? [{name: d.name, hosts: d.hosts, surrogate}] : []
  })
}

/** What the spec needs to know about the engine (cheap on a local engine; see Engine). */
export async function engineTraits(ctx: Context): Promise<{userns?: string; selinux: boolean}> {
  const [userns, selinux] = await Promise.all([ctx.engine.userns(), ctx.engine.selinux()])
  return {userns, selinux}
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

export {listSandboxes, type SandboxRow} from './listing.js'
export {STATE_DIR}

/**
 * Settings into specs: everything `start`, `run` and `show-run` would create
 * for a workspace (the sandbox, its push gate and its egress gateway, and what
 * only the gateway may hold), and what the spec needs to know of the engine.
 */
import type {ConfigFile, NetworkMode, Settings} from '../config/schema.js'
import {loadSettings} from '../config/load.js'
import type {ContainerInfo} from '../engine/index.js'
import {UsageError} from '../errors.js'
import {hostGitIdentity} from '../git/identity.js'
import {nestedSeccompProfile} from '../util/assets.js'
import {fsKindOf, planProtectedPaths} from '../git/protected.js'
import {detectHookConfig, fsHookProbe, hooksDirOf, hooksPathFromConfig, hookConfigLabel, type HookConfigReport} from '../git/hook-config.js'
import type {Reporter} from '../reporter.js'
import {checkDockerNetwork, type SandboxSpec} from './spec.js'
import {buildSpec} from './spec-sandbox.js'
import {buildGateSpec, buildGatewaySpec} from './spec-companions.js'
import type {GatewaySecrets} from '../network/gateway/server.js'
import {caCertLine, ensureGatewayCa, ephemeralGatewayCa} from '../network/gateway-ca.js'
import {isMasked, makeSurrogate, type MaskedSecret} from '../network/gateway/secrets.js'
import {maskVendorKeys} from '../network/gateway/agent-logins.js'
import {gatewayLogins} from '../logins/login-sync.js'
import {Labels, Names, type Workspace} from '../workspace.js'
import {assertGatewayCanCarry, GHAPP_SECRET, planGhapp, type GhappPlan} from '../github/plan.js'
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

/** A masked secret as a running sandbox holds it: no value, only its surrogate (spec-sandbox.ts Labels.masked and the env). */
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

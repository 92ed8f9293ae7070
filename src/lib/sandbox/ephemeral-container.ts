/**
 * Fresh containers from the workspace's image, with the same mounts,
 * guardrails and firewall as `start`: one per `run`, and one per
 * SandboxManager sandbox. Created through the same spec and readiness path.
 */
import {randomBytes} from 'node:crypto'
import type {ConfigFile, NetworkMode} from '../config/schema.js'
import {ImageMissingError} from '../errors.js'
import {createPlaceholders} from '../git/protected.js'
import {silentReporter} from '../reporter.js'
import {assertNestedEngine, createContainer, ensureVolumes} from './lifecycle.js'
import {engineTraits, prepareSandbox, reportSecrets} from './prepare.js'
import type {Context} from '../context.js'
import {requireInitialised} from '../workspace.js'
import {quoteArg} from '../util/shell-quote.js'
import {provisionBranch} from './repo-shelf.js'
import {secretValues, type SandboxSpec} from './spec.js'
import type {GatewaySecrets} from '../network/gateway/server.js'
import {IMAGE_RUNTIME, Labels, type Workspace} from '../workspace.js'

export interface Limits {
  memory?: string
  cpus?: number
  pids?: number
}

export interface EphemeralOptions {
  kind: 'run' | 'api'
  branch?: string
  baseTag?: string
  network?: NetworkMode
  limits?: Limits
  /** Host environment variables passed by reference (value read from ctx.env, never printed). */
  envNames?: string[]
  /** Extra plain variables (the API's per-sandbox env). */
  env?: Record<string, string>
  allowDomains?: string[]
  cmd?: string[]
  /** --allow-host-network (spec.ts checkDockerNetwork). */
  allowHostNetwork?: boolean
  /** --nested and --registry: as the config layer of flags (nestedContainers, registries). */
  shape?: Pick<ConfigFile, 'nestedContainers' | 'registries'>
}

export interface EphemeralContainer {
  id: string
  name: string
  spec: SandboxSpec
  /** Values to mask in anything printed. */
  secrets: string[]
  /** A run's egress gateway (network firewall), to start once the run container is (startRunGateway). */
  gateway?: SandboxSpec
  gatewaySecrets?: GatewaySecrets
}

/** Pure: `2s`, `500ms`, `1.5m`, `1h`, or plain seconds, to milliseconds. */
export function parseDuration(text: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(text.trim())
  if (!match) throw new Error(`not a duration: ${text}`)
  const unit = {ms: 1, s: 1000, m: 60_000, h: 3_600_000}[(match[2] ?? 's') as 'ms' | 's' | 'm' | 'h']
  const ms = Math.round(Number(match[1]) * unit)
  if (ms <= 0) throw new Error(`not a positive duration: ${text}`)
  return ms
}

export async function createEphemeral(ctx: Context, ws: Workspace, options: EphemeralOptions): Promise<EphemeralContainer> {
  requireInitialised(ws)
  if (options.branch !== undefined) {
    await provisionBranch(ctx, ws, options.branch, {baseTag: options.baseTag, network: options.network, allowHostNetwork: options.allowHostNetwork})
  }
  const flags: ConfigFile = {}
  if (options.limits && Object.keys(options.limits).length) flags.limits = options.limits
  if (options.envNames?.length) flags.secretEnv = options.envNames
  if (options.env && Object.keys(options.env).length) flags.env = options.env
  Object.assign(flags, options.shape)
  const suffix = randomBytes(4).toString('hex')
  const name = `agent-sandbox-${options.kind}-${ws.hash.slice(0, 12)}-${suffix}`
  const prepared = await prepareSandbox(
    ws,
    {
      branch: options.branch,
      network: options.network,
      allowDomains: options.allowDomains,
      flags,
      name,
      cmd: options.cmd,
      labels: {[Labels.kind]: options.kind},
      allowHostNetwork: options.allowHostNetwork,
      oneShotGateway: options.kind === 'run',
      ...(await engineTraits(ctx)),
    },
    ctx.env,
  )
  const {spec} = prepared
  // Only what is left out: `run --env NAME` asks for the value in as it is, and says so itself.
  reportSecrets(ctx.reporter ?? silentReporter, {exposedSecrets: [], unmasked: prepared.unmasked})
  await assertNestedEngine(ctx, spec)
  const image = await ctx.engine.images.inspect(spec.image)
  if (!image) {
    throw new ImageMissingError(`image ${spec.image} is missing`, {hint: `build it with: agent-sandbox build ${quoteArg(ws.path)}`})
  }
  // A run with a gateway needs an entrypoint that waits for it as this CLI starts it (else it would wait 120 s, then fail).
  if (prepared.gateway && !(Number(image.labels[Labels.runtime] ?? 1) >= IMAGE_RUNTIME)) {
    throw new ImageMissingError(`image ${spec.image} was built from a base image older than this agent-sandbox, whose runs with masked secrets it cannot start`, {
      hint: `rebuild both: agent-sandbox build-base && agent-sandbox build ${quoteArg(ws.path)}`,
    })
  }
  await ensureVolumes(ctx, ws, spec)
  createPlaceholders(ws.path, prepared.placeholders, ws)
  const id = await createContainer(ctx, spec)
  return {id, name, spec, secrets: secretValues(spec), gateway: prepared.gateway, gatewaySecrets: prepared.gatewaySecrets}
}

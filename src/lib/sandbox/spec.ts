/**
 * The shape of every container we make (SandboxSpec), the checks of the
 * inputs its builders share, and its digest. The builders, all pure:
 * spec-sandbox.ts (the sandbox) and spec-companions.ts (helpers, the push
 * gate, the egress gateway). spec-render.ts turns a spec into an engine
 * create call and into `docker run` argv.
 */
import type {NetworkMode, Settings} from '../config/schema.js'
import {MIN_CPUS, MIN_MEMORY_BYTES, parseSize} from '../config/limits.js'
import {Labels, md5, type Workspace} from '../workspace.js'
import type {MountSpec} from '../engine/types.js'
import {UsageError} from '../errors.js'

/** The nested runtime mounts a proc of its own, which the kernel refuses while parts of /proc are masked. */
export const UNMASKED_PROC = 'systempaths=unconfined'

export interface EnvEntry {
  name: string
  value: string
  /** Printed as a reference (`-e NAME`), never as its value. */
  secret: boolean
}

export interface PortSpec {
  hostIp: string
  hostPort: string
  containerPort: string
  protocol: 'tcp' | 'udp'
}

export interface SandboxSpec {
  name: string
  image: string
  labels: Record<string, string>
  mounts: MountSpec[]
  env: EnvEntry[]
  /** The main process's user: root, for the entrypoint only. */
  user: string
  /** The user every agent process runs as. */
  execUser: string
  workdir: string
  capAdd: string[]
  capDrop: string[]
  securityOpt: string[]
  /** Host devices passed in (nested containers only); the entrypoint gives them to `node`. */
  devices?: string[]
  networkMode: string
  ports: PortSpec[]
  limits: {memoryBytes?: number; nanoCpus?: number; pids?: number}
  /** `keep-id` on rootless Podman: your uid is the same inside, so `node`, renumbered to it, owns the workspace. */
  userns?: string
  cmd?: string[]
  /** Replaces the image's entrypoint (the gate runs its own program, not the sandbox set-up). */
  entrypoint?: string[]
  readOnlyRootfs?: boolean
}

/** Parse `3000`, `8080:3000`, `127.0.0.1:8080:3000[/udp]`. Host ports bind to loopback unless an address is given. */
export function parsePort(text: string): PortSpec {
  const [body, proto] = text.split('/')
  const protocol = proto === 'udp' ? 'udp' : 'tcp'
  const ipv6 = /^\[([^\]]+)\]:(.*)$/.exec(body)
  let rest = body
  let hostIp = '127.0.0.1'
  if (ipv6) {
    hostIp = ipv6[1]
    rest = ipv6[2]
  }
  const parts = rest.split(':')
  if (parts.length === 3) {
    hostIp = parts[0]
    return {hostIp, hostPort: parts[1], containerPort: parts[2], protocol}
  }
  if (parts.length === 2) return {hostIp, hostPort: parts[0], containerPort: parts[1], protocol}
  return {hostIp, hostPort: parts[0], containerPort: parts[0], protocol}
}

/**
 * The engine network a sandbox may join. `host` puts the sandbox in the
 * host's network namespace (and, with the firewall, would hand NET_ADMIN over
 * the host's own rules to the entrypoint): only with network `open` and an
 * explicit --allow-host-network. `container:…` (another container's, e.g.
 * another sandbox's, namespace) and Podman's `ns:…` are refused from any
 * source. Pure.
 */
export function checkDockerNetwork(dockerNetwork: string, network: NetworkMode, allowHostNetwork = false): void {
  if (dockerNetwork.includes(':')) {
    throw new UsageError(`dockerNetwork ${JSON.stringify(dockerNetwork)} would join another container's or namespace's network: refused from any source`, {
      hint: 'use an engine network name such as bridge, or one you created with docker network create',
    })
  }
  if (dockerNetwork !== 'host' || (network === 'open' && allowHostNetwork)) return
  if (network !== 'open') {
    throw new UsageError(`dockerNetwork "host" is refused with network ${JSON.stringify(network)}: the sandbox would run in the host's network namespace`, {
      hint: 'drop dockerNetwork "host"; to share the host network unfiltered, use --network open --allow-host-network',
    })
  }
  throw new UsageError('dockerNetwork "host" shares the host\'s network with the sandbox: pass --allow-host-network to allow it', {
    hint: 'or drop dockerNetwork "host" from the config',
  })
}

export {parseSize}

/**
 * The engine values of the limits, as the spec sends them. The engine reads 0
 * as no limit, so a set limit below the engine's minimum is an error here too,
 * whatever the schema let through: it never becomes unlimited.
 */
export function engineLimits(limits: Settings['limits']): SandboxSpec['limits'] {
  const out: SandboxSpec['limits'] = {}
  if (limits.memory !== undefined) out.memoryBytes = parseSize(limits.memory)
  if (limits.cpus !== undefined) out.nanoCpus = Math.round(limits.cpus * 1e9)
  if (limits.pids !== undefined) out.pids = limits.pids
  const low: string[] = []
  if (out.memoryBytes !== undefined && !(out.memoryBytes >= MIN_MEMORY_BYTES)) low.push(`memory ${JSON.stringify(limits.memory)} (at least 6m)`)
  if (out.nanoCpus !== undefined && !(out.nanoCpus >= MIN_CPUS * 1e9)) low.push(`cpus ${limits.cpus} (at least 0.01)`)
  if (out.pids !== undefined && !(out.pids >= 1)) low.push(`pids ${limits.pids} (at least 1)`)
  if (low.length) throw new UsageError(`limits below the engine's minimum, which it would read as no limit: ${low.join(', ')}`, {hint: 'raise them, or leave the limit out'})
  return out
}

/** Whether bind mounts are relabelled for SELinux: the setting, or with `auto` what the engine says. Pure. */
export function wantsRelabel(setting: Settings['selinuxRelabel'], selinux: boolean | undefined): boolean {
  return setting === 'on' || (setting === 'auto' && selinux === true)
}

/**
 * Relabel bind mounts for SELinux: the workspace (and the protected paths in
 * it) is shared by every sandbox and run of the workspace (:z); the token
 * directory belongs to one sandbox (:Z). The engine API can relabel only
 * `src:dst:opts` binds, which cannot hold a path with a colon.
 */
export function relabelBinds(mounts: MountSpec[]): void {
  for (const m of mounts) {
    if (m.type !== 'bind') continue
    assertRelabelable(m)
    m.relabel = m.target === '/run/secrets' ? 'private' : 'shared'
  }
}

export function assertRelabelable(m: MountSpec): void {
  if (m.source.includes(':') || m.target.includes(':')) {
    throw new UsageError(`cannot relabel ${m.source} for SELinux: the path contains a colon`, {
      hint: 'rename the directory, or set "selinuxRelabel": "off" and disable labels for containers (containers.conf: label = false)',
    })
  }
}

/**
 * The gateway's uid: one no user of the sandbox has. The firewall lets only
 * this uid out on ports 80 and 443, so it must never be the agent's (the
 * workspace owner's, which `node` is renumbered to).
 */
export function gatewayUid(ws: Pick<Workspace, 'uid'>): number {
  return ws.uid === 65532 ? 65531 : 65532
}

/** A stable digest of everything that shapes the container (not secret values). */
export function specHash(spec: SandboxSpec): string {
  const {labels, ...rest} = spec
  const stable = {
    ...rest,
    env: spec.env.map((e) => `${e.name}=${e.secret ? '<secret>' : e.value}`),
    labels: Object.fromEntries(Object.entries(labels).filter(([k]) => k !== Labels.spec)),
  }
  // md5 is only a change detector here
  return md5(JSON.stringify(stable)).slice(0, 12)
}

/** Every value that must never be printed. */
export function secretValues(spec: SandboxSpec): string[] {
  return spec.env.filter((e) => e.secret && e.value.length > 0).map((e) => e.value)
}

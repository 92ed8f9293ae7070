/**
 * The one pure description of a sandbox container. `start` turns it into an
 * engine create call (toCreateOptions); `show-run` prints it as `docker run`
 * argv (toDockerRunArgs). Both come from the same SandboxSpec, so they agree.
 */
import type {ContainerCreateOptions} from 'dockerode'
import {readFileSync} from 'node:fs'
import {posix} from 'node:path'
import type {NetworkMode, RegistryPreset, Settings} from '../config/schema.js'
import {MIN_CPUS, MIN_MEMORY_BYTES, parseSize} from '../config/limits.js'
import {Labels, md5, Names, sanitizeBranch, workspaceLabels, type Workspace} from '../workspace.js'
import {quoteArg} from '../util/shell-quote.js'
import type {MountSpec} from '../engine/types.js'
import {UsageError} from '../errors.js'
import {inboundPortsEnv, sandboxSecurityOpt} from './seccomp.js'
import {GATEWAY_DEFAULTS, gatewayCommand} from '../network/gateway/ports.js'
import type {HttpRule} from '../network/gateway/rules.js'
import {isMasked, secretName} from '../network/gateway/secrets.js'

export const STATE_DIR = '/run/agent-sandbox'
/** Debian's system bundle, which the image's NODE_EXTRA_CA_CERTS names (base-image/Dockerfile). */
export const SYSTEM_CA_BUNDLE = '/etc/ssl/certs/ca-certificates.crt'
export const SANDBOX_USER = 'node'
/** Every agent process goes through it: it waits for the firewall and set-up (docs/design.md). */
export const SANDBOX_EXEC = '/usr/local/bin/sandbox-exec'
export const SHELF_MOUNT = '/repo-shelf'
/** Where a bind-mode sandbox sees the host's .git (read-only): the alternate of its own git directory. */
export const HOST_GIT_MOUNT = '/host-git'
/** The push gate's port on the sandbox's loopback (git-gate.sh), and the URL of the remote `host`. */
export const GATE_PORT = 19418
export const GATE_URL = `git://127.0.0.1:${GATE_PORT}/ws/.git`

/** Nested containers (nestedContainers): the Podman storage volume, the socket DOCKER_HOST names, the devices `node` gets. */
export const NESTED_STORE = '/home/node/.local/share/containers'
export const NESTED_DOCKER_HOST = `unix://${STATE_DIR}/podman/podman.sock`
export const NESTED_DEVICES = ['/dev/fuse', '/dev/net/tun']
/** The nested runtime mounts a proc of its own, which the kernel refuses while parts of /proc are masked. */
const UNMASKED_PROC = 'systempaths=unconfined'

/**
 * The domains a registry preset allowlists: the registry, its token service
 * and where it redirects blob downloads (2026-11). A registry that moves its
 * blobs elsewhere needs that domain in allowDomains.
 */
export const REGISTRY_DOMAINS: Record<RegistryPreset, string[]> = {
  'docker.io': ['docker.io', 'registry-1.docker.io', 'auth.docker.io', 'index.docker.io', 'production.cloudflare.docker.com'],
  'ghcr.io': ['ghcr.io', 'pkg-containers.githubusercontent.com'],
  'quay.io': ['quay.io', 'cdn.quay.io', 'cdn01.quay.io', 'cdn02.quay.io', 'cdn03.quay.io'],
}

/** Capabilities the entrypoint needs to install the firewall and renumber `node`. Nothing else. */
// NET_BIND_SERVICE: the resolver binds port 53 as root (Docker lowers ip_unprivileged_port_start, Podman does not).
export const FIREWALL_CAPS = ['CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'KILL', 'NET_ADMIN', 'NET_BIND_SERVICE', 'NET_RAW', 'SETGID', 'SETUID']
export const BASE_CAPS = ['CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'KILL', 'SETGID', 'SETUID']

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

export interface ProtectedMount {
  /** Path relative to the workspace root. */
  relative: string
}

export interface SpecOptions {
  branch?: string
  network?: NetworkMode
  baseTag?: string
  image?: string
  /** Protected paths that exist (or were given placeholders) on the host, relative to the workspace. */
  protectedPaths: ProtectedMount[]
  gitIdentity?: {name?: string; email?: string}
  /** Values of `secretEnv` names, read from the host environment by the caller. */
  secretValues?: Record<string, string>
  /** Surrogates of masked `secretEnv` entries (gateway/secrets.ts), by name: what the sandbox gets instead of the value. */
  surrogates?: Record<string, string>
  extraAllowDomains?: string[]
  /** Extra labels (e.g. kind=run). */
  labels?: Record<string, string>
  name?: string
  cmd?: string[]
  /** GitHub App token for git and gh (docs/github-app.md): the host directory holding ghapp_token, and where it is used. */
  ghapp?: GhappSpec
  /** The engine's user namespace mode (Engine.userns(): `keep-id` on rootless Podman). */
  userns?: string
  /** The engine's host uses SELinux labels (Engine.selinux()); with selinuxRelabel `auto`, bind mounts are relabelled. */
  selinux?: boolean
  /**
   * The agent's own git directory over the host's .git (bind mode, when the
   * workspace's .git is a repository): a per-workspace volume for sandboxes
   * (pushed through the gate), a tmpfs for one-shot containers.
   */
  ownGit?: 'volume' | 'tmpfs'
  /** The seccomp profile file of nested containers (util/assets.ts nestedSeccompProfile); required with nestedContainers. */
  nestedSeccomp?: string
  /** Where nested images live: the workspace's volume (sandboxes), or a tmpfs (one-shot containers, which must not share a store with a running sandbox). */
  nestedStore?: 'volume' | 'tmpfs'
  /** The sandbox's web traffic goes through its egress gateway (buildGatewaySpec); network `firewall` only. */
  gateway?: boolean
  /** A one-shot run whose gateway the CLI starts after it: its entrypoint waits for the gateway's TLS port (AGENT_SANDBOX_RUN_GATEWAY). */
  runGateway?: boolean
  /** The masked secrets whose surrogates the sandbox holds (names and hosts, no values): its Labels.masked. */
  masked?: Array<{name: string; hosts: string[]}>
  /** The gateway's CA certificate as one line (gateway-ca.ts caCertLine): the entrypoint adds it to the system bundle. */
  gatewayCa?: string
}

export interface GhappSpec {
  /** Host directory holding only `ghapp_token`, the token's surrogate (the gateway holds the token); mounted read-only at /run/secrets. */
  secretsDir: string
  /** `scheme://host[:port]` the askpass helper answers for. */
  gitOrigin: string
  /** The host `gh` talks to. */
  ghHost: string
  /** The API and git hosts, added to the firewall allowlist. */
  allowDomains: string[]
}

export const GHAPP_ASKPASS = '/usr/local/bin/git-askpass-ghapp'

export function workspaceMountPath(ws: Workspace): string {
  return posix.join('/workspace', ws.repoName)
}

export function workdirFor(ws: Workspace, branch?: string): string {
  return branch === undefined ? workspaceMountPath(ws) : posix.join(SHELF_MOUNT, 'worktrees', sanitizeBranch(branch))
}

const SECRET_NAME = /(TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|API_?KEY|PRIVATE|CREDENTIAL|AUTH|COOKIE|SESSION)/i

export function looksSecret(name: string): boolean {
  return SECRET_NAME.test(name)
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
function relabelBinds(mounts: MountSpec[]): void {
  for (const m of mounts) {
    if (m.type !== 'bind') continue
    assertRelabelable(m)
    m.relabel = m.target === '/run/secrets' ? 'private' : 'shared'
  }
}

function assertRelabelable(m: MountSpec): void {
  if (m.source.includes(':') || m.target.includes(':')) {
    throw new UsageError(`cannot relabel ${m.source} for SELinux: the path contains a colon`, {
      hint: 'rename the directory, or set "selinuxRelabel": "off" and disable labels for containers (containers.conf: label = false)',
    })
  }
}

export function buildSpec(ws: Workspace, settings: Settings, options: SpecOptions): SandboxSpec {
  const network = options.network ?? settings.network
  const wsMount = workspaceMountPath(ws)
  const workdir = workdirFor(ws, options.branch)
  const shared = settings.sharedAgentConfig
  const branchMode = options.branch !== undefined
  const ownGit = branchMode ? undefined : options.ownGit
  const mounts: MountSpec[] = [
    // Branch mode works in the repo-shelf: the host's checkout is only read.
    {type: 'bind', source: ws.path, target: wsMount, readOnly: branchMode},
    ...(ownGit
      ? [
          ownGit === 'volume'
            ? {type: 'volume' as const, source: Names.gitVolume(ws), target: posix.join(wsMount, '.git'), readOnly: false}
            : {type: 'tmpfs' as const, source: '', target: posix.join(wsMount, '.git'), readOnly: false},
          {type: 'bind' as const, source: posix.join(ws.path, '.git'), target: HOST_GIT_MOUNT, readOnly: true},
        ]
      : []),
    ...options.protectedPaths.map((p) => ({
      type: 'bind' as const,
      source: posix.join(ws.path, p.relative),
      target: posix.join(wsMount, p.relative),
      readOnly: true,
    })),
    {type: 'volume', source: Names.shelfVolume(ws), target: SHELF_MOUNT, readOnly: false},
    {type: 'volume', source: Names.historyVolume(ws), target: '/commandhistory', readOnly: false},
    {type: 'volume', source: Names.claudeVolume(ws, shared), target: '/home/node/.claude', readOnly: false},
    {type: 'volume', source: Names.codexVolume(ws, shared), target: '/home/node/.codex', readOnly: false},
    {type: 'tmpfs', source: '', target: STATE_DIR, readOnly: false},
  ]
  if (options.ghapp) mounts.push({type: 'bind', source: options.ghapp.secretsDir, target: '/run/secrets', readOnly: true})
  const nested = settings.nestedContainers
  if (nested && !options.nestedSeccomp) throw new UsageError('nestedContainers needs the seccomp profile shipped with agent-sandbox', {hint: 'reinstall agent-sandbox'})
  if (nested) {
    mounts.push(
      options.nestedStore === 'tmpfs'
        ? {type: 'tmpfs', source: '', target: NESTED_STORE, readOnly: false, options: 'exec,mode=0755'}
        : {type: 'volume', source: Names.nestedVolume(ws), target: NESTED_STORE, readOnly: false},
    )
  }
  if (wantsRelabel(settings.selinuxRelabel, options.selinux)) relabelBinds(mounts)
  const ports = network === 'none' ? [] : settings.ports.map(parsePort)
  const allowDomains = [
    ...new Set([...settings.allowDomains, ...settings.registries.flatMap((r) => REGISTRY_DOMAINS[r]), ...(options.extraAllowDomains ?? []), ...(options.ghapp?.allowDomains ?? [])]),
  ]
  const env: EnvEntry[] = [
    {name: 'AGENT_SANDBOX_NETWORK', value: network, secret: false},
    {name: 'AGENT_SANDBOX_WORKDIR', value: workdir, secret: false},
    {name: 'AGENT_SANDBOX_UID', value: String(ws.uid), secret: false},
    {name: 'AGENT_SANDBOX_GID', value: String(ws.gid), secret: false},
  ]
  // mount-watch (base-image/mount-watch.sh) keeps these read-only, or kills the agent's processes.
  const protectedTargets = mounts.filter((m) => m.type === 'bind' && m.readOnly && m.target.startsWith(`${wsMount}/`)).map((m) => m.target)
  if (protectedTargets.length) env.push({name: 'AGENT_SANDBOX_PROTECTED_MOUNTS', value: protectedTargets.join('\n'), secret: false})
  // The agent's own .git over the host's must stay too (only the host removing its whole .git would detach it).
  if (ownGit) env.push({name: 'AGENT_SANDBOX_KEPT_MOUNTS', value: posix.join(wsMount, '.git'), secret: false})
  if (allowDomains.length) env.push({name: 'AGENT_SANDBOX_ALLOW_DOMAINS', value: allowDomains.join(','), secret: false})
  if (nested) {
    env.push(
      {name: 'AGENT_SANDBOX_NESTED', value: '1', secret: false},
      {name: 'DOCKER_HOST', value: NESTED_DOCKER_HOST, secret: false},
      // Rootless Podman publishes ports on the sandbox's loopback; testcontainers, seeing
      // /.dockerenv, would otherwise look for them at a bridge gateway the sandbox cannot reach.
      {name: 'TESTCONTAINERS_HOST_OVERRIDE', value: '127.0.0.1', secret: false},
    )
  }
  // init-firewall.sh redirects TCP 80/443 to the gateway and lets only its uid out on those ports.
  if (options.gateway && network === 'firewall') {
    env.push(
      {name: 'AGENT_SANDBOX_GATEWAY_UID', value: String(gatewayUid(ws)), secret: false},
      {name: 'AGENT_SANDBOX_GATEWAY_PORTS', value: `${GATEWAY_DEFAULTS.httpPort},${GATEWAY_DEFAULTS.tlsPort}`, secret: false},
    )
    // Only a run whose gateway is coming waits for it (entrypoint.sh wait_gateway); any other command starts at once.
    if (options.runGateway) env.push({name: 'AGENT_SANDBOX_RUN_GATEWAY', value: '1', secret: false})
    // Intercepted hosts (httpRules) present leaves of this CA: the system bundle gets it (entrypoint.sh), which
    // NODE_EXTRA_CA_CERTS (the image's) names already; OpenSSL, curl, Rust's native roots and Python's requests read these two.
    if (options.gatewayCa) {
      env.push(
        {name: 'AGENT_SANDBOX_GATEWAY_CA', value: options.gatewayCa, secret: false},
        {name: 'SSL_CERT_FILE', value: SYSTEM_CA_BUNDLE, secret: false},
        {name: 'REQUESTS_CA_BUNDLE', value: SYSTEM_CA_BUNDLE, secret: false},
      )
    }
  }
  env.push(...inboundPortsEnv(ports))
  if (ownGit) {
    env.push(
      {name: 'AGENT_SANDBOX_HOST_GIT', value: HOST_GIT_MOUNT, secret: false},
      {name: 'AGENT_SANDBOX_GIT_WORKTREE', value: wsMount, secret: false},
      {name: 'AGENT_SANDBOX_GATE_URL', value: GATE_URL, secret: false},
    )
  }
  // A sandbox with a push gate (lifecycle.ts): sandbox-exec checks that it listens, the git wrapper says so when it does not.
  if ((ownGit === 'volume' || branchMode) && options.name === undefined) env.push({name: 'AGENT_SANDBOX_GATE_PORT', value: String(GATE_PORT), secret: false})
  // The hook dispatcher (hook-dispatch.sh) runs hooks with HEAD's package.json keys unless this is off.
  if (ownGit && !settings.protectHookConfig) env.push({name: 'AGENT_SANDBOX_PROTECT_HOOK_CONFIG', value: '0', secret: false})
  if (options.gitIdentity?.name) env.push({name: 'AGENT_SANDBOX_GIT_NAME', value: options.gitIdentity.name, secret: false})
  if (options.gitIdentity?.email) env.push({name: 'AGENT_SANDBOX_GIT_EMAIL', value: options.gitIdentity.email, secret: false})
  for (const [name, value] of Object.entries(settings.env).sort(([a], [b]) => a.localeCompare(b))) {
    env.push({name, value, secret: looksSecret(name)})
  }
  if (options.ghapp) {
    env.push(
      {name: 'GIT_ASKPASS', value: GHAPP_ASKPASS, secret: false},
      {name: 'AGENT_SANDBOX_GHAPP_GIT_ORIGIN', value: options.ghapp.gitOrigin, secret: false},
      {name: 'AGENT_SANDBOX_GHAPP_GH_HOST', value: options.ghapp.ghHost, secret: false},
    )
  }
  for (const entry of settings.secretEnv) {
    const name = secretName(entry)
    // A masked secret's surrogate is no secret (the gateway swaps it only at the declared hosts); without one, nothing.
    const value = isMasked(entry) ? options.surrogates?.[name] : options.secretValues?.[name]
    if (value !== undefined) env.push({name, value, secret: !isMasked(entry)})
  }
  const limits = engineLimits(settings.limits)
  const name = options.name ?? Names.container(ws, options.branch)
  const labels: Record<string, string> = {
    ...workspaceLabels(ws, options.branch),
    [Labels.kind]: 'sandbox',
    [`${Labels.volume}s`]: mounts
      .filter((m) => m.type === 'volume')
      .map((m) => m.source)
      .join(','),
    [Labels.workdir]: workdir,
    [Labels.network]: network,
    [Labels.limits]: JSON.stringify(settings.limits),
    ...(options.ghapp ? {[Labels.ghapp]: '1'} : {}),
    ...(nested ? {[Labels.nested]: '1'} : {}),
    ...(options.masked?.length ? {[Labels.masked]: JSON.stringify(options.masked)} : {}),
    [Labels.git]: ownGit === 'volume' || branchMode ? 'gate' : ownGit === 'tmpfs' ? 'throwaway' : 'protected',
    ...options.labels,
  }
  const spec: SandboxSpec = {
    name,
    image: options.image ?? `${Names.image(ws)}:latest`,
    labels,
    mounts,
    env,
    user: 'root',
    execUser: SANDBOX_USER,
    workdir,
    capAdd: network === 'firewall' ? FIREWALL_CAPS : BASE_CAPS,
    capDrop: ['ALL'],
    // Nested user namespaces: a seccomp profile that allows them, and a /proc the nested runtime can mount (docs/security.md).
    securityOpt: sandboxSecurityOpt(nested ? options.nestedSeccomp : undefined, UNMASKED_PROC),
    ...(nested ? {devices: NESTED_DEVICES} : {}),
    networkMode: network === 'none' ? 'none' : settings.dockerNetwork,
    ports,
    limits,
    ...(options.userns ? {userns: options.userns} : {}),
    cmd: options.cmd,
  }
  spec.labels[Labels.spec] = specHash(spec)
  return spec
}

/** A short-lived helper container: a root program of the image on a volume of ours (the shelf, an agent's config). */
export interface HelperSpecOptions {
  /** The `kind` label: `provision` (the shelf's scripts), `helper` (agent config volumes). */
  kind: string
  name: string
  baseTag: string
  /** Labels besides managed and kind (the workspace, where the helper belongs to one). */
  labels?: Record<string, string>
  entrypoint: string[]
  cmd?: string[]
  network: string
  /** The only capabilities it keeps (all others are dropped). */
  capAdd: string[]
  mounts: MountSpec[]
  /** The engine's user namespace mode: helpers share volumes with sandboxes, so they need the same one. */
  userns?: string
}

/** The spec of a helper container: root, the given capabilities only, no new privileges, its own program. Pure. */
export function buildHelperSpec(options: HelperSpecOptions): SandboxSpec {
  return {
    name: options.name,
    image: Names.baseImage(options.baseTag),
    labels: {[Labels.managed]: 'true', [Labels.kind]: options.kind, ...options.labels},
    mounts: options.mounts,
    env: [],
    user: '0:0',
    execUser: '0:0',
    workdir: '/',
    capAdd: options.capAdd,
    capDrop: ['ALL'],
    securityOpt: ['no-new-privileges'],
    networkMode: options.network,
    ports: [],
    limits: {},
    userns: options.userns,
    entrypoint: options.entrypoint,
    cmd: options.cmd,
  }
}

export const GATE_ENTRYPOINT = '/usr/local/sbin/git-gate'
const GATE_ROOT = '/gate/ws'

/**
 * The push gate of a sandbox (git-gate.sh): the only container that can write
 * the host's .git. It runs as the workspace's owner with no capabilities and a
 * read-only root, in its own PID and mount namespaces, and shares only the
 * sandbox's network namespace, where it serves git on 127.0.0.1:GATE_PORT.
 */
export function buildGateSpec(ws: Workspace, sandbox: SandboxSpec, settings: Settings, options: {branch?: string; userns?: string; selinux?: boolean; gateFiles?: string[]}): SandboxSpec {
  const mounts: MountSpec[] = [
    {type: 'bind', source: ws.path, target: GATE_ROOT, readOnly: true},
    {type: 'bind', source: posix.join(ws.path, '.git'), target: posix.join(GATE_ROOT, '.git'), readOnly: false},
    {type: 'tmpfs', source: '', target: '/tmp', readOnly: false, options: 'mode=1777'},
  ]
  if (wantsRelabel(settings.selinuxRelabel, options.selinux)) relabelBinds(mounts)
  const env: EnvEntry[] = [
    {name: 'AGENT_SANDBOX_GATE_MODE', value: options.branch === undefined ? 'bind' : 'branch', secret: false},
    {name: 'AGENT_SANDBOX_GATE_PORT', value: String(GATE_PORT), secret: false},
  ]
  if (settings.protectedBranches.length) env.push({name: 'AGENT_SANDBOX_PROTECTED_BRANCHES', value: settings.protectedBranches.join('\n'), secret: false})
  // Hook configuration found at start (hook-config.ts): pre-receive flags a push that changes it.
  if (options.gateFiles?.length) env.push({name: 'AGENT_SANDBOX_GATE_FILES', value: options.gateFiles.join('\n'), secret: false})
  return sidecarSpec(ws, sandbox, options, {
    name: Names.gate(sandbox.name),
    labels: {[Labels.kind]: 'gate', [Labels.gateOf]: sandbox.name},
    mounts,
    env,
    user: `${ws.uid}:${ws.gid}`,
    workdir: GATE_ROOT,
    pids: 512,
    entrypoint: [GATE_ENTRYPOINT],
  })
}

/**
 * A container that serves a sandbox from inside its network namespace (the
 * push gate, the egress gateway): the sandbox's image, no capabilities, no new
 * privileges, a read-only root, its own PID and mount namespaces. Pure.
 */
function sidecarSpec(
  ws: Workspace,
  sandbox: SandboxSpec,
  options: {branch?: string; userns?: string},
  own: {name: string; labels: Record<string, string>; mounts: MountSpec[]; env: EnvEntry[]; user: string; workdir: string; pids: number; entrypoint: string[]; cmd?: string[]},
): SandboxSpec {
  const spec: SandboxSpec = {
    name: own.name,
    image: sandbox.image,
    labels: {...workspaceLabels(ws, options.branch), ...own.labels},
    mounts: own.mounts,
    env: own.env,
    user: own.user,
    execUser: own.user,
    workdir: own.workdir,
    capAdd: [],
    capDrop: ['ALL'],
    securityOpt: ['no-new-privileges'],
    networkMode: `container:${sandbox.name}`,
    ports: [],
    limits: {pids: own.pids},
    // Rootless Podman cannot mount /sys in a network namespace its user namespace
    // does not own: a sidecar joins the sandbox's user namespace (keep-id) too.
    ...(options.userns ? {userns: `container:${sandbox.name}`} : {}),
    entrypoint: own.entrypoint,
    ...(own.cmd ? {cmd: own.cmd} : {}),
    readOnlyRootfs: true,
  }
  spec.labels[Labels.spec] = specHash(spec)
  return spec
}

/**
 * The gateway's uid: one no user of the sandbox has. The firewall lets only
 * this uid out on ports 80 and 443, so it must never be the agent's (the
 * workspace owner's, which `node` is renumbered to).
 */
export function gatewayUid(ws: Pick<Workspace, 'uid'>): number {
  return ws.uid === 65532 ? 65531 : 65532
}

/**
 * The egress gateway of a sandbox (src/gateway.ts): the only process that may
 * open connections to ports 80 and 443, and so the only one that sees the
 * traffic the firewall redirects there. Like the push gate it shares only the
 * sandbox's network namespace, with its own PID and mount namespaces, no
 * capabilities, a read-only root and a uid of its own: the agent can neither
 * signal it nor read its memory or files.
 */
export function buildGatewaySpec(ws: Workspace, sandbox: SandboxSpec, options: {branch?: string; userns?: string; httpRules?: HttpRule[]; masked?: string[]; inspectAll?: boolean; oneShot?: boolean}): SandboxSpec {
  const uid = gatewayUid(ws)
  const allow = sandbox.env.find((e) => e.name === 'AGENT_SANDBOX_ALLOW_DOMAINS')
  const env: EnvEntry[] = [
    {name: 'AGENT_SANDBOX_GATEWAY_PORTS', value: `${GATEWAY_DEFAULTS.httpPort},${GATEWAY_DEFAULTS.tlsPort}`, secret: false},
    ...(allow ? [{...allow}] : []),
    // Not secret (the CA key is not here: it comes over an exec's stdin, lifecycle.ts startGatewayContainer).
    ...(options.httpRules?.length ? [{name: 'AGENT_SANDBOX_GATEWAY_RULES', value: JSON.stringify(options.httpRules), secret: false}] : []),
    // Names only: the gateway waits for the values and their hosts (stdin) before it lets anything out, and intercepts those hosts.
    ...(options.masked?.length ? [{name: 'AGENT_SANDBOX_GATEWAY_MASKED', value: options.masked.join(','), secret: false}] : []),
    // gateway.inspectAll: every TLS connection intercepted, not only those to hosts with rules or secrets.
    ...(options.inspectAll ? [{name: 'AGENT_SANDBOX_GATEWAY_INSPECT_ALL', value: '1', secret: false}] : []),
    // A one-shot run's gateway also writes its request log to stdout: the CLI reads it with one logs call as the run ends.
    ...(options.oneShot ? [{name: 'AGENT_SANDBOX_GATEWAY_LOG_STDOUT', value: '1', secret: false}] : []),
    // The image sets it for every process; the gateway builds its own upstream trust (src/gateway.ts), and node
    // would parse the whole bundle again at every start (about 30 ms in the image's node).
    {name: 'NODE_EXTRA_CA_CERTS', value: '', secret: false},
    // Its node's options are ours: an image's NODE_OPTIONS (a workspace Dockerfile's ENV) would change its
    // memory, and would make node refuse the snapshot node-boot starts a run's gateway from (exit 14).
    {name: 'NODE_OPTIONS', value: '', secret: false},
  ]
  const program = gatewayCommand([], {snapshot: options.oneShot === true})
  return sidecarSpec(ws, sandbox, options, {
    name: Names.gateway(sandbox.name),
    labels: {[Labels.kind]: 'gateway', [Labels.gatewayOf]: sandbox.name},
    mounts: [{type: 'tmpfs', source: '', target: GATEWAY_DEFAULTS.stateDir, readOnly: false, options: 'mode=1777'}],
    env,
    user: `${uid}:${uid}`,
    workdir: GATEWAY_DEFAULTS.stateDir,
    pids: 256,
    // The program's first word as the entrypoint, the rest as the command: `docker run --entrypoint` takes one word
    // (show-run prints this). A run's gateway, whose start every run waits for, boots from the snapshot.
    entrypoint: program.slice(0, 1),
    cmd: program.slice(1),
  })
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

export function toCreateOptions(spec: SandboxSpec, engine: 'docker' | 'podman' = 'docker'): ContainerCreateOptions {
  const exposed: Record<string, object> = {}
  const bindings: Record<string, Array<{HostIp: string; HostPort: string}>> = {}
  for (const p of spec.ports) {
    const key = `${p.containerPort}/${p.protocol}`
    exposed[key] = {}
    ;(bindings[key] ??= []).push({HostIp: p.hostIp, HostPort: p.hostPort})
  }
  const tmpfs = Object.fromEntries(spec.mounts.filter((m) => m.type === 'tmpfs').map((m) => [m.target, m.options ?? 'mode=755']))
  return {
    name: spec.name,
    Image: spec.image,
    Labels: spec.labels,
    Env: spec.env.map((e) => `${e.name}=${e.value}`),
    User: spec.user,
    WorkingDir: spec.workdir,
    Cmd: spec.cmd,
    ...(spec.entrypoint ? {Entrypoint: spec.entrypoint} : {}),
    ExposedPorts: exposed,
    HostConfig: {
      Mounts: spec.mounts
        .filter((m) => m.type !== 'tmpfs' && !m.relabel)
        .map((m) => ({Type: m.type, Source: m.source, Target: m.target, ReadOnly: m.readOnly})),
      // Only `Binds` can ask the engine to relabel (Mounts has no field for it).
      ...(spec.mounts.some((m) => m.relabel) ? {Binds: spec.mounts.filter((m) => m.relabel).map(bindString)} : {}),
      Tmpfs: tmpfs,
      CapAdd: spec.capAdd,
      CapDrop: spec.capDrop,
      SecurityOpt: spec.securityOpt.filter((o) => o !== UNMASKED_PROC).map((o) => (engine === 'podman' ? o : engineSecurityOpt(o))),
      // The API's form of the CLI's `systempaths=unconfined`: no masked, no read-only paths in /proc.
      ...(spec.securityOpt.includes(UNMASKED_PROC) ? {MaskedPaths: [], ReadonlyPaths: []} : {}),
      ...(spec.devices ? {Devices: spec.devices.map((d) => ({PathOnHost: d, PathInContainer: d, CgroupPermissions: 'rwm'}))} : {}),
      Privileged: false,
      ...(spec.readOnlyRootfs ? {ReadonlyRootfs: true} : {}),
      NetworkMode: spec.networkMode,
      PortBindings: bindings,
      Memory: spec.limits.memoryBytes,
      MemorySwap: spec.limits.memoryBytes,
      NanoCpus: spec.limits.nanoCpus,
      PidsLimit: spec.limits.pids,
      ...(spec.userns ? {UsernsMode: spec.userns} : {}),
    },
  }
}

const profiles = new Map<string, string>()

/**
 * Docker's API takes a seccomp profile's JSON where the docker CLI takes its
 * path: `seccomp=<file>` is sent with the file's content, as the CLI does.
 * Podman's takes only a path, on the engine's host (toCreateOptions keeps it).
 */
export function engineSecurityOpt(opt: string): string {
  const path = /^seccomp=(\/.*)$/.exec(opt)?.[1]
  if (path === undefined) return opt
  let json = profiles.get(path)
  if (json === undefined) {
    json = JSON.stringify(JSON.parse(readFileSync(path, 'utf8')))
    profiles.set(path, json)
  }
  return `seccomp=${json}`
}

/** A relabelled bind as `src:dst:[ro,]z|Z`; a path with a colon cannot be one (UsageError). */
export function bindString(m: MountSpec): string {
  assertRelabelable(m)
  return `${m.source}:${m.target}:${[...(m.readOnly ? ['ro'] : []), m.relabel === 'private' ? 'Z' : 'z'].join(',')}`
}

/** A --mount field value, CSV-quoted when it holds a comma or a quote. */
function mountField(key: string, value: string): string {
  const field = `${key}=${value}`
  return /[",]/.test(field) ? `"${field.replaceAll('"', '""')}"` : field
}

/** The spec as `docker run` argv (without the leading `docker`). Secrets appear as `-e NAME` references. */
export function toDockerRunArgs(spec: SandboxSpec): string[] {
  const args = ['run', '--detach', '--name', spec.name]
  args.push('--user', spec.user, '--workdir', spec.workdir)
  if (spec.entrypoint) args.push('--entrypoint', spec.entrypoint.join(' '))
  if (spec.readOnlyRootfs) args.push('--read-only')
  for (const cap of spec.capDrop) args.push('--cap-drop', cap)
  for (const cap of spec.capAdd) args.push('--cap-add', cap)
  for (const opt of spec.securityOpt) args.push('--security-opt', opt)
  for (const device of spec.devices ?? []) args.push('--device', device)
  args.push('--network', spec.networkMode)
  if (spec.userns) args.push('--userns', spec.userns)
  for (const [k, v] of Object.entries(spec.labels).sort(([a], [b]) => a.localeCompare(b))) args.push('--label', `${k}=${v}`)
  for (const m of spec.mounts) {
    if (m.type === 'tmpfs') {
      args.push('--tmpfs', `${m.target}:${m.options ?? 'mode=755'}`)
      continue
    }
    if (m.relabel) {
      args.push('--volume', bindString(m))
      continue
    }
    const fields = [`type=${m.type}`, mountField('source', m.source), mountField('target', m.target)]
    if (m.readOnly) fields.push('readonly')
    args.push('--mount', fields.join(','))
  }
  for (const e of spec.env) args.push('--env', e.secret ? e.name : `${e.name}=${e.value}`)
  for (const p of spec.ports) args.push('--publish', `${p.hostIp.includes(':') ? `[${p.hostIp}]` : p.hostIp}:${p.hostPort}:${p.containerPort}/${p.protocol}`)
  if (spec.limits.memoryBytes) args.push('--memory', `${spec.limits.memoryBytes}b`, '--memory-swap', `${spec.limits.memoryBytes}b`)
  if (spec.limits.nanoCpus) args.push('--cpus', String(spec.limits.nanoCpus / 1e9))
  if (spec.limits.pids) args.push('--pids-limit', String(spec.limits.pids))
  args.push(spec.image)
  if (spec.cmd) args.push(...spec.cmd)
  return args
}

/**
 * The spec as one pasteable shell command. Protected paths that do not exist
 * yet get their placeholders first, as `start` would create them; containers
 * that go with it (the push gate) follow it.
 */
export function toShellCommand(spec: SandboxSpec, placeholders: Array<{path: string; kind: 'file' | 'dir'}> = [], companions: SandboxSpec[] = []): string {
  const prep = placeholders.map((p) => (p.kind === 'dir' ? `mkdir -p -- ${quoteArg(p.path)}` : `touch -- ${quoteArg(p.path)}`))
  // Only podman's CLI knows keep-id (the docker CLI refuses it).
  const run = (s: SandboxSpec) => [s.userns ? 'podman' : 'docker', ...toDockerRunArgs(s)].map(quoteArg).join(' ')
  return [...prep, run(spec), ...companions.map(run)].join(' && ')
}

/** Every value that must never be printed. */
export function secretValues(spec: SandboxSpec): string[] {
  return spec.env.filter((e) => e.secret && e.value.length > 0).map((e) => e.value)
}

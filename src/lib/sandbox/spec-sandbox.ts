/**
 * The spec of a sandbox: (workspace, settings, options) → SandboxSpec, with
 * the mounts, environment, capabilities and labels its entrypoint and scripts
 * expect. Pure. The containers that go with it are in spec-companions.ts.
 */
import {posix} from 'node:path'
import type {NetworkMode, RegistryPreset, Settings} from '../config/schema.js'
import {Labels, Names, sanitizeBranch, workspaceLabels, type Workspace} from '../workspace.js'
import type {MountSpec} from '../engine/types.js'
import {UsageError} from '../errors.js'
import {GATE_PORT, GATE_URL, GHAPP_ASKPASS, HOST_GIT_MOUNT, NESTED_DEVICES, NESTED_DOCKER_HOST, NESTED_STORE, SANDBOX_USER, SHELF_MOUNT, STATE_DIR, SYSTEM_CA_BUNDLE} from '../contract.js'
import type {ProtectedMount} from '../git/protected.js'
import type {GhappSpec} from '../github/plan.js'
import {looksSecret} from '../util/secret-names.js'
import {inboundPortsEnv, sandboxSecurityOpt} from './seccomp.js'
import {GATEWAY_DEFAULTS} from '../network/gateway/ports.js'
import {isMasked, secretName} from '../network/gateway/secrets.js'
import {engineLimits, gatewayUid, parsePort, relabelBinds, specHash, UNMASKED_PROC, wantsRelabel, type EnvEntry, type SandboxSpec} from './spec.js'

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

export function workspaceMountPath(ws: Workspace): string {
  return posix.join('/workspace', ws.repoName)
}

export function workdirFor(ws: Workspace, branch?: string): string {
  return branch === undefined ? workspaceMountPath(ws) : posix.join(SHELF_MOUNT, 'worktrees', sanitizeBranch(branch))
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
  // A sandbox with a push gate (gate.ts): sandbox-exec checks that it listens, the git wrapper says so when it does not.
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

/**
 * The specs of the containers that go with a sandbox: short-lived helpers on
 * our volumes, and the two sidecars in the sandbox's network namespace, the
 * push gate and the egress gateway. Pure.
 */
import {posix} from 'node:path'
import type {Settings} from '../config/schema.js'
import {Labels, Names, workspaceLabels, type Workspace} from '../workspace.js'
import type {MountSpec} from '../engine/types.js'
import {GATE_ENTRYPOINT, GATE_PORT} from '../contract.js'
import {GATEWAY_DEFAULTS, gatewayCommand} from '../network/gateway/ports.js'
import type {HttpRule} from '../network/gateway/rules.js'
import {gatewayUid, relabelBinds, specHash, wantsRelabel, type EnvEntry, type SandboxSpec} from './spec.js'

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
    // Not secret (the CA key is not here: it comes over an exec's stdin, gateway-container.ts startGatewayContainer).
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

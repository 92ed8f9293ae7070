/**
 * A SandboxSpec rendered for the engine. `start` turns it into an engine
 * create call (toCreateOptions); `show-run` prints it as `docker run` argv
 * (toDockerRunArgs). Both come from the same SandboxSpec, so they agree.
 */
import type {ContainerCreateOptions} from 'dockerode'
import {readFileSync} from 'node:fs'
import {quoteArg} from '../util/shell-quote.js'
import type {MountSpec} from '../engine/types.js'
import {assertRelabelable, UNMASKED_PROC, type SandboxSpec} from './spec.js'

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
export function toShellCommand(
  spec: SandboxSpec,
  placeholders: Array<{path: string; kind: 'file' | 'dir'}> = [],
  companions: SandboxSpec[] = [],
  engine: 'docker' | 'podman' = 'docker',
): string {
  const prep = placeholders.map((p) => (p.kind === 'dir' ? `mkdir -p -- ${quoteArg(p.path)}` : `touch -- ${quoteArg(p.path)}`))
  // The podman CLI for Podman: only it knows keep-id, and the docker CLI sends a seccomp profile's
  // JSON, which Podman's compatible API opens as a path.
  const cli = engine === 'podman' || spec.userns ? 'podman' : 'docker'
  const run = (s: SandboxSpec) => [cli, ...toDockerRunArgs(s)].map(quoteArg).join(' ')
  return [...prep, run(spec), ...companions.map(run)].join(' && ')
}

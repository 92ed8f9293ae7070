/**
 * The one engine seam. Everything that talks to Docker or Podman goes through
 * an Engine built once per process and passed down.
 */
import {existsSync, statSync} from 'node:fs'
import {delimiter, join} from 'node:path'
import type {ProcOptions, ProcResult} from '../util/proc.js'
import {EngineApi} from './api.js'
import {currentContextHost} from './context.js'
import {ApiContainers, type ContainerClient} from './containers.js'
import {discoverEndpoint, type Endpoint, type EndpointChoice} from './endpoint.js'
import {ApiImages, type ImageClient} from './images.js'
import type {EngineKind} from './types.js'
import {ApiVolumes, type VolumeClient} from './volumes.js'

export * from './types.js'
export type {ContainerClient} from './containers.js'
export type {ImageClient} from './images.js'
export type {VolumeClient} from './volumes.js'
export type {Endpoint} from './endpoint.js'

/** Runs the engine's own CLI (docker or podman) against the same endpoint. */
export interface EngineCli {
  readonly binary: string
  run(args: readonly string[], options?: ProcOptions): Promise<ProcResult>
}

export interface Engine {
  readonly endpoint: Endpoint
  readonly endpointSource: EndpointChoice['source']
  readonly containers: ContainerClient
  readonly images: ImageClient
  readonly volumes: VolumeClient
  readonly cli: EngineCli
  ping(): Promise<void>
  kind(): Promise<EngineKind>
  version(): Promise<string>
  /**
   * The user namespace every container of ours must be created in: `keep-id`
   * on rootless Podman (its root is your uid, so without it the workspace's
   * owner is root inside and `node` cannot write to it), else undefined.
   */
  userns(): Promise<string | undefined>
  /** Whether the engine's host labels files for SELinux, so bind mounts need relabelling. */
  selinux(): Promise<boolean>
}

export interface ConnectOptions {
  env?: NodeJS.ProcessEnv
  /** `docker` or `podman`; default AGENT_SANDBOX_ENGINE, else detected. */
  engine?: string
}

export async function connectEngine(options: ConnectOptions = {}): Promise<Engine> {
  const env = options.env ?? process.env
  const choice = discoverEndpoint(env, () => currentContextHost(env))
  const requested = options.engine ?? env.AGENT_SANDBOX_ENGINE
  const endpoint = choice.endpoint
  // One client for every transport (api.ts; ssh:// through `docker system dial-stdio`, ssh.ts).
  const api = new EngineApi(endpoint)
  const backend: Backend = {
    containers: new ApiContainers(api),
    images: new ApiImages(api),
    volumes: new ApiVolumes(api),
    ping: async () => {
      await api.json('GET', '/_ping')
    },
    version: () => api.json<RawVersion>('GET', '/version'),
    info: () => api.json<RawInfo>('GET', '/info'),
    pingHeaders: () => api.headers('GET', '/_ping'),
  }
  return new DockerEngine(backend, choice, env, requested)
}

interface RawVersion {
  Version: string
  Components?: Array<{Name: string}>
}

interface RawInfo {
  /** Podman only. */
  Rootless?: boolean
  /** Rootless Docker says `name=rootless` here. */
  SecurityOptions?: string[] | null
}

/** What an engine is made of: the resource clients, and the calls about the engine itself. */
interface Backend {
  containers: ContainerClient
  images: ImageClient
  volumes: VolumeClient
  ping(): Promise<void>
  version(): Promise<RawVersion>
  info(): Promise<RawInfo>
  pingHeaders(): Promise<Record<string, string | string[] | undefined>>
}

class DockerEngine implements Engine {
  readonly endpoint: Endpoint
  readonly endpointSource: EndpointChoice['source']
  readonly containers: ContainerClient
  readonly images: ImageClient
  readonly volumes: VolumeClient
  readonly cli: EngineCli
  private versionInfo?: Promise<{kind: EngineKind; version: string}>
  private usernsMode?: Promise<string | undefined>
  private selinuxOn?: Promise<boolean>
  private infoOnce?: Promise<RawInfo>

  constructor(
    private readonly backend: Backend,
    choice: EndpointChoice,
    env: NodeJS.ProcessEnv,
    private readonly requestedKind: string | undefined,
  ) {
    this.endpoint = choice.endpoint
    this.endpointSource = choice.source
    // Failures are classified where the calls are made (api.ts).
    this.containers = backend.containers
    this.images = backend.images
    this.volumes = backend.volumes
    this.cli = new ProcessCli(pickCliBinary(env, requestedKind), choice.endpoint)
  }

  userns(): Promise<string | undefined> {
    this.usernsMode ??= this.detectRootlessPodman().then((rootlessPodman) => (rootlessPodman ? 'keep-id' : undefined))
    return this.usernsMode
  }

  /**
   * On Linux with a local socket the engine runs on this host: SELinux is on
   * when selinuxfs is mounted (enforcing or permissive). Elsewhere (a VM behind
   * the socket, tcp, ssh) the engine's /info says so.
   */
  selinux(): Promise<boolean> {
    this.selinuxOn ??= (async () => {
      if (this.endpoint.kind === 'socket' && process.platform === 'linux') return existsSync('/sys/fs/selinux/enforce')
      return selinuxInfo(await this.systemInfo())
    })()
    return this.selinuxOn
  }

  /**
   * Rootless Podman? On a local socket, cheaply: a rootless service runs as, and
   * owns its socket as, a user; a rootful one as root. Podman says who it is in
   * its ping's headers. Elsewhere (tcp, ssh) /info says so (Podman: `Rootless`),
   * at the cost of a slow call on Podman (about 0.3 s), once per command.
   */
  private async detectRootlessPodman(): Promise<boolean> {
    if (this.endpoint.kind === 'socket') {
      const owner = socketOwner(this.endpoint.socketPath)
      if (owner === 0) return false
      if (owner !== undefined) return isPodmanPing(await this.backend.pingHeaders())
    }
    return rootlessPodmanInfo(await this.systemInfo())
  }

  /** /info, asked once per command (it takes about 0.3 s on Podman). */
  private systemInfo(): Promise<RawInfo> {
    this.infoOnce ??= this.backend.info()
    return this.infoOnce
  }


  ping(): Promise<void> {
    return this.backend.ping()
  }

  async kind(): Promise<EngineKind> {
    if (this.requestedKind === 'docker' || this.requestedKind === 'podman') return this.requestedKind
    return (await this.info()).kind
  }

  async version(): Promise<string> {
    return (await this.info()).version
  }

  private info(): Promise<{kind: EngineKind; version: string}> {
    this.versionInfo ??= this.backend.version().then((v) => {
      const components = v.Components ?? []
      const podman = components.some((c) => /podman/i.test(c.Name))
      return {kind: podman ? 'podman' : 'docker', version: v.Version}
    })
    return this.versionInfo
  }
}

/** Whether an engine's ping headers are Podman's. Pure. */
export function isPodmanPing(headers: Record<string, string | string[] | undefined>): boolean {
  return Object.keys(headers).some((name) => name.toLowerCase() === 'libpod-api-version')
}

/** Whether /info says the engine uses SELinux labels. Pure. */
export function selinuxInfo(info: RawInfo): boolean {
  return (info.SecurityOptions ?? []).some((option) => option.split(',').includes('name=selinux'))
}

/** Whether /info describes rootless Podman (rootless Docker has no keep-id). Pure. */
export function rootlessPodmanInfo(info: RawInfo): boolean {
  return info.Rootless === true
}

function socketOwner(path: string): number | undefined {
  try {
    return statSync(path).uid
  } catch {
    return undefined
  }
}

function onPath(binary: string, env: NodeJS.ProcessEnv): boolean {
  return (env.PATH ?? '').split(delimiter).some((dir) => dir && existsSync(join(dir, binary)))
}

export function pickCliBinary(env: NodeJS.ProcessEnv, kind?: string): string {
  if (env.AGENT_SANDBOX_DOCKER_CLI) return env.AGENT_SANDBOX_DOCKER_CLI
  if (kind === 'podman' && onPath('podman', env)) return 'podman'
  if (onPath('docker', env)) return 'docker'
  if (onPath('podman', env)) return 'podman'
  return 'docker'
}

/**
 * The engine's own CLI, for the two streams a user watches: an image build's
 * output and an interactive shell's terminal. Every container is made over the
 * API (api.ts).
 */
class ProcessCli implements EngineCli {
  constructor(
    readonly binary: string,
    private readonly endpoint: Endpoint,
  ) {}

  async run(args: readonly string[], options: ProcOptions = {}): Promise<ProcResult> {
    const hostEnv = this.binary.endsWith('podman') ? {CONTAINER_HOST: this.endpoint.dockerHost} : {DOCKER_HOST: this.endpoint.dockerHost}
    // Loaded here: node:child_process is not needed by the commands that only call the API.
    const {run} = await import('../util/proc.js')
    return run(this.binary, args, {...options, env: {...hostEnv, ...options.env}})
  }
}

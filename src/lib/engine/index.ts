/**
 * The one engine seam. Everything that talks to Docker or Podman goes through
 * an Engine built once per process and passed down.
 */
import type Dockerode from 'dockerode'
import {existsSync} from 'node:fs'
import {delimiter, join} from 'node:path'
import {run, type RunOptions, type RunResult} from '../proc.js'
import {classifyEngineError, createDockerode} from './connect.js'
import {currentContextHost} from './context.js'
import {DockerodeContainers, type ContainerClient} from './containers.js'
import {discoverEndpoint, type Endpoint, type EndpointChoice} from './endpoint.js'
import {DockerodeImages, type ImageClient} from './images.js'
import type {EngineKind} from './types.js'
import {DockerodeVolumes, type VolumeClient} from './volumes.js'

export * from './types.js'
export type {ContainerClient} from './containers.js'
export type {ImageClient} from './images.js'
export type {VolumeClient} from './volumes.js'
export type {Endpoint} from './endpoint.js'

/** Runs the engine's own CLI (docker or podman) against the same endpoint. */
export interface EngineCli {
  readonly binary: string
  run(args: readonly string[], options?: RunOptions): Promise<RunResult>
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
  raw(): Dockerode
}

export interface ConnectOptions {
  env?: NodeJS.ProcessEnv
  /** `docker` or `podman`; default AGENT_SANDBOX_ENGINE, else detected. */
  engine?: string
}

export async function connectEngine(options: ConnectOptions = {}): Promise<Engine> {
  const env = options.env ?? process.env
  const choice = discoverEndpoint(env, () => currentContextHost(env))
  const docker = await createDockerode(choice.endpoint)
  return new DockerEngine(docker, choice, env, options.engine ?? env.AGENT_SANDBOX_ENGINE)
}

class DockerEngine implements Engine {
  readonly endpoint: Endpoint
  readonly endpointSource: EndpointChoice['source']
  readonly containers: ContainerClient
  readonly images: ImageClient
  readonly volumes: VolumeClient
  readonly cli: EngineCli
  private versionInfo?: Promise<{kind: EngineKind; version: string}>

  constructor(
    private readonly docker: Dockerode,
    choice: EndpointChoice,
    env: NodeJS.ProcessEnv,
    private readonly requestedKind: string | undefined,
  ) {
    this.endpoint = choice.endpoint
    this.endpointSource = choice.source
    this.containers = guard(new DockerodeContainers(docker), choice.endpoint)
    this.images = guard(new DockerodeImages(docker), choice.endpoint)
    this.volumes = guard(new DockerodeVolumes(docker), choice.endpoint)
    this.cli = new ProcessCli(pickCliBinary(env, requestedKind), choice.endpoint)
  }

  raw(): Dockerode {
    return this.docker
  }

  async ping(): Promise<void> {
    try {
      await this.docker.ping()
    } catch (error) {
      throw classifyEngineError(error, this.endpoint)
    }
  }

  async kind(): Promise<EngineKind> {
    if (this.requestedKind === 'docker' || this.requestedKind === 'podman') return this.requestedKind
    return (await this.info()).kind
  }

  async version(): Promise<string> {
    return (await this.info()).version
  }

  private info(): Promise<{kind: EngineKind; version: string}> {
    this.versionInfo ??= this.docker.version().then(
      (v) => {
        const components = (v as {Components?: Array<{Name: string}>}).Components ?? []
        const podman = components.some((c) => /podman/i.test(c.Name))
        return {kind: podman ? 'podman' : 'docker', version: v.Version}
      },
      (error: unknown) => {
        throw classifyEngineError(error, this.endpoint)
      },
    )
    return this.versionInfo
  }
}

/** Wrap every method so that connection failures become classified EngineErrors. */
function guard<T extends object>(client: T, endpoint: Endpoint): T {
  return new Proxy(client, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown
      if (typeof value !== 'function') return value
      return async (...args: unknown[]) => {
        try {
          return await (value as (...a: unknown[]) => Promise<unknown>).apply(target, args)
        } catch (error) {
          if (isConnectionError(error)) throw classifyEngineError(error, endpoint)
          throw error
        }
      }
    },
  })
}

function isConnectionError(error: unknown): boolean {
  const code = (error as {code?: string} | undefined)?.code
  return typeof code === 'string' && /^E[A-Z]+$/.test(code) && (error as {statusCode?: number}).statusCode === undefined
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

class ProcessCli implements EngineCli {
  constructor(
    readonly binary: string,
    private readonly endpoint: Endpoint,
  ) {}

  run(args: readonly string[], options: RunOptions = {}): Promise<RunResult> {
    const hostEnv = this.binary.endsWith('podman') ? {CONTAINER_HOST: this.endpoint.dockerHost} : {DOCKER_HOST: this.endpoint.dockerHost}
    return run(this.binary, args, {...options, env: {...hostEnv, ...options.env}})
  }
}

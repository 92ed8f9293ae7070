/**
 * The embeddable API: SandboxManager.createSandbox() gives a fresh, firewalled
 * sandbox container with a handle to execute commands in it and destroy it.
 * It goes through the same spec, create and readiness code as the CLI.
 */
import type {NetworkMode} from '../config/schema.js'
import {connectEngine, type Engine} from '../engine/index.js'
import {createEphemeral, type Limits} from './ephemeral-container.js'
import {SandboxError} from '../errors.js'
import type {Reporter} from '../reporter.js'
import {waitReady} from './lifecycle.js'
import {SANDBOX_EXEC, SANDBOX_USER} from '../contract.js'
import {resolveWorkspace} from '../workspace.js'

export interface SandboxManagerOptions {
  /** `docker` or `podman`; default: detected from the socket (or AGENT_SANDBOX_ENGINE). */
  engine?: 'docker' | 'podman'
  /** Environment to read DOCKER_HOST, AGENT_SANDBOX_* and secret values from (default process.env). */
  env?: NodeJS.ProcessEnv
  reporter?: Reporter
}

export interface CreateSandboxOptions {
  workspacePath: string
  branch?: string
  /** Default `none` for API sandboxes: network is opt-in (`firewall` or, loudly, `open`). */
  network?: NetworkMode
  limits?: Limits
  /** Host variables passed by reference into the sandbox. */
  envNames?: string[]
  allowDomains?: string[]
  /** Allow dockerNetwork `host` (from the settings); only with network `open`. */
  allowHostNetwork?: boolean
}

export interface ExecuteOptions {
  env?: Record<string, string>
  stdin?: string | Buffer
  timeoutMs?: number
  cwd?: string
  onStdout?: (chunk: Buffer) => void
  onStderr?: (chunk: Buffer) => void
}

export interface ExecuteResult {
  exitCode: number
  stdout: string
  stderr: string
  timedOut: boolean
}

export interface SandboxHandle {
  readonly id: string
  readonly name: string
  readonly workspacePath: string
  execute(cmd: string, args?: string[], options?: ExecuteOptions): Promise<ExecuteResult>
  destroy(): Promise<void>
}

/** The exit code of coreutils `timeout` when it had to stop the command. */
const TIMEOUT_EXIT = 124

export class SandboxManager {
  private enginePromise?: Promise<Engine>

  constructor(private readonly options: SandboxManagerOptions = {}) {}

  private engine(): Promise<Engine> {
    this.enginePromise ??= connectEngine({engine: this.options.engine, env: this.options.env})
    return this.enginePromise
  }

  /** A real probe: the engine answers a ping. */
  async isAvailable(): Promise<boolean> {
    try {
      await (await this.engine()).ping()
      return true
    } catch {
      return false
    }
  }

  async createSandbox(options: CreateSandboxOptions): Promise<SandboxHandle> {
    const engine = await this.engine()
    const ws = resolveWorkspace(options.workspacePath)
    const ctx = {engine, reporter: this.options.reporter, env: this.options.env}
    const created = await createEphemeral(ctx, ws, {
      kind: 'api',
      branch: options.branch,
      network: options.network ?? 'none',
      limits: options.limits,
      envNames: options.envNames,
      allowDomains: options.allowDomains,
      allowHostNetwork: options.allowHostNetwork,
    })
    try {
      await engine.containers.start(created.id)
      await waitReady(ctx, {id: created.id, name: created.name})
    } catch (error) {
      await engine.containers.remove(created.id, {force: true}).catch(() => undefined)
      throw error
    }
    return new Handle(engine, created.id, created.name, ws.path)
  }
}

class Handle implements SandboxHandle {
  private destroyed = false

  constructor(
    private readonly engine: Engine,
    readonly id: string,
    readonly name: string,
    readonly workspacePath: string,
  ) {}

  async execute(cmd: string, args: string[] = [], options: ExecuteOptions = {}): Promise<ExecuteResult> {
    if (this.destroyed) throw new SandboxError(`sandbox ${this.name} was destroyed`)
    const timeout = options.timeoutMs ? ['timeout', '--kill-after=2', `${Math.max(options.timeoutMs, 1) / 1000}`] : []
    const started = Date.now()
    const result = await this.engine.containers.exec(this.id, [SANDBOX_EXEC, ...timeout, cmd, ...args], {
      user: SANDBOX_USER,
      workdir: options.cwd,
      env: Object.entries(options.env ?? {}).map(([k, v]) => `${k}=${v}`),
      stdin: options.stdin,
      onStdout: options.onStdout,
      onStderr: options.onStderr,
    })
    // 124 (TERM) or 137 (KILL after the grace period), and only once the time is really up.
    const timedOut = options.timeoutMs !== undefined && (result.exitCode === TIMEOUT_EXIT || result.exitCode === 137) && Date.now() - started >= options.timeoutMs - 100
    return {...result, timedOut}
  }

  async destroy(): Promise<void> {
    this.destroyed = true
    await this.engine.containers.remove(this.id, {force: true})
  }
}

/** Containers, through the engine API. */
import type Dockerode from 'dockerode'
import type {ContainerCreateOptions, ContainerInspectInfo} from 'dockerode'
import type {Readable, Writable} from 'node:stream'
import {SandboxError, UsageError} from '../errors.js'
import {demultiplex, type EngineApi} from './api.js'
import type {ContainerInfo, ContainerSummary, ExecResult, MountSpec} from './types.js'
import {usageOf, type ContainerStats, type RawStats} from './stats.js'

export interface ContainerClient {
  list(labels: Record<string, string>): Promise<ContainerSummary[]>
  inspect(nameOrId: string): Promise<ContainerInfo | undefined>
  create(options: ContainerCreateOptions): Promise<string>
  start(id: string): Promise<void>
  /** Stop a container by name or id: what it was found to be, so that callers need no inspect first. */
  stop(nameOrId: string, timeoutSeconds?: number): Promise<'stopped' | 'not-running' | 'missing'>
  /**
   * SIGKILL (the engine waits for the exit) unless another signal is named
   * (delivered, not waited for). `answer: false` resolves once the request is
   * on its way (EngineApi.dispatch): for a signal whose outcome nobody reports.
   */
  kill(id: string, signal?: string, options?: {answer?: boolean}): Promise<void>
  remove(id: string, options?: {force?: boolean}): Promise<void>
  wait(id: string): Promise<number>
  /** Its stdout and stderr as text: the last `tail` lines (50), or all of them; with `timestamps`, each line starts with the engine's RFC 3339 time and a space. */
  logs(id: string, tail?: number | 'all', options?: {timestamps?: boolean}): Promise<string>
  /** Run a command and collect its output; optionally stream it as it comes. */
  exec(id: string, cmd: string[], options?: ExecOptions): Promise<ExecResult>
  /** A one-off resource sample (a host-side probe: needs no process in the container). */
  stats(id: string): Promise<ContainerStats>
  /** Stream a container's stdout/stderr (attach before start to miss nothing); resolves when the stream ends. */
  attach(id: string, sink: OutputSink): Promise<{ended: Promise<void>}>
  /** Unpack a tar archive into a directory of a container (one that is created and not started, too). */
  putArchive(id: string, dir: string, tar: Buffer): Promise<void>
}

export interface OutputSink {
  onStdout?: (chunk: Buffer) => void
  onStderr?: (chunk: Buffer) => void
}

export interface ExecOptions extends OutputSink {
  user?: string
  workdir?: string
  env?: string[]
  /** Input for the process: all of it at once, or a stream (e.g. our own stdin) piped as it comes. End of input is passed on. */
  stdin?: string | Buffer | Readable
  /** Keep the output in the result (default); false only streams it to the callbacks. */
  collect?: boolean
  /** Abort: stop streaming and resolve with exit code -1 (the process itself is left to the engine). */
  signal?: AbortSignal
  /** Write the output here as it comes, with backpressure (a slow reader slows the process, nothing piles up in memory). */
  stdout?: Writable
  stderr?: Writable
}

/** Feed `stdin` to an exec's hijacked connection, then half-close it (end of input). */
function feedStdin(socket: Writable, stdin: string | Buffer | Readable): void {
  if (typeof stdin === 'string' || Buffer.isBuffer(stdin)) socket.end(stdin)
  else stdin.pipe(socket)
}

/** Wait for an exec's output stream to finish, or for the abort signal. */
async function pumpExec(stream: Readable & {destroy(): void}, options: ExecOptions, demux: (out: (c: Buffer) => void, err: (c: Buffer) => void) => Promise<void>): Promise<{out: Buffer[]; err: Buffer[]; aborted: boolean}> {
  const collect = options.collect !== false
  const out: Buffer[] = []
  const err: Buffer[] = []
  let aborted = false
  const onAbort = () => {
    aborted = true
    stream.destroy()
  }
  if (options.signal?.aborted) onAbort()
  options.signal?.addEventListener('abort', onAbort, {once: true})
  // A sink that cannot take more pauses the engine's stream until it drains.
  const deliver = (sink: Writable | undefined, chunk: Buffer) => {
    if (!sink || sink.destroyed) return
    if (!sink.write(chunk) && !stream.isPaused()) {
      stream.pause()
      sink.once('drain', () => stream.resume())
    }
  }
  try {
    await demux(
      (c) => {
        if (collect) out.push(c)
        options.onStdout?.(c)
        deliver(options.stdout, c)
      },
      (c) => {
        if (collect) err.push(c)
        options.onStderr?.(c)
        deliver(options.stderr, c)
      },
    )
  } catch (error) {
    if (!aborted) throw error
  } finally {
    options.signal?.removeEventListener('abort', onAbort)
    if (options.stdin && typeof options.stdin !== 'string' && !Buffer.isBuffer(options.stdin)) options.stdin.unpipe()
  }
  return {out, err, aborted}
}

export function labelFilters(labels: Record<string, string>): string[] {
  return Object.entries(labels).map(([k, v]) => (v === '' ? k : `${k}=${v}`))
}

/** The same calls on the engine API directly (see api.ts): no dockerode to load. */
export class ApiContainers implements ContainerClient {
  constructor(private readonly api: EngineApi) {}

  async list(labels: Record<string, string>): Promise<ContainerSummary[]> {
    const rows = await this.api.json<Dockerode.ContainerInfo[]>('GET', '/containers/json', {
      query: {all: true, filters: JSON.stringify({label: labelFilters(labels)})},
    })
    return rows.map((row) => ({
      id: row.Id,
      name: (row.Names[0] ?? '').replace(/^\//, ''),
      image: row.Image,
      state: row.State,
      status: row.Status,
      labels: row.Labels ?? {},
    }))
  }

  async inspect(nameOrId: string): Promise<ContainerInfo | undefined> {
    try {
      return toContainerInfo(await this.api.json<ContainerInspectInfo>('GET', `/containers/${nameOrId}/json`))
    } catch (error) {
      if (isNotFound(error)) return undefined
      throw error
    }
  }

  async create(options: ContainerCreateOptions): Promise<string> {
    const {name, ...body} = options
    try {
      const created = await this.api.json<{Id: string}>('POST', '/containers/create', {query: {name}, body})
      return created.Id
    } catch (error) {
      throw createError(error)
    }
  }

  async start(id: string): Promise<void> {
    try {
      await this.api.json('POST', `/containers/${id}/start`)
    } catch (error) {
      if ((error as {statusCode?: number}).statusCode === 304) return // already started
      throw error
    }
  }

  async stop(nameOrId: string, timeoutSeconds = 3): Promise<'stopped' | 'not-running' | 'missing'> {
    try {
      await this.api.json('POST', `/containers/${nameOrId}/stop`, {query: {t: timeoutSeconds}})
      return 'stopped'
    } catch (error) {
      if ((error as {statusCode?: number}).statusCode === 304) return 'not-running'
      if (isNotFound(error)) return 'missing'
      throw error
    }
  }

  async kill(id: string, signal?: string, options: {answer?: boolean} = {}): Promise<void> {
    if (options.answer === false) return this.api.dispatch('POST', `/containers/${id}/kill`, signal ? {query: {signal}} : {})
    try {
      await this.api.json('POST', `/containers/${id}/kill`, signal ? {query: {signal}} : {})
    } catch (error) {
      const status = (error as {statusCode?: number}).statusCode
      if (status === 409 || status === 304 || isNotFound(error)) return
      throw error
    }
  }

  async remove(id: string, options: {force?: boolean} = {}): Promise<void> {
    try {
      await this.api.json('DELETE', `/containers/${id}`, {query: {force: options.force ?? false, v: false}})
    } catch (error) {
      if (isNotFound(error)) return
      throw error
    }
  }

  async wait(id: string): Promise<number> {
    // As long as the container runs: no time limit.
    const result = await this.api.json<{StatusCode: number}>('POST', `/containers/${id}/wait`, {timeoutMs: 0})
    return result.StatusCode
  }

  async logs(id: string, tail: number | 'all' = 50, options: {timestamps?: boolean} = {}): Promise<string> {
    const query = {stdout: true, stderr: true, tail, follow: false, ...(options.timestamps ? {timestamps: true} : {})}
    return demuxToText(await this.api.buffer('GET', `/containers/${id}/logs`, {query}))
  }

  async exec(id: string, cmd: string[], options: ExecOptions = {}): Promise<ExecResult> {
    const withStdin = options.stdin !== undefined
    const created = await this.api.json<{Id: string}>('POST', `/containers/${id}/exec`, {
      body: {Cmd: cmd, User: options.user, WorkingDir: options.workdir, Env: options.env, AttachStdout: true, AttachStderr: true, AttachStdin: withStdin},
    })
    const start = {body: {Detach: false, Tty: false}}
    let stream: Readable
    if (withStdin) {
      const socket = await this.api.hijack('POST', `/exec/${created.Id}/start`, start)
      // Half-close after the input: the process sees end-of-file, its output still comes back.
      feedStdin(socket, options.stdin as string | Buffer | Readable)
      stream = socket
    } else {
      stream = await this.api.stream('POST', `/exec/${created.Id}/start`, start)
    }
    const {out, err, aborted} = await pumpExec(stream, options, (onOut, onErr) => demultiplex(stream, onOut, onErr)).catch((error: unknown) => {
      // A connection cut off mid-stream is the engine's failure, classified like the rest (api.ts).
      throw this.api.classify(error)
    })
    const exitCode = aborted ? -1 : await this.execExitCode(created.Id)
    return {exitCode, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8')}
  }

  /**
   * The exit code, once the stream has ended. The engine records it as the
   * process ends, which is when the stream usually ends: if it is not there
   * yet, wait a little. A stream can also end while the process runs on (it
   * closed its stdout and stderr, or a proxy on the way cut a half-closed
   * connection): then say so, rather than make up an exit code.
   */
  private async execExitCode(execId: string): Promise<number> {
    for (let attempt = 0; ; attempt++) {
      const info = await this.api.json<{ExitCode: number | null; Running?: boolean}>('GET', `/exec/${execId}/json`)
      if (!info.Running && info.ExitCode !== null) return info.ExitCode
      if (attempt === 25) {
        throw new SandboxError('the command was still running when its output ended, so its exit code is unknown', {
          hint: 'it closed its stdout and stderr but kept running, or a proxy between this host and the engine cut the connection (it must pass half-closed connections on)',
        })
      }
      await new Promise((resolve) => setTimeout(resolve, 40))
    }
  }

  async stats(id: string): Promise<ContainerStats> {
    const raw = await this.api.json<RawStats>('GET', `/containers/${id}/stats`, {query: {stream: false}})
    return {pids: raw.pids_stats?.current ?? 0, pidsLimit: raw.pids_stats?.limit ?? 0, ...usageOf(raw)}
  }

  async putArchive(id: string, dir: string, tar: Buffer): Promise<void> {
    await this.api.json('PUT', `/containers/${id}/archive`, {query: {path: dir}, raw: {type: 'application/x-tar', data: tar}})
  }

  async attach(id: string, sink: OutputSink): Promise<{ended: Promise<void>}> {
    const stream = await this.api.stream('POST', `/containers/${id}/attach`, {query: {stream: true, stdout: true, stderr: true}})
    const ended = demultiplex(
      stream,
      (c) => sink.onStdout?.(c),
      (c) => sink.onStderr?.(c),
    ).catch(() => undefined)
    return {ended}
  }
}

/** Podman 4 re-parses mount specs as CSV and chokes on a double quote in a path. */
function createError(error: unknown): unknown {
  if (/bare " in non-quoted-field|parse error on line \d+, column \d+/.test(String((error as Error)?.message))) {
    return new UsageError('this engine cannot mount a path that contains a double quote (")', {
      cause: error,
      hint: 'rename the directory, or use Docker, which accepts such paths',
    })
  }
  return error
}

/** The engine refused a create because the name is taken (Docker: 409; Podman: 500 "… is in use"). */
export function isNameInUse(error: unknown): boolean {
  const e = error as {statusCode?: number; message?: string} | undefined
  return e?.statusCode === 409 || (e?.statusCode === 500 && /is in use|already in use|already exists/i.test(e.message ?? ''))
}

export function isNotFound(error: unknown): boolean {
  const e = error as {statusCode?: number; message?: string} | undefined
  if (e?.statusCode === 404) return true
  // Podman, while a container is being removed, answers 500 "getting container
  // from store …: container not known" (seen after Ctrl-C during start).
  return e?.statusCode === 500 && /container not known|no such container/i.test(e.message ?? '')
}

/**
 * The engine refused to create an exec because the container is missing (404)
 * or not running (Docker: 409; Podman: 500 "container state improper").
 */
export function isNotRunning(error: unknown): boolean {
  const status = (error as {statusCode?: number} | undefined)?.statusCode
  if (status === 404 || status === 409) return true
  return status === 500 && /container state improper|is not running/i.test((error as Error).message ?? '')
}

/** Logs of a non-TTY container come framed (8-byte headers); strip the frames. */
export function demuxToText(buffer: Buffer): string {
  const parts: Buffer[] = []
  let offset = 0
  while (offset + 8 <= buffer.length) {
    const type = buffer[offset]
    const size = buffer.readUInt32BE(offset + 4)
    if (type > 2 || buffer[offset + 1] !== 0 || offset + 8 + size > buffer.length) {
      return buffer.toString('utf8') // not framed after all
    }
    parts.push(buffer.subarray(offset + 8, offset + 8 + size))
    offset += 8 + size
  }
  if (offset !== buffer.length) return buffer.toString('utf8')
  return Buffer.concat(parts).toString('utf8')
}

export function toContainerInfo(raw: ContainerInspectInfo): ContainerInfo {
  const host = raw.HostConfig as ContainerInspectInfo['HostConfig'] & {
    CapAdd?: string[] | null
    CapDrop?: string[] | null
    SecurityOpt?: string[] | null
    NanoCpus?: number
    PidsLimit?: number | null
    Memory?: number
  }
  const mounts: MountSpec[] = (raw.Mounts ?? []).map((m) => ({
    type: m.Type as MountSpec['type'],
    source: m.Type === 'volume' ? (m.Name ?? m.Source) : m.Source,
    target: m.Destination,
    readOnly: !m.RW,
  }))
  const ports = Object.entries(host.PortBindings ?? {}).flatMap(([containerPort, bindings]) =>
    ((bindings as Array<{HostIp?: string; HostPort?: string}> | null) ?? []).map(
      (b) => `${b.HostIp ? `${b.HostIp}:` : ''}${b.HostPort ?? ''}:${containerPort}`,
    ),
  )
  return {
    id: raw.Id,
    name: raw.Name.replace(/^\//, ''),
    image: raw.Config.Image,
    imageId: raw.Image,
    running: raw.State.Running,
    status: raw.State.Status,
    exitCode: raw.State.ExitCode,
    oomKilled: raw.State.OOMKilled,
    startedAt: raw.State.StartedAt,
    finishedAt: raw.State.FinishedAt,
    labels: raw.Config.Labels ?? {},
    env: raw.Config.Env ?? [],
    user: raw.Config.User ?? '',
    workdir: raw.Config.WorkingDir ?? '',
    mounts,
    capAdd: host.CapAdd ?? [],
    capDrop: host.CapDrop ?? [],
    privileged: host.Privileged ?? false,
    securityOpt: host.SecurityOpt ?? [],
    networkMode: host.NetworkMode ?? '',
    memory: host.Memory ?? 0,
    nanoCpus: host.NanoCpus ?? 0,
    pidsLimit: host.PidsLimit ?? 0,
    ports,
  }
}

/**
 * The one Engine API client, on node:http, for every transport: local sockets,
 * tcp/http(s), and ssh:// through `ssh … docker system dial-stdio` (ssh.ts), as
 * the docker CLI does. Loading dockerode (with its gRPC, protobuf and SSH
 * dependencies) cost more than a whole warm `exec`, so the CLI speaks the
 * handful of calls it needs itself (docs/PERFORMANCE.md).
 *
 * The one place where engine failures are classified and timed: an HTTP error
 * status is an EngineApiError with `statusCode` and the engine's message (the
 * resource clients read 404s, 409s and 304s from it); a failure to reach the
 * engine, or one cut off mid-stream, is a classified EngineError (connect.ts,
 * exit 3); a call that gets no answer within ENGINE_TIMEOUT_MS is one too.
 */
import {Agent, request, type ClientRequest, type IncomingMessage, type OutgoingHttpHeaders, type RequestOptions} from 'node:http'
import {readFileSync} from 'node:fs'
import {Duplex, finished, type Readable} from 'node:stream'
import type {Endpoint} from './endpoint.js'
import {lazyImport} from '../util/lazy-import.js'
import {extraTrust} from '../util/tls.js'
import {SshAgent} from './ssh.js'
import {classifyEngineError, isConnectionError} from './connect.js'
import {EngineError} from '../errors.js'

export class EngineApiError extends Error {
  override name = 'EngineApiError'
  constructor(
    message: string,
    readonly statusCode: number,
    readonly json?: unknown,
  ) {
    super(message)
  }
}

export type Query = Record<string, string | number | boolean | undefined>

export interface CallOptions {
  query?: Query
  /** A JSON body, or raw bytes of a type (a tar archive). */
  body?: unknown
  raw?: {type: string; data: Buffer}
  /**
   * How long the engine may take to answer (for a JSON call: the whole body);
   * 0 for calls that last as long as a process (`wait`). Streams are timed
   * until their response starts only.
   */
  timeoutMs?: number
}

/**
 * The TLS server name of a connection without TLS. node's Agent works one out
 * for every request unless it is given, and its test of whether a name is an IP
 * address compiles a large regular expression on first use: 3-4 ms of every
 * command's first engine call, on a unix socket too (docs/PERFORMANCE.md).
 */
const NO_TLS = ''

/** No engine call of ours takes this long unless the engine is stuck (a create on a loaded Podman takes seconds). */
export const ENGINE_TIMEOUT_MS = 120_000

interface Upgraded {
  upgraded: true
  socket: Duplex
  head: Buffer
}

/** `?k=v&…` for the defined values, percent-encoded (URLSearchParams would cost 0.2 ms of start-up on its first use). */
export function queryString(query: Query | undefined): string {
  const pairs: string[] = []
  for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined) pairs.push(`${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`)
  return pairs.length ? `?${pairs.join('&')}` : ''
}

/**
 * TLS options for an engine behind https://: DOCKER_CERT_PATH's ca.pem,
 * cert.pem and key.pem where present; without a ca.pem, node's store plus
 * NODE_EXTRA_CA_CERTS (which the launcher keeps out of node's start: ../tls.ts).
 */
export function certs(): {ca?: Buffer | string[]; cert?: Buffer; key?: Buffer} {
  const certPath = process.env.DOCKER_CERT_PATH
  const read = (name: string) => {
    if (!certPath) return undefined
    try {
      return readFileSync(`${certPath}/${name}`)
    } catch {
      return undefined
    }
  }
  return {ca: read('ca.pem') ?? extraTrust(), cert: read('cert.pem'), key: read('key.pem')}
}

interface Transport {
  request(options: RequestOptions): ClientRequest
  /** Keep-alive, for the JSON calls: one connection serves a command's round-trips. */
  shared: Agent
  /** A connection of its own, for a stream that lasts as long as a process. */
  fresh(): Agent
}

export class EngineApi {
  private transport?: Promise<Transport>

  constructor(private readonly endpoint: Endpoint) {}

  /** node:http, or node:https (loaded only for a TLS endpoint: it costs start-up time), or ssh. */
  private getTransport(): Promise<Transport> {
    this.transport ??= (async () => {
      if (this.endpoint.kind === 'ssh') {
        const target = this.endpoint
        return {request, shared: new SshAgent(target, {keepAlive: true}), fresh: () => new SshAgent(target, {keepAlive: false})}
      }
      if (this.endpoint.kind === 'http' && this.endpoint.protocol === 'https') {
        const https = await lazyImport<typeof import('node:https')>('node:https')
        const tls = certs()
        return {request: https.request, shared: new https.Agent({keepAlive: true, ...tls}), fresh: () => new https.Agent({keepAlive: false, ...tls})}
      }
      return {request, shared: new Agent({keepAlive: true}), fresh: () => new Agent({keepAlive: false})}
    })()
    return this.transport
  }

  private options(method: string, path: string, headers: OutgoingHttpHeaders, agent: Agent): RequestOptions & {servername?: string} {
    const base: RequestOptions = {method, path, headers, agent}
    if (this.endpoint.kind === 'http') {
      const tcp = {...base, host: this.endpoint.host, port: this.endpoint.port}
      return this.endpoint.protocol === 'https' ? tcp : {...tcp, servername: NO_TLS}
    }
    // Over ssh the agent makes the connection; the host only names it in the request.
    if (this.endpoint.kind === 'ssh') return {...base, host: 'docker', servername: NO_TLS}
    return {...base, socketPath: this.endpoint.socketPath, servername: NO_TLS}
  }

  /** A failure to reach the engine, or a stream cut off, as the one-line EngineError users see; anything else as it is. */
  classify(error: unknown): unknown {
    return isConnectionError(error) ? classifyEngineError(error, this.endpoint) : error
  }

  /**
   * Send a request; resolves with the response (any status) or, for `upgrade`,
   * the hijacked socket. `finish` runs within the call's time limit (reading a
   * JSON body); streams are timed until their response starts.
   */
  private async send<T>(
    method: string,
    path: string,
    options: CallOptions & {stream?: boolean; upgrade?: boolean},
    finish: (res: IncomingMessage | Upgraded) => Promise<T>,
  ): Promise<T> {
    const transport = await this.getTransport()
    const body = options.raw?.data ?? (options.body === undefined ? undefined : Buffer.from(JSON.stringify(options.body)))
    const headers: OutgoingHttpHeaders = {}
    if (body) {
      headers['Content-Type'] = options.raw?.type ?? 'application/json'
      headers['Content-Length'] = body.length
    }
    if (options.upgrade) {
      headers.Connection = 'Upgrade'
      headers.Upgrade = 'tcp'
    }
    const agent = options.stream || options.upgrade ? transport.fresh() : transport.shared
    const req = transport.request(this.options(method, path + queryString(options.query), headers, agent))
    const limit = options.timeoutMs ?? ENGINE_TIMEOUT_MS
    let timer: NodeJS.Timeout | undefined
    const timedOut = () =>
      new EngineError('unhealthy', `the container engine did not answer ${method} ${path.split('?')[0]} within ${limit / 1000} s`, {
        hint: 'check `docker info`; restart the engine if it does not answer',
      })
    try {
      const answer = await new Promise<IncomingMessage | Upgraded>((resolve, reject) => {
        if (limit > 0) timer = setTimeout(() => req.destroy(timedOut()), limit)
        req.on('error', reject)
        req.on('response', resolve)
        req.on('upgrade', (_res, socket, head) => resolve({upgraded: true, socket, head}))
        req.end(body)
      })
      if (options.stream || options.upgrade) clearTimeout(timer)
      return await finish(answer)
    } catch (error) {
      throw this.classify(error)
    } finally {
      clearTimeout(timer)
    }
  }

  /**
   * The whole body. With events, not `for await`: a stream's async iterator
   * costs about 0.8 ms to set up on its first use, in every command.
   */
  private static read(res: Readable): Promise<Buffer> {
    return new Promise((resolve, reject) => {
      const chunks: Buffer[] = []
      res.on('data', (chunk: Buffer) => chunks.push(chunk))
      finished(res, {writable: false}, (error) => (error ? reject(error) : resolve(Buffer.concat(chunks))))
    })
  }

  private static async fail(res: IncomingMessage, method: string, path: string): Promise<never> {
    const text = (await EngineApi.read(res)).toString('utf8')
    let json: unknown
    try {
      json = JSON.parse(text)
    } catch {
      json = undefined
    }
    const message = (json as {message?: string} | undefined)?.message ?? (text.trim() || res.statusMessage || 'unexpected')
    throw new EngineApiError(`(HTTP code ${res.statusCode}) ${message} (${method} ${path.split('?')[0]})`, res.statusCode ?? 0, json)
  }

  /** A JSON call; resolves with the parsed body (undefined when there is none). Non-2xx statuses reject. */
  json<T>(method: string, path: string, options: CallOptions = {}): Promise<T> {
    return this.send(method, path, options, async (answer) => {
      const res = answer as IncomingMessage
      if ((res.statusCode ?? 0) >= 300) return EngineApi.fail(res, method, path)
      const raw = await EngineApi.read(res)
      if (raw.length === 0) return undefined as T
      const text = raw.toString('utf8')
      try {
        return JSON.parse(text) as T
      } catch {
        return text as T
      }
    })
  }

  /** A call's response headers (the body is read and dropped); non-2xx statuses reject. */
  headers(method: string, path: string): Promise<IncomingMessage['headers']> {
    return this.send(method, path, {}, async (answer) => {
      const res = answer as IncomingMessage
      if ((res.statusCode ?? 0) >= 300) return EngineApi.fail(res, method, path)
      await EngineApi.read(res)
      return res.headers
    })
  }

  /** The whole body as bytes (logs). */
  buffer(method: string, path: string, options: CallOptions = {}): Promise<Buffer> {
    return this.send(method, path, options, async (answer) => {
      const res = answer as IncomingMessage
      if ((res.statusCode ?? 0) >= 300) return EngineApi.fail(res, method, path)
      return EngineApi.read(res)
    })
  }

  /**
   * A call whose answer nobody waits for: resolves once the request is handed
   * to the operating system on the engine's connection (a local socket or TCP),
   * and the answer, when it comes, is read and dropped, errors included. The
   * engine serves a request it has received even if this process exits first,
   * so a command can end without waiting for work it does not report on. Over
   * ssh the bytes pass through the ssh client, which an exit would cut off:
   * there it waits for the answer (and still ignores it).
   */
  async dispatch(method: string, path: string, options: CallOptions = {}): Promise<void> {
    if (this.endpoint.kind === 'ssh') {
      await this.buffer(method, path, options).catch(() => undefined)
      return
    }
    const transport = await this.getTransport()
    const req = transport.request(this.options(method, path + queryString(options.query), {}, transport.shared))
    await new Promise<void>((resolve) => {
      req.on('error', () => resolve())
      req.on('response', (res) => res.resume())
      req.end(resolve)
    })
  }

  /** A streamed body (attach, exec without stdin): the engine writes the raw stream until the process ends. */
  stream(method: string, path: string, options: CallOptions = {}): Promise<Readable> {
    return this.send(method, path, {...options, stream: true}, async (answer) => {
      const res = answer as IncomingMessage
      if ((res.statusCode ?? 0) >= 300) return EngineApi.fail(res, method, path)
      return res
    })
  }

  /** A hijacked connection (exec with stdin): write stdin, end it, read the raw stream. */
  hijack(method: string, path: string, options: CallOptions = {}): Promise<Duplex> {
    return this.send(method, path, {...options, upgrade: true}, async (result) => {
      if (!('upgraded' in result)) {
        if ((result.statusCode ?? 0) >= 300) return EngineApi.fail(result, method, path)
        // An engine that answers 200 without upgrading has still hijacked the connection:
        // input goes to the socket, output comes as the response body.
        return Duplex.from({readable: result, writable: result.socket})
      }
      if (result.head.length) result.socket.unshift(result.head)
      return result.socket
    })
  }
}

/**
 * Split the engine's multiplexed stream (8-byte frame headers: stream id,
 * 3 zero bytes, big-endian length) into stdout and stderr as it arrives.
 * Resolves when the stream ends.
 */
export function demultiplex(stream: Readable, onStdout: (chunk: Buffer) => void, onStderr: (chunk: Buffer) => void): Promise<void> {
  let pending: Buffer = Buffer.alloc(0)
  return new Promise((resolve, reject) => {
    stream.on('data', (chunk: Buffer) => {
      pending = pending.length ? Buffer.concat([pending, chunk]) : chunk
      while (pending.length >= 8) {
        const size = pending.readUInt32BE(4)
        if (pending.length < 8 + size) break
        const payload = pending.subarray(8, 8 + size)
        if (pending[0] === 2) onStderr(payload)
        else if (pending[0] === 1) onStdout(payload)
        pending = pending.subarray(8 + size)
      }
    })
    stream.on('end', resolve)
    stream.on('close', resolve)
    stream.on('error', reject)
  })
}

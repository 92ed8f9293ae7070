/**
 * ssh:// engines, the way the docker CLI reaches them: each connection is an
 * `ssh … docker system dial-stdio` process whose stdin and stdout carry the
 * Engine API's HTTP, so the same client (api.ts) speaks to every transport.
 * The user's own ssh (config, agent, keys, known hosts) does the connecting.
 * A keep-alive agent keeps one ssh process for a command's JSON calls; a
 * stream or a hijacked exec gets one of its own.
 */
import {Agent, type AgentOptions} from 'node:http'
import type {ChildProcessWithoutNullStreams} from 'node:child_process'
import {Duplex} from 'node:stream'
import {builtin} from '../util/lazy-import.js'

export interface SshTarget {
  host: string
  port: number
  username?: string
}

/** ssh's argv for a target: batch mode (never a prompt: the CLI's stdin may be a command's), then the remote command. */
export function sshArgv(target: SshTarget, remote: readonly string[] = ['docker', 'system', 'dial-stdio']): string[] {
  const destination = target.username ? `${target.username}@${target.host}` : target.host
  return ['-o', 'BatchMode=yes', '-p', String(target.port), '--', destination, ...remote]
}

/**
 * The errno code a failed ssh connection amounts to, from ssh's own message,
 * so that classifyEngineError gives it the same one line as a socket failure.
 */
export function sshFailureCode(stderr: string): string {
  if (/connection refused/i.test(stderr)) return 'ECONNREFUSED'
  if (/could not resolve hostname|name or service not known/i.test(stderr)) return 'ENOTFOUND'
  if (/no route to host/i.test(stderr)) return 'EHOSTUNREACH'
  if (/timed out/i.test(stderr)) return 'ETIMEDOUT'
  if (/permission denied|host key verification failed/i.test(stderr)) return 'ESSHAUTH'
  return 'ESSH'
}

/** An http.Agent whose connections are ssh processes running `docker system dial-stdio`. */
export class SshAgent extends Agent {
  constructor(
    private readonly target: SshTarget,
    options: AgentOptions = {},
    private readonly binary = process.env.AGENT_SANDBOX_SSH ?? 'ssh',
  ) {
    super(options)
  }

  override createConnection(): Duplex {
    const {spawn} = builtin<typeof import('node:child_process')>('node:child_process')
    return new SshSocket(spawn(this.binary, sshArgv(this.target), {stdio: ['pipe', 'pipe', 'pipe']}))
  }
}

/**
 * A connection that is an ssh process: its stdin and stdout. It ends only once
 * ssh has exited, so a failed connection reports ssh's reason (with an
 * errno-like code) rather than a bare "socket hang up". node's HTTP client
 * calls the socket methods at the end; ref/unref matter, so that an idle
 * keep-alive connection does not keep the CLI from exiting.
 */
class SshSocket extends Duplex implements SocketLike {
  private stderr = ''

  constructor(private readonly child: ChildProcessWithoutNullStreams) {
    super()
    child.stderr.setEncoding('utf8')
    child.stderr.on('data', (chunk: string) => {
      if (this.stderr.length < 4096) this.stderr += chunk
    })
    child.stdout.on('data', (chunk: Buffer) => {
      if (!this.push(chunk)) child.stdout.pause()
    })
    // Writing to an ssh that has gone fails with EPIPE; its exit says why.
    child.stdin.on('error', () => undefined)
    child.on('error', (error) => this.destroy(error))
    child.on('close', (code, signal) => {
      if (this.destroyed) return
      if (code === 0) {
        this.push(null)
        return
      }
      const line = this.stderr.trim().split('\n').pop() || `ssh exited with ${signal ?? `status ${code}`}`
      this.destroy(Object.assign(new Error(`ssh: ${line.replace(/^ssh: /, '')}`), {code: sshFailureCode(this.stderr)}))
    })
  }

  override _read(): void {
    this.child.stdout.resume()
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, done: (error?: Error | null) => void): void {
    if (this.child.stdin.writable) this.child.stdin.write(chunk, () => done())
    else done()
  }

  override _final(done: (error?: Error | null) => void): void {
    this.child.stdin.end(() => done())
  }

  override _destroy(error: Error | null, done: (error?: Error | null) => void): void {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill()
    done(error)
  }

  setNoDelay(): this {
    return this
  }

  setKeepAlive(): this {
    return this
  }

  setTimeout(): this {
    return this
  }

  ref(): this {
    this.child.ref()
    for (const pipe of this.pipes()) pipe.ref?.()
    return this
  }

  unref(): this {
    this.child.unref()
    for (const pipe of this.pipes()) pipe.unref?.()
    return this
  }

  private pipes(): Array<{ref?(): void; unref?(): void}> {
    return [this.child.stdin, this.child.stdout, this.child.stderr] as unknown as Array<{ref?(): void; unref?(): void}>
  }
}

/** What node's HTTP client calls on a socket besides reading and writing. */
interface SocketLike {
  setNoDelay(): unknown
  setKeepAlive(): unknown
  setTimeout(): unknown
  ref(): unknown
  unref(): unknown
}

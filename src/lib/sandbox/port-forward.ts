/**
 * `agent-sandbox port`: a loopback port on the host forwarded to a port inside
 * a running sandbox, in the manner of `kubectl port-forward`. Each connection
 * is one engine exec of a small relay (node, which every image has) that
 * connects to 127.0.0.1:<port> in the sandbox's own network namespace and
 * copies bytes both ways, end of input included. Nothing about the sandbox
 * changes: no published port, no firewall rule (the traffic is the user's,
 * inbound, over the engine's API, and stays on the sandbox's loopback).
 */
import {readFileSync} from 'node:fs'
import {createServer, type Server, type Socket} from 'node:net'
import {join} from 'node:path'
import type {Context} from '../context.js'
import {NotReadyError, UsageError} from '../errors.js'
import {silentReporter} from '../reporter.js'
import {templatesDir} from '../util/assets.js'
import {SANDBOX_USER} from '../contract.js'

export interface PortMapping {
  /** The host's loopback port; 0 picks a free one. */
  host: number
  /** The port inside the sandbox. */
  container: number
}

/** `3000` (the same port on both sides), `8080:3000` (host:sandbox) or `0:3000` (a free host port). Pure. */
export function parsePortSpec(spec: string): PortMapping {
  const match = /^(?:(\d{1,5}):)?(\d{1,5})$/.exec(spec)
  const host = match ? Number(match[1] ?? match[2]) : NaN
  const container = match ? Number(match[2]) : NaN
  if (!match || container < 1 || container > 65535 || host > 65535) {
    throw new UsageError(`not a port to forward: ${JSON.stringify(spec)}`, {hint: 'give the sandbox\'s port (3000), or host:sandbox (8080:3000; 0:3000 picks a free host port)'})
  }
  return {host, container}
}

/** The relay run inside for each connection (`node -e RELAY <port>`), shipped as templates/port-relay.cjs. */
export function relayProgram(): string {
  return readFileSync(join(templatesDir, 'port-relay.cjs'), 'utf8')
}

export interface Forwarding {
  /** What listens, once every port does. */
  bound: PortMapping[]
  /** Resolves when the forwarding has ended (the signal was aborted), every connection closed. */
  closed: Promise<void>
}

/**
 * Listen on 127.0.0.1 for each mapping and relay every connection into the
 * running sandbox `name`, until `ctx.signal` aborts. Refuses a sandbox that is
 * not running, and a host port in use (nothing is left listening then).
 */
export async function forwardPorts(ctx: Context, name: string, mappings: readonly PortMapping[], hint: {start: string}): Promise<Forwarding> {
  const reporter = ctx.reporter ?? silentReporter
  const info = await ctx.engine.containers.inspect(name)
  if (!info?.running) throw new NotReadyError(`sandbox ${name} is not running`, {hint: `start it first: ${hint.start}`})
  const program = relayProgram()
  const servers: Server[] = []
  const sockets = new Set<Socket>()
  const bound: PortMapping[] = []
  const relay = (socket: Socket, port: number) => {
    sockets.add(socket)
    const done = new AbortController()
    const errors: Buffer[] = []
    socket.on('error', () => done.abort())
    socket.on('close', () => {
      sockets.delete(socket)
      done.abort()
    })
    ctx.engine.containers
      .exec(info.id, ['node', '-e', program, String(port)], {user: SANDBOX_USER, stdin: socket, stdout: socket, collect: false, onStderr: (c) => errors.push(c), signal: done.signal})
      .then(
        (result) => {
          socket.end()
          if (result.exitCode > 0) reporter.warn(`port ${port} in ${name}: ${Buffer.concat(errors).toString().trim() || `the relay exited with ${result.exitCode}`}`)
        },
        (error: unknown) => {
          socket.destroy()
          reporter.warn(`port ${port} in ${name}: ${error instanceof Error ? error.message : String(error)}`)
        },
      )
  }
  try {
    for (const mapping of mappings) {
      const server = createServer({allowHalfOpen: true}, (socket) => relay(socket, mapping.container))
      servers.push(server)
      const port = await new Promise<number>((resolve, reject) => {
        server.once('error', reject)
        server.listen(mapping.host, '127.0.0.1', () => {
          server.removeListener('error', reject)
          const address = server.address()
          resolve(typeof address === 'object' && address ? address.port : mapping.host)
        })
      }).catch((error: NodeJS.ErrnoException) => {
        if (error.code === 'EADDRINUSE' || error.code === 'EACCES') {
          throw new UsageError(`cannot listen on 127.0.0.1:${mapping.host}: ${error.code === 'EADDRINUSE' ? 'the port is in use' : 'permission denied'}`, {
            hint: `pick another host port, or 0:${mapping.container} for a free one`,
            cause: error,
          })
        }
        throw error
      })
      bound.push({host: port, container: mapping.container})
    }
  } catch (error) {
    for (const server of servers) server.close()
    throw error
  }
  const closed = new Promise<void>((resolve) => {
    const stop = () => {
      for (const socket of sockets) socket.destroy()
      let open = servers.length
      for (const server of servers) server.close(() => --open === 0 && resolve())
    }
    if (ctx.signal?.aborted) stop()
    else ctx.signal?.addEventListener('abort', stop, {once: true})
  })
  return {bound, closed}
}

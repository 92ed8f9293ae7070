/**
 * The egress gateway (docs/design.md, "The egress gateway"): the program of a
 * sandbox's gateway container. The firewall redirects the agent's TCP to ports
 * 80 and 443 of allowlisted addresses here; the gateway decides from the Host
 * header (HTTP) or the SNI (TLS) alone where each request may go, resolves that
 * name itself through the sandbox's resolver, and connects on its own (only its
 * uid may reach ports 80 and 443). The address the client dialled is never
 * used: a name it does not allow goes nowhere, whatever address it was sent to.
 *
 * One shared state (state.ts) and a module per protocol: http1.ts (with
 * upgrade.ts), http2.ts, tls.ts; the request log in request-log.ts.
 */
import net from 'node:net'
import type {Duplex} from 'node:stream'
import {createHttp1Server} from './http1.js'
import {GatewayState, type GatewayConfig} from './state.js'
import {createTlsServer} from './tls.js'

export type {GatewayConfig, GatewaySecrets} from './state.js'
export {SECRETS_FILE} from './ports.js'

export interface RunningGateway {
  close(): Promise<void>
  allowlistSize: number
}

/** Serve the gateway on its HTTP and TLS ports until closed. */
export async function serveGateway(config: GatewayConfig): Promise<RunningGateway> {
  const state = new GatewayState(config)
  // Plain HTTP and decrypted TLS are served alike, one server each, so each keeps its own connections.
  const plain = createHttp1Server(state)
  const decrypted = createHttp1Server(state)
  const tls = createTlsServer(state, decrypted)
  // Upgraded connections leave the HTTP servers' books: kept here, so that close ends them too.
  const sockets = new Set<Duplex>()
  for (const server of [plain, decrypted])
    server.on('connection', (s: Duplex) => {
      sockets.add(s)
      s.once('close', () => sockets.delete(s))
    })
  await listenAll(plain, config.httpPort, config.listen)
  await listenAll(tls.server, config.tlsPort, config.listen)
  return {
    allowlistSize: state.allowlist().length,
    close: async () => {
      await tls.close()
      for (const s of sockets) s.destroy()
      await Promise.all([plain, tls.server, decrypted].map((s) => new Promise((r) => s.close(r))))
      state.close()
    },
  }
}

/** Listen on the first address (must work), then on the others where the address exists (::1 only with IPv6). */
async function listenAll(server: net.Server, port: number, addresses: string[]): Promise<void> {
  const [first, ...rest] = addresses
  await listenOn(server, port, first)
  for (const address of rest) {
    const extra = net.createServer()
    extra.on('connection', (s) => server.emit('connection', s))
    await listenOn(extra, port, address).catch(() => undefined)
  }
}

function listenOn(server: net.Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen({port, host, exclusive: true}, () => {
      server.off('error', reject)
      resolve()
    })
  })
}

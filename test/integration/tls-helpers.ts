/**
 * TLS for integration tests: a throwaway CA and a server certificate for
 * 127.0.0.1 (made with openssl), and a TLS relay on loopback that decrypts and
 * passes bytes on to a socket of ours (the engine's, a stand-in's), as a
 * TLS-inspecting proxy or a TLS-protected engine would present itself.
 */
import {execa} from 'execa'
import {readFileSync, writeFileSync} from 'node:fs'
import {connect, type NetConnectOpts, type Socket} from 'node:net'
import {join} from 'node:path'
import {createServer, type Server} from 'node:tls'

export interface TestCa {
  /** The CA certificate (what NODE_EXTRA_CA_CERTS would name). */
  caFile: string
  cert: Buffer
  key: Buffer
}

/** A CA and a certificate for IP 127.0.0.1 signed by it, in `dir`. */
export async function makeTestCa(dir: string): Promise<TestCa> {
  const f = (name: string) => join(dir, name)
  const openssl = (...args: string[]) => execa('openssl', args, {cwd: dir})
  await openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', f('ca.key'), '-out', f('ca.pem'), '-days', '2', '-subj', '/CN=agent-sandbox test CA')
  await openssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', f('server.key'), '-out', f('server.csr'), '-subj', '/CN=127.0.0.1')
  writeFileSync(f('server.ext'), 'subjectAltName=IP:127.0.0.1\n')
  await openssl('x509', '-req', '-in', f('server.csr'), '-CA', f('ca.pem'), '-CAkey', f('ca.key'), '-CAcreateserial', '-out', f('server.pem'), '-days', '2', '-extfile', f('server.ext'))
  return {caFile: f('ca.pem'), cert: readFileSync(f('server.pem')), key: readFileSync(f('server.key'))}
}

export interface Relay {
  port: number
  close(): Promise<void>
}

/**
 * TLS on 127.0.0.1 (a free port), each connection relayed to `target`.
 * Half-closed connections are passed on, as Docker's own TLS listener does:
 * an exec's end of input must not end its output.
 */
export async function tlsRelay(ca: TestCa, target: NetConnectOpts): Promise<Relay> {
  const open = new Set<Socket>()
  const track = (socket: Socket) => {
    open.add(socket)
    socket.on('close', () => open.delete(socket))
  }
  const server: Server = createServer({cert: ca.cert, key: ca.key, allowHalfOpen: true}, (client) => {
    const upstream = connect({...target, allowHalfOpen: true})
    track(client)
    track(upstream)
    client.pipe(upstream).pipe(client)
    upstream.on('error', () => client.destroy())
    client.on('error', () => upstream.destroy())
  })
  // Connections whose handshake failed (an untrusted certificate) too.
  server.on('connection', track)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  if (!address || typeof address === 'string') throw new Error('no port')
  return {
    port: address.port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        for (const socket of open) socket.destroy()
      }),
  }
}

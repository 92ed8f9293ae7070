/**
 * TLS (port 443) in the egress gateway: the SNI of the ClientHello decides,
 * read without terminating TLS (sni.ts). A name off the allowlist gets an
 * alert. A host with httpRules or a masked secret (every host with
 * gateway.inspectAll) is intercepted: TLS terminated with a leaf of the
 * sandbox's CA, the decrypted stream served as HTTP/2 or HTTP/1.1 by what was
 * negotiated. Every other connection is passed through to the name's own
 * address, its bytes untouched.
 */
import type http from 'node:http'
import type * as Http2 from 'node:http2'
import net from 'node:net'
import tls from 'node:tls'
import {createLeafMinter, type LeafMinter} from './certificates.js'
import {errCode, uploadMeter} from './forward.js'
import type {Admission} from './grants.js'
import {decideSni} from './policy.js'
import {ALERT_UNRECOGNIZED_NAME, parseClientHello} from './sni.js'
import type {GatewayState} from './state.js'

const HELLO_TIMEOUT_MS = 10_000
/**
 * What a passed-through download is read into, reused for the connection's life: one read
 * takes what the kernel holds, up to this, with no allocation; the next waits until it is written.
 */
const PASS_THROUGH_BUFFER = 256 * 1024
/** Leaf contexts kept: names come from the allowlist, but a wildcard entry admits any number of them. */
const MAX_LEAF_CONTEXTS = 256

interface Interception {
  minter: LeafMinter
  h2: Http2.Http2Server
  sni: symbol
}

/** The TLS listener; `intercepted` serves decrypted HTTP/1.1 (http1.ts). */
export function createTlsServer(state: GatewayState, intercepted: http.Server): {server: net.Server; close: () => Promise<void>} {
  let interception: Promise<Interception> | undefined
  /** The minter and the HTTP/2 server, loaded at the first interception only (a gateway that passes everything through never loads them). */
  const getInterception = (): Promise<Interception> => {
    if (!interception) {
      const made = (async () => {
        const secrets = state.secrets()
        if (!secrets) throw new Error('no CA yet')
        const {createH2Server, SNI} = await import('./http2.js')
        return {minter: createLeafMinter(secrets.ca), h2: createH2Server(state), sni: SNI}
      })()
      made.catch(() => (interception = undefined))
      interception = made
    }
    return interception
  }

  /**
   * A TLS context per intercepted name, made once: given `cert` and `key`, each TLSSocket
   * would parse them into an OpenSSL context of its own, which costs a few ms and leaves
   * the heap fragmented.
   */
  const leafContexts = new Map<string, Promise<tls.SecureContext>>()
  const leafContext = (minter: LeafMinter, host: string): Promise<tls.SecureContext> => {
    let made = leafContexts.get(host)
    if (!made) {
      if (leafContexts.size >= MAX_LEAF_CONTEXTS) leafContexts.clear()
      made = minter.leaf(host).then(({cert, key}) => tls.createSecureContext({cert, key}))
      made.catch(() => leafContexts.delete(host))
      leafContexts.set(host, made)
    }
    return made
  }

  /**
   * Terminate the client's TLS with a leaf for its SNI (the buffered ClientHello is handed
   * back to the TLS socket), offering ALPN `h2` and `http/1.1`, and serve the decrypted
   * stream by what was negotiated; either way the Host must equal the SNI.
   */
  const intercept = (client: net.Socket, hello: Buffer, host: string) => {
    getInterception()
      .then(async (i) => ({i, context: await leafContext(i.minter, host)}))
      .then(
        ({i, context}) => {
          client.unshift(hello)
          const secure = new tls.TLSSocket(client, {isServer: true, secureContext: context, ALPNProtocols: ['h2', 'http/1.1']})
          secure.on('error', () => secure.destroy())
          state.sniOf.set(secure, host)
          // Read back through the session's socket proxy, which forwards property reads to this socket.
          ;(secure as unknown as Record<symbol, string>)[i.sni] = host
          // Synchronously on 'secure': the bytes after the handshake wait in the socket until a server takes it.
          secure.once('secure', () => {
            if (secure.alpnProtocol !== 'h2') return void intercepted.emit('connection', secure)
            // What tls.Server does for its own sockets once secure (onServerSocketSecure): an HTTP/2
            // session over a socket still marked connecting waits for a 'secureConnect' that a server never emits.
            ;(secure as unknown as {secureConnecting: boolean}).secureConnecting = false
            i.h2.emit('connection', secure)
          })
        },
        (e: unknown) => {
          client.destroy()
          state.record({method: 'TLS', host, path: '', status: 0, bytes: 0, decision: 'blocked', rule: `interception not ready: ${errCode(e)}`})
        },
      )
  }

  // noDelay both ways: a TLS handshake is small writes answered in turn, which Nagle's
  // algorithm against the peer's delayed ACK would hold back by tens of milliseconds.
  const open = new Set<net.Socket>()
  const server = net.createServer({noDelay: true}, (client) => {
    client.on('error', () => undefined)
    open.add(client)
    client.on('close', () => open.delete(client))
    let buffered = Buffer.alloc(0)
    const timer = setTimeout(() => client.destroy(), HELLO_TIMEOUT_MS)
    const onData = (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk])
      const hello = parseClientHello(buffered)
      if (hello.state === 'need-more') return
      client.off('data', onData)
      client.pause()
      clearTimeout(timer)
      if (hello.state === 'not-tls') {
        client.destroy()
        state.record({method: 'TLS', host: '', path: '', status: 0, bytes: 0, decision: 'blocked', rule: hello.reason})
        return
      }
      const verdict = decideSni(hello.sni, state.allowlist())
      const host = verdict.host ?? hello.sni ?? ''
      if (!verdict.allowed) {
        client.end(ALERT_UNRECOGNIZED_NAME)
        state.record({method: 'TLS', host, path: '', status: 0, bytes: 0, decision: 'blocked', rule: verdict.rule})
        return
      }
      // The grant that lets it out (grants.ts): an intercepted connection's requests are admitted one by one,
      // so its handshake only checks that the grant is in force; a passed-through one is one request, hello counted.
      const intercepted = state.intercepts(host)
      const admission = state.grants.admit(host, intercepted ? 0 : buffered.length, !intercepted)
      if (!('name' in admission)) {
        client.end(ALERT_UNRECOGNIZED_NAME)
        state.record({method: 'TLS', host, path: '', status: 0, bytes: 0, decision: 'blocked', rule: admission.rule})
        return
      }
      if (intercepted) return intercept(client, buffered, host)
      state.resolve(host).then(
        (address) => passThrough(state, client, buffered, address, host, verdict.rule, admission),
        (e: unknown) => {
          client.end(ALERT_UNRECOGNIZED_NAME)
          state.record({method: 'TLS', host, path: '', status: 0, bytes: 0, decision: 'blocked', rule: `cannot resolve: ${errCode(e)}`})
        },
      )
    }
    client.on('data', onData)
    client.on('close', () => clearTimeout(timer))
  })

  return {
    server,
    close: async () => {
      for (const s of open) s.destroy()
      const h2 = await interception?.then((i) => i.h2).catch(() => undefined)
      if (h2) await new Promise((r) => h2.close(r))
    },
  }
}

/**
 * A connection passed through: the ClientHello, then the bytes both ways as they are. The
 * site's side (downloads) is read into one reused buffer and written to the client before
 * the next read; the client's side is piped.
 */
function passThrough(state: GatewayState, client: net.Socket, hello: Buffer, address: string, host: string, rule: string, admission: Admission): void {
  let bytes = 0
  let failed = ''
  let spent = ''
  let waiting = false
  const resumeUpstream = () => {
    if (!waiting) return
    waiting = false
    upstream.resume()
  }
  const upstream = net.connect({
    port: state.config.upstreamTlsPort,
    host: address,
    noDelay: true,
    onread: {
      buffer: Buffer.allocUnsafe(PASS_THROUGH_BUFFER),
      callback: (n: number, buffer: Uint8Array) => {
        bytes += n
        client.write(buffer.subarray(0, n), resumeUpstream)
        // Written at once: the buffer is free. Else reading stops until the write is done.
        if (client.writableLength === 0) return true
        waiting = true
        return false
      },
    },
  })
  upstream.on('connect', () => {
    upstream.write(hello)
    // What the client sends counts against its grant's upload budget: crossing it cuts the tunnel.
    const meter = admission.metered
      ? uploadMeter(admission, (why) => {
          spent = why
          client.destroy()
          upstream.destroy()
        })
      : undefined
    if (meter) client.pipe(meter).pipe(upstream)
    else client.pipe(upstream)
    client.resume()
  })
  upstream.on('end', () => client.end())
  upstream.on('error', (e) => {
    failed = errCode(e)
    client.destroy()
  })
  upstream.on('close', () => {
    client.destroy()
    if (spent) return state.record({method: 'TLS', host, path: '', status: 0, bytes, decision: 'blocked', rule: spent})
    state.record({method: 'TLS', host, path: '', status: 0, bytes, decision: 'allowed', rule: failed ? `${rule}; upstream error ${failed}` : rule, grant: admission.name()})
  })
  client.on('close', () => upstream.destroy())
}

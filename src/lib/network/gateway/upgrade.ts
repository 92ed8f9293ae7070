/**
 * HTTP/1 upgrades in the egress gateway. An upgrade becomes a tunnel only when
 * the site answers 101 to a request the gateway judged; until then the bytes
 * the client sends after the request wait, unread. Any other answer is
 * relayed with framing of the gateway's own, and the connection goes back to
 * the HTTP server, where every later request meets the same checks as the
 * first. `Upgrade: h2c` is sent as a plain request (the gateway speaks HTTP/2
 * only where it negotiated it in TLS).
 */
import type http from 'node:http'
import https from 'node:https'
import httpModule from 'node:http'
import type {Duplex} from 'node:stream'
import type tls from 'node:tls'
import {refusalReason} from './approval.js'
import {errCode, filterRaw, headerObject, rawRefusal, uploadMeter} from './forward.js'
import {judgeHttp1} from './http1-judge.js'
import {grantField, type GatewayState} from './state.js'

/** https.request takes tls.connect's options too (its types name only some of them). */
const tlsOptions = (o: https.RequestOptions & tls.ConnectionOptions): https.RequestOptions => o
const KEEP_FOR_UPGRADE = new Set(['upgrade', 'connection'])

export function serveUpgrade(state: GatewayState, server: http.Server, req: http.IncomingMessage, socket: Duplex, head: Buffer): void {
  // Whatever the client sent past the request waits in the socket: read only once the site has switched.
  socket.pause()
  if (head.length) socket.unshift(head)
  socket.on('error', () => undefined)
  const method = req.method ?? 'GET'
  const {host, path, judged, allowRule} = judgeHttp1(state, req, {upgrade: true})
  if ('status' in judged) {
    socket.end(rawRefusal(judged.status, refusalReason({method, host, path, ...judged}, Boolean(allowRule))))
    state.record({method, host, path, status: judged.status, bytes: 0, decision: 'blocked', rule: judged.rule})
    return
  }
  const protocol = String(req.headers.upgrade ?? '').trim().toLowerCase()
  const h2c = protocol === 'h2c'
  const rule = [allowRule, judged.rule, h2c ? 'h2c upgrade not forwarded' : `upgrade ${protocol}`].filter(Boolean).join('; ')
  const secure = state.sniOf.has(socket)
  const headers = h2c ? headerObject(judged.headers) : {...headerObject(judged.headers, KEEP_FOR_UPGRADE), connection: 'Upgrade'}
  const record = (status: number, bytes: number, why = '') => state.record({method, host, path, status, bytes, decision: 'allowed', rule: `${rule}${why}`, ...grantField(judged.admission)})
  state.resolve(host).then(
    (address) => {
      const options = {host: address, method, path: judged.forward, headers, setHost: false, agent: false as const}
      // h2c goes as a plain request, over the keep-alive connections of every other one.
      const upstream = h2c
        ? state.upstreamRequest(secure, address, host, method, judged.forward, headers)
        : secure
        ? https.request(tlsOptions({...options, servername: host, port: state.config.upstreamTlsPort, ALPNProtocols: ['http/1.1'], secureContext: state.upstreamTls()}))
        : httpModule.request({...options, port: state.config.upstreamHttpPort})
      upstream.on('upgrade', (res, tunnel, upHead) => {
        // The site switched: from here on it is the site's protocol, both ways.
        tunnel.on('error', () => socket.destroy())
        const lines = [`HTTP/1.1 101 ${res.statusMessage ?? 'Switching Protocols'}`]
        for (let i = 0; i < res.rawHeaders.length; i += 2) lines.push(`${res.rawHeaders[i]}: ${res.rawHeaders[i + 1]}`)
        socket.write(`${lines.join('\r\n')}\r\n\r\n`)
        if (upHead.length) socket.write(upHead)
        let bytes = upHead.length
        tunnel.on('data', (c: Buffer) => (bytes += c.length))
        tunnel.pipe(socket)
        // What the client sends through the tunnel counts against its grant's upload budget: crossing it cuts the tunnel.
        let spent = ''
        const admission = judged.admission
        if (admission?.metered) {
          socket
            .pipe(
              uploadMeter(admission, (why) => {
                spent = why
                socket.destroy()
              }),
            )
            .pipe(tunnel)
        } else socket.pipe(tunnel)
        socket.resume()
        tunnel.on('close', () => socket.destroy())
        socket.on('close', () => {
          tunnel.destroy()
          if (spent) state.record({method, host, path, status: 101, bytes, decision: 'blocked', rule: spent})
          else record(101, bytes)
        })
      })
      upstream.on('response', (res) => relayAnswer(server, req, socket, res, (bytes) => record(res.statusCode ?? 0, bytes)))
      upstream.on('error', (e) => {
        socket.end(rawRefusal(502, `${host}: ${e.message}`))
        record(502, 0, `; upstream error ${errCode(e)}`)
      })
      socket.on('close', () => upstream.destroy())
      upstream.end()
    },
    (e: unknown) => {
      socket.end(rawRefusal(502, `cannot resolve ${host}: ${errCode(e)}`))
      state.record({method, host, path, status: 502, bytes: 0, decision: 'blocked', rule: `cannot resolve: ${errCode(e)}`})
    },
  )
}

/**
 * An answer other than 101, relayed with framing of the gateway's own: its
 * Content-Length when it has one, else chunked. Then the connection goes back
 * to the HTTP server, whatever bytes the client sent meanwhile with it, unless
 * either side asked to close.
 */
function relayAnswer(server: http.Server, req: http.IncomingMessage, socket: Duplex, res: http.IncomingMessage, done: (bytes: number) => void): void {
  const status = res.statusCode ?? 502
  const bodiless = req.method === 'HEAD' || status === 204 || status === 304 || (status >= 100 && status < 200)
  const length = res.headers['content-length']
  const chunked = !bodiless && length === undefined
  const close = res.headers.connection?.toLowerCase().includes('close') === true || req.headers.connection?.toLowerCase().includes('close') === true
  const lines = [`HTTP/1.1 ${status} ${res.statusMessage ?? ''}`]
  const raw = filterRaw(res.rawHeaders)
  for (let i = 0; i < raw.length; i += 2) lines.push(`${raw[i]}: ${raw[i + 1]}`)
  if (chunked) lines.push('transfer-encoding: chunked')
  if (close) lines.push('connection: close')
  socket.write(`${lines.join('\r\n')}\r\n\r\n`)
  let bytes = 0
  res.on('data', (c: Buffer) => {
    bytes += c.length
    socket.write(chunked ? Buffer.concat([Buffer.from(`${c.length.toString(16)}\r\n`), c, Buffer.from('\r\n')]) : c)
  })
  res.on('error', () => socket.destroy())
  res.on('end', () => {
    if (chunked) socket.write('0\r\n\r\n')
    done(bytes)
    if (close || socket.destroyed) return void socket.end()
    // Back to HTTP: the server parses the connection afresh, from the next byte the client sent.
    server.emit('connection', socket)
    socket.resume()
  })
}

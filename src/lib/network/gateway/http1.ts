/**
 * HTTP/1 in the egress gateway: plain HTTP (port 80) and the decrypted side
 * of intercepted TLS, one server each. Every request is parsed by llhttp and
 * the strict rules (strict.ts) and judged (state.ts) before a byte of it
 * leaves; one connection serves one host (a later request naming another is
 * refused, and the connection closed); upgrades go to upgrade.ts, which hands
 * the connection back here unless the site switched protocols.
 */
import http from 'node:http'
import type {Duplex} from 'node:stream'
import {refusalReason} from './approval.js'
import {errCode, filterRaw, headerObject, rawRefusal, refusalText, uploadMeter} from './forward.js'
import {hostOf, judgeHttp1} from './http1-judge.js'
import type {ExchangeIo} from './login-exchange.js'
import {grantField, type GatewayState} from './state.js'
import {MAX_HEADER_FIELDS, parserRefusal, type Refusal} from './strict.js'
import {serveUpgrade} from './upgrade.js'

/**
 * Connections whose head was refused with a close: llhttp keeps parsing the
 * bytes already read after it, and those are neither answered nor logged.
 */
const closing = new WeakSet<Duplex>()

/** Plain HTTP or decrypted TLS: the request, upgrade, CONNECT and parser-error handlers of one server. */
export function createHttp1Server(state: GatewayState): http.Server {
  // maxHeadersCount one past the limit, so strictHead sees that it was passed; the Host check is judge's (logged).
  const server = http.createServer({keepAlive: true, noDelay: true, requireHostHeader: false})
  server.maxHeadersCount = MAX_HEADER_FIELDS + 1
  server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => forward(state, req, res))
  server.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    if (closing.has(socket)) return void socket.end()
    serveUpgrade(state, server, req, socket, head)
  })
  // A transparent gateway is no forward proxy: CONNECT goes nowhere.
  server.on('connect', (req: http.IncomingMessage, socket: Duplex) => {
    socket.on('error', () => undefined)
    socket.end(rawRefusal(400, 'CONNECT is not forwarded (no forward proxy)'))
    state.record({method: 'CONNECT', host: String(req.url ?? ''), path: '', status: 400, bytes: 0, decision: 'blocked', rule: 'CONNECT is not forwarded'})
  })
  server.on('clientError', (e: NodeJS.ErrnoException, socket: Duplex) => {
    socket.on('error', () => undefined)
    // A reset or a timeout is no request: nothing to answer or log.
    if (closing.has(socket)) return void socket.end()
    if (!e.code?.startsWith('HPE_') || !socket.writable) return void socket.destroy()
    const refusal: Refusal = parserRefusal(e.code)
    socket.end(rawRefusal(refusal.status, `request refused: ${refusal.rule}`))
    state.record({method: '', host: hostOf.get(socket) ?? state.sniOf.get(socket) ?? '', path: '', status: refusal.status, bytes: 0, decision: 'blocked', rule: refusal.rule})
  })
  return server
}

function refuse(res: http.ServerResponse, status: number, why: string, close: boolean): void {
  const body = refusalText(why)
  res.writeHead(status, {'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(body), 'x-agent-sandbox': 'blocked', ...(close ? {connection: 'close'} : {})})
  res.end(body)
}

function forward(state: GatewayState, req: http.IncomingMessage, res: http.ServerResponse): void {
  // A request pipelined behind a refused head goes nowhere; the connection ends after the refusal.
  if (closing.has(req.socket)) return void req.resume()
  const method = req.method ?? ''
  const {host, path, judged, allowRule, metered} = judgeHttp1(state, req, {upgrade: false})
  if ('status' in judged) {
    // A refusal of the head itself (400, 431) closes the connection: its framing is not to be trusted.
    const close = judged.status === 400 || judged.status === 431
    refuse(res, judged.status, refusalReason({method, host, path, ...judged}, Boolean(allowRule)), close)
    if (close) closing.add(req.socket)
    state.record({method, host, path, status: judged.status, bytes: 0, decision: 'blocked', rule: judged.rule})
    req.resume()
    return
  }
  const rule = [allowRule, judged.rule].filter(Boolean).join('; ')
  // A token exchange of a masked login (over TLS only) is relayed whole, its bodies swapped (login-exchange.ts).
  const login = state.sniOf.has(req.socket) ? state.logins.exchange(host, method, judged.forward) : undefined
  if (login) {
    const reply: ExchangeIo['reply'] = (status, headers, body) => res.writeHead(status, headers).end(body)
    return state.relayLogin(login, host, method, judged, req, reply, (status, why) => refuse(res, status, why, false))
  }
  state.resolve(host).then(
    (address) => {
      const upstream = state.upstreamRequest(state.sniOf.has(req.socket), address, host, method || 'GET', judged.forward, headerObject(judged.headers))
      let bytes = 0
      let cut = false
      const grant = () => grantField(judged.admission)
      upstream.on('response', (up) => {
        if (cut) return void up.destroy()
        res.writeHead(up.statusCode ?? 502, up.statusMessage, filterRaw(up.rawHeaders))
        up.on('data', (c: Buffer) => (bytes += c.length))
        up.pipe(res)
        up.on('end', () => state.record({method, host, path, status: up.statusCode ?? 0, bytes, decision: 'allowed', rule, ...grant()}))
      })
      upstream.on('error', (e) => {
        if (cut) return
        if (!res.headersSent) refuse(res, 502, `${host}: ${e.message}`, false)
        else res.destroy()
        state.record({method, host, path, status: 502, bytes, decision: 'allowed', rule: `${rule}; upstream error ${errCode(e)}`, ...grant()})
      })
      res.on('close', () => {
        if (!res.writableFinished) upstream.destroy()
      })
      // A body of unknown length is counted as it streams: the chunk that would cross the grant's upload budget cuts the request.
      if (!metered || !judged.admission?.metered) return void req.pipe(upstream)
      const onSpent = (why: string) => {
        cut = true
        upstream.destroy()
        req.unpipe()
        req.resume()
        if (!res.headersSent) refuse(res, 403, `${method} ${host}${path} refused: ${why}`, true)
        else res.destroy()
        state.record({method, host, path, status: 403, bytes, decision: 'blocked', rule: why})
      }
      req.pipe(uploadMeter(judged.admission, onSpent)).pipe(upstream)
    },
    (e: unknown) => {
      refuse(res, 502, `cannot resolve ${host}: ${errCode(e)}`, false)
      state.record({method, host, path, status: 502, bytes: 0, decision: 'blocked', rule: `cannot resolve: ${errCode(e)}`})
      req.resume()
    },
  )
}

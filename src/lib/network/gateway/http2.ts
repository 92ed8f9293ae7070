/**
 * HTTP/2 in the egress gateway, on intercepted TLS where the client
 * negotiated it (ALPN h2): each stream meets the same judgement as an HTTP/1
 * request, with `:authority` as the Host (a `host` header beside it must
 * agree), then goes upstream over HTTP/1.1 through the keep-alive agent
 * (docs/design.md: why not HTTP/2 upstream). `CONNECT` is refused, and
 * extended CONNECT (WebSocket over HTTP/2) is not offered: the server's
 * SETTINGS say so, and clients use an HTTP/1.1 upgrade instead.
 */
import http2 from 'node:http2'
import {refusalReason} from './approval.js'
import {declaredLength, errCode, headerObject, HOP_BY_HOP, refusalText, requestHeadBytes, uploadMeter} from './forward.js'
import {decideHttp, normaliseHost, pathOnly, type Verdict} from './policy.js'
import type {ExchangeIo} from './login-exchange.js'
import {grantField, type GatewayState, type Judged} from './state.js'

/** HTTP/2 flow-control window for what clients send (uploads): node's default 64 KiB would stall a fast upload on round trips. */
const H2_WINDOW = 1024 * 1024
/** The SNI of an intercepted TLS socket, as a property (an HTTP/2 session hands out only a proxy of its socket). */
export const SNI = Symbol('agent-sandbox.sni')

export function createH2Server(state: GatewayState): http2.Http2Server {
  const h2 = http2.createServer({settings: {initialWindowSize: H2_WINDOW, enableConnectProtocol: false}})
  h2.on('session', (session) => {
    session.on('error', () => undefined)
    // The connection window (65535 by default) would cap uploads from the client below the stream's.
    session.once('connect', () => session.setLocalWindowSize(H2_WINDOW))
  })
  h2.on('stream', (stream, headers) => serveStream(state, stream, headers))
  return h2
}

function verdictOf(state: GatewayState, headers: http2.IncomingHttpHeaders, method: string, target: string): Verdict & {host?: string} {
  const authority = headers[':authority'] ?? headers.host
  if (method === 'CONNECT') return {allowed: false, rule: headers[':protocol'] ? `extended CONNECT (${headers[':protocol']}) is not supported` : 'CONNECT is not forwarded', status: 400, host: normaliseHost(authority)}
  if (headers.host !== undefined && headers[':authority'] !== undefined && normaliseHost(headers.host) !== normaliseHost(headers[':authority']))
    return {allowed: false, rule: `Host ${headers.host} differs from :authority ${headers[':authority']}`, status: 421, host: normaliseHost(headers[':authority'])}
  return decideHttp(authority, target, state.allowlist())
}

function serveStream(state: GatewayState, stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders): void {
  stream.on('error', () => undefined)
  const sni = (stream.session?.socket as unknown as Record<symbol, string | undefined> | undefined)?.[SNI]
  const method = String(headers[':method'] ?? '')
  const target = String(headers[':path'] ?? '')
  const path = pathOnly(target)
  const authority = headers[':authority'] ?? headers.host
  const answer = (status: number, why: string) => {
    const body = refusalText(why)
    if (stream.headersSent || stream.destroyed || stream.closed) return void stream.destroy()
    stream.respond({':status': status, 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(body), 'x-agent-sandbox': 'blocked'})
    stream.end(body)
  }
  const verdict = verdictOf(state, headers, method, target)
  const host = verdict.host ?? String(authority ?? '')
  const pairs: Array<[string, string]> = [['host', String(authority ?? '')]]
  for (const [k, v] of Object.entries(headers)) {
    if (k.startsWith(':') || k === 'host' || v === undefined) continue
    for (const one of Array.isArray(v) ? v : [v]) pairs.push([k, one])
  }
  let judged: Judged = verdict.allowed ? state.judge({sni: sni ?? '', method, host, target, headers: pairs}) : {status: verdict.status, rule: verdict.rule}
  // The grant that lets it out (grants.ts) counts its head and a declared body; a body of unknown length as it streams.
  const length = declaredLength(headers['content-length'], undefined)
  if (!('status' in judged)) {
    const admission = state.grants.admit(host, requestHeadBytes(method, target, pairs) + (length ?? 0))
    judged = 'name' in admission ? {...judged, admission} : {status: 403, rule: admission.rule}
  }
  if ('status' in judged) {
    answer(judged.status, refusalReason({method, host, path, ...judged}, verdict.allowed))
    state.record({method, host, path, status: judged.status, bytes: 0, decision: 'blocked', rule: judged.rule})
    stream.resume()
    return
  }
  const rule = [verdict.rule, judged.rule, 'HTTP/2'].filter(Boolean).join('; ')
  const admission = judged.admission
  const grant = () => grantField(admission)
  // A token exchange of a masked login is relayed whole, its bodies swapped (login-exchange.ts).
  const login = state.logins.exchange(host, method, judged.forward)
  if (login) {
    const reply: ExchangeIo['reply'] = (status, headers, body) => {
      if (stream.destroyed || stream.closed) return
      try {
        stream.respond({':status': status, ...headers})
        stream.end(body)
      } catch {
        // A header HTTP/2 refuses: this exchange fails, the gateway goes on.
        stream.destroy()
      }
    }
    return state.relayLogin(login, host, method, judged, stream, reply, answer)
  }
  state.resolve(host).then(
    (address) => {
      const upstream = state.upstreamRequest(true, address, host, method, judged.forward, headerObject(judged.headers))
      let bytes = 0
      let cut = false
      upstream.on('response', (up) => {
        if (cut) return void up.destroy()
        const out: http2.OutgoingHttpHeaders = {':status': up.statusCode ?? 502}
        for (const [k, v] of Object.entries(up.headers)) if (v !== undefined && !HOP_BY_HOP.has(k)) out[k] = v
        if (stream.destroyed || stream.closed) return void up.destroy()
        try {
          stream.respond(out)
        } catch (e) {
          // A header HTTP/2 refuses (node throws on what it cannot send): this request fails, the gateway goes on.
          up.destroy()
          stream.destroy()
          state.record({method, host, path, status: 502, bytes, decision: 'allowed', rule: `${rule}; response not sendable over HTTP/2: ${errCode(e)}`, ...grant()})
          return
        }
        up.on('data', (c: Buffer) => (bytes += c.length))
        // A HEAD, 204 or 304 ends the stream with its headers (node does): nothing to pipe.
        if (stream.writableEnded) up.resume()
        else up.pipe(stream)
        up.on('end', () => state.record({method, host, path, status: up.statusCode ?? 0, bytes, decision: 'allowed', rule, ...grant()}))
      })
      upstream.on('error', (e) => {
        if (cut) return
        if (!stream.headersSent) answer(502, `${host}: ${e.message}`)
        else stream.destroy(e)
        state.record({method, host, path, status: 502, bytes, decision: 'allowed', rule: `${rule}; upstream error ${errCode(e)}`, ...grant()})
      })
      stream.on('close', () => {
        if (!stream.writableFinished) upstream.destroy()
      })
      if (length !== undefined || !admission?.metered) return void stream.pipe(upstream)
      const onSpent = (why: string) => {
        cut = true
        upstream.destroy()
        stream.unpipe()
        answer(403, `${method} ${host}${path} refused: ${why}`)
        state.record({method, host, path, status: 403, bytes, decision: 'blocked', rule: why})
      }
      stream.pipe(uploadMeter(admission, onSpent)).pipe(upstream)
    },
    (e: unknown) => {
      answer(502, `cannot resolve ${host}: ${errCode(e)}`)
      state.record({method, host, path, status: 502, bytes: 0, decision: 'blocked', rule: `cannot resolve: ${errCode(e)}`})
      stream.resume()
    },
  )
}

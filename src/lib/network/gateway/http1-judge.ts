/**
 * The judgement of one HTTP/1 request head, for requests and upgrades alike:
 * the strict parsing rules, the Host and the allowlist, one host per
 * connection, then the gateway's judge (state.ts).
 */
import type http from 'node:http'
import {declaredLength, requestHeadBytes} from './forward.js'
import {decideHttp, pathOnly} from './policy.js'
import type {GatewayState, Judged} from './state.js'
import {strictHead} from './strict.js'

/** The host a connection's first judged request named: a later one naming another is refused. */
export const hostOf = new WeakMap<object, string>()

/**
 * A request's checks before any upstream: strict head, Host and allowlist, one host per connection,
 * judge, then the grant that lets it out (grants.ts), which counts its head and a declared body.
 */
export function judgeHttp1(state: GatewayState, req: http.IncomingMessage, options: {upgrade: boolean}): {host: string; path: string; judged: Judged; allowRule: string; metered?: boolean} {
  const target = req.url ?? '/'
  const path = pathOnly(target)
  const strict = strictHead(req.rawHeaders, options)
  const verdict = decideHttp(req.headers.host, target, state.allowlist())
  const host = verdict.host ?? String(req.headers.host ?? '')
  if (strict) return {host, path, judged: strict, allowRule: ''}
  if (!verdict.allowed) return {host, path, judged: {status: verdict.status, rule: verdict.rule}, allowRule: ''}
  const sni = state.sniOf.get(req.socket)
  const pinned = hostOf.get(req.socket)
  if (sni === undefined && pinned !== undefined && pinned !== host) return {host, path, judged: {status: 400, rule: `Host ${host} on a connection that served ${pinned}`}, allowRule: ''}
  const pairs: Array<[string, string]> = []
  for (let i = 0; i < req.rawHeaders.length; i += 2) pairs.push([req.rawHeaders[i], req.rawHeaders[i + 1]])
  const judged = state.judge({sni, method: req.method ?? '', host, target, headers: pairs})
  if ('status' in judged) return {host, path, judged, allowRule: verdict.rule}
  const length = declaredLength(req.headers['content-length'], req.headers['transfer-encoding'])
  const admission = state.grants.admit(host, requestHeadBytes(req.method ?? '', target, pairs) + (length ?? 0))
  if (!('name' in admission)) return {host, path, judged: {status: 403, rule: admission.rule}, allowRule: verdict.rule}
  hostOf.set(req.socket, host)
  return {host, path, judged: {...judged, admission}, allowRule: verdict.rule, metered: length === undefined}
}

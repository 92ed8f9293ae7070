import {describe, expect, it} from 'vitest'
import {dnsApprovalLine, grantCommand, grantedPath, refusalReason} from '../../src/lib/network/gateway/approval.js'
import type {RequestLogEntry} from '../../src/lib/network/gateway/log.js'
import {derivePending} from '../../src/lib/network/pending.js'

const entry = (over: Partial<RequestLogEntry>): RequestLogEntry => ({time: '2026-01-01T00:00:00.000Z', method: 'GET', host: 'x.example', path: '/', status: 403, bytes: 0, decision: 'blocked', rule: 'not allowlisted', ...over})
const rule = 'path /private not in httpRules api.example paths /pub/*'

describe('approval lines', () => {
  it('names the exact command that grants a refused host, method or path', () => {
    expect(grantCommand(entry({}))).toBe('agent-sandbox firewall allow x.example')
    expect(grantCommand(entry({host: 'api.example', method: 'post', path: "/a b'", rule: `method POST not in httpRules api.example methods GET`}))).toBe(
      `agent-sandbox firewall allow api.example --methods POST --paths '/a b'\\'''`,
    )
    // a path refusal grants the path as judged, not as sent
    expect(grantCommand(entry({host: 'api.example', path: '/pub/../private', rule: 'path /private not in httpRules api.example paths /pub/*'}))).toBe(
      'agent-sandbox firewall allow api.example --methods GET --paths /private',
    )
    expect(refusalReason(entry({}), false)).toBe("x.example refused: not allowlisted; waiting for the user's approval: agent-sandbox firewall allow x.example")
    expect(dnsApprovalLine('x.example')).toBe("agent-sandbox firewall: x.example refused: DNS name not allowlisted; waiting for the user's approval: agent-sandbox firewall allow x.example")
  })

  it('offers no grant for refusals no grant lifts: fronting, a bad head, a secret, an unresolvable name', () => {
    expect(grantCommand(entry({status: 421, rule: 'Host a differs from the TLS name b'}))).toBeUndefined()
    expect(grantCommand(entry({status: 400, rule: 'no valid Host header'}))).toBeUndefined()
    expect(grantCommand(entry({status: 403, rule: 'IP address, not an allowlisted name'}))).toBeUndefined()
    expect(grantCommand(entry({status: 502, rule: 'cannot resolve: ENOTFOUND'}))).toBeUndefined()
    expect(refusalReason(entry({status: 421, rule: 'Host a differs'}), true)).toBe('GET x.example/ refused: Host a differs')
  })

  it('offers no grant for a path that --paths would read as a pattern or a list: it would admit more than was refused', () => {
    for (const path of ['/*', '/x,/*', '/a?b', '/a/*/b']) {
      const refused = entry({host: 'api.example', path, rule: `path ${path} not in httpRules api.example paths /pub/*`})
      expect(grantedPath(refused), path).toBeUndefined()
      expect(grantCommand(refused), path).toBeUndefined()
      expect(refusalReason(refused, true)).toBe(`GET api.example${path} refused: path ${path} not in httpRules api.example paths /pub/*`)
      expect(derivePending([refused], [], {allowlist: ['api.example'], rules: [{host: 'api.example', paths: ['/pub/*']}], denied: {}})).toEqual([])
    }
    // a pending rule approval carries the path as judged, the one its command grants
    const judged = entry({host: 'api.example', path: '/pub/../private', rule})
    expect(derivePending([judged], [], {allowlist: ['api.example'], rules: [{host: 'api.example', paths: ['/pub/*']}], denied: {}})[0]).toMatchObject({kind: 'rule', path: '/private'})
  })
})

describe('derivePending', () => {
  const none = {allowlist: [], rules: [], denied: {}}
  it('groups refusals per host (and per method and path), most recent last, with the 403 line', () => {
    const log = [
      entry({host: 'a.example', time: 't1'}),
      entry({host: 'api.example', path: '/private', rule, time: 't2'}),
      entry({host: 'a.example', time: 't3'}),
      entry({host: 'ok.example', decision: 'allowed', status: 200, rule: 'allowlist ok.example', time: 't4'}),
    ]
    const pending = derivePending(log, [], {...none, allowlist: ['api.example'], rules: [{host: 'api.example', paths: ['/pub/*']}]})
    expect(pending.map((p) => [p.kind, p.host, p.count, p.first, p.last])).toEqual([
      ['rule', 'api.example', 1, 't2', 't2'],
      ['host', 'a.example', 2, 't1', 't3'],
    ])
    expect(pending[1].line).toBe("agent-sandbox gateway: a.example refused: not allowlisted; waiting for the user's approval: agent-sandbox firewall allow a.example")
    expect(pending[0].command).toBe('agent-sandbox firewall allow api.example --methods GET --paths /private')
  })

  it('drops what a grant now covers, and what firewall deny cleared until it is refused again', () => {
    const log = [entry({host: 'a.example', time: '2026-01-01T00:00:01Z'}), entry({host: 'b.example', time: '2026-01-01T00:00:01Z'}), entry({host: 'api.example', path: '/private', rule})]
    const now = {allowlist: ['*.a.example', 'a.example', 'api.example'], rules: [{host: 'api.example', paths: ['/pub/*', '/private']}], denied: {'b.example': '2026-01-01T00:00:02Z'}}
    expect(derivePending(log, [], now)).toEqual([])
    const again = [...log, entry({host: 'b.example', time: '2026-01-01T00:00:03Z'})]
    expect(derivePending(again, [], now).map((p) => p.host)).toEqual(['b.example'])
  })

  it('adds refused DNS names not already queued, not allowed since and not cleared', () => {
    const pending = derivePending([entry({host: 'a.example'})], ['a.example', 'b.example.', 'c.example', 'd.example'], {allowlist: ['c.example'], rules: [], denied: {'d.example': 't'}})
    expect(pending.map((p) => [p.kind, p.host])).toEqual([
      ['host', 'a.example'],
      ['dns', 'b.example'],
    ])
    expect(pending[1].line).toBe(dnsApprovalLine('b.example'))
  })

  it('leaves out a one-label name tried with a search domain when the name itself was queried or is allowlisted', () => {
    const dns = ['other.dns.podman', 'other', 'allowed.dns.podman', 'asked.dns.podman', 'lone.dns.podman', 'www.other.example']
    const pending = derivePending([entry({host: 'asked'})], dns, {allowlist: ['allowed'], rules: [], denied: {}})
    expect(pending.map((p) => [p.kind, p.host])).toEqual([
      ['host', 'asked'],
      ['dns', 'other'],
      // Nothing else asked for `lone`: the search-domain name is all there is to approve.
      ['dns', 'lone.dns.podman'],
      ['dns', 'www.other.example'],
    ])
  })
})

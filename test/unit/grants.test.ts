/**
 * Grants (grants.ts): the --for and --max-upload values, which grant lets a
 * request out, expiry and upload budgets, pure; then the real gateway
 * (serveGateway) on loopback with a grants file, as `firewall allow` writes
 * it: an expired grant refused by name, a once grant used up, an upload budget
 * crossed up front, mid-stream and in a passed-through tunnel, and each
 * allowed request's log line naming its grant.
 */
import type {Socket as UdpSocket} from 'node:dgram'
import {appendFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import http from 'node:http'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import tls from 'node:tls'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {
  chooseGrant,
  currentGrants,
  describeGrant,
  formatDuration,
  formatSize,
  GrantBook,
  grantSpent,
  parseGrantDuration,
  parseGrantLines,
  parseGrantSize,
  type Grant,
} from '../../src/lib/network/gateway/grants.js'
import {LIVE_GRANTS} from '../../src/lib/network/gateway/live.js'
import {formatRequest, parseRequestLog, REQUEST_LOG} from '../../src/lib/network/gateway/log.js'
import {limitFlags, ONCE_LIFE_MS, parseForFlag, parseMaxUploadFlag, planGrant} from '../../src/lib/network/firewall-allow.js'
import {UsageError} from '../../src/lib/errors.js'
import {startDns, startGatewayFor, startSite, type Site} from './gateway-site.js'
import type {RunningGateway} from '../../src/lib/network/gateway/server.js'
import {lastingEntries} from '../../src/lib/sandbox/gateway-container.js'

describe('durations and sizes', () => {
  it('reads durations with units, alone or combined', () => {
    expect(parseGrantDuration('3s')).toBe(3000)
    expect(parseGrantDuration('10m')).toBe(600_000)
    expect(parseGrantDuration('2h')).toBe(7_200_000)
    expect(parseGrantDuration('1h30m')).toBe(5_400_000)
    expect(parseGrantDuration('500ms')).toBe(500)
    expect(parseGrantDuration(' 1D ')).toBe(86_400_000)
  })

  it('refuses what is not a duration, and zero', () => {
    for (const bad of ['', '3', 's', '3x', '-3s', '1.5m', '0s', '3 s', '10m5', 'forever']) expect(parseGrantDuration(bad), bad).toBeUndefined()
  })

  it('reads sizes in bytes or KiB, MiB, GiB', () => {
    expect(parseGrantSize('4096')).toBe(4096)
    expect(parseGrantSize('100k')).toBe(102_400)
    expect(parseGrantSize('5m')).toBe(5 * 1024 * 1024)
    expect(parseGrantSize('1G')).toBe(1024 ** 3)
    expect(parseGrantSize('5MiB')).toBe(5 * 1024 * 1024)
    expect(parseGrantSize('5mb')).toBe(5 * 1024 * 1024)
    expect(parseGrantSize('12b')).toBe(12)
  })

  it('refuses what is not a size, and zero', () => {
    for (const bad of ['', 'k', '5t', '-5', '1.5m', '0', '0k', '5 m m', 'lots', '5ib']) expect(parseGrantSize(bad), bad).toBeUndefined()
  })

  it('writes durations and sizes in their shortest exact form', () => {
    expect([3000, 600_000, 5_400_000, 86_400_000, 1500].map(formatDuration)).toEqual(['3s', '10m', '1h30m', '1d', '1500ms'])
    expect([5 * 1024 * 1024, 102_400, 1024 ** 3, 1000].map(formatSize)).toEqual(['5m', '100k', '1g', '1000'])
  })

  it('--for and --max-upload: a bad value is a one-line UsageError naming the fix', () => {
    expect(parseForFlag('10m')).toBe(600_000)
    expect(parseMaxUploadFlag('5m')).toBe(5 * 1024 * 1024)
    expect(() => parseForFlag('soon')).toThrow(UsageError)
    expect(() => parseForFlag('soon')).toThrow('--for: not a duration: "soon"')
    try {
      parseMaxUploadFlag('5t')
      expect.unreachable()
    } catch (error) {
      expect(error).toBeInstanceOf(UsageError)
      expect((error as UsageError).message).toBe('--max-upload: not a size: "5t"')
      expect((error as UsageError).hint).toContain('--max-upload 100k')
    }
  })
})

describe('planGrant', () => {
  const now = Date.parse('2026-11-29T12:00:00.000Z')

  it('--for longer than a year is refused in one line (a longer grant is the sandbox\'s life)', () => {
    expect(() => planGrant({forMs: 100_000_000 * 86_400_000}, now)).toThrow(/--for is at most 365 days, not 100000000 days/)
    expect(planGrant({forMs: 365 * 86_400_000}, now).summary.expiresAt).toBe('2027-11-29T12:00:00.000Z')
  })

  it('without limits: for the sandbox life, nothing for the firewall, no limits for the gateway', () => {
    expect(planGrant({}, now)).toEqual({summary: {kind: 'allow', expiresAt: null, maxUploadBytes: null}, firewallArgs: [], gateway: {}})
  })

  it('--for: the same expiry for both, the firewall in whole seconds rounded up', () => {
    const plan = planGrant({forMs: 1500}, now)
    expect(plan.summary).toEqual({kind: 'for', expiresAt: '2026-11-29T12:00:01.500Z', maxUploadBytes: null})
    expect(plan.firewallArgs).toEqual(['--until', String(Math.ceil((now + 1500) / 1000))])
    expect(plan.gateway).toEqual({until: now + 1500, forMs: 1500})
  })

  it('--once: a short life at both, one request at the gateway; --max-upload: the budget', () => {
    const plan = planGrant({once: true, maxUploadBytes: 100}, now)
    expect(plan.summary).toEqual({kind: 'once', expiresAt: new Date(now + ONCE_LIFE_MS).toISOString(), maxUploadBytes: 100})
    expect(plan.gateway).toEqual({until: now + ONCE_LIFE_MS, once: true, maxUpload: 100})
    expect(plan.firewallArgs).toEqual(['--until', String(Math.ceil((now + ONCE_LIFE_MS) / 1000)), '--limited'])
    expect(planGrant({maxUploadBytes: 100}, now).firewallArgs).toEqual(['--limited'])
    expect(limitFlags({forMs: 600_000, once: true, maxUploadBytes: 5 * 1024 * 1024})).toBe('--for 10m --once --max-upload 5m')
  })

  it('refuses limits the library is given that are not positive whole numbers', () => {
    expect(() => planGrant({forMs: 0}, now)).toThrow(UsageError)
    expect(() => planGrant({maxUploadBytes: 1.5}, now)).toThrow(UsageError)
  })
})

describe('grants: names, matching, expiry and budgets', () => {
  const at = Date.parse('2026-11-29T12:00:00.000Z')
  const none = {requests: 0, bytes: 0}
  const base = {defaults: ['registry.npmjs.org'], config: ['*.config.example']}

  it('names a grant by its limits', () => {
    expect(describeGrant({entry: 'a.example', at})).toBe('allow')
    expect(describeGrant({entry: 'a.example', at, until: at + 600_000, forMs: 600_000})).toBe('allow for 10m until 2026-11-29T12:10:00.000Z')
    expect(describeGrant({entry: 'a.example', at, until: at + ONCE_LIFE_MS, once: true})).toBe('allow once')
    expect(describeGrant({entry: 'a.example', at, maxUpload: 5 * 1024 * 1024}, {requests: 2, bytes: 1234})).toBe('allow max-upload 5m (used 1234)')
    expect(describeGrant({entry: 'a.example', at, until: at + 3000, forMs: 3000, once: true, maxUpload: 100})).toBe('allow for 3s until 2026-11-29T12:00:03.000Z, once, max-upload 100 (used 0)')
  })

  it('reads the grants file; a bad line keeps its id; a later grant of the same entry replaces it', () => {
    const lines = parseGrantLines(['{"entry":"A.example","at":1}', 'not json', '{"entry":"b.example"}', '{"entry":"*.a.example","at":2,"until":5}', ''].join('\n'))
    expect(lines).toEqual([{entry: 'a.example', at: 1}, undefined, undefined, {entry: '*.a.example', at: 2, until: 5}])
    expect(currentGrants(lines)).toEqual([{id: 3, grant: {entry: '*.a.example', at: 2, until: 5}}])
  })

  it('the defaults and the config come first: an expired grant never blocks what they allow', () => {
    const expired = [{id: 0, grant: {entry: 'registry.npmjs.org', at, until: at + 1}}, {id: 1, grant: {entry: 'x.config.example', at, until: at + 1}}]
    expect(chooseGrant('registry.npmjs.org', base, expired, () => none, at + 10)).toEqual({ok: true, source: 'default'})
    expect(chooseGrant('x.config.example', base, expired, () => none, at + 10)).toEqual({ok: true, source: 'config'})
  })

  it('a grant lets its host and subdomains out until it expires, then refuses them naming it', () => {
    const g: Grant = {entry: 'api.example', at, until: at + 3000, forMs: 3000}
    const grants = [{id: 0, grant: g}]
    expect(chooseGrant('api.example', base, grants, () => none, at + 2999)).toEqual({ok: true, source: 'allow', id: 0, grant: g})
    expect(chooseGrant('v2.api.example', base, grants, () => none, at)).toMatchObject({ok: true, id: 0})
    expect(chooseGrant('api.example', base, grants, () => none, at + 3000)).toEqual({ok: false, rule: 'grant expired: allow for 3s until 2026-11-29T12:00:03.000Z'})
    expect(chooseGrant('other.example', base, grants, () => none, at)).toEqual({ok: false, rule: undefined})
    expect(chooseGrant('notapi.example', base, grants, () => none, at)).toEqual({ok: false, rule: undefined})
  })

  it('once: spent after one request; a budget: the request that would cross it is refused, those before pass', () => {
    const once: Grant = {entry: 'a.example', at, once: true}
    expect(grantSpent(once, none, at)).toBeUndefined()
    expect(grantSpent(once, {requests: 1, bytes: 0}, at)).toBe('grant used: allow once')
    const budget: Grant = {entry: 'a.example', at, maxUpload: 100}
    expect(grantSpent(budget, {requests: 1, bytes: 60}, at, 40)).toBeUndefined()
    expect(grantSpent(budget, {requests: 1, bytes: 60}, at, 41)).toBe('upload budget of the grant spent: allow max-upload 100 (used 60), the request needs 41')
  })

  it('the most lenient usable grant serves; with none, the most specific one says why', () => {
    const wide = {id: 0, grant: {entry: 'example.org', at, until: at + 10}}
    const narrow = {id: 1, grant: {entry: 'api.example.org', at, once: true}}
    expect(chooseGrant('api.example.org', base, [wide, narrow], () => none, at)).toMatchObject({ok: true, id: 0})
    expect(chooseGrant('api.example.org', base, [wide, narrow], (id) => (id === 1 ? {requests: 1, bytes: 0} : none), at + 10)).toEqual({ok: false, rule: 'grant used: allow once'})
    const lasting = {id: 2, grant: {entry: 'example.org', at}}
    expect(chooseGrant('api.example.org', base, [narrow, lasting], () => none, at)).toMatchObject({ok: true, id: 2})
  })

  it('GrantBook: counts what each grant let out, afresh for a new grant of the same entry', () => {
    let now = at
    let lines: Grant[] = [{entry: 'up.example', at, maxUpload: 100}]
    const book = new GrantBook({defaults: [], config: ['cfg.example']}, () => lines, () => now)
    const first = book.admit('up.example', 60)
    expect('name' in first && first.name()).toBe('allow max-upload 100 (used 60)')
    expect(book.admit('up.example', 41)).toEqual({rule: 'upload budget of the grant spent: allow max-upload 100 (used 60), the request needs 41'})
    const second = book.admit('up.example', 10)
    if (!('name' in second)) throw new Error(second.rule)
    expect(second.metered).toBe(true)
    expect(second.charge(30)).toBe(true)
    expect(second.charge(1)).toBe(false)
    expect(second.spentRule(1)).toBe('upload budget of the grant spent: allow max-upload 100 (used 100), 1 more bytes refused')
    lines = [...lines, {entry: 'up.example', at: at + 1, maxUpload: 100}]
    expect(book.admit('up.example', 100)).toMatchObject({metered: true})
    const cfg = book.admit('cfg.example', 1_000_000)
    expect('name' in cfg && [cfg.name(), cfg.metered, cfg.charge(1e12)]).toEqual(['config', false, true])
    // A check alone (an intercepted handshake) uses nothing of a once grant.
    lines = [...lines, {entry: 'once.example', at, until: at + 10, once: true}]
    expect('name' in book.admit('once.example', 0, false)).toBe(true)
    expect('name' in book.admit('once.example', 0)).toBe(true)
    expect(book.admit('once.example', 0)).toEqual({rule: 'grant used: allow once'})
    now = at + 10
    expect(book.admit('once.example', 0, false)).toEqual({rule: 'grant expired: allow once'})
    expect(book.entries()).toEqual(['up.example', 'once.example'])
  })
})

// ---- the real gateway, with the grants file `firewall allow` writes ----------------------------

const DEFAULT = 'default.test'
const TIMED = 'timed.test'
const ONCE = 'once.test'
const BUDGET = 'budget.test'
const TUNNEL = 'tunnel.test'
const LASTING = 'lasting.test'

let dir = ''
let site: Site
let dns: UdpSocket
let gw: {gateway: RunningGateway; httpPort: number; tlsPort: number}

beforeAll(async () => {
  site = await startSite([TUNNEL])
  dns = await startDns()
  dir = mkdtempSync(join(tmpdir(), 'grants-unit-'))
  writeFileSync(join(dir, 'domains.txt'), `${DEFAULT}\n`)
  gw = await startGatewayFor(site, dns, {allowDomains: [], rules: [], masked: [], domainFiles: [join(dir, 'domains.txt')], stateDir: dir})
})

afterAll(async () => {
  await gw?.gateway.close()
  site?.close()
  dns?.close()
  if (dir) rmSync(dir, {recursive: true, force: true})
})

function grant(entry: string, limits: Omit<Grant, 'entry' | 'at'> = {}): void {
  appendFileSync(join(dir, LIVE_GRANTS), `${JSON.stringify({...limits, entry, at: Date.now()})}\n`)
}

/** A request through the gateway's HTTP port: its status and body (a cut connection: status 0). */
function request(host: string, path: string, options: {body?: Buffer; chunked?: boolean} = {}): Promise<{status: number; body: string}> {
  return new Promise((resolve) => {
    const headers: Record<string, string | number> = {host, connection: 'close'}
    if (options.body && !options.chunked) headers['content-length'] = options.body.length
    const req = http.request({host: '127.0.0.1', port: gw.httpPort, method: options.body ? 'POST' : 'GET', path, headers, agent: false})
    req.on('response', (res) => {
      let body = ''
      res.on('data', (c: Buffer) => (body += c.toString()))
      res.on('end', () => resolve({status: res.statusCode ?? 0, body}))
      res.on('error', () => resolve({status: res.statusCode ?? 0, body}))
    })
    req.on('error', () => resolve({status: 0, body: ''}))
    if (options.body && options.chunked) {
      // Chunks of 1 KiB, each written on its own: the gateway counts them as they come.
      for (let i = 0; i < options.body.length; i += 1024) req.write(options.body.subarray(i, i + 1024))
      req.end()
    } else req.end(options.body)
  })
}

/** The log entries for `host`, once `n` of them are written (each is written when its request ends). */
async function logOf(host: string, n: number): Promise<ReturnType<typeof parseRequestLog>> {
  for (let i = 0; ; i++) {
    const entries = parseRequestLog(readFileSync(join(dir, REQUEST_LOG), 'utf8')).filter((e) => e.host === host)
    if (entries.length >= n || i > 200) return entries
    await new Promise((r) => setTimeout(r, 10))
  }
}

describe('the gateway with live grants', () => {
  it('names the grant of every allowed request: default, allow', async () => {
    grant(LASTING)
    expect(await request(DEFAULT, '/a')).toEqual({status: 200, body: `GET /a host=${DEFAULT} upgrade= auth=`})
    expect((await request(LASTING, '/b')).status).toBe(200)
    const [d] = await logOf(DEFAULT, 1)
    const [l] = await logOf(LASTING, 1)
    expect([d.decision, d.rule, d.grant]).toEqual(['allowed', `allowlist ${DEFAULT}`, 'default'])
    expect([l.decision, l.rule, l.grant]).toEqual(['allowed', `allowlist ${LASTING}`, 'allow'])
    expect(formatRequest(l)).toMatch(new RegExp(`ALLOW  200  GET  ${LASTING}/b  \\d+B  \\(allowlist ${LASTING}\\)  \\[grant: allow\\]$`))
  })

  it('an expired grant: 403 saying so, and the log names it; a new grant lets the host out again', async () => {
    const until = Date.now() + 300
    grant(TIMED, {until, forMs: 300})
    expect((await request(TIMED, '/before')).status).toBe(200)
    // Expiry is checked when a request comes: wait past it (no timer in the gateway to wait for).
    await new Promise((r) => setTimeout(r, Math.max(0, until - Date.now()) + 50))
    const after = await request(TIMED, '/after')
    const name = `allow for 300ms until ${new Date(until).toISOString()}`
    expect(after).toEqual({status: 403, body: `agent-sandbox gateway: GET ${TIMED}/after refused: grant expired: ${name}\n`})
    const [ok, refused] = await logOf(TIMED, 2)
    expect([ok.decision, ok.grant]).toEqual(['allowed', name])
    expect([refused.decision, refused.status, refused.rule]).toEqual(['blocked', 403, `grant expired: ${name}`])
    grant(TIMED)
    expect((await request(TIMED, '/again')).status).toBe(200)
  })

  it('once: the next request passes, the one after is refused', async () => {
    grant(ONCE, {until: Date.now() + 60_000, once: true})
    expect((await request(ONCE, '/1')).status).toBe(200)
    expect(await request(ONCE, '/2')).toEqual({status: 403, body: `agent-sandbox gateway: GET ${ONCE}/2 refused: grant used: allow once\n`})
    const [first, second] = await logOf(ONCE, 2)
    expect([first.decision, first.grant, second.decision, second.rule]).toEqual(['allowed', 'allow once', 'blocked', 'grant used: allow once'])
  })

  it('an upload budget: requests pass until the one that would cross it, refused before it is sent (Content-Length) or cut as it streams', async () => {
    grant(BUDGET, {maxUpload: 8 * 1024})
    const small = await request(BUDGET, '/upload', {body: Buffer.alloc(2000, 'a')})
    expect(small).toEqual({status: 200, body: 'got 2000'})
    const before = site.raw().length
    const big = await request(BUDGET, '/upload', {body: Buffer.alloc(7000, 'b')})
    expect(big.status).toBe(403)
    expect(big.body).toMatch(/^agent-sandbox gateway: POST budget\.test\/upload refused: upload budget of the grant spent: allow max-upload 8k \(used \d+\), the request needs \d+\n$/)
    expect(site.raw().length).toBe(before) // nothing of it reached the site
    // Chunked: the head passes, the body is counted as it comes, and the chunk that crosses the budget cuts it.
    const streamed = await request(BUDGET, '/upload', {body: Buffer.alloc(10_000, 'c'), chunked: true})
    expect(streamed.status === 403 || streamed.status === 0, JSON.stringify(streamed)).toBe(true)
    expect(site.raw().slice(before)).not.toContain('c'.repeat(8 * 1024))
    const entries = await logOf(BUDGET, 3)
    expect(entries.map((e) => [e.decision, e.status])).toEqual([['allowed', 200], ['blocked', 403], ['blocked', 403]])
    expect(entries[0].grant).toMatch(/^allow max-upload 8k \(used \d+\)$/)
    expect(entries[2].rule).toMatch(/^upload budget of the grant spent: allow max-upload 8k \(used \d+\), 1024 more bytes refused$/)
  })

  it('a passed-through TLS connection: what the client sends counts, and crossing the budget cuts the tunnel', async () => {
    grant(TUNNEL, {maxUpload: 6 * 1024})
    const exchange = (bytes: number) =>
      new Promise<string>((resolve) => {
        const socket = tls.connect({host: '127.0.0.1', port: gw.tlsPort, servername: TUNNEL, ca: site.ca})
        let got = ''
        socket.on('secureConnect', () => socket.write(`POST /upload HTTP/1.1\r\nhost: ${TUNNEL}\r\ncontent-length: ${bytes}\r\nconnection: close\r\n\r\n${'d'.repeat(bytes)}`))
        socket.on('data', (c: Buffer) => (got += c.toString()))
        socket.on('error', () => undefined)
        socket.on('close', () => resolve(got))
      })
    expect(await exchange(100)).toContain('got 100')
    expect(await exchange(20_000)).not.toContain('got 20000')
    const entries = await logOf(TUNNEL, 2)
    expect(entries.map((e) => [e.method, e.decision])).toEqual([['TLS', 'allowed'], ['TLS', 'blocked']])
    expect(entries[0].grant).toMatch(/^allow max-upload 6k \(used \d+\)$/)
    expect(entries[1].rule).toMatch(/^upload budget of the grant spent: allow max-upload 6k/)
  })
})

describe('lastingEntries (a gateway made anew)', () => {
  it('gives again every allowlist entry but those of a grant that expires', () => {
    const allowlist = 'one.example\nlive.example\ntimed.example\ndb.example:5432\n'
    expect(lastingEntries(allowlist, 'live.example 0\ntimed.example 1795959748\ndb.example:5432 1795959748\n')).toEqual(['one.example', 'live.example'])
    expect(lastingEntries(allowlist, 'live.example 0 limited\n')).toEqual(['one.example', 'timed.example', 'db.example:5432'])
    expect(lastingEntries(allowlist, '')).toEqual(['one.example', 'live.example', 'timed.example', 'db.example:5432'])
  })
})

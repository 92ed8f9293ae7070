/**
 * Grants with limits, on the real engine against test sites this file starts
 * on a network it creates: `firewall allow --for` expires at the sandbox's DNS
 * and at the egress gateway alike (and the logs say so), `--max-upload`
 * refuses the request that would cross the budget, `--once` lets one request
 * out, and every allowed request's log entry names the grant that let it out.
 */
import {randomBytes} from 'node:crypto'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {cli, type Result, sbx} from './helpers.js'
import {createTestNetwork, must, removeTestSites, siteCertificate, startedWorkspace, startTestSite} from './test-sites.js'

const RUN = `${(process.env.AGENT_SANDBOX_IT_ID ?? 'main').toLowerCase().replace(/[^a-z0-9]+/g, '-')}-${randomBytes(3).toString('hex')}`
const LABEL = `dev.agent-sandbox.grantit=${RUN}`
const name = (role: string) => `grantit-${role}-${RUN}`

/** A test site: GET answers with its NAME; a POST with the bytes of the body it got. */
const SITE = `const http = require('http'), https = require('https');
const answer = (q, r) => { let n = 0; q.on('data', (c) => (n += c.length)); q.on('end', () => r.end(q.method === 'POST' ? 'got ' + n : 'hi from ' + process.env.NAME)); };
http.createServer(answer).listen(80, '::');
https.createServer({cert: process.env.CERT, key: process.env.KEY}, answer).listen(443, '::');`

const workspaces: string[] = []
let network = ''
let certDir = ''

afterAll(() => removeTestSites(LABEL, network, workspaces, certDir))

interface LogEntry {
  method: string
  host: string
  path: string
  status: number
  decision: string
  rule: string
  grant?: string
}

/** curl in the sandbox: the body, then the status code on a line of its own. */
async function curl(ws: string, ...args: string[]): Promise<{body: string; code: string; r: Result}> {
  const r = await sbx(ws, 'curl', '-sS', '--max-time', '10', '-w', '\n%{http_code}', ...args)
  const cut = r.stdout.lastIndexOf('\n')
  return {body: r.stdout.slice(0, cut).replace(/\n$/, ''), code: r.stdout.slice(cut + 1), r}
}

/** POST `bytes` zero bytes (Content-Length known) from the sandbox. */
async function post(ws: string, url: string, bytes: number): Promise<{body: string; code: string}> {
  const r = await sbx(ws, 'sh', '-c', `head -c ${bytes} /dev/zero | curl -sS --max-time 10 -w '\\n%{http_code}' --data-binary @- ${url}`)
  const cut = r.stdout.lastIndexOf('\n')
  return {body: r.stdout.slice(0, cut).replace(/\n$/, ''), code: r.stdout.slice(cut + 1)}
}

async function requests(ws: string, host: string): Promise<LogEntry[]> {
  const r = must(await cli(['firewall', 'log', ws, '--json', '--lines', '500']), 'firewall log')
  return r.stdout
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as LogEntry)
    .filter((e) => e.host === host)
}

/** Whether the sandbox's resolver answers `host` (getent: exit 0 with an address, 2 when refused). */
async function resolves(ws: string, host: string): Promise<boolean> {
  return (await sbx(ws, 'getent', 'hosts', host)).exitCode === 0
}

describe('grants with limits', () => {
  const config = name('config')
  const timed = name('timed')
  const budget = name('budget')
  const once = name('once')
  const ips: Record<string, string> = {}
  let ws = ''

  beforeAll(async () => {
    const net = await createTestNetwork(name('net'), LABEL, 150)
    network = net.name
    const site = siteCertificate('grantit', [config, timed, budget, once])
    certDir = site.dir
    const {cert, key} = site
    const sites = [config, timed, budget, once]
    for (const [i, site] of sites.entries()) {
      ips[site] = `${net.prefix}.${200 + i}`
      await startTestSite({container: site, label: LABEL, network, role: site.split('-')[1], ip: ips[site], cert, key, program: SITE})
    }
    ws = (await startedWorkspace('grants', workspaces, {dockerNetwork: network, allowDomains: [config]})).ws
  })

  it('refuses a bad --for or --max-upload with a one-line usage error, changing nothing', async () => {
    const bad = await cli(['firewall', 'allow', timed, ws, '--for', 'soon'])
    expect(bad.exitCode).not.toBe(0)
    expect(bad.stderr.trim().split('\n')).toHaveLength(1)
    expect(bad.stderr).toContain('--for: not a duration: "soon"')
    const size = await cli(['firewall', 'allow', timed, ws, '--max-upload', '5t'])
    expect(size.exitCode).not.toBe(0)
    expect(size.stderr).toContain('--max-upload: not a size: "5t"')
    expect(await resolves(ws, timed)).toBe(false)
  })

  it('--for 3s: the name resolves and its requests pass, then after expiry DNS refuses it and the gateway answers 403 naming the expired grant', async () => {
    // First a grant of 10 minutes, so that what holds before expiry is seen whatever the engine's pace;
    // then the same name granted again for 3 s: the new grant replaces it, and expires.
    const long = JSON.parse(must(await cli(['firewall', 'allow', timed, ws, '--for', '10m', '--json']), 'firewall allow --for 10m').stdout) as {added: string[]; grant: {kind: string; expiresAt: string}}
    expect(long.added).toEqual([timed])
    expect(await resolves(ws, timed)).toBe(true)
    expect(await curl(ws, `http://${timed}/`)).toMatchObject({code: '200', body: 'hi from timed'})
    expect((await requests(ws, timed)).map((e) => e.grant)).toEqual([`allow for 10m until ${long.grant.expiresAt}`])

    const allowed = must(await cli(['firewall', 'allow', timed, ws, '--for', '3s', '--json']), 'firewall allow --for 3s')
    const result = JSON.parse(allowed.stdout) as {renewed: string[]; grant: {kind: string; expiresAt: string; maxUploadBytes: number | null}}
    expect(result.renewed).toEqual([timed])
    expect(result.grant.kind).toBe('for')
    expect(result.grant.maxUploadBytes).toBeNull()
    const expiresAt = result.grant.expiresAt
    expect(Date.parse(expiresAt)).toBeLessThan(Date.parse(long.grant.expiresAt))

    // Expiry: wait (polling, generous deadline) until the sandbox's resolver refuses the name.
    const deadline = Date.now() + 120_000
    while ((await resolves(ws, timed)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 500))
    expect(await resolves(ws, timed)).toBe(false)
    expect((await curl(ws, `http://${timed}/`)).r.exitCode).toBe(6) // curl: could not resolve

    // The address the agent may still hold reaches the gateway, which refuses the name: the grant expired.
    const after = await curl(ws, '--resolve', `${timed}:80:${ips[timed]}`, `http://${timed}/x`)
    expect(after.code).toBe('403')
    expect(after.body).toBe(`agent-sandbox gateway: GET ${timed}/x refused: grant expired: allow for 3s until ${expiresAt}`)

    const log = await requests(ws, timed)
    const refused = log.find((e) => e.path === '/x')
    expect([refused?.decision, refused?.status, refused?.rule]).toEqual(['blocked', 403, `grant expired: allow for 3s until ${expiresAt}`])
    const fwLog = await sbx(ws, 'cat', '/run/agent-sandbox/firewall.log')
    expect(fwLog.stdout).toContain(`firewall-allow: the grant of ${timed} expired`)

    // A new grant lets it out again.
    must(await cli(['firewall', 'allow', timed, ws]), 'firewall allow again')
    expect(await curl(ws, `http://${timed}/`)).toMatchObject({code: '200', body: 'hi from timed'})
  })

  it('names the grant of every allowed request: config, allow; and a grant given again replaces the earlier', async () => {
    expect(await curl(ws, `http://${config}/`)).toMatchObject({code: '200', body: 'hi from config'})
    const plain = JSON.parse(must(await cli(['firewall', 'allow', budget, ws, '--json']), 'firewall allow').stdout) as {added: string[]; grant: unknown}
    expect(plain.grant).toEqual({kind: 'allow', expiresAt: null, maxUploadBytes: null})
    expect(await curl(ws, `http://${budget}/plain`)).toMatchObject({code: '200', body: 'hi from budget'})
    expect((await requests(ws, config)).map((e) => [e.decision, e.grant])).toEqual([['allowed', 'config']])
    expect((await requests(ws, budget)).map((e) => [e.path, e.decision, e.grant])).toEqual([['/plain', 'allowed', 'allow']])
    const text = must(await cli(['firewall', 'log', ws]), 'firewall log').stdout
    expect(text).toMatch(new RegExp(`ALLOW  200  GET  ${budget}/plain  \\d+B  \\(allowlist ${budget}\\)  \\[grant: allow\\]`))
    // A config host given a grant keeps the config's: it is already allowed.
    const again = JSON.parse(must(await cli(['firewall', 'allow', config, ws, '--for', '1s', '--json']), 'firewall allow config').stdout) as {alreadyAllowed: string[]}
    expect(again.alreadyAllowed).toEqual([config])
  })

  it('--max-upload: requests pass until the one that would cross the budget, which is refused and logged', async () => {
    const granted = JSON.parse(must(await cli(['firewall', 'allow', budget, ws, '--max-upload', '3k', '--json']), 'firewall allow --max-upload').stdout) as {renewed: string[]; grant: unknown}
    expect(granted.renewed).toEqual([budget])
    expect(granted.grant).toEqual({kind: 'allow', expiresAt: null, maxUploadBytes: 3072})
    expect(await post(ws, `http://${budget}/up`, 1000)).toEqual({body: 'got 1000', code: '200'})
    const over = await post(ws, `http://${budget}/up`, 2500)
    expect(over.code).toBe('403')
    expect(over.body).toMatch(new RegExp(`^agent-sandbox gateway: POST ${budget}/up refused: upload budget of the grant spent: allow max-upload 3k \\(used \\d+\\), the request needs \\d+$`))
    const log = (await requests(ws, budget)).filter((e) => e.path === '/up')
    expect(log.map((e) => [e.decision, e.status])).toEqual([['allowed', 200], ['blocked', 403]])
    expect(log[0].grant).toMatch(/^allow max-upload 3k \(used \d+\)$/)
    expect(log[1].rule).toMatch(/^upload budget of the grant spent: allow max-upload 3k/)
  })

  it('--once: the next request passes, the one after is refused', async () => {
    const granted = JSON.parse(must(await cli(['firewall', 'allow', once, ws, '--once', '--json']), 'firewall allow --once').stdout) as {grant: {kind: string}}
    expect(granted.grant.kind).toBe('once')
    expect(await curl(ws, `http://${once}/1`)).toMatchObject({code: '200', body: 'hi from once'})
    const second = await curl(ws, `http://${once}/2`)
    expect(second.code).toBe('403')
    expect(second.body).toBe(`agent-sandbox gateway: GET ${once}/2 refused: grant used: allow once`)
    expect((await requests(ws, once)).map((e) => [e.path, e.decision, e.grant ?? e.rule])).toEqual([
      ['/1', 'allowed', 'allow once'],
      ['/2', 'blocked', 'grant used: allow once'],
    ])
  })
})

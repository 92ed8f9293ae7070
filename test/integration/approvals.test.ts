/**
 * Blocked requests become approvals, on the real engine against a test site
 * this file starts on a network it creates: the agent's refused request waits
 * in `firewall pending` with the very line its 403 carried; `firewall allow`
 * makes its retry succeed; a refused DNS name waits too, with the same line in
 * `firewall status`; `firewall deny` clears an entry.
 */
import {randomBytes} from 'node:crypto'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {cli, type Result, sbx} from './helpers.js'
import {createTestNetwork, must, removeTestSites, siteCertificate, startedWorkspace, startTestSite} from './test-sites.js'

const RUN = `${(process.env.AGENT_SANDBOX_IT_ID ?? 'main').toLowerCase().replace(/[^a-z0-9]+/g, '-')}-${randomBytes(3).toString('hex')}`
const LABEL = `dev.agent-sandbox.apprit=${RUN}`
const name = (role: string) => `apprit-${role}-${RUN}`

/** A test site: answers every request on 80 and 443 with its NAME and the Host it was sent. */
const SITE = `const http = require('http'), https = require('https');
const answer = (q, r) => r.end('hi from ' + process.env.NAME + ' host=' + q.headers.host);
http.createServer(answer).listen(80, '::');
https.createServer({cert: process.env.CERT, key: process.env.KEY}, answer).listen(443, '::');`

const workspaces: string[] = []
let network = ''
let certDir = ''

afterAll(() => removeTestSites(LABEL, network, workspaces, certDir))

function curl(ws: string, ...args: string[]): Promise<Result> {
  return sbx(ws, 'curl', '-sS', '--max-time', '10', ...args)
}

async function pending(ws: string): Promise<{container: string; pending: Array<{kind: string; host: string; line: string; command: string; count: number}>}> {
  const r = must(await cli(['firewall', 'pending', ws, '--json']), 'firewall pending')
  return JSON.parse(r.stdout)
}

describe('blocked requests become approvals', () => {
  const allowed = name('allowed')
  const asked = name('asked')
  const other = name('other')
  let ip = ''
  let ws = ''

  beforeAll(async () => {
    const net = await createTestNetwork(name('net'), LABEL, 190)
    network = net.name
    ip = `${net.prefix}.200`
    const site = siteCertificate('apprit', [allowed, asked, other])
    certDir = site.dir
    const {cert, key} = site
    await startTestSite({container: allowed, label: LABEL, network, role: 'site', ip, cert, key, program: SITE})
    await startTestSite({container: asked, label: LABEL, network, role: 'asked', ip: `${net.prefix}.201`, cert, key, program: SITE})
    ws = (await startedWorkspace('appr', workspaces, {dockerNetwork: network, allowDomains: [allowed]})).ws
  })

  it("puts the agent's refused request in firewall pending with the one line of its 403; allowing it makes the retry succeed", async () => {
    expect((await pending(ws)).pending).toEqual([])
    // The agent reaches the allowlisted address for a name that is not allowlisted: the gateway refuses it.
    expect((await curl(ws, `http://${allowed}/`)).stdout).toBe(`hi from site host=${allowed}`) // its address is now the firewall's to let through
    const refused = await curl(ws, '-w', '%{http_code}', '--resolve', `${asked}:80:${ip}`, `http://${asked}/x`)
    const [body, code] = refused.stdout.split('\n')
    expect(code, refused.stderr).toBe('403')
    expect(body).toBe(`agent-sandbox gateway: ${asked} refused: not allowlisted; waiting for the user's approval: agent-sandbox firewall allow ${asked}`)
    const started = Date.now()
    const queue = await pending(ws)
    const took = Date.now() - started
    expect(queue.pending.map((p) => [p.kind, p.host, p.line, p.command])).toEqual([['host', asked, body, `agent-sandbox firewall allow ${asked}`]])
    console.log(`firewall pending after a blocked request: ${took} ms`)
    const text = must(await cli(['firewall', 'pending', ws]), 'firewall pending')
    expect(text.stdout.trim()).toBe(body)

    must(await cli(['firewall', 'allow', asked, ws]), 'firewall allow')
    const retry = await curl(ws, `http://${asked}/x`)
    expect(retry.stdout, retry.stderr).toBe(`hi from asked host=${asked}`)
    expect((await pending(ws)).pending).toEqual([])
  })

  it('puts a DNS name the firewall refused in firewall pending, with the same line in firewall status; firewall deny clears it', async () => {
    expect((await curl(ws, `http://${other}/`)).exitCode).toBe(6) // not resolved: dnsmasq refused the name
    const line = `agent-sandbox firewall: ${other} refused: DNS name not allowlisted; waiting for the user's approval: agent-sandbox firewall allow ${other}`
    let queue = await pending(ws)
    for (let i = 0; i < 20 && !queue.pending.length; i++) {
      await new Promise((r) => setTimeout(r, 250)) // dnsmasq's log is written as it answers; allow for its buffering
      queue = await pending(ws)
    }
    expect(queue.pending.map((p) => [p.kind, p.host, p.line])).toEqual([['dns', other, line]])
    const status = must(await cli(['firewall', 'status', ws]), 'firewall status')
    expect(status.stdout).toContain(`  ${line}\n`)

    const deny = must(await cli(['firewall', 'deny', other, ws]), 'firewall deny')
    expect(deny.stdout.trim()).toBe(`cleared ${other} from the pending approvals of ${queue.container}`)
    expect((await pending(ws)).pending).toEqual([])
    const again = await cli(['firewall', 'deny', other, ws])
    expect(again.exitCode).toBe(0)
    expect(again.stderr).toContain(`${other} was not pending`)
    expect((await curl(ws, `http://${other}/`)).exitCode).toBe(6) // denying grants nothing
  })
})

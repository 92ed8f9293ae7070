/**
 * Operations: httpRules added live with `firewall allow --methods
 * /--paths` (and saved), doctor's probes of the gateway's refusals (a masked
 * secret's surrogate sent to another host, a blocked method), and the warm
 * paths making anew a gateway that does not serve the sandbox (killed, or left
 * behind by a `docker restart`). Against test sites this file starts on a
 * network it creates (never any other address); plain HTTP, to which the
 * gateway applies the same rules and secret checks as to intercepted TLS.
 * Every refusal is paired with the request that works.
 */
import {randomBytes} from 'node:crypto'
import {execFileSync} from 'node:child_process'
import {mkdtempSync, readFileSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {cli, docker, initWorkspace, inspect, makeWorkspace, type Result, trustWorkspace} from './helpers.js'
import {createTestNetwork, must, removeTestSites, startTestSite} from './test-sites.js'

const RUN = `${(process.env.AGENT_SANDBOX_IT_ID ?? 'main').toLowerCase().replace(/[^a-z0-9]+/g, '-')}-${randomBytes(3).toString('hex')}`
const LABEL = `dev.agent-sandbox.gwoit=${RUN}`
const name = (role: string) => `gwoit-${role}-${RUN}`

/** HTTP on 80 (and HTTPS on 443, which startTestSite waits for): answers with its NAME, the method and the path. */
const SITE = `const http = require('http'), https = require('https');
const answer = (q, r) => r.end('hi from ' + process.env.NAME + ' ' + q.method + ' ' + q.url + '\\n');
http.createServer(answer).listen(80, '::');
https.createServer({cert: process.env.CERT, key: process.env.KEY}, answer).listen(443, '::');`

const TOKEN = `sk-proj-${randomBytes(18).toString('hex')}`
const ENV = {GWOIT_TOKEN: TOKEN}
const api = name('api')
const plain = name('plain')
const workspaces: string[] = []
let network = ''
let certDir = ''
let ws = ''
let sandbox = ''

/** The CLI's exec, with the masked secret's value in its environment (a gateway it makes anew gets it, as at start). */
function curl(...args: string[]): Promise<Result> {
  return cli(['exec', ws, '--', 'curl', '-sS', '--max-time', '10', ...args], {env: ENV})
}

async function requests(): Promise<any[]> {
  const r = must(await cli(['firewall', 'log', ws, '--json', '--lines', '500']), 'firewall log')
  return r.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l))
}

async function doctorRows(): Promise<{exitCode: number; rows: Record<string, {status: string; detail: string}>}> {
  const r = await cli(['doctor', ws, '--json'])
  const report = JSON.parse(r.stdout)
  return {exitCode: r.exitCode, rows: Object.fromEntries(report.checks.map((c: any) => [c.name, c]))}
}

afterAll(() => removeTestSites(LABEL, network, workspaces, certDir))

beforeAll(async () => {
  const net = await createTestNetwork(name('net'), LABEL, 110)
  network = net.name
  certDir = mkdtempSync(join(tmpdir(), 'gwoit-cert-'))
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=gwoit', '-keyout', join(certDir, 'key.pem'), '-out', join(certDir, 'cert.pem')], {stdio: 'ignore'})
  const [cert, key] = ['cert.pem', 'key.pem'].map((f) => readFileSync(join(certDir, f), 'utf8'))
  await startTestSite({container: api, label: LABEL, network, role: 'api', ip: `${net.prefix}.200`, cert, key, program: SITE})
  await startTestSite({container: plain, label: LABEL, network, role: 'plain', ip: `${net.prefix}.201`, cert, key, program: SITE})
  ws = await makeWorkspace('gwo')
  workspaces.push(ws)
  await initWorkspace(ws)
  const config = {
    dockerNetwork: network,
    allowDomains: [api, plain],
    httpRules: [{host: api, methods: ['GET'], paths: ['/pub/*']}],
    secretEnv: [{name: 'GWOIT_TOKEN', hosts: [api]}],
    env: {AGENT_SANDBOX_GITHUB_META: '0'},
  }
  writeFileSync(join(ws, '.agent-sandbox', 'config.json'), `${JSON.stringify(config, null, 2)}\n`)
  await trustWorkspace(ws)
  sandbox = JSON.parse(must(await cli(['start', ws, '--json'], {env: ENV}), 'start').stdout).name
})

describe('firewall allow --methods / --paths: httpRules added live', () => {
  it('a blocked path becomes allowed at once, without a restart; other paths and methods stay blocked; the log names the new rule', async () => {
    const before = await curl('-w', '%{http_code}', `http://${api}/priv/x`)
    expect(before.stdout, before.stderr).toBe(`agent-sandbox gateway: GET ${api}/priv/x refused: path /priv/x not in httpRules ${api} methods GET paths /pub/*; waiting for the user's approval: agent-sandbox firewall allow ${api} --methods GET --paths /priv/x\n403`)
    const started = [(await inspect(sandbox)).State.StartedAt, (await inspect(`${sandbox}-gateway`)).State.StartedAt]
    const r = must(await cli(['firewall', 'allow', api, ws, '--methods', 'GET,HEAD', '--paths', '/priv/*']), 'firewall allow --paths')
    expect(r.stdout).toContain(`added httpRules ${api} methods GET,HEAD paths /priv/* in ${sandbox} (live)`)
    expect((await curl(`http://${api}/priv/x`)).stdout).toBe(`hi from api GET /priv/x`)
    // the twin: what no rule admits is still refused
    expect((await curl('-w', '%{http_code}', `http://${api}/secret`)).stdout).toMatch(/refused: path \/secret not in .*\n403$/)
    expect((await curl('-X', 'POST', '-w', '%{http_code}', `http://${api}/pub/x`)).stdout).toMatch(/^agent-sandbox gateway: POST .* refused: .*\n403$/)
    // --methods with --paths: PUT under /up/ only
    must(await cli(['firewall', 'allow', api, ws, '--methods', 'put', '--paths', '/up/*']), 'firewall allow --methods')
    expect((await curl('-X', 'PUT', `http://${api}/up/file`)).stdout).toBe(`hi from api PUT /up/file`)
    expect((await curl('-X', 'PUT', '-w', '%{http_code}', `http://${api}/pub/file`)).stdout).toMatch(/refused: .*\n403$/)
    expect([(await inspect(sandbox)).State.StartedAt, (await inspect(`${sandbox}-gateway`)).State.StartedAt]).toEqual(started)
    const log = await requests()
    expect(log.find((e) => e.path === '/priv/x' && e.decision === 'allowed')).toMatchObject({status: 200, rule: `allowlist ${api}; httpRules ${api} methods GET,HEAD paths /priv/*`})
    expect(log.find((e) => e.path === '/up/file' && e.decision === 'allowed')).toMatchObject({method: 'PUT', rule: `allowlist ${api}; httpRules ${api} methods PUT paths /up/*`})
    expect(log.find((e) => e.path === '/secret')).toMatchObject({decision: 'blocked', status: 403})
  })

  it('a host allowed without rules keeps every method and path: the rule is not added (it would narrow it)', async () => {
    const r = must(await cli(['firewall', 'allow', plain, ws, '--methods', 'GET']), 'firewall allow on an unrestricted host')
    expect(r.stderr).toContain(`${plain} is already allowed for every method and path`)
    expect((await curl('-X', 'DELETE', `http://${plain}/anything`)).stdout).toBe('hi from plain DELETE /anything')
  })

  it('bad methods or paths: one line naming the problem and the fix, exit 2, nothing changed', async () => {
    for (const [flag, value, message] of [
      ['--methods', 'GET,G3T', '--methods: not an HTTP method: "G3T"'],
      ['--paths', 'secret/*', '--paths: not a path pattern: "secret/*"'],
    ]) {
      const r = await cli(['firewall', 'allow', api, ws, flag, value])
      expect(r.exitCode, r.stderr).toBe(2)
      const lines = r.stderr.trim().split('\n')
      expect(lines[0]).toContain(message)
      expect(r.stderr).toMatch(/e\.g\. --(methods GET,HEAD,PUT|paths '\/myorg\/\*')/)
    }
    expect((await curl('-w', '%{http_code}', `http://${api}/secret/x`)).stdout).toMatch(/refused: .*\n403$/)
  })

  it('the agent cannot add rules: the gateway program and its state directory inside the sandbox are not the gateway\'s', async () => {
    const rule = JSON.stringify({host: api, methods: ['GET'], paths: ['/agent/*']})
    // what firewall allow does, tried from inside: it writes the sandbox's own /tmp, which the gateway never reads
    const inside = await cli(['exec', ws, '--', 'bash', '-c', `node /usr/local/lib/agent-sandbox/egress-gateway.cjs --rule '${rule}'; echo '${rule}' >> /tmp/rules.jsonl; echo done`], {env: ENV})
    expect(inside.stdout, inside.stderr).toContain('done')
    expect((await curl('-w', '%{http_code}', `http://${api}/agent/x`)).stdout).toMatch(/refused: path \/agent\/x not in .*\n403$/)
    // the control: the same through the gateway container (the engine, out of the sandbox's reach) takes effect
    must(await docker('exec', `${sandbox}-gateway`, 'node', '/usr/local/lib/agent-sandbox/egress-gateway.cjs', '--rule', rule), 'rule over docker exec')
    expect((await curl(`http://${api}/agent/x`)).stdout).toBe('hi from api GET /agent/x')
  })
})

describe('doctor: the gateway refuses a leaked surrogate and a blocked method', () => {
  it('passes each row, with the refusal in the request log, against this file\'s own sites only', async () => {
    const {rows} = await doctorRows()
    expect(rows['gateway-masked-secrets'], JSON.stringify(rows)).toMatchObject({status: 'pass'})
    expect(rows['gateway-masked-secrets'].detail).toContain(`GWOIT_TOKEN's surrogate sent to ${plain}: refused (403) and logged: secret GWOIT_TOKEN is not for ${plain}`)
    expect(rows['gateway-http-rules']).toMatchObject({status: 'pass'})
    expect(rows['gateway-http-rules'].detail).toMatch(new RegExp(`^DELETE to ${api}: refused \\(403\\) and logged: method DELETE not in`))
    const probes = (await requests()).filter((e) => e.path.startsWith('/agent-sandbox-doctor/'))
    expect(probes.map((e) => [e.host, e.decision])).toEqual([[plain, 'blocked'], [api, 'blocked']])
    // the sites never heard of them
    for (const site of [api, plain]) expect(must(await docker('logs', site), 'site log').stdout).not.toContain('agent-sandbox-doctor')
  })

  it('fails both rows (exit 1) with the gateway killed; exec makes it anew, with the rules added live since the sandbox started', async () => {
    must(await docker('kill', `${sandbox}-gateway`), 'kill the gateway')
    const {exitCode, rows} = await doctorRows()
    expect(exitCode).toBe(1)
    expect(rows['gateway-masked-secrets']).toMatchObject({status: 'fail'})
    expect(rows['gateway-http-rules']).toMatchObject({status: 'fail'})
    const r = await curl(`http://${api}/priv/again`)
    expect(r.stdout, r.stderr).toBe('hi from api GET /priv/again')
    expect(r.stderr).toContain('making it anew')
    expect((await curl('-w', '%{http_code}', `http://${api}/secret`)).stdout).toMatch(/\n403$/)
    const again = (await doctorRows()).rows
    expect([again['gateway-masked-secrets'].status, again['gateway-http-rules'].status, again['egress-gateway'].status]).toEqual(['pass', 'pass', 'pass'])
  })
})

describe('a docker restart of the sandbox (outside the CLI)', () => {
  it('leaves web access refused until the CLI\'s next exec, which makes the gateway anew; rules added live went with the restart', async () => {
    must(await docker('restart', '-t', '1', sandbox), 'docker restart')
    // the control: straight through the engine, nothing remakes the gateway and the web stays refused (fail closed)
    const raw = await docker('exec', '-u', 'node', sandbox, '/usr/local/bin/sandbox-exec', 'curl', '-sS', '--max-time', '5', `http://${plain}/`)
    expect(raw.exitCode, raw.stdout).not.toBe(0)
    expect(raw.stdout).not.toContain('hi from')
    const r = await curl(`http://${plain}/after-restart`)
    expect(r.stdout, r.stderr).toBe('hi from plain GET /after-restart')
    // live additions last until the sandbox restarts
    expect((await curl('-w', '%{http_code}', `http://${api}/priv/x`)).stdout).toMatch(/refused: path \/priv\/x not in .*\n403$/)
    expect((await curl(`http://${api}/pub/x`)).stdout).toBe('hi from api GET /pub/x')
  })

  it('start on the running sandbox does the same', async () => {
    must(await docker('restart', '-t', '1', sandbox), 'docker restart')
    must(await cli(['start', ws], {env: ENV}), 'start')
    const raw = await docker('exec', '-u', 'node', sandbox, '/usr/local/bin/sandbox-exec', 'curl', '-sS', '--max-time', '5', `http://${plain}/raw`)
    expect(raw.stdout, raw.stderr).toBe('hi from plain GET /raw')
  })
})

describe('firewall allow --save', () => {
  it('writes the host\'s rules with the new one to the trusted workspace config, which stays trusted and applies from the next start', async () => {
    const r = must(await cli(['firewall', 'allow', api, ws, '--paths', '/saved/*', '--methods', 'GET', '--save']), 'firewall allow --save')
    expect(r.stdout).toContain(`saved httpRules ${api} methods GET paths /saved/*`)
    expect(r.stderr).not.toContain('not trusted')
    expect(JSON.parse(readFileSync(join(ws, '.agent-sandbox', 'config.json'), 'utf8')).httpRules).toEqual([
      {host: api, methods: ['GET'], paths: ['/pub/*']},
      {host: api, methods: ['GET'], paths: ['/saved/*']},
    ])
    must(await cli(['stop', ws]), 'stop')
    must(await cli(['start', ws], {env: ENV}), 'start with the saved rule')
    expect((await curl(`http://${api}/saved/x`)).stdout).toBe('hi from api GET /saved/x')
    expect((await curl('-w', '%{http_code}', `http://${api}/priv/x`)).stdout).toMatch(/\n403$/)
  })
})

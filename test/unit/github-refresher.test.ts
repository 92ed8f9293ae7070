/**
 * The refresher: schedule (pure), one refresh with a fake minter, the loop with
 * a fake engine, and real minting through @octokit/auth-app against a local
 * stand-in that verifies the RS256 JWT (loopback only).
 */
import {generateKeyPairSync, verify} from 'node:crypto'
import {existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {createServer, type Server} from 'node:http'
import type {AddressInfo} from 'node:net'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi} from 'vitest'
import type {Engine} from '../../src/lib/engine/index.js'
import {containerInfo, fakeEngine} from './fake-engine.js'
import {ConfigError} from '../../src/lib/errors.js'
import {GithubAppError, mintInstallationToken, type AppConfig} from '../../src/lib/github/app.js'
import {
  backoffMs,
  nextAttemptAt,
  pollIntervalMs,
  provisionToken,
  refreshDueAt,
  refreshTarget,
  removeAppToken,
  runRefreshLoop,
} from '../../src/lib/github/refresher.js'
import {readTokenStatus, readSurrogate, readToken, tokenPaths, writeStatus, type AppRecord} from '../../src/lib/github/token-store.js'
import {gatewayCommand} from '../../src/lib/network/gateway/ports.js'

describe('schedule', () => {
  it('backs off 2 s, 4 s, 8 s … up to a minute', () => {
    expect([0, 1, 2, 3, 4, 5, 6, 7, 50].map((n) => backoffMs(n))).toEqual([0, 2000, 4000, 8000, 16_000, 32_000, 60_000, 60_000, 60_000])
  })

  it('renews margin seconds before expiry, never in the first half of a token’s life', () => {
    const t0 = 1_000_000
    expect(refreshDueAt(t0, t0 + 3_600_000, 300)).toBe(t0 + 3_300_000)
    expect(refreshDueAt(t0, t0 + 20_000, 10)).toBe(t0 + 10_000)
    expect(refreshDueAt(t0, t0 + 20_000, 300)).toBe(t0 + 10_000)
  })

  it('wakes often enough for the margin, at most every 10 s and at least every second', () => {
    expect([pollIntervalMs(1), pollIntervalMs(10), pollIntervalMs(300)]).toEqual([1000, 2000, 10_000])
  })

  it('is due now without a token, at the backoff after failures, else at the renewal time', () => {
    const t0 = Date.parse('2026-01-01T00:00:00Z')
    const iso = (ms: number) => new Date(t0 + ms).toISOString()
    expect(nextAttemptAt(undefined, 300)).toBe(0)
    expect(nextAttemptAt({failures: 2, nextAttemptAt: iso(4000)}, 300)).toBe(t0 + 4000)
    const healthy = {failures: 0, lastSuccess: iso(0), expiresAt: iso(3_600_000)}
    expect(nextAttemptAt(healthy, 300)).toBe(t0 + 3_300_000)
    expect(nextAttemptAt({...healthy, failures: 1, nextAttemptAt: iso(3_302_000)}, 300)).toBe(t0 + 3_302_000)
  })
})

const config: AppConfig = {appId: 1, installationId: 2, privateKeyPath: '/nonexistent.pem', apiUrl: 'http://127.0.0.1:1', gitUrl: 'http://127.0.0.1:1', refreshMarginSeconds: 10}
const record: AppRecord = {config, owner: {uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0}, workspace: '/w'}

let root: string
let env: NodeJS.ProcessEnv
beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'ghrefresh-'))
  env = {XDG_RUNTIME_DIR: root}
})
afterEach(() => rmSync(root, {recursive: true, force: true}))

describe('refreshTarget', () => {
  it('writes a new token and a clean status on success', async () => {
    const paths = await provisionToken('sbx', record, env, {mint: async () => ({token: 'ghs_one', expiresAt: '2030-01-01T00:00:00Z'}), now: () => 0})
    expect(JSON.parse(readFileSync(paths.app, 'utf8'))).toEqual(record)
    writeStatus(paths, {failures: 2, lastError: 'old', lastSuccess: '1970-01-01T00:00:00.000Z', expiresAt: '2030-01-01T00:00:00Z'})
    const error = await refreshTarget({name: 'sbx', paths, record}, {mint: async () => ({token: 'ghs_two', expiresAt: '2031-01-01T00:00:00Z'}), now: () => 1000})
    expect(error).toBeUndefined()
    expect(readToken(paths)).toBe('ghs_two')
    expect(readTokenStatus(paths)).toEqual({lastSuccess: '1970-01-01T00:00:01.000Z', expiresAt: '2031-01-01T00:00:00Z', failures: 0})
  })

  it('hands the new token to the gateway; a hand-over that fails is a failed refresh, retried', async () => {
    const token = (c: string) => `ghs_${c.repeat(36)}`
    const paths = await provisionToken('sbx', record, env, {mint: async () => ({token: token('1'), expiresAt: '2030-01-01T00:00:00Z'}), now: () => 0})
    const surrogate = readSurrogate(paths)
    expect(surrogate).toMatch(/^ghs_[A-Za-z0-9]{36}$/)
    const deliver = vi.fn(async () => undefined)
    expect(await refreshTarget({name: 'sbx', paths, record}, {mint: async () => ({token: token('2'), expiresAt: '2031-01-01T00:00:00Z'}), now: () => 1000, deliver})).toBeUndefined()
    expect(deliver).toHaveBeenCalledWith('sbx', token('2'))
    expect(readToken(paths)).toBe(token('2'))
    // The sandbox's surrogate stays as it was: only the gateway's value changes.
    expect(readSurrogate(paths)).toBe(surrogate)
    const refused = vi.fn(async () => {
      throw new GithubAppError('cannot hand the new token to the egress gateway sbx-gateway: no such container')
    })
    const error = await refreshTarget({name: 'sbx', paths, record}, {mint: async () => ({token: 'ghs_three', expiresAt: '2032-01-01T00:00:00Z'}), now: () => 2000, deliver: refused})
    expect(error).toMatch(/egress gateway sbx-gateway/)
    expect(readTokenStatus(paths)).toMatchObject({failures: 1, lastError: expect.stringContaining('egress gateway'), nextAttemptAt: new Date(4000).toISOString()})
  })

  it('records a failure with its retry time and leaves the last token in place', async () => {
    const paths = await provisionToken('sbx', record, env, {mint: async () => ({token: 'ghs_kept', expiresAt: '2030-01-01T00:00:00Z'}), now: () => 0})
    const failing = async () => {
      throw new GithubAppError('cannot get a GitHub App installation token: cannot reach http://x: ECONNREFUSED')
    }
    const log = vi.fn()
    expect(await refreshTarget({name: 'sbx', paths, record}, {mint: failing, now: () => 10_000, log})).toMatch(/ECONNREFUSED/)
    expect(await refreshTarget({name: 'sbx', paths, record}, {mint: failing, now: () => 20_000, log})).toMatch(/ECONNREFUSED/)
    expect(readToken(paths)).toBe('ghs_kept')
    expect(readTokenStatus(paths)).toMatchObject({
      expiresAt: '2030-01-01T00:00:00Z',
      failures: 2,
      lastError: 'cannot reach http://x: ECONNREFUSED',
      lastErrorAt: new Date(20_000).toISOString(),
      nextAttemptAt: new Date(24_000).toISOString(),
    })
    expect(log.mock.calls.at(-1)?.[0]).toMatch(/^sbx: refresh failed \(2 in a row/)
  })

  it('does not bring back a directory removed while it was minting', async () => {
    const paths = await provisionToken('sbx', record, env, {mint: async () => ({token: 'ghs_a', expiresAt: '2030-01-01T00:00:00Z'})})
    await refreshTarget({name: 'sbx', paths, record}, {
      mint: async () => {
        rmSync(paths.dir, {recursive: true})
        return {token: 'ghs_b', expiresAt: '2031-01-01T00:00:00Z'}
      },
    })
    expect(existsSync(paths.dir)).toBe(false)
  })

  it('removeAppToken deletes the whole directory', async () => {
    const paths = await provisionToken('sbx', record, env, {mint: async () => ({token: 'ghs_a', expiresAt: '2030-01-01T00:00:00Z'})})
    expect(await removeAppToken('sbx', env)).toBe(true)
    expect(existsSync(paths.dir)).toBe(false)
    expect(await removeAppToken('sbx', env)).toBe(false)
  })
})

function engineWith(rows: Array<{name: string; state: string; labels?: Record<string, string>}>): Engine {
  return fakeEngine({
    containers: {
      exec: vi.fn(async () => ({exitCode: 0, stdout: '', stderr: ''})),
      list: vi.fn(async (labels: Record<string, string>) =>
        rows
          .filter((r) => Object.entries(labels).every(([k, v]) => r.labels?.[k] === v))
          .map((r) => ({id: r.name, name: r.name, image: 'i', state: r.state, status: r.state, labels: r.labels ?? {}})),
      ),
      inspect: vi.fn(async (name: string) => {
        const row = rows.find((r) => r.name === name)
        return row ? containerInfo({name, running: row.state === 'running', labels: row.labels ?? {}}) : undefined
      }),
    },
  })
}

describe('runRefreshLoop', () => {
  it('per sandbox: refreshes when due and exits once its container is gone', async () => {
    const rows = [{name: 'sbx', state: 'running'}]
    const engine = engineWith(rows)
    await provisionToken('sbx', record, env, {mint: async () => ({token: 'ghs_0', expiresAt: new Date(Date.now() - 1000).toISOString()})})
    let n = 0
    const mint = vi.fn(async () => {
      n++
      if (n === 2) rows.length = 0 // the container is removed after the second renewal
      return {token: `ghs_${n}`, expiresAt: new Date(Date.now() - 1000).toISOString()}
    })
    const log = vi.fn()
    await runRefreshLoop({engine, env, container: 'sbx', signal: new AbortController().signal, log, deps: {mint}})
    expect(mint).toHaveBeenCalledTimes(2)
    expect(readToken(tokenPaths('sbx', env))).toBe('ghs_2')
    // Each new token went to the sandbox's gateway, over stdin (never an argument).
    expect(engine.containers.exec).toHaveBeenCalledWith('sbx-gateway', gatewayCommand(['--secret', 'github-app-token']), {stdin: 'ghs_2'})
    expect(log.mock.calls.at(-1)?.[0]).toBe('sbx: container gone; refresher exiting')
  }, 10_000)

  it('daemon: serves running labelled sandboxes with an app.json, and stops on its signal', async () => {
    const label = {'dev.agent-sandbox.ghapp': '1'}
    const engine = engineWith([
      {name: 'a', state: 'running', labels: label},
      {name: 'stopped', state: 'exited', labels: label},
      {name: 'unknown', state: 'running', labels: label},
      {name: 'plain', state: 'running'},
    ])
    for (const name of ['a', 'stopped', 'plain']) await provisionToken(name, record, env, {mint: async () => ({token: `ghs_${name}`, expiresAt: new Date(Date.now() - 1000).toISOString()})})
    const controller = new AbortController()
    const minted: string[] = []
    const log = vi.fn()
    await runRefreshLoop({
      engine,
      env,
      signal: controller.signal,
      log,
      deps: {
        mint: async () => {
          minted.push('x')
          controller.abort()
          return {token: 'ghs_new', expiresAt: '2030-01-01T00:00:00Z'}
        },
      },
    })
    expect(minted).toHaveLength(1)
    expect(readToken(tokenPaths('a', env))).toBe('ghs_new')
    expect(readToken(tokenPaths('stopped', env))).toBe('ghs_stopped')
    expect(readToken(tokenPaths('plain', env))).toBe('ghs_plain')
    expect(log.mock.calls.map((c) => c[0]).join('\n')).toMatch(/unknown: no app\.json/)
  })

  it('keeps going when the engine fails for a pass', async () => {
    const engine = engineWith([])
    await provisionToken('sbx', record, env, {mint: async () => ({token: 'ghs_a', expiresAt: '2030-01-01T00:00:00Z'})})
    let calls = 0
    ;(engine.containers.inspect as ReturnType<typeof vi.fn>).mockImplementation(async () => {
      calls++
      if (calls === 1) throw new Error('engine restarting')
      return undefined
    })
    const log = vi.fn()
    await runRefreshLoop({engine, env, container: 'sbx', signal: new AbortController().signal, log})
    expect(log.mock.calls.map((c) => c[0])).toEqual(['refresh pass failed: engine restarting', 'sbx: container gone; refresher exiting'])
  }, 10_000)
})

describe('mintInstallationToken (real @octokit/auth-app, local stand-in)', () => {
  const pair = generateKeyPairSync('rsa', {modulusLength: 2048})
  let server: Server
  let base: string
  const seen: Array<{path: string; problem?: string}> = []

  beforeAll(async () => {
    server = createServer((req, res) => {
      const jwt = /^bearer (.+)$/i.exec(req.headers.authorization ?? '')?.[1] ?? ''
      const [h, p, s] = jwt.split('.')
      const ok = Boolean(s) && verify('sha256', Buffer.from(`${h}.${p}`), pair.publicKey, Buffer.from(s, 'base64url'))
      const claims = ok ? JSON.parse(Buffer.from(p, 'base64url').toString()) : {}
      const problem = !ok ? 'signature' : String(claims.iss) !== '42' ? 'iss' : undefined
      seen.push({path: req.url ?? '', problem})
      if (problem || req.method !== 'POST') {
        res.writeHead(401, {'content-type': 'application/json'}).end('{"message":"A JSON web token could not be decoded"}')
        return
      }
      res.writeHead(201, {'content-type': 'application/json'}).end(JSON.stringify({token: `ghs_${seen.length}`, expires_at: '2030-01-01T00:00:00Z'}))
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/v3`
  })
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())))

  const keyFile = () => {
    const file = join(root, 'app.pem')
    writeFileSync(file, pair.privateKey.export({type: 'pkcs1', format: 'pem'}), {mode: 0o600})
    return file
  }

  it('signs the JWT with the key, honours apiUrl, and mints fresh every time', async () => {
    const cfg = {...config, appId: 42, installationId: 7, privateKeyPath: keyFile(), apiUrl: base}
    const one = await mintInstallationToken(cfg)
    const two = await mintInstallationToken(cfg)
    expect(one).toEqual({token: 'ghs_1', expiresAt: '2030-01-01T00:00:00Z'})
    expect(two.token).toBe('ghs_2')
    expect(seen.slice(0, 2)).toEqual([
      {path: '/api/v3/app/installations/7/access_tokens', problem: undefined},
      {path: '/api/v3/app/installations/7/access_tokens', problem: undefined},
    ])
  })

  it('says what the API answered, without the JWT', async () => {
    const error = await mintInstallationToken({...config, appId: 99, installationId: 7, privateKeyPath: keyFile(), apiUrl: base}).then(() => new Error('minted'), (e: unknown) => e as GithubAppError)
    expect(error).toBeInstanceOf(GithubAppError)
    expect(error.message).toBe(`cannot get a GitHub App installation token: ${base} answered 401: A JSON web token could not be decoded`)
    expect(error.cause).toBeUndefined()
  })

  it('names an unreadable or non-PEM key file without quoting it', async () => {
    const missing = await mintInstallationToken({...config, privateKeyPath: join(root, 'nope.pem')}).then(() => new Error('minted'), (e: unknown) => e as ConfigError)
    expect(missing).toBeInstanceOf(ConfigError)
    expect(missing.message).toBe(`cannot read the GitHub App private key ${join(root, 'nope.pem')}: ENOENT`)
    writeFileSync(join(root, 'bad.pem'), 'secret-not-a-key')
    const bad = await mintInstallationToken({...config, privateKeyPath: join(root, 'bad.pem')}).then(() => new Error('minted'), (e: unknown) => e as ConfigError)
    expect(bad.message).toBe(`${join(root, 'bad.pem')} is not a PEM private key`)
    expect(bad.message).not.toContain('secret-not-a-key')
  })
})

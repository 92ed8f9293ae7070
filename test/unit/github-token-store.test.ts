/** The token store: paths, private directories, atomic writes, status and its one-line form. */
import {existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterEach, beforeEach, describe, expect, it} from 'vitest'
import {
  daemonPidPath,
  ensurePrivateDir,
  formatGithubState,
  humanDuration,
  readTokenStatus,
  readSurrogate,
  readToken,
  refresherAlive,
  runtimeBase,
  tokenPaths,
  writeFileAtomic,
  writeStatus,
  writeToken,
} from '../../src/lib/github/token-store.js'

let root: string
beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'ghstore-'))
})
afterEach(() => rmSync(root, {recursive: true, force: true}))

const mode = (path: string) => (lstatSync(path).mode & 0o777).toString(8)

describe('paths', () => {
  it('lives under $XDG_RUNTIME_DIR/agent-sandbox', () => {
    expect(runtimeBase({XDG_RUNTIME_DIR: '/run/user/1000', HOME: '/home/me'})).toBe('/run/user/1000/agent-sandbox')
    expect(tokenPaths('agent-sandbox-app-abc', {XDG_RUNTIME_DIR: '/run/user/1000'})).toEqual({
      dir: '/run/user/1000/agent-sandbox/agent-sandbox-app-abc',
      secretsDir: '/run/user/1000/agent-sandbox/agent-sandbox-app-abc/secrets',
      token: '/run/user/1000/agent-sandbox/agent-sandbox-app-abc/secrets/ghapp_token',
      real: '/run/user/1000/agent-sandbox/agent-sandbox-app-abc/token',
      status: '/run/user/1000/agent-sandbox/agent-sandbox-app-abc/status.json',
      app: '/run/user/1000/agent-sandbox/agent-sandbox-app-abc/app.json',
      pid: '/run/user/1000/agent-sandbox/agent-sandbox-app-abc/refresher.pid',
      log: '/run/user/1000/agent-sandbox/agent-sandbox-app-abc/refresher.log',
    })
    expect(daemonPidPath({XDG_RUNTIME_DIR: '/run/user/1000'})).toBe('/run/user/1000/agent-sandbox/daemon.pid')
  })

  it('falls back to ~/.cache/agent-sandbox/run without XDG_RUNTIME_DIR (or with a relative one)', () => {
    expect(runtimeBase({HOME: '/home/me'})).toBe('/home/me/.cache/agent-sandbox/run')
    expect(runtimeBase({HOME: '/home/me', XDG_RUNTIME_DIR: 'rel'})).toBe('/home/me/.cache/agent-sandbox/run')
    expect(runtimeBase({HOME: '/home/me', XDG_CACHE_HOME: '/c'})).toBe('/c/agent-sandbox/run')
  })

  it('refuses a container name that could escape the directory', () => {
    expect(() => tokenPaths('../etc', {})).toThrow(/not a container name/)
    expect(() => tokenPaths('a/b', {})).toThrow(/not a container name/)
  })
})

describe('ensurePrivateDir', () => {
  it('creates every missing level 0700 and tightens an existing one', () => {
    const deep = join(root, 'a', 'b', 'c')
    ensurePrivateDir(deep)
    for (const p of [join(root, 'a'), join(root, 'a', 'b'), deep]) expect(mode(p)).toBe('700')
    mkdirSync(join(root, 'loose'), {mode: 0o755})
    ensurePrivateDir(join(root, 'loose'))
    expect(mode(join(root, 'loose'))).toBe('700')
  })

  it('refuses a symbolic link in its place', () => {
    mkdirSync(join(root, 'elsewhere'))
    symlinkSync(join(root, 'elsewhere'), join(root, 'link'))
    expect(() => ensurePrivateDir(join(root, 'link'))).toThrow(/not a directory/)
  })
})

describe('atomic writes', () => {
  it('writes 0600 through a temp file and leaves no temp file behind', () => {
    const file = join(root, 'f')
    writeFileAtomic(file, 'one')
    writeFileAtomic(file, 'two')
    expect(readFileSync(file, 'utf8')).toBe('two')
    expect(mode(file)).toBe('600')
    expect(readdirSync(root)).toEqual(['f'])
  })

  it('replaces the file by rename: an open reader keeps the old content whole', () => {
    const file = join(root, 'f')
    writeFileAtomic(file, 'old-token')
    const before = lstatSync(file).ino
    writeFileAtomic(file, 'new-token')
    expect(lstatSync(file).ino).not.toBe(before)
    expect(readFileSync(file, 'utf8')).toBe('new-token')
  })

  it('a failed write leaves the old file untouched', () => {
    const file = join(root, 'f')
    writeFileAtomic(file, 'kept')
    expect(() => writeFileAtomic(join(root, 'missing-dir', 'f'), 'x')).toThrow()
    expect(readFileSync(file, 'utf8')).toBe('kept')
  })

  it('keeps the token on the host and puts only a surrogate of its shape in secrets/, with private modes', () => {
    const paths = tokenPaths('sbx', {XDG_RUNTIME_DIR: root})
    const token = `ghs_${'A1b2C3d4E5'.repeat(3)}abcdef`
    expect(readToken(paths)).toBeUndefined()
    const surrogate = writeToken(paths, token)
    expect(readToken(paths)).toBe(token)
    expect(readFileSync(paths.real, 'utf8')).toBe(`${token}\n`)
    expect(readFileSync(paths.token, 'utf8')).toBe(`${surrogate}\n`)
    expect(readSurrogate(paths)).toBe(surrogate)
    expect(surrogate).toMatch(/^ghs_[A-Za-z0-9]{36}$/)
    expect(surrogate).not.toBe(token)
    expect(mode(paths.dir)).toBe('700')
    expect(mode(paths.secretsDir)).toBe('700')
    expect(mode(paths.token)).toBe('600')
    expect(mode(paths.real)).toBe('600')
    // The mounted directory holds the surrogate only; the token is beside it, never under it.
    expect(readdirSync(paths.secretsDir)).toEqual(['ghapp_token'])
    expect(paths.real.startsWith(`${paths.secretsDir}/`)).toBe(false)
  })

  it('keeps the surrogate across renewals of the same shape, and makes a new one for another shape or another sandbox', () => {
    const paths = tokenPaths('sbx', {XDG_RUNTIME_DIR: root})
    const first = writeToken(paths, `ghs_${'a'.repeat(36)}`)
    expect(writeToken(paths, `ghs_${'b'.repeat(36)}`)).toBe(first)
    expect(readToken(paths)).toBe(`ghs_${'b'.repeat(36)}`)
    expect(readSurrogate(paths)).toBe(first)
    const longer = writeToken(paths, `ghs_${'c'.repeat(40)}`)
    expect(longer).toMatch(/^ghs_[A-Za-z0-9]{40}$/)
    const other = writeToken(tokenPaths('other', {XDG_RUNTIME_DIR: root}), `ghs_${'b'.repeat(36)}`)
    expect(other).not.toBe(first)
  })

  it('never keeps what an older version left in secrets/ (a real token) as the surrogate', () => {
    const paths = tokenPaths('sbx', {XDG_RUNTIME_DIR: root})
    const old = `ghs_${'o'.repeat(36)}`
    mkdirSync(paths.secretsDir, {recursive: true})
    writeFileSync(paths.token, `${old}\n`)
    const surrogate = writeToken(paths, `ghs_${'n'.repeat(36)}`)
    expect(surrogate).not.toBe(old)
    expect(readFileSync(paths.token, 'utf8')).toBe(`${surrogate}\n`)
  })
})

describe('status', () => {
  it('round-trips and tolerates a missing or broken file', () => {
    const paths = tokenPaths('sbx', {XDG_RUNTIME_DIR: root})
    expect(readTokenStatus(paths)).toBeUndefined()
    writeStatus(paths, {lastSuccess: '2026-01-01T00:00:00Z', expiresAt: '2026-01-01T01:00:00Z', failures: 0})
    expect(readTokenStatus(paths)).toEqual({lastSuccess: '2026-01-01T00:00:00Z', expiresAt: '2026-01-01T01:00:00Z', failures: 0})
    expect(mode(paths.status)).toBe('600')
    writeFileSync(paths.status, '{broken')
    expect(readTokenStatus(paths)).toBeUndefined()
  })

  const now = Date.parse('2026-01-01T00:00:00Z')
  const at = (seconds: number) => new Date(now + seconds * 1000).toISOString()

  it.each([
    [undefined, 'refresher', true, 'no token'],
    [{failures: 1, lastError: 'cannot reach x'}, 'refresher', true, 'error: cannot reach x'],
    [{failures: 0, lastSuccess: at(-60), expiresAt: at(3300)}, 'refresher', true, 'ok (expires in 55m)'],
    [{failures: 0, lastSuccess: at(-60), expiresAt: at(3 * 3600 + 300)}, 'daemon', true, 'ok (expires in 3h05m)'],
    [{failures: 0, lastSuccess: at(-60), expiresAt: at(12)}, 'daemon', true, 'ok (expires in 12s)'],
    [{failures: 3, lastError: 'answered 401', lastSuccess: at(-60), expiresAt: at(120)}, 'refresher', true, 'error: answered 401 (3x; token expires in 2m)'],
    [{failures: 0, lastSuccess: at(-60), expiresAt: at(600)}, 'none', true, 'no refresher (token expires in 10m)'],
    [{failures: 0, lastSuccess: at(-3600), expiresAt: at(-5)}, 'refresher', true, 'EXPIRED'],
    [{failures: 0, lastSuccess: at(-60), expiresAt: at(600)}, 'none', false, 'stopped (token expires in 10m)'],
  ] as const)('formats %j with %s (running %s) as %s', (status, refresher, running, text) => {
    expect(formatGithubState(status as never, refresher, running, now)).toBe(text)
  })

  it('formats durations', () => {
    expect([humanDuration(-5), humanDuration(59_400), humanDuration(61_000), humanDuration(7_260_000)]).toEqual(['0s', '59s', '1m', '2h01m'])
  })
})

describe('refresherAlive', () => {
  it('is false for no pid, a dead pid, and a live process that is not a refresher', () => {
    expect(refresherAlive(undefined)).toBe(false)
    expect(refresherAlive(2 ** 22 + 12345)).toBe(false)
    // This test runner is alive but is not `token-daemon`: a reused pid is not mistaken for one.
    expect(refresherAlive(process.pid)).toBe(false)
    expect(existsSync(`/proc/${process.pid}`)).toBe(true)
  })
})

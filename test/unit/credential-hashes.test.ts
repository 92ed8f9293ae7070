/**
 * base-image/credential-hashes.js, the in-sandbox half of doctor's
 * agent-logins check, run with node over a directory of our own.
 */
import {execFileSync} from 'node:child_process'
import {createHash} from 'node:crypto'
import {mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join, resolve} from 'node:path'
import {afterAll, describe, expect, it} from 'vitest'

const SCRIPT = readFileSync(resolve(import.meta.dirname, '..', '..', 'base-image', 'credential-hashes.js'), 'utf8')
const sha = (v: string) => createHash('sha256').update(v).digest('hex')
const root = mkdtempSync(join(tmpdir(), 'credential-hashes-'))
afterAll(() => rmSync(root, {recursive: true, force: true}))

const hashes = (env: Record<string, string> = {}, ...roots: string[]) =>
  new Set(execFileSync(process.execPath, ['-e', SCRIPT, ...roots], {encoding: 'utf8', env: {PATH: process.env.PATH ?? '', ...env}}).split('\n').filter(Boolean))

describe('credential-hashes.js', () => {
  const token = 'sk-ant-oat01-' + 'A'.repeat(40)
  const jwt = 'eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJlLXNpZ25hdHVyZQ'
  mkdirSync(join(root, 'home', '.claude'), {recursive: true})
  writeFileSync(join(root, 'home', '.claude', '.credentials.json'), JSON.stringify({claudeAiOauth: {accessToken: token}}))
  writeFileSync(join(root, 'home', 'auth.json'), `{"id_token":"${jwt}"}\n`)
  writeFileSync(join(root, 'short.txt'), 'abc-short-string\n')

  it('prints the SHA-256 of every token-like string in the files under the roots, never a value', () => {
    const out = execFileSync(process.execPath, ['-e', SCRIPT, root], {encoding: 'utf8'})
    expect(out).not.toContain(token)
    const got = new Set(out.split('\n').filter(Boolean))
    expect(got.has(sha(token))).toBe(true)
    expect(got.has(sha(jwt))).toBe(true)
    expect(got.has(sha('abc-short-string'))).toBe(false)
    expect([...got].every((h) => /^[0-9a-f]{64}$/.test(h))).toBe(true)
  })

  it('finds a token in a process environment', () => {
    const secret = 'ghp_' + 'Z'.repeat(36)
    expect(hashes({SOME_TOKEN: secret}, root).has(sha(secret))).toBe(true)
  })

  it('does not follow a symlink out of the roots', () => {
    const outside = mkdtempSync(join(tmpdir(), 'credential-hashes-out-'))
    const hidden = 'hidden-' + 'Q'.repeat(30)
    writeFileSync(join(outside, 'f'), hidden)
    symlinkSync(outside, join(root, 'link'))
    try {
      expect(hashes({}, root).has(sha(hidden))).toBe(false)
    } finally {
      rmSync(outside, {recursive: true, force: true})
    }
  })
})

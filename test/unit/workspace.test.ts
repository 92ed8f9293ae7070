import {mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {UsageError} from '../../src/lib/errors.js'
import {
  Labels,
  Names,
  describeWorkspace,
  md5,
  resolveWorkspace,
  sanitizeBranch,
  slug,
  validateBranch,
  workspaceLabels,
} from '../../src/lib/workspace.js'

describe('md5', () => {
  it('is the hex MD5 digest', () => {
    expect(md5('')).toBe('d41d8cd98f00b204e9800998ecf8427e')
    expect(md5('/home/me/repo')).toMatch(/^[0-9a-f]{32}$/)
    expect(md5('/a')).not.toBe(md5('/b'))
  })
})

describe('slug', () => {
  it.each([
    ['My Repo', 'my-repo'],
    ['already-ok_1.2', 'already-ok_1.2'],
    ['café', 'cafe'],
    ['Prøject', 'pr-ject'],
    ['$(touch x)', 'touch-x'],
    [`it's "quoted"`, 'it-s-quoted'],
    ['---lead', 'lead'],
    ['trail...', 'trail'],
    ['', 'workspace'],
    ['日本語', 'workspace'],
    ['$$$', 'workspace'],
  ])('%j → %j', (input, expected) => {
    expect(slug(input)).toBe(expected)
  })

  it('always yields a safe name within the length cap', () => {
    for (const input of ['Ünïcödé Prøject', 'a'.repeat(100), `${'x'.repeat(39)}-yyyy`, ' weird / name ; rm -rf ~ ', '\u0000\t\n', 'A'.repeat(41)]) {
      const out = slug(input)
      expect(out.length).toBeLessThanOrEqual(40)
      expect(out).toMatch(/^[a-z0-9]([a-z0-9_.-]*[a-z0-9])?$/)
    }
    expect(slug('a'.repeat(100))).toBe('a'.repeat(40))
    expect(slug(`${'x'.repeat(39)}-yyyy`)).toBe('x'.repeat(39))
    expect(slug('abcdefghij', 5)).toBe('abcde')
  })
})

describe('describeWorkspace', () => {
  it('derives name, slug and hash from the path', () => {
    expect(describeWorkspace('/home/me/My Repo', 1000, 1001)).toEqual({
      path: '/home/me/My Repo',
      repoName: 'My Repo',
      repoSlug: 'my-repo',
      hash: md5('/home/me/My Repo'),
      uid: 1000,
      gid: 1001,
    })
  })

  it('names the root directory "root" and defaults uid/gid to 0', () => {
    expect(describeWorkspace('/')).toMatchObject({repoName: 'root', repoSlug: 'root', uid: 0, gid: 0})
  })
})

describe('resolveWorkspace', () => {
  let root: string
  beforeAll(() => {
    root = realpathSync(mkdtempSync(join(tmpdir(), 'agent-sandbox-ws-')))
    mkdirSync(join(root, 'repo'))
    mkdirSync(join(root, 'my $(touch pwned) dir'))
    writeFileSync(join(root, 'file.txt'), 'x')
    symlinkSync(join(root, 'repo'), join(root, 'link'))
  })
  afterAll(() => rmSync(root, {recursive: true, force: true}))

  it('resolves a relative path against cwd', () => {
    const ws = resolveWorkspace('repo', root)
    expect(ws.path).toBe(join(root, 'repo'))
    expect(ws.repoName).toBe('repo')
    expect(ws.hash).toBe(md5(join(root, 'repo')))
    expect(ws.uid).toBe(process.getuid?.() ?? ws.uid)
  })

  it('defaults to cwd', () => {
    expect(resolveWorkspace(undefined, join(root, 'repo')).path).toBe(join(root, 'repo'))
  })

  it('resolves a symlink to the real path (and so to the same hash)', () => {
    const viaLink = resolveWorkspace(join(root, 'link'))
    expect(viaLink.path).toBe(join(root, 'repo'))
    expect(viaLink.hash).toBe(resolveWorkspace(join(root, 'repo')).hash)
  })

  it('accepts a directory with spaces and $(…) in its name', () => {
    const ws = resolveWorkspace(join(root, 'my $(touch pwned) dir'))
    expect(ws.repoName).toBe('my $(touch pwned) dir')
    expect(ws.repoSlug).toBe('my-touch-pwned-dir')
  })

  it('refuses a missing path with a UsageError', () => {
    expect(() => resolveWorkspace(join(root, 'nope'))).toThrow(UsageError)
    expect(() => resolveWorkspace(join(root, 'nope'))).toThrow(/does not exist/)
  })

  it('refuses a file with a UsageError', () => {
    let caught: unknown
    try {
      resolveWorkspace(join(root, 'file.txt'))
    } catch (error) {
      caught = error
    }
    expect(caught).toBeInstanceOf(UsageError)
    expect((caught as UsageError).message).toMatch(/not a directory/)
    expect((caught as UsageError).hint).toBeTruthy()
  })
})

const SAFE = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/

describe('sanitizeBranch', () => {
  it('keeps simple names as they are', () => {
    expect(sanitizeBranch('main')).toBe('main')
    expect(sanitizeBranch('release-1.2_rc')).toBe('release-1.2_rc')
  })

  it('turns / and white space into __ and adds a hash', () => {
    expect(sanitizeBranch('feat/x')).toMatch(/^feat__x-[0-9a-f]{8}$/)
    expect(sanitizeBranch('feat/x')).toBe(`feat__x-${md5('feat/x').slice(0, 8)}`)
    expect(sanitizeBranch('a b')).toMatch(/^a__b-[0-9a-f]{8}$/)
    expect(sanitizeBranch('a//b')).toMatch(/^a__b-/)
  })

  it('keeps feat/x and feat__x apart', () => {
    expect(sanitizeBranch('feat__x')).toBe('feat__x')
    expect(sanitizeBranch('feat/x')).not.toBe(sanitizeBranch('feat__x'))
  })

  it('replaces other unsafe characters with -', () => {
    expect(sanitizeBranch('fix#12')).toMatch(/^fix-12-[0-9a-f]{8}$/)
    expect(sanitizeBranch('üml')).toMatch(/^ml-[0-9a-f]{8}$/)
    expect(sanitizeBranch('$(touch x)')).toMatch(SAFE)
  })

  it('hashes names that already end like a hash, so they cannot collide with a hashed one', () => {
    const hashed = sanitizeBranch('feat/x')
    expect(sanitizeBranch(hashed)).not.toBe(hashed)
    expect(sanitizeBranch(hashed)).not.toBe(sanitizeBranch('feat/x'))
  })

  it('caps long names and keeps them distinct', () => {
    const a = `${'a'.repeat(70)}1`
    const b = `${'a'.repeat(70)}2`
    expect(sanitizeBranch(a).length).toBeLessThanOrEqual(69)
    expect(sanitizeBranch(a)).not.toBe(sanitizeBranch(b))
  })

  it('never maps two different tricky names to the same result, and always yields a safe name', () => {
    const atoms = ['feat', 'x', '/', '__', '_', '-', '.', ' ', '\t', 'Ü', '#', '$(a)', "'", '"', 'deadbeef', '-deadbeef', 'A', '0', '..', '@', '~']
    const names = new Set<string>(['main', 'feat/x', 'feat__x', 'feat x', 'feat\tx', 'feat/ x', 'feat__x-1a2b3c4d', 'a'.repeat(61), 'a'.repeat(60)])
    for (const a of atoms) for (const b of atoms) for (const c of atoms) names.add(`${a}${b}${c}`)
    const seen = new Map<string, string>()
    for (const name of names) {
      const out = sanitizeBranch(name)
      const earlier = seen.get(out)
      expect(earlier, `${JSON.stringify(name)} and ${JSON.stringify(earlier)} both give ${out}`).toBeUndefined()
      seen.set(out, name)
      // A leading "_" is kept by sanitizeBranch (see report); every other name must be fully safe.
      if (!out.startsWith('_')) expect(out, JSON.stringify(name)).toMatch(SAFE)
    }
    expect(seen.size).toBe(names.size)
  })
})

describe('validateBranch', () => {
  it.each(['main', 'feat/x', 'a.b-c_d', 'release/2024.1', 'UPPER', 'x@y'])('accepts %j', (name) => {
    expect(() => validateBranch(name)).not.toThrow()
  })

  it.each(['', '-x', 'a..b', 'a b', 'x.lock', 'a/x.lock/b', 'a~b', 'a^b', 'a:b', 'a?b', 'a*b', 'a[b', 'a\\b', '@', '/x', 'x/', '.x', 'a/.x', 'x.', 'a//b', 'a@{1}', 'tab\there', 'del\x7f'])(
    'rejects %j with a UsageError',
    (name) => {
      expect(() => validateBranch(name)).toThrow(UsageError)
    },
  )
})

describe('Names and labels', () => {
  const ws = describeWorkspace('/home/me/My Repo', 1000, 1000)
  const hash = md5('/home/me/My Repo')

  it('names containers, images and volumes after the slug and hash', () => {
    expect(Names.container(ws)).toBe(`agent-sandbox-my-repo-${hash}`)
    expect(Names.container(ws, 'feat/x')).toBe(`agent-sandbox-my-repo-${sanitizeBranch('feat/x')}-${hash}`)
    expect(Names.container(ws, 'main')).toBe(`agent-sandbox-my-repo-main-${hash}`)
    expect(Names.container(ws, 'feat/x')).not.toBe(Names.container(ws, 'feat__x'))
    expect(Names.image(ws)).toBe(`agent-sandbox-my-repo-${hash}`)
    expect(Names.historyVolume(ws)).toBe(`agent-sandbox-${hash}-history`)
    expect(Names.shelfVolume(ws)).toBe(`agent-sbx-repo-${hash}`)
    expect(Names.baseImage('2026-01-01')).toBe('agent-sandbox-base:2026-01-01')
  })

  it('shares agent config volumes only when asked', () => {
    expect(Names.claudeVolume(ws, true)).toBe('agent-sandbox-claude-code-config')
    expect(Names.claudeVolume(ws, false)).toBe(`agent-sandbox-${hash}-claude-code-config`)
    expect(Names.codexVolume(ws, true)).toBe('agent-sandbox-codex-config')
    expect(Names.codexVolume(ws, false)).toBe(`agent-sandbox-${hash}-codex-config`)
    const other = describeWorkspace('/elsewhere/My Repo')
    expect(Names.claudeVolume(other, false)).not.toBe(Names.claudeVolume(ws, false))
    expect(Names.claudeVolume(other, true)).toBe(Names.claudeVolume(ws, true))
  })

  it('labels bind and branch sandboxes', () => {
    expect(workspaceLabels(ws)).toEqual({
      [Labels.managed]: 'true',
      [Labels.workspace]: '/home/me/My Repo',
      [Labels.hash]: hash,
      [Labels.repo]: 'My Repo',
      [Labels.mode]: 'bind',
      [Labels.branch]: '',
    })
    expect(workspaceLabels(ws, 'feat/x')).toMatchObject({'dev.agent-sandbox.mode': 'branch', 'dev.agent-sandbox.branch': 'feat/x'})
  })
})

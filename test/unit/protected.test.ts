import {mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterEach, beforeEach, describe, expect, it} from 'vitest'
import {createPlaceholders, fsKindOf, normaliseRelative, planProtectedPaths} from '../../src/lib/git/protected.js'

type Kind = 'file' | 'dir' | 'symlink' | 'other' | 'missing'
const kinds = (map: Record<string, Kind>) => (relative: string): Kind => map[relative] ?? 'missing'

const FULL: Record<string, Kind> = {
  '.git': 'dir',
  '.git/hooks': 'dir',
  '.git/config': 'file',
  '.husky': 'dir',
  '.agent-sandbox': 'dir',
  '.agent-precommit': 'dir',
  '.agent-precommit/user-context.json': 'file',
}
const mounted = (plan: ReturnType<typeof planProtectedPaths>) => plan.mounts.map((m) => m.relative)

describe('planProtectedPaths', () => {
  it('mounts every default path that exists, with no placeholders', () => {
    const plan = planProtectedPaths([], kinds(FULL))
    expect(mounted(plan)).toEqual(['.husky', '.agent-sandbox', '.agent-precommit/user-context.json'])
    expect(plan.placeholders).toEqual([])
    expect(plan.skipped).toEqual([])
  })

  it('gives a missing directory a dir placeholder at its topmost missing component', () => {
    const plan = planProtectedPaths(['config/secrets/prod'], kinds({...FULL, '.husky': 'missing', config: 'dir'}))
    expect(plan.placeholders).toContainEqual({relative: '.husky', kind: 'dir'})
    expect(plan.placeholders).toContainEqual({relative: 'config/secrets', kind: 'dir'})
    expect(mounted(plan)).toContain('.husky')
    expect(mounted(plan)).toContain('config/secrets')
    expect(mounted(plan)).not.toContain('config/secrets/prod')
  })

  it('placeholders the .agent-precommit dir when it is missing', () => {
    const {'.agent-precommit': _a, '.agent-precommit/user-context.json': _b, ...rest} = FULL
    const plan = planProtectedPaths([], kinds(rest))
    expect(plan.placeholders).toEqual([{relative: '.agent-precommit', kind: 'dir'}])
    expect(mounted(plan)).toContain('.agent-precommit')
    expect(mounted(plan)).not.toContain('.agent-precommit/user-context.json')
  })

  it('placeholders user-context.json as a file when only it is missing', () => {
    const plan = planProtectedPaths([], kinds({...FULL, '.agent-precommit/user-context.json': 'missing'}))
    expect(plan.placeholders).toEqual([{relative: '.agent-precommit/user-context.json', kind: 'file'}])
    expect(mounted(plan)).toContain('.agent-precommit/user-context.json')
  })

  it('uses a file placeholder for a missing leaf with an extension, a dir otherwise', () => {
    const plan = planProtectedPaths(['.env.local', 'Makefile', 'ci/deploy.yaml'], kinds({...FULL, ci: 'dir'}))
    expect(plan.placeholders).toEqual([
      {relative: '.env.local', kind: 'file'},
      {relative: 'Makefile', kind: 'dir'},
      {relative: 'ci/deploy.yaml', kind: 'file'},
    ])
  })

  it('protects paths under .git that the user lists, when .git is a directory', () => {
    expect(mounted(planProtectedPaths(['.git/hooks', '.git/config'], kinds(FULL)))).toEqual(['.husky', '.agent-sandbox', '.agent-precommit/user-context.json', '.git/hooks', '.git/config'])
  })

  it.each([['file'], ['missing'], ['symlink']] as const)('skips .git/* when .git is a %s', (gitKind) => {
    const plan = planProtectedPaths(['.git/hooks', '.git/config'], kinds({...FULL, '.git': gitKind}))
    expect(mounted(plan)).toEqual(['.husky', '.agent-sandbox', '.agent-precommit/user-context.json'])
    expect(plan.skipped.map((s) => s.relative)).toEqual(['.git/hooks', '.git/config'])
    expect(plan.skipped[0].reason).toMatch(/\.git is not a directory/)
    expect(plan.placeholders).toEqual([])
  })

  it('skips a symbolic link and paths under one', () => {
    const plan = planProtectedPaths(['linked/inner'], kinds({...FULL, '.husky': 'symlink', linked: 'symlink'}))
    expect(mounted(plan)).not.toContain('.husky')
    expect(mounted(plan)).not.toContain('linked/inner')
    expect(plan.skipped).toContainEqual({relative: '.husky', reason: '.husky is a symbolic link'})
    expect(plan.skipped).toContainEqual({relative: 'linked/inner', reason: 'linked is a symbolic link'})
    expect(plan.placeholders).toEqual([])
  })

  it('skips a path under a file', () => {
    const plan = planProtectedPaths(['README.md/x'], kinds({...FULL, 'README.md': 'file'}))
    expect(plan.skipped).toContainEqual({relative: 'README.md/x', reason: 'README.md is not a directory'})
  })

  it('normalises, de-duplicates and drops nested or escaping paths', () => {
    const plan = planProtectedPaths(['./.husky/', '.husky', '.agent-sandbox/config.json', 'secrets', 'secrets/a', '../outside', '.', ''], kinds({...FULL, secrets: 'dir', 'secrets/a': 'file', '.agent-sandbox/config.json': 'file'}))
    expect(mounted(plan)).toEqual(['.husky', '.agent-sandbox', '.agent-precommit/user-context.json', 'secrets'])
  })

  it('creates one placeholder for several paths under the same missing dir', () => {
    const plan = planProtectedPaths(['deploy/keys', 'deploy/certs/ca.pem'], kinds(FULL))
    expect(plan.placeholders.filter((p) => p.relative === 'deploy')).toEqual([{relative: 'deploy', kind: 'dir'}])
    expect(mounted(plan).filter((m) => m.startsWith('deploy'))).toEqual(['deploy'])
  })

  it('normaliseRelative strips ./ and trailing slashes', () => {
    expect(normaliseRelative('./a//b/')).toBe('a/b')
    expect(normaliseRelative('a/./b/../c')).toBe('a/c')
  })
})

describe('placeholders on disk', () => {
  let root: string
  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'agent-sandbox-prot-'))
  })
  afterEach(() => rmSync(root, {recursive: true, force: true}))

  it('fsKindOf reports kinds without following links', () => {
    mkdirSync(join(root, 'd'))
    mkdirSync(join(root, 'e'))
    writeFileSync(join(root, 'd', 'inside'), 'x')
    writeFileSync(join(root, 'f'), 'x')
    symlinkSync(join(root, 'd'), join(root, 'l'))
    const kindOf = fsKindOf(root)
    expect([kindOf('d'), kindOf('e'), kindOf('f'), kindOf('l'), kindOf('nope'), kindOf('f/x')]).toEqual(['dir', 'empty-dir', 'file', 'symlink', 'missing', 'missing'])
  })

  it('plans the same mounts before and after its own placeholders exist', () => {
    mkdirSync(join(root, '.git', 'hooks'), {recursive: true})
    writeFileSync(join(root, '.git', 'config'), '')
    writeFileSync(join(root, '.git', 'hooks', 'x'), '')
    const before = planProtectedPaths([], fsKindOf(root))
    createPlaceholders(root, before.placeholders)
    const after = planProtectedPaths([], fsKindOf(root))
    expect(after.mounts.map((m) => m.relative).sort()).toEqual(before.mounts.map((m) => m.relative).sort())
    expect(after.placeholders).toEqual([])
  })

  it('creates placeholders planned from the real tree', () => {
    mkdirSync(join(root, '.git', 'hooks'), {recursive: true})
    writeFileSync(join(root, '.git', 'config'), '[core]\n')
    const plan = planProtectedPaths(['notes.txt'], fsKindOf(root))
    expect(plan.placeholders).toEqual([
      {relative: '.husky', kind: 'dir'},
      {relative: '.agent-sandbox', kind: 'dir'},
      {relative: '.agent-precommit', kind: 'dir'},
      {relative: 'notes.txt', kind: 'file'},
    ])
    createPlaceholders(root, plan.placeholders)
    expect(statSync(join(root, '.husky')).isDirectory()).toBe(true)
    expect(statSync(join(root, 'notes.txt')).isFile()).toBe(true)
    expect(statSync(join(root, 'notes.txt')).size).toBe(0)

  })

  it('createPlaceholders leaves an existing file untouched', () => {
    writeFileSync(join(root, 'a.json'), '{"x":1}')
    createPlaceholders(root, [{relative: 'a.json', kind: 'file'}])
    expect(statSync(join(root, 'a.json')).size).toBe(7)
  })
})

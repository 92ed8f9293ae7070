import {chmodSync, chownSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync} from 'node:fs'
import {createRequire} from 'node:module'
import {homedir, tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterAll, describe, expect, it} from 'vitest'

const {buildHash, cacheDir, cacheFile, ours} = createRequire(import.meta.url)('../../bin/compile-cache.cjs') as {
  buildHash(source: string): string | undefined
  cacheDir(env: NodeJS.ProcessEnv): string | undefined
  cacheFile(dir: string, hash: string): string
  ours(target: string, kind: 'directory' | 'file'): boolean
}

const tmp = mkdtempSync(join(tmpdir(), 'asb-cc-unit-'))
afterAll(() => rmSync(tmp, {recursive: true, force: true}))

describe('buildHash', () => {
  it("reads the content hash scripts/bundle-cli.mjs puts on the bundle's first line", () => {
    expect(buildHash('// agent-sandbox cli, build 445613315221c7b5e63e27bcf638d937\nconst x = 1\n')).toBe('445613315221c7b5e63e27bcf638d937')
  })

  it('has no hash (so no cache) for anything else', () => {
    expect(buildHash('const x = 1\n')).toBeUndefined()
    expect(buildHash('// agent-sandbox cli, build nothex\n')).toBeUndefined()
    expect(buildHash('x\n// agent-sandbox cli, build 445613315221c7b5e63e27bcf638d937\n')).toBeUndefined()
  })
})

describe('cacheDir and cacheFile', () => {
  it("takes NODE_COMPILE_CACHE as node does, else the user's cache directory", () => {
    expect(cacheDir({NODE_COMPILE_CACHE: '/c'})).toBe('/c')
    expect(cacheDir({XDG_CACHE_HOME: '/x'})).toBe('/x/agent-sandbox/compile-cache')
    expect(cacheDir({})).toBe(join(homedir(), '.cache', 'agent-sandbox', 'compile-cache'))
  })

  it('ignores relative paths: they would point into the current directory, often a workspace', () => {
    const fallback = join(homedir(), '.cache', 'agent-sandbox', 'compile-cache')
    expect(cacheDir({NODE_COMPILE_CACHE: 'cache'})).toBe(fallback)
    expect(cacheDir({XDG_CACHE_HOME: '.cache'})).toBe(fallback)
  })

  it('names one file per build, node version and architecture', () => {
    const a = cacheFile('/c', 'aaaaaaaaaaaaaaaa')
    expect(a).toBe(`/c/cli-aaaaaaaaaaaaaaaa-${process.version}-${process.arch}.cache`)
    // Two builds of the same length get different files: V8 would take a cache for either.
    expect(cacheFile('/c', 'bbbbbbbbbbbbbbbb')).not.toBe(a)
  })
})

describe('ours', () => {
  it('takes a directory or file of ours that no one else can write, or one not made yet', () => {
    const dir = join(tmp, 'private')
    mkdirSync(dir, {mode: 0o700})
    writeFileSync(join(dir, 'c'), 'x', {mode: 0o600})
    writeFileSync(join(dir, 'r'), 'x', {mode: 0o644})
    expect(ours(dir, 'directory')).toBe(true)
    expect(ours(join(dir, 'c'), 'file')).toBe(true)
    expect(ours(join(dir, 'r'), 'file')).toBe(true)
    expect(ours(join(dir, 'missing'), 'file')).toBe(true)
  })

  it('refuses what others could write, what is not ours, links and the wrong kind', () => {
    const open = join(tmp, 'open')
    mkdirSync(open)
    chmodSync(open, 0o777)
    expect(ours(open, 'directory')).toBe(false)
    const groupWritable = join(tmp, 'g')
    writeFileSync(groupWritable, 'x')
    chmodSync(groupWritable, 0o664)
    expect(ours(groupWritable, 'file')).toBe(false)
    // Someone else's: as root, a file given to uid 1234; as anyone else, one of root's.
    let theirs = '/etc/passwd'
    if (process.geteuid?.() === 0) {
      theirs = join(tmp, 'theirs')
      writeFileSync(theirs, 'x', {mode: 0o600})
      chownSync(theirs, 1234, 1234)
    }
    expect(ours(theirs, 'file')).toBe(false)
    const link = join(tmp, 'link')
    symlinkSync(join(tmp, 'private', 'c'), link)
    expect(ours(link, 'file')).toBe(false)
    expect(ours(join(tmp, 'private'), 'file')).toBe(false)
  })
})

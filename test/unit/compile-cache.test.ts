import {createRequire} from 'node:module'
import {homedir} from 'node:os'
import {join} from 'node:path'
import {describe, expect, it} from 'vitest'

const {buildHash, cacheDir, cacheFile} = createRequire(import.meta.url)('../../bin/compile-cache.cjs') as {
  buildHash(source: string): string | undefined
  cacheDir(env: NodeJS.ProcessEnv): string | undefined
  cacheFile(dir: string, hash: string): string
}

describe('buildHash', () => {
  it("reads the content hash scripts/bundle-fast.mjs puts on the bundle's first line", () => {
    expect(buildHash('// agent-sandbox fast path, build 445613315221c7b5e63e27bcf638d937\nconst x = 1\n')).toBe('445613315221c7b5e63e27bcf638d937')
  })

  it('has no hash (so no cache) for anything else', () => {
    expect(buildHash('const x = 1\n')).toBeUndefined()
    expect(buildHash('// agent-sandbox fast path, build nothex\n')).toBeUndefined()
    expect(buildHash('x\n// agent-sandbox fast path, build 445613315221c7b5e63e27bcf638d937\n')).toBeUndefined()
  })
})

describe('cacheDir and cacheFile', () => {
  it("takes NODE_COMPILE_CACHE as node does, else the user's cache directory", () => {
    expect(cacheDir({NODE_COMPILE_CACHE: '/c'})).toBe('/c')
    expect(cacheDir({XDG_CACHE_HOME: '/x'})).toBe('/x/agent-sandbox/compile-cache')
    expect(cacheDir({})).toBe(join(homedir(), '.cache', 'agent-sandbox', 'compile-cache'))
  })

  it('names one file per build, node version and architecture', () => {
    const a = cacheFile('/c', 'aaaaaaaaaaaaaaaa')
    expect(a).toBe(`/c/fast-aaaaaaaaaaaaaaaa-${process.version}-${process.arch}.cache`)
    // Two builds of the same length get different files: V8 would take a cache for either.
    expect(cacheFile('/c', 'bbbbbbbbbbbbbbbb')).not.toBe(a)
  })
})

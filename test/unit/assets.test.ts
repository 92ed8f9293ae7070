import {mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join, resolve} from 'node:path'
import {afterAll, describe, expect, it} from 'vitest'
import {baseImageDir, findPackageRoot, packageRoot} from '../../src/lib/util/assets.js'

const tmp = mkdtempSync(join(tmpdir(), 'asb-assets-'))
afterAll(() => rmSync(tmp, {recursive: true, force: true}))

describe('findPackageRoot', () => {
  it('finds this package from src/lib, and the base image context in it', () => {
    expect(packageRoot).toBe(resolve(__dirname, '../..'))
    expect(baseImageDir).toBe(join(packageRoot, 'base-image'))
  })

  it('finds the root from any depth below it (dist/lib, the bundle in dist/cli)', () => {
    const root = join(tmp, 'pkg')
    mkdirSync(join(root, 'base-image'), {recursive: true})
    mkdirSync(join(root, 'dist', 'cli'), {recursive: true})
    writeFileSync(join(root, 'package.json'), '{}')
    // A package.json without base-image/ on the way (a dependency's) is not it.
    writeFileSync(join(root, 'dist', 'package.json'), '{"type": "commonjs"}')
    expect(findPackageRoot(join(root, 'dist', 'cli'))).toBe(root)
    expect(findPackageRoot(root)).toBe(root)
  })

  it('fails with a message naming where it looked', () => {
    expect(() => findPackageRoot(join(tmp, 'nowhere'))).toThrow(/cannot find agent-sandbox's package files .* above .*nowhere/)
  })
})

/** Files shipped with the package: the base image context and the templates. */
import {existsSync} from 'node:fs'
import {dirname, join} from 'node:path'
import {fileURLToPath} from 'node:url'

/**
 * The package's root: the nearest directory at or above `from` that holds
 * package.json and base-image/. This module runs from src/lib (tests),
 * dist/lib, and inside the fast path's bundle (dist/cli/fast.cjs), so it looks
 * rather than counting levels.
 */
export function findPackageRoot(from: string): string {
  for (let dir = from; ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json')) && existsSync(join(dir, 'base-image'))) return dir
    if (dirname(dir) === dir) throw new Error(`cannot find agent-sandbox's package files (package.json, base-image/) above ${from}`)
  }
}

export const packageRoot = findPackageRoot(dirname(fileURLToPath(import.meta.url)))
export const baseImageDir = join(packageRoot, 'base-image')
export const templatesDir = join(packageRoot, 'templates')
/** The seccomp profile of a sandbox with nested containers (docs/security.md). */
export const nestedSeccompProfile = join(templatesDir, 'seccomp-nested.json')
/** The seccomp profile of every other sandbox: socket families limited (docs/security.md). */
export const defaultSeccompProfile = join(templatesDir, 'seccomp-default.json')

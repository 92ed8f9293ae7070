/**
 * Packages (and node:https) that a command loads only when it needs them, all
 * through this one function. The CLI's fast path runs as code compiled through
 * a V8 code cache (bin/compile-cache.cjs), and node 20 cannot import() from such
 * code without an experimental flag: the loader then provides an importer of its
 * own, defined in ordinary CommonJS, under this symbol. Everywhere else this is
 * a plain import(). scripts/bundle-fast.mjs refuses a bundle with any other import().
 */
import {createRequire} from 'node:module'

const IMPORTER = Symbol.for('agent-sandbox.import')

type Importer = (specifier: string) => Promise<unknown>

export function lazyImport<T>(specifier: string): Promise<T> {
  const importer = (globalThis as {[IMPORTER]?: Importer})[IMPORTER]
  return (importer ? importer(specifier) : import(specifier)) as Promise<T>
}

/**
 * A node built-in, loaded synchronously where it is first needed rather than
 * at import (node:crypto costs 3 ms, node:tls 5 ms). process.getBuiltinModule
 * (node 20.16+) costs nothing; createRequire about 1.5 ms on older 20.x.
 */
export function builtin<T>(specifier: string): T {
  return ((process.getBuiltinModule?.(specifier) as T | undefined) ?? createRequire(import.meta.url)(specifier)) as T
}

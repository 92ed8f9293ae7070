/**
 * Hex digests, with node:crypto loaded on first use: `list` and the engine
 * client never hash, and loading the module costs them about 3 ms at start-up
 * (docs/PERFORMANCE.md).
 */
import type * as Crypto from 'node:crypto'
import {createRequire} from 'node:module'

let crypto: typeof Crypto | undefined

export function hexDigest(algorithm: 'md5' | 'sha256', text: string): string {
  // process.getBuiltinModule (node 20.16+) costs nothing; createRequire about 1.5 ms on older 20.x.
  crypto ??= (process.getBuiltinModule?.('node:crypto') as typeof Crypto | undefined) ?? (createRequire(import.meta.url)('node:crypto') as typeof Crypto)
  return crypto.createHash(algorithm).update(text).digest('hex')
}

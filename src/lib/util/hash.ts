/**
 * Hex digests, with node:crypto loaded on first use: `list` and the engine
 * client never hash (docs/PERFORMANCE.md).
 */
import type * as Crypto from 'node:crypto'
import {builtin} from './lazy-import.js'

export function hexDigest(algorithm: 'md5' | 'sha256', text: string | Uint8Array): string {
  return builtin<typeof Crypto>('node:crypto').createHash(algorithm).update(text).digest('hex')
}

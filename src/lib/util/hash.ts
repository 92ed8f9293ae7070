/**
 * Hex digests, in JavaScript (@noble/hashes, inside the CLI's bundle) rather than
 * node:crypto: loading node:crypto costs about 3.5 ms (it pulls in node's streams),
 * a tenth of a warm `exec`, and every command hashes something small: the MD5 that
 * names a workspace's containers, the SHA-256 of the trust store's few files
 * (docs/PERFORMANCE.md).
 */
import {md5} from '@noble/hashes/legacy'
import {sha256} from '@noble/hashes/sha2'
import {bytesToHex, utf8ToBytes} from '@noble/hashes/utils'

const bytes = (data: string | Uint8Array) => (typeof data === 'string' ? utf8ToBytes(data) : data)

/** MD5 of a string's UTF-8 bytes, in hex. */
export function md5Hex(text: string): string {
  return bytesToHex(md5(bytes(text)))
}

export function sha256Hex(data: string | Uint8Array): string {
  return bytesToHex(sha256(bytes(data)))
}

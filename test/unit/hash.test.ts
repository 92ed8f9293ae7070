import {createHash} from 'node:crypto'
import {describe, expect, it} from 'vitest'
import {md5Hex, sha256Hex} from '../../src/lib/util/hash.js'

describe('md5Hex', () => {
  // Every container, volume and image name comes from it: it must be node's MD5 of the UTF-8 bytes.
  it.each(['', '/', '/home/dev/src/app', '/tmp/naïve €/日本語/😀', 'x'.repeat(55), 'y'.repeat(56), 'z'.repeat(64), 'w'.repeat(1000), 'feat/🙂-branch'])(
    'is node:crypto MD5 of %j',
    (text) => {
      expect(md5Hex(text)).toBe(createHash('md5').update(text, 'utf8').digest('hex'))
    },
  )

  it('matches node:crypto for 500 random strings of every length', () => {
    let seed = 42
    const rand = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31
    for (let i = 0; i < 500; i++) {
      const text = Array.from({length: Math.floor(rand() * 200)}, () => String.fromCodePoint(Math.floor(rand() * 0x2fff))).join('')
      expect(md5Hex(text), JSON.stringify(text)).toBe(createHash('md5').update(text, 'utf8').digest('hex'))
    }
  })
})

describe('sha256Hex', () => {
  it('is node:crypto SHA-256 of strings and bytes', () => {
    expect(sha256Hex('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad')
    expect(sha256Hex(new Uint8Array([1, 2, 3]))).toBe(createHash('sha256').update(new Uint8Array([1, 2, 3])).digest('hex'))
  })
})

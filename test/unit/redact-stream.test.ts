import {describe, expect, it} from 'vitest'
import {StreamRedactor} from '../../src/cli/redact-stream.js'

/** Feed BYTES to a redactor in chunks cut at every offset in CUTS; return what it wrote. */
function through(secrets: string[], bytes: Buffer, cuts: number[]): string {
  let out = ''
  const r = new StreamRedactor(secrets, (text) => (out += text))
  let at = 0
  for (const cut of [...cuts, bytes.length]) {
    r.push(bytes.subarray(at, cut))
    at = cut
  }
  r.end()
  return out
}

describe('StreamRedactor', () => {
  const text = 'naïve € ok'
  const bytes = Buffer.from(text)

  it('keeps a character whose bytes are split between chunks, with and without secrets', () => {
    for (let cut = 1; cut < bytes.length; cut++) {
      expect(through([], bytes, [cut]), `cut at byte ${cut}`).toBe(text)
      expect(through(['s3cret'], bytes, [cut]), `cut at byte ${cut}`).toBe(text)
    }
    // Every byte on its own.
    expect(through(['s3cret'], bytes, Array.from({length: bytes.length - 1}, (_, i) => i + 1))).toBe(text)
  })

  it('masks a secret split between chunks, next to multi-byte characters', () => {
    const input = Buffer.from('€ token=s3cret € done')
    for (let cut = 1; cut < input.length; cut++) {
      const out = through(['s3cret'], input, [cut])
      expect(out, `cut at byte ${cut}`).not.toContain('s3cret')
      expect(out).toContain('€ token=')
      expect(out.endsWith(' € done')).toBe(true)
    }
  })
})

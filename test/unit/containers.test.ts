import {describe, expect, it} from 'vitest'
import {demuxToText, labelFilters} from '../../src/lib/engine/containers.js'

function frame(stream: 0 | 1 | 2, text: string): Buffer {
  const body = Buffer.from(text, 'utf8')
  const header = Buffer.alloc(8)
  header[0] = stream
  header.writeUInt32BE(body.length, 4)
  return Buffer.concat([header, body])
}

describe('demuxToText', () => {
  it('strips the 8-byte headers of framed stdout and stderr', () => {
    const buffer = Buffer.concat([frame(1, 'hello '), frame(2, 'wörld\n'), frame(1, 'done')])
    expect(demuxToText(buffer)).toBe('hello wörld\ndone')
  })

  it('handles an empty frame and an empty buffer', () => {
    expect(demuxToText(Buffer.concat([frame(1, ''), frame(1, 'x')]))).toBe('x')
    expect(demuxToText(Buffer.alloc(0))).toBe('')
  })

  it('returns unframed (TTY) output as it is', () => {
    expect(demuxToText(Buffer.from('plain log line\nsecond line\n'))).toBe('plain log line\nsecond line\n')
    expect(demuxToText(Buffer.from('short'))).toBe('short')
  })

  it('returns the raw text when a frame claims more bytes than there are', () => {
    const truncated = frame(1, 'abcdef').subarray(0, 10)
    expect(demuxToText(truncated)).toBe(truncated.toString('utf8'))
  })

  it('returns the raw text when trailing bytes do not form a frame', () => {
    const buffer = Buffer.concat([frame(1, 'ok'), Buffer.from('xyz')])
    expect(demuxToText(buffer)).toBe(buffer.toString('utf8'))
  })

  it('does not mistake text whose first byte is not a stream id for a frame', () => {
    const text = Buffer.from('\u0003abcdefgh-more-text')
    expect(demuxToText(text)).toBe(text.toString('utf8'))
  })
})

describe('labelFilters', () => {
  it('renders key=value, and a bare key for an empty value', () => {
    expect(labelFilters({'dev.agent-sandbox.managed': 'true', 'dev.agent-sandbox.branch': '', a: 'b=c'})).toEqual([
      'dev.agent-sandbox.managed=true',
      'dev.agent-sandbox.branch',
      'a=b=c',
    ])
    expect(labelFilters({})).toEqual([])
  })
})

/**
 * Masks secret values in streamed output. A secret may be split across two
 * chunks, so up to (longest secret - 1) characters are held back until the
 * next chunk or the end. Bytes are decoded as one UTF-8 stream, so a character
 * split between two chunks is not garbled.
 */
import {StringDecoder} from 'node:string_decoder'
import {redact} from './output.js'

export class StreamRedactor {
  private pending = ''
  private readonly hold: number
  private readonly decoder = new StringDecoder('utf8')

  constructor(
    private readonly secrets: readonly string[],
    private readonly write: (text: string) => void,
  ) {
    this.hold = Math.max(0, ...secrets.map((s) => s.length - 1))
  }

  push(chunk: Buffer | string): void {
    const decoded = typeof chunk === 'string' ? chunk : this.decoder.write(chunk)
    if (this.secrets.length === 0) {
      if (decoded) this.write(decoded)
      return
    }
    const text = redact(this.pending + decoded, this.secrets)
    const cut = Math.max(0, text.length - this.hold)
    this.pending = text.slice(cut)
    if (cut > 0) this.write(text.slice(0, cut))
  }

  end(): void {
    const rest = this.pending + this.decoder.end()
    if (rest) this.write(this.secrets.length ? redact(rest, this.secrets) : rest)
    this.pending = ''
  }
}

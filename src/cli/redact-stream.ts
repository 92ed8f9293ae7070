/**
 * Masks secret values in streamed output. A secret may be split across two
 * chunks, so up to (longest secret - 1) bytes are held back until the next
 * chunk or the end.
 */
import {redact} from './output.js'

export class StreamRedactor {
  private pending = ''
  private readonly hold: number

  constructor(
    private readonly secrets: readonly string[],
    private readonly write: (text: string) => void,
  ) {
    this.hold = Math.max(0, ...secrets.map((s) => s.length - 1))
  }

  push(chunk: Buffer | string): void {
    if (this.secrets.length === 0) return this.write(chunk.toString())
    const text = redact(this.pending + chunk.toString(), this.secrets)
    const cut = Math.max(0, text.length - this.hold)
    this.pending = text.slice(cut)
    if (cut > 0) this.write(text.slice(0, cut))
  }

  end(): void {
    if (this.pending) this.write(redact(this.pending, this.secrets))
    this.pending = ''
  }
}

/** The writer of the gateway's request log (log.ts has its format): appends, rotating past a size with one old file kept. */
import {createWriteStream, renameSync, statSync, type WriteStream} from 'node:fs'
import {join} from 'node:path'
import {REQUEST_LOG, type RequestLogEntry} from './log.js'

export class RequestLog {
  private stream: WriteStream
  private written: number
  private readonly path: string
  constructor(
    stateDir: string,
    private readonly maxBytes: number,
    private readonly onError?: (message: string) => void,
    private readonly onRecord?: (line: string) => void,
  ) {
    this.path = join(stateDir, REQUEST_LOG)
    this.written = sizeOf(this.path)
    this.stream = this.open()
  }

  private open(): WriteStream {
    const s = createWriteStream(this.path, {flags: 'a', mode: 0o600})
    s.on('error', (e) => this.onError?.(`request log: ${e.message}`))
    return s
  }

  write(entry: RequestLogEntry): void {
    const line = `${JSON.stringify(entry)}\n`
    if (this.written + line.length > this.maxBytes) {
      this.stream.end()
      try {
        renameSync(this.path, `${this.path}.1`)
      } catch {
        // nothing to rotate
      }
      this.written = 0
      this.stream = this.open()
    }
    this.written += line.length
    this.stream.write(line)
    this.onRecord?.(line)
  }

  close(): void {
    this.stream.end()
  }
}

function sizeOf(path: string): number {
  try {
    return statSync(path).size
  } catch {
    return 0
  }
}

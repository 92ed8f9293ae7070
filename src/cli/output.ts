/** Results on stdout, stderr progress (ora spinners on a TTY, plain lines otherwise) and secret masking. */
import {writeSync} from 'node:fs'
import {ExitCode, isSandboxError} from '../lib/errors.js'
import type {Reporter} from '../lib/reporter.js'
import {inertText} from '../lib/util/inert-text.js'
import {lazyImport} from '../lib/util/lazy-import.js'

const touched = new Set<NodeJS.WriteStream>()

/**
 * process.stdout or process.stderr, noted as used. node builds each on first
 * use, loading its stream machinery (2 ms of a 30 ms command), so the command
 * layer asks for them only when it writes to them, and flushes only those.
 */
export function stdio(name: 'stdout' | 'stderr'): NodeJS.WriteStream {
  const stream = process[name]
  touched.add(stream)
  return stream
}

/** Resolves once everything written to the streams we used has been handed to the OS (process.exit drops what is queued). */
export async function flushOutput(): Promise<void> {
  await Promise.all(
    [...touched].map((stream) => new Promise<void>((resolve) => (stream.destroyed || stream.writableLength === 0 ? resolve() : stream.write('', () => resolve())))),
  )
}

/** stdout's reader went away (`agent-sandbox list | head -1`): the command ends as SIGPIPE would end it, silently. */
export class StdoutClosedError extends Error {
  readonly exitCode = 128 + 13
}

/** Set once a write had to queue: from then on every write queues behind it, so the output stays in order. */
let queued = false

/**
 * Write a result to stdout, synchronously and in full. Straight to file
 * descriptor 1: node's process.stdout loads its stream machinery first, 2 ms of
 * a 30 ms command (docs/PERFORMANCE.md). A non-blocking descriptor that is full
 * falls back to process.stdout, which queues (Command.run flushes before exit).
 */
export function writeStdout(text: string): void {
  let data = Buffer.from(text, 'utf8')
  while (data.length > 0 && !queued) {
    try {
      data = data.subarray(writeSync(1, data))
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code
      if (code === 'EPIPE') throw new StdoutClosedError('stdout was closed')
      if (code !== 'EAGAIN') throw error
      queued = true
    }
  }
  if (data.length > 0) stdio('stdout').write(data)
}

export function redact(text: string, secrets: readonly string[]): string {
  let out = text
  // Longest first, so that a secret containing another is masked whole.
  for (const secret of [...secrets].sort((a, b) => b.length - a.length)) {
    if (secret.length >= 4) out = out.split(secret).join('***')
  }
  return out
}

/**
 * A failure as the user sees it: one line on stderr and an exit code.
 * SandboxErrors carry both (and a hint); anything else is an unexpected failure.
 */
export function reportFailure(error: Error, secrets: readonly string[]): number {
  if (isSandboxError(error)) {
    const hint = error.hint ? ` (hint: ${error.hint})` : ''
    stdio('stderr').write(`agent-sandbox: error: ${inertText(redact(error.message, secrets))}${inertText(redact(hint, secrets))}\n`)
    if (process.env.AGENT_SANDBOX_DEBUG && error.cause) console.error(error.cause)
    return error.exitCode
  }
  stdio('stderr').write(`agent-sandbox: error: ${inertText(redact(error.message, secrets))}\n`)
  if (process.env.AGENT_SANDBOX_DEBUG) console.error(error)
  return ExitCode.failure
}

export function makeReporter(secrets: () => readonly string[]): Reporter {
  const write = (line: string) => stdio('stderr').write(`${inertText(redact(line, secrets()))}\n`)
  return {
    info: (message) => write(message),
    output: (chunk) => stdio('stderr').write(chunk),
    warn: (message) => write(`warning: ${message}`),
    async step(label, work) {
      if (!stdio('stderr').isTTY || process.env.CI) {
        write(`${label}…`)
        return work()
      }
      const {default: ora} = await lazyImport<typeof import('ora')>('ora')
      const spinner = ora({text: label, stream: stdio('stderr')}).start()
      try {
        const result = await work()
        spinner.succeed()
        return result
      } catch (error) {
        spinner.fail()
        throw error
      }
    },
  }
}

/** Ask yes/no on a TTY. Callers check for a TTY first and require a flag otherwise. */
export async function confirm(message: string): Promise<boolean> {
  const {confirm: ask} = await lazyImport<typeof import('@inquirer/prompts')>('@inquirer/prompts')
  return ask({message, default: false}, {output: stdio('stderr')})
}

export function isInteractive(): boolean {
  return Boolean(process.stdin.isTTY && stdio('stderr').isTTY)
}

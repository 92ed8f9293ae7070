/** stderr progress (ora spinners on a TTY, plain lines otherwise) and secret masking. */
import {ExitCode, isSandboxError} from '../lib/errors.js'
import type {Reporter} from '../lib/reporter.js'
import {lazyImport} from '../lib/util/lazy-import.js'

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
    process.stderr.write(`agent-sandbox: error: ${redact(error.message, secrets)}${redact(hint, secrets)}\n`)
    if (process.env.AGENT_SANDBOX_DEBUG && error.cause) console.error(error.cause)
    return error.exitCode
  }
  process.stderr.write(`agent-sandbox: error: ${redact(error.message, secrets)}\n`)
  if (process.env.AGENT_SANDBOX_DEBUG) console.error(error)
  return ExitCode.failure
}

export function makeReporter(secrets: () => readonly string[]): Reporter {
  const write = (line: string) => process.stderr.write(`${redact(line, secrets())}\n`)
  const tty = Boolean(process.stderr.isTTY) && !process.env.CI
  return {
    info: (message) => write(message),
    warn: (message) => write(`warning: ${message}`),
    async step(label, work) {
      if (!tty) {
        write(`${label}…`)
        return work()
      }
      const {default: ora} = await lazyImport<typeof import('ora')>('ora')
      const spinner = ora({text: label, stream: process.stderr}).start()
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
  return ask({message, default: false}, {output: process.stderr})
}

export function isInteractive(): boolean {
  return Boolean(process.stdin.isTTY && process.stderr.isTTY)
}

/**
 * The command layer's shared base: it builds the engine and the reporter once,
 * and is the only place where SandboxErrors become messages and exit codes.
 */
import {Command, Errors, Flags, type Interfaces} from '@oclif/core'
import type {Engine} from '../lib/engine/index.js'
import {ExitCode, isSandboxError} from '../lib/errors.js'
import type {Reporter} from '../lib/reporter.js'
import {makeReporter, redact, reportFailure} from './output.js'

export abstract class BaseCommand extends Command {
  static override baseFlags = {
    engine: Flags.string({
      description: 'container engine to use (default: detected from the socket; env AGENT_SANDBOX_ENGINE)',
      options: ['docker', 'podman'],
      helpGroup: 'GLOBAL',
    }),
  }

  private enginePromise?: Promise<Engine>
  private reporterInstance?: Reporter
  /** Values that must never be printed (tokens, secret env values). */
  protected readonly secrets: string[] = []

  protected async engine(flags?: {engine?: string}): Promise<Engine> {
    this.enginePromise ??= import('../lib/engine/index.js').then(({connectEngine}) => connectEngine({engine: flags?.engine}))
    return this.enginePromise
  }

  protected get reporter(): Reporter {
    this.reporterInstance ??= makeReporter(() => this.secrets)
    return this.reporterInstance
  }

  /** Print a result on stdout, with secrets masked. */
  protected out(text: string): void {
    process.stdout.write(`${redact(text, this.secrets)}\n`)
  }

  protected outJson(value: unknown): void {
    this.out(JSON.stringify(value, null, 2))
  }

  protected override async catch(error: Interfaces.CommandError): Promise<unknown> {
    // this.exit(n) is an ExitError: the command chose its exit code (e.g. exec passing one through).
    if (error instanceof Errors.ExitError) return super.catch(error)
    if (isSandboxError(error)) return this.exit(reportFailure(error, this.secrets))
    if (error instanceof Errors.CLIError) {
      // oclif's own parse errors: unknown flags, bad option values, missing arguments.
      const message = error.message
        .split('\n')
        .filter((line) => !/See more help/.test(line))
        .join(' ')
        .replace(/\s+/g, ' ')
        .trim()
      process.stderr.write(`agent-sandbox: error: ${message} (hint: see --help)\n`)
      return this.exit(ExitCode.usage)
    }
    return this.exit(reportFailure(error, this.secrets))
  }
}

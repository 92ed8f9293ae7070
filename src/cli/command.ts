/**
 * The command layer's base class. A command (src/commands/<name>.ts) declares
 * its summary, examples, flags and arguments as static fields and implements
 * `run(input)`; that class is the command's only definition.
 *
 * `Command.run(argv)` is the one way a command runs: our parser
 * (src/cli/parse.ts), then the handler, then the exit code. The dispatcher
 * (src/cli/main.ts) calls it for every command line that is not a request for
 * help; oclif reads the same static fields for help and for its manifest, and
 * would call the same `run` (its `Command.run(argv, config)` convention). This
 * is also the only place where errors become messages and exit codes.
 */
import {inertText} from '../lib/util/inert-text.js'
import type {Engine} from '../lib/engine/index.js'
import {InterruptedError} from '../lib/errors.js'
import type {Reporter} from '../lib/reporter.js'
import type {Context} from '../lib/context.js'
import {watchInterrupts, type Interrupts} from './interrupt.js'
import {launchRefresher} from './refresher.js'
import {flushOutput, makeReporter, redact, reportFailure, StdoutClosedError, writeStdout} from './output.js'
import {Flags, type ArgSet, type ArgValues, type FlagSet, type FlagValues} from './params.js'
import {parseCommandLine} from './parse.js'

/** Flags every command takes. */
export const baseFlags = {
  engine: Flags.string({
    description: 'container engine to use (default: detected from the socket; env AGENT_SANDBOX_ENGINE)',
    options: ['docker', 'podman'],
    helpGroup: 'GLOBAL',
  }),
}

/** What a command's `run` receives: its arguments and flags, typed from its own definitions. */
export interface Input<C extends {flags: FlagSet; args: ArgSet}> {
  args: ArgValues<C['args']>
  flags: FlagValues<C['flags'] & typeof baseFlags>
  /** Every positional (for commands that are not strict). */
  argv: string[]
  /** The command after `--` (exec, run), or what a pass-through command passes on; undefined when there was no `--`. */
  command: string[] | undefined
}

export abstract class Command {
  /** Set by the dispatcher from the command's file name (`firewall:allow`), as oclif does. */
  static id = ''
  static summary = ''
  static description?: string
  static examples: string[] = []
  static flags: FlagSet = {}
  static args: ArgSet = {}
  static baseFlags = baseFlags
  static strict = true
  static hidden = false
  static aliases: string[] = []
  /** Takes a command after `--`. */
  static takesCommand = false
  /** Passes what follows its own flags through (claude, codex: the agent's arguments, in `command`). */
  static passThrough = false
  /**
   * Hands the library an AbortSignal that Ctrl-C, SIGTERM and SIGHUP abort
   * (src/cli/interrupt.ts): for commands that make containers or stream a
   * session, which then clean up. Other commands keep the signals' defaults.
   */
  static interruptible = false

  /**
   * Parse `argv`, run the command, and resolve to its exit code once its output
   * is flushed; never throws.
   * oclif passes its config as a second argument, and reads no result: then the code is the process's.
   */
  static async run(this: CommandClass, argv: string[], oclifConfig?: unknown): Promise<number> {
    const command = new this()
    if (this.interruptible) command.interrupts = watchInterrupts()
    let code: number
    try {
      const parsed = parseCommandLine(
        {id: this.id, flags: {...this.baseFlags, ...this.flags}, args: this.args, strict: this.strict, takesCommand: this.takesCommand, passThrough: this.passThrough},
        argv,
      )
      code = (await command.run(parsed as Input<{flags: FlagSet; args: ArgSet}>)) ?? 0
    } catch (error) {
      // Interrupted or cut off: silent, as a shell is; the exit code (128+n) says it.
      if (error instanceof StdoutClosedError || error instanceof InterruptedError) code = error.exitCode
      else code = reportFailure(error instanceof Error ? error : new Error(String(error)), command.secrets)
    } finally {
      command.interrupts?.dispose()
    }
    // The caller exits at once: what we wrote must reach a piped reader first.
    await flushOutput()
    if (oclifConfig !== undefined) process.exitCode = code
    return code
  }

  /** Values that must never be printed (tokens, secret env values). */
  protected readonly secrets: string[] = []
  /** Set for interruptible commands while they run. */
  protected interrupts?: Interrupts
  private enginePromise?: Promise<Engine>
  private reporterInstance?: Reporter

  /** The command's work; resolves to its exit code (0 when it returns nothing). */
  abstract run(input: Input<{flags: FlagSet; args: ArgSet}>): Promise<number | void>

  protected engine(flags: {engine?: string}): Promise<Engine> {
    this.enginePromise ??= import('../lib/engine/index.js').then(({connectEngine}) => connectEngine({engine: flags.engine}))
    return this.enginePromise
  }

  /** The library's context: the engine, progress on stderr, and (interruptible commands) the abort signal. */
  protected async context(flags: {engine?: string}): Promise<Context> {
    const {interrupts} = this
    return {
      engine: await this.engine(flags),
      reporter: this.reporter,
      signal: interrupts?.signal,
      foreground: interrupts && (() => interrupts.foreground()),
      launchRefresher,
    }
  }

  protected get reporter(): Reporter {
    this.reporterInstance ??= makeReporter(() => this.secrets)
    return this.reporterInstance
  }

  /** Print a result on stdout, with secrets masked and control characters made inert (inert-text.ts). */
  protected out(text: string): void {
    writeStdout(`${inertText(redact(text, this.secrets))}\n`)
  }

  protected outJson(value: unknown): void {
    this.out(JSON.stringify(value, null, 2))
  }
}

export type CommandClass = (new () => Command) & Omit<typeof Command, 'prototype'>

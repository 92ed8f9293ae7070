/**
 * Typed errors. Library code throws subclasses of SandboxError; only the
 * command layer turns them into a one-line message, a hint and an exit code.
 */

/** Exit codes, as documented in the README. */
export const ExitCode = {
  failure: 1,
  usage: 2,
  engine: 3,
  notInitialised: 4,
  build: 5,
  notReady: 6,
  conflict: 7,
  timeout: 124,
  interrupted: 130,
} as const

export interface SandboxErrorOptions {
  cause?: unknown
  hint?: string
}

export class SandboxError extends Error {
  readonly hint?: string
  readonly exitCode: number = ExitCode.failure

  constructor(message: string, options: SandboxErrorOptions = {}) {
    super(message, {cause: options.cause})
    this.name = new.target.name
    this.hint = options.hint
  }
}

/** Bad input from the user: a path, a flag value, a name. */
export class UsageError extends SandboxError {
  override readonly exitCode: number = ExitCode.usage
}

/** A config file or value that does not validate. */
export class ConfigError extends SandboxError {
  override readonly exitCode: number = ExitCode.usage
}

export type EngineFailure = 'socket-not-found' | 'permission-denied' | 'connection-refused' | 'tls' | 'unhealthy' | 'unsupported'

/** The container engine cannot be reached or does not answer. */
export class EngineError extends SandboxError {
  override readonly exitCode: number = ExitCode.engine
  readonly kind: EngineFailure

  constructor(kind: EngineFailure, message: string, options: SandboxErrorOptions = {}) {
    super(message, options)
    this.kind = kind
  }
}

/** The workspace has no .agent-sandbox/, or an image it needs is missing. */
export class NotInitialisedError extends SandboxError {
  override readonly exitCode: number = ExitCode.notInitialised
}

export class ImageMissingError extends SandboxError {
  override readonly exitCode: number = ExitCode.notInitialised
}

/** An image build failed; the message carries the engine's own error. */
export class BuildError extends SandboxError {
  override readonly exitCode: number = ExitCode.build
}

/** The container did not become ready (firewall or set-up failed). */
export class NotReadyError extends SandboxError {
  override readonly exitCode: number = ExitCode.notReady
}

/** Something already exists (e.g. .agent-sandbox/ without --force). */
export class ConflictError extends SandboxError {
  override readonly exitCode: number = ExitCode.conflict
}

/** A subprocess failed: carries the command, its exit code and stderr. */
export class CommandFailedError extends SandboxError {
  readonly command: string
  readonly code: number | undefined
  readonly stderr: string

  constructor(command: string, code: number | undefined, stderr: string, options: SandboxErrorOptions = {}) {
    const last = stderr.trim().split('\n').filter(Boolean).pop() ?? ''
    super(`${command} failed${code === undefined ? '' : ` (exit ${code})`}${last ? `: ${last}` : ''}`, options)
    this.command = command
    this.code = code
    this.stderr = stderr
  }
}

export function isSandboxError(error: unknown): error is SandboxError {
  return error instanceof SandboxError
}

/** OpenSSL's certificate verification codes and node's TLS errors, as node reports them in `code`. Pure. */
export function isTlsFailure(code: unknown): boolean {
  return typeof code === 'string' && /^ERR_(TLS|SSL)_|CERT|^UNABLE_TO_|SELF_SIGNED|^INVALID_CA$|^HOSTNAME_MISMATCH$|^PATH_LENGTH_EXCEEDED$|^INVALID_PURPOSE$/.test(code)
}

/**
 * The command was interrupted (Ctrl-C, SIGTERM, SIGHUP, or its stdout's reader
 * went away). The command layer aborts the library's AbortSignal with one of
 * these as the reason; the library cleans up what it was making and rethrows
 * it. Silent, as a shell is: the exit code (128+n) says what happened.
 */
export class InterruptedError extends SandboxError {
  override readonly exitCode: number
  readonly signal: string

  constructor(signal: string, exitCode: number) {
    super(`interrupted by ${signal}`)
    this.signal = signal
    this.exitCode = exitCode
  }
}

/** Throw the reason an AbortSignal was aborted with (an InterruptedError from the command layer). */
export function throwIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw abortReason(signal)
}

/** The reason as an error: the command layer's InterruptedError, or one made for a caller's own abort(). */
export function abortReason(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new InterruptedError('abort', ExitCode.interrupted)
}

/** `work`, or the signal's reason as soon as it is aborted (work still in flight goes on; the caller waits for it). */
export function untilAborted<T>(signal: AbortSignal | undefined, work: Promise<T>): Promise<T> {
  if (!signal) return work
  throwIfAborted(signal)
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(abortReason(signal))
    signal.addEventListener('abort', onAbort, {once: true})
    work.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort))
  })
}

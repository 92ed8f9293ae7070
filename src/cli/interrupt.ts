/**
 * Signals belong to the command layer (the library never traps them). While a
 * command runs, SIGINT, SIGTERM and SIGHUP abort the AbortSignal it hands the
 * library, with an InterruptedError (128+n) as the reason: the library removes
 * what it was making and rethrows it. A second signal ends the process at once,
 * as a second Ctrl-C does in most tools. While a child owns the terminal (an
 * interactive shell), Ctrl-C and Ctrl-\ are the child's: we ignore them.
 */
import {InterruptedError} from '../lib/errors.js'
import {endChildren, signalExitCode} from '../lib/util/children.js'

const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const
/** The keys a terminal turns into signals for the foreground process group. */
const TERMINAL_SIGNALS = new Set(['SIGINT', 'SIGQUIT'])

export interface Interrupts {
  readonly signal: AbortSignal
  /** Abort as if `signal` had come (a stdout reader that went away is SIGPIPE). */
  abort(signal: string): void
  /** A child takes over the terminal; the function returned gives it back. */
  foreground(): () => void
  dispose(): void
}

export function watchInterrupts(): Interrupts {
  const controller = new AbortController()
  let childOwnsTerminal = 0
  const abort = (signal: string) => {
    if (!controller.signal.aborted) controller.abort(new InterruptedError(signal, signalExitCode(signal)))
  }
  const handlers = SIGNALS.map((signal) => {
    const handler = () => {
      if (childOwnsTerminal > 0 && TERMINAL_SIGNALS.has(signal)) return
      if (controller.signal.aborted) {
        // The second one: now. Children still running end with us ('exit' below).
        process.exit(signalExitCode(signal))
      }
      abort(signal)
    }
    process.on(signal, handler)
    return [signal, handler] as const
  })
  const ignore = () => {}
  process.on('exit', endChildren)
  return {
    signal: controller.signal,
    abort,
    foreground() {
      if (childOwnsTerminal++ === 0) process.on('SIGQUIT', ignore)
      return () => {
        if (--childOwnsTerminal === 0) process.removeListener('SIGQUIT', ignore)
      }
    },
    dispose() {
      for (const [signal, handler] of handlers) process.removeListener(signal, handler)
      process.removeListener('SIGQUIT', ignore)
      process.removeListener('exit', endChildren)
    },
  }
}

/**
 * The child processes the library has running. The library never hooks the
 * process's exit or its signals: the command layer calls endChildren when it
 * exits (src/cli/interrupt.ts), so our children do not outlive us. Also the
 * exit code a signal means, for a child's end and for our own interrupts. No
 * node:child_process here: the command layer loads this on every command.
 */
import {constants} from 'node:os'

interface Killable {
  kill(signal?: NodeJS.Signals): boolean
}

export const liveChildren = new Set<Killable>()

export function endChildren(): void {
  for (const child of liveChildren) child.kill('SIGTERM')
}

/** A shell's exit code for a process ended by SIGNAL: 128 + its number (SIGINT: 130, SIGKILL: 137, SIGPIPE: 141). */
export function signalExitCode(signal: string): number {
  return 128 + (constants.signals[signal as NodeJS.Signals] ?? 0)
}

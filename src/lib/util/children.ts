/**
 * The child processes the library has running. The library never hooks the
 * process's exit or its signals: the command layer calls endChildren when it
 * exits (src/cli/interrupt.ts), so our children do not outlive us. No
 * node:child_process here: the command layer loads this on every command.
 */
interface Killable {
  kill(signal?: NodeJS.Signals): boolean
}

export const liveChildren = new Set<Killable>()

export function endChildren(): void {
  for (const child of liveChildren) child.kill('SIGTERM')
}

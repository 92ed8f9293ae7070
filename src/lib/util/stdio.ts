/**
 * Output helpers that load nothing: the fast path's warm commands use them, and
 * must not pay for node:child_process (proc.ts).
 */

/**
 * Resolves once everything written so far to our stdout and stderr has been
 * handed to the OS: writes to a pipe are asynchronous, and process.exit drops
 * what is still queued.
 */
export async function flushStdio(): Promise<void> {
  await Promise.all(
    [process.stdout, process.stderr].map(
      (stream) =>
        new Promise<void>((resolve) => {
          if (stream.destroyed || stream.writableLength === 0) resolve()
          else stream.write('', () => resolve())
        }),
    ),
  )
}

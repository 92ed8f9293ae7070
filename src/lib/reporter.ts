/**
 * Progress and warnings from library code. The command layer supplies one that
 * draws spinners on stderr; the library API defaults to silence.
 */
export interface Reporter {
  info(message: string): void
  warn(message: string): void
  /** Run `work` under a progress label (a spinner on a TTY, a line otherwise). */
  step<T>(label: string, work: () => Promise<T>): Promise<T>
  /** Raw output of a subprocess the user watches (an image build's log). */
  output(chunk: Buffer): void
}

export const silentReporter: Reporter = {
  info() {},
  warn() {},
  step: (_label, work) => work(),
  output() {},
}

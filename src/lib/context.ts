/**
 * What every library call gets first: the engine, where progress goes, and how
 * the caller says stop. Library functions take `(ctx, ws, opts)` (or `(ctx,
 * opts)` when there is no workspace). The command layer builds one per command
 * (src/cli/command.ts); the SandboxManager API builds its own.
 */
import type {Engine} from './engine/index.js'
import type {RefresherLauncher} from './github/refresher.js'
import type {Reporter} from './reporter.js'

export interface Context {
  engine: Engine
  reporter?: Reporter
  env?: NodeJS.ProcessEnv
  /**
   * Aborted when the caller gives up (the command layer: Ctrl-C, SIGTERM). Work
   * that makes containers removes what it made, then throws the signal's reason.
   */
  signal?: AbortSignal
  /** Called when a child process takes over the terminal (an interactive shell); returns the function that gives it back. */
  foreground?: () => () => void
  /** Starts a sandbox's GitHub App token refresher when no daemon runs (the CLI's `token-daemon`); without it, none is started. */
  launchRefresher?: RefresherLauncher
}

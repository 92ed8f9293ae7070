import {Flags} from '../cli/params.js'
import {Command, type Input} from '../cli/command.js'
import {ConflictError} from '../lib/errors.js'
import {claimDaemonPid, releasePid, runRefreshLoop} from '../lib/github/refresher.js'
import {daemonPidPath, readPid, refresherAlive, tokenPaths} from '../lib/github/token-store.js'

export default class TokenDaemon extends Command {
  static override summary = 'Keep the GitHub App tokens of every running sandbox fresh (foreground; for a user systemd service).'
  static override description =
    'Renews each sandbox\'s installation token github.refreshMarginSeconds before it expires, keeping it on the host and handing it to the sandbox\'s egress gateway (the sandbox itself holds only a surrogate, in /run/secrets/ghapp_token). Sandboxes are found by the label dev.agent-sandbox.ghapp=1. Without a daemon, `start` spawns one refresher per sandbox instead. See docs/github-app.md.'
  static override examples = ['<%= config.bin %> token-daemon', 'systemctl --user enable --now agent-sandbox-token-daemon']
  static override flags = {
    container: Flags.string({description: 'refresh only this sandbox and exit when it is gone (what `start` spawns)', hidden: true}),
  }

  async run({flags}: Input<typeof TokenDaemon>): Promise<number | void> {
    const env = process.env
    let pidFile: string
    if (flags.container) {
      pidFile = tokenPaths(flags.container, env).pid
      const holder = readPid(pidFile)
      // `start` writes our pid before we run; another live pid means a duplicate.
      if (holder && holder !== process.pid && refresherAlive(holder)) return
    } else {
      pidFile = daemonPidPath(env)
      const holder = claimDaemonPid(env)
      if (holder) throw new ConflictError(`a token daemon is already running (pid ${holder})`, {hint: `stop it first, or leave it running (pid file ${pidFile})`})
    }
    const engine = await this.engine(flags)
    const controller = new AbortController()
    const log = (line: string) => process.stderr.write(`${new Date().toISOString()} ${line}\n`)
    // Exit at once, even in the middle of a request: every write is a rename,
    // so nothing is left half-written, and `rm` waits for us before it deletes
    // the token directory (a late write must not bring it back).
    const stop = (signal: string) => {
      controller.abort()
      releasePid(pidFile)
      log(`stopped (${signal})`)
      process.exit(0)
    }
    process.once('SIGTERM', () => stop('SIGTERM'))
    process.once('SIGINT', () => stop('SIGINT'))
    log(flags.container ? `refresher for ${flags.container} started (pid ${process.pid})` : `token daemon started (pid ${process.pid})`)
    try {
      await runRefreshLoop({engine, env, container: flags.container, signal: controller.signal, log})
    } finally {
      releasePid(pidFile)
      log('stopped')
    }
  }
}

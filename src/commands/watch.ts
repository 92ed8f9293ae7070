import {Command, type Input} from '../cli/command.js'
import {Flags} from '../cli/params.js'
import {watchJson, watchScreen} from '../cli/watch.js'
import {userWatchNotify} from '../lib/config/layers.js'

export default class Watch extends Command {
  static override summary = 'Watch every sandbox on the engine: its state and resources, its requests as they happen, pending approvals and pushes to review.'
  static override description =
    "A terminal UI over every sandbox: name, repository, mode and branch, state, uptime, CPU and memory; each firewalled sandbox's requests as its egress gateway logs them (refused ones highlighted); the pending approvals (as firewall pending) and the pushes the push gate kept (as review). Keys act on the selected entry: o allows a pending host once, t for 10 minutes, a for the sandbox's life, s also saves it to the workspace's config, d denies it; r (or Enter) opens the selected push's diff through your pager (review show); arrows or j/k select, q quits. No mouse needed, so it works over SSH; NO_COLOR turns colours off. With --json, or when stdout or stdin is not a terminal, the same events go to stdout, one JSON object a line, until Ctrl-C. --notify (or \"watchNotify\": true in your user config) notifies each new pending approval with notify-send, or the terminal bell where there is none."
  static override examples = ['<%= config.bin %> watch', '<%= config.bin %> watch --notify', '<%= config.bin %> watch --json | jq -c \'select(.type == "pending")\'']
  static override interruptible = true
  static override flags = {
    interval: Flags.integer({description: 'seconds between two looks at the engine (default 2)', min: 1}),
    json: Flags.boolean({description: 'print the events, one JSON object a line, instead of the terminal UI'}),
    notify: Flags.boolean({description: 'notify each new pending approval (notify-send, else the terminal bell); default: watchNotify in your user config'}),
  }

  async run({flags}: Input<typeof Watch>): Promise<number | void> {
    const ctx = await this.context(flags)
    const options = {
      signal: ctx.signal ?? new AbortController().signal,
      notify: flags.notify || userWatchNotify(),
      intervalMs: flags.interval === undefined ? undefined : flags.interval * 1000,
    }
    if (flags.json || !process.stdout.isTTY || !process.stdin.isTTY) {
      this.reporter.info('watching every sandbox on the engine: one JSON object a line; Ctrl-C ends')
      return watchJson(ctx, options)
    }
    return watchScreen(ctx, options)
  }
}

import {Flags} from '../../cli/params.js'
import {Command, type Input} from '../../cli/command.js'
import {branchFlag, pathArg} from '../../cli/flags.js'
import {formatRequest, requestLog} from '../../lib/network/firewall.js'
import {resolveWorkspace} from '../../lib/workspace.js'

export default class FirewallLog extends Command {
  static override summary = "Show the requests the sandbox's egress gateway let through or refused."
  static override description =
    'One line a request (a connection, for TLS passed through without interception): time, ALLOW or BLOCK, status, method, host and path (never the query), bytes of the response, and the allowlist entry or the reason; an allowed request ends with the grant that let it out ([grant: default], config, allow, allow for 10m until <time>, allow once, allow max-upload 5m (used N)). With --follow, new requests are shown as they come until you press Ctrl-C. With --json, one JSON object a line (its grant in the field grant).'
  static override examples = ['<%= config.bin %> firewall log', '<%= config.bin %> firewall log --follow', '<%= config.bin %> firewall log ~/src/app --json --lines 200']
  static override interruptible = true
  static override args = {path: pathArg}
  static override flags = {
    branch: branchFlag,
    follow: Flags.boolean({char: 'f', description: 'keep showing new requests as they come'}),
    json: Flags.boolean({description: 'print one JSON object a line'}),
    lines: Flags.integer({description: 'how many past requests to show first (default 50)', min: 0}),
  }

  async run({args, flags}: Input<typeof FirewallLog>): Promise<number | void> {
    const ws = resolveWorkspace(args.path)
    await requestLog(await this.context(flags), ws, {
      branch: flags.branch,
      follow: flags.follow,
      lines: flags.lines,
      onEntry: (e) => this.out(flags.json ? JSON.stringify(e) : formatRequest(e)),
    })
  }
}

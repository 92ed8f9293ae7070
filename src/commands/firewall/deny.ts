import {Args, Flags} from '../../cli/params.js'
import {Command, type Input} from '../../cli/command.js'
import {branchFlag} from '../../cli/flags.js'
import {splitDomainsAndPath} from '../../lib/network/firewall-allow.js'
import {denyPending} from '../../lib/network/pending.js'
import {resolveWorkspace} from '../../lib/workspace.js'

export default class FirewallDeny extends Command {
  static override summary = "Clear hosts from the sandbox's pending approvals (firewall pending): they stay refused."
  static override description =
    'The refusals of each host up to now leave the queue; a later one is pending again. Nothing is allowed or taken back: a host already allowed stays allowed. The cleared entries are kept on the host until the sandbox restarts. The workspace path, if given, comes last and must contain a "/" (e.g. ./app) or be an existing directory.'
  static override examples = ['<%= config.bin %> firewall deny tracker.example.com', '<%= config.bin %> firewall deny tracker.example.com ~/src/app --branch feat']
  static override strict = false
  static override args = {
    host: Args.required('host(s) to clear, then optionally the workspace path'),
  }

  static override flags = {
    branch: branchFlag,
    json: Flags.boolean({description: 'print the result as JSON'}),
  }

  async run({argv, flags}: Input<typeof FirewallDeny>): Promise<number | void> {
    const {domains, path} = splitDomainsAndPath(argv as string[])
    const ws = resolveWorkspace(path)
    const result = await denyPending(await this.context(flags), ws, domains, {branch: flags.branch})
    if (flags.json) return this.outJson(result)
    for (const h of result.cleared) this.out(`cleared ${h} from the pending approvals of ${result.container}`)
    for (const h of result.notPending) this.reporter.warn(`${h} was not pending in ${result.container}`)
  }
}

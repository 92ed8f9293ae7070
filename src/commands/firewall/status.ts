import {Flags} from '../../cli/params.js'
import {Command, type Input} from '../../cli/command.js'
import {branchFlag, pathArg} from '../../cli/flags.js'
import {firewallStatus, formatStatus} from '../../lib/network/firewall.js'
import {resolveWorkspace} from '../../lib/workspace.js'

export default class FirewallStatus extends Command {
  static override summary = "Show the running sandbox's firewall: rules in force, allowlist, recently denied DNS names and connections."
  static override description = 'Reads the state as root inside the sandbox (firewall-status). Denied packets reach the log about a second after they are refused.'
  static override examples = ['<%= config.bin %> firewall status', '<%= config.bin %> firewall status ~/src/app --json', '<%= config.bin %> firewall status --branch feat']
  static override args = {path: pathArg}
  static override flags = {
    branch: branchFlag,
    json: Flags.boolean({description: 'print the status as JSON'}),
  }

  async run({args, flags}: Input<typeof FirewallStatus>): Promise<number | void> {
    const ws = resolveWorkspace(args.path)
    const engine = await this.engine(flags)
    const status = await firewallStatus({engine, reporter: this.reporter}, ws, {branch: flags.branch})
    if (flags.json) return this.outJson(status)
    this.out(formatStatus(status))
  }
}

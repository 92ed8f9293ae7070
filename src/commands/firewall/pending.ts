import {Flags} from '../../cli/params.js'
import {Command, type Input} from '../../cli/command.js'
import {branchFlag, pathArg} from '../../cli/flags.js'
import {pendingApprovals} from '../../lib/network/pending.js'
import {resolveWorkspace} from '../../lib/workspace.js'

export default class FirewallPending extends Command {
  static override summary = "List the sandbox's requests that wait for the user's approval: hosts, methods and paths, and DNS names the firewall refused."
  static override description =
    'Derived from the egress gateway\'s request log and the firewall\'s DNS log: a host the allowlist refused, a method or path outside a host\'s httpRules, a DNS name dnsmasq refused. Each entry is the one line the agent got (its 403 body), ending in the command that grants it, run in the workspace; `firewall allow` grants it, `firewall deny` clears it. Most recent last. With --json, an object with the container and its entries (kind, host, method, path, count, first, last, line, command).'
  static override examples = ['<%= config.bin %> firewall pending', '<%= config.bin %> firewall pending ~/src/app --json', '<%= config.bin %> firewall pending --branch feat']
  static override args = {path: pathArg}
  static override flags = {
    branch: branchFlag,
    json: Flags.boolean({description: 'print the queue as JSON'}),
  }

  async run({args, flags}: Input<typeof FirewallPending>): Promise<number | void> {
    const ws = resolveWorkspace(args.path)
    const result = await pendingApprovals(await this.context(flags), ws, {branch: flags.branch})
    if (flags.json) return this.outJson(result)
    if (result.pending.length === 0) return this.out(`nothing waits for approval in ${result.container}`)
    for (const p of result.pending) this.out(p.count > 1 ? `${p.line} (${p.count} times, last ${p.last})` : p.line)
  }
}

import {Args, Flags} from '../../cli/params.js'
import {Command, type Input} from '../../cli/command.js'
import {branchFlag} from '../../cli/flags.js'
import {allowDomains, splitDomainsAndPath} from '../../lib/network/firewall.js'
import {resolveWorkspace} from '../../lib/workspace.js'

export default class FirewallAllow extends Command {
  static override summary = "Allow more domains in the running sandbox's firewall, at once and without a restart."
  static override description =
    'Each domain also allows its subdomains; *.example.com is accepted too. With --save the domains are also added to allowDomains in the workspace\'s .agent-sandbox/config.json (written on the host: the sandbox cannot write it); live additions last until the container restarts, saved ones apply from the next start. A stopped sandbox only gets the config change. The workspace path, if given, comes last and must contain a "/" (e.g. ./app) or be an existing directory.'
  static override examples = [
    '<%= config.bin %> firewall allow api.example.com',
    "<%= config.bin %> firewall allow pypi.org files.pythonhosted.org '*.example.org' --save",
    '<%= config.bin %> firewall allow api.example.com ~/src/app --branch feat',
  ]
  static override strict = false
  static override args = {
    domain: Args.required('domain(s) to allow, then optionally the workspace path'),
  }

  static override flags = {
    branch: branchFlag,
    json: Flags.boolean({description: 'print the result as JSON'}),
    save: Flags.boolean({description: "also add the domains to the workspace's .agent-sandbox/config.json"}),
  }

  async run({argv, flags}: Input<typeof FirewallAllow>): Promise<number | void> {
    const {domains, path} = splitDomainsAndPath(argv as string[])
    const ws = resolveWorkspace(path)
    const engine = await this.engine(flags)
    const result = await allowDomains({engine, reporter: this.reporter}, ws, domains, {branch: flags.branch, save: flags.save})
    if (!result.live) this.reporter.warn(`${result.container} is not running: only the config was changed; the domains apply from its next start`)
    if (flags.json) return this.outJson(result)
    for (const d of result.added) this.out(`allowed ${d} in ${result.container} (live)`)
    for (const d of result.alreadyAllowed) this.out(`${d} was already allowed in ${result.container}`)
    if (result.saved) {
      this.out(result.saved.added.length ? `saved ${result.saved.added.join(', ')} to ${result.saved.path}` : `${result.saved.path} already lists ${domains.join(', ')}`)
    }
  }
}

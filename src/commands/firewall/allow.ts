import {Args, Flags} from '../../cli/params.js'
import {Command, type Input} from '../../cli/command.js'
import {branchFlag} from '../../cli/flags.js'
import {allowDomains, splitDomainsAndPath} from '../../lib/network/firewall-allow.js'
import {describeRule} from '../../lib/network/gateway/rules.js'
import {resolveWorkspace} from '../../lib/workspace.js'
import {quoteArg} from '../../lib/util/shell-quote.js'

export default class FirewallAllow extends Command {
  static override summary = "Allow more domains (or more methods and paths of a domain) in the running sandbox's firewall, at once and without a restart."
  static override description =
    'Each domain also allows its subdomains; *.example.com is accepted too. --methods and --paths add an httpRule for each domain to the running egress gateway (over an exec into the gateway container, which the sandbox cannot reach): a host whose rules restrict it gets the rule besides them (e.g. PUT on the npm registry, which is read-only by default); a domain this command newly allows gets it as its only rule; a host already allowed without rules keeps every method and path. With --save the domains (and rules) are also added to the workspace\'s .agent-sandbox/config.json (written on the host: the sandbox cannot write it; a file you had trusted stays trusted, an untrusted one must be approved with `agent-sandbox trust` before rules that widen apply); live additions last until the container restarts, saved ones apply from the next start. A stopped sandbox only gets the config change. The workspace path, if given, comes last and must contain a "/" (e.g. ./app) or be an existing directory.'
  static override examples = [
    '<%= config.bin %> firewall allow api.example.com',
    "<%= config.bin %> firewall allow pypi.org files.pythonhosted.org '*.example.org' --save",
    '<%= config.bin %> firewall allow api.example.com ~/src/app --branch feat',
    '<%= config.bin %> firewall allow registry.npmjs.org --methods GET,HEAD,PUT --paths \'/@myorg/*\' --save',
  ]
  static override strict = false
  static override args = {
    domain: Args.required('domain(s) to allow, then optionally the workspace path'),
  }

  static override flags = {
    branch: branchFlag,
    json: Flags.boolean({description: 'print the result as JSON'}),
    methods: Flags.string({description: 'an httpRule for the domains: the methods it admits, comma-separated (e.g. GET,HEAD,PUT); with --paths, on those paths only'}),
    paths: Flags.string({description: "an httpRule for the domains: the path globs it admits, comma-separated (e.g. '/myorg/*'; * any characters, ? one); with --methods, for those methods only"}),
    save: Flags.boolean({description: "also add the domains (and the rule) to the workspace's .agent-sandbox/config.json"}),
  }

  async run({argv, flags}: Input<typeof FirewallAllow>): Promise<number | void> {
    const {domains, path} = splitDomainsAndPath(argv as string[])
    const ws = resolveWorkspace(path)
    const engine = await this.engine(flags)
    const rule = {methods: flags.methods, paths: flags.paths}
    const result = await allowDomains({engine, reporter: this.reporter}, ws, domains, {branch: flags.branch, save: flags.save, rule})
    if (!result.live) this.reporter.warn(`${result.container} is not running: only the config was changed; the domains apply from its next start`)
    if (flags.json) return this.outJson(result)
    for (const d of result.added) this.out(`allowed ${d} in ${result.container} (live)`)
    for (const d of result.alreadyAllowed) this.out(`${d} was already allowed in ${result.container}`)
    for (const {rule, action} of result.rules) {
      const what = describeRule(rule)
      if (action === 'added') this.out(`${result.live ? 'added' : 'planned'} ${what} in ${result.container}${result.live ? ' (live)' : ''}`)
      if (action === 'present') this.out(`${what} is already in force in ${result.container}`)
      if (action === 'unrestricted') this.reporter.warn(`${rule.host} is already allowed for every method and path in ${result.container}: the rule was not added (it would narrow it)`)
    }
    if (result.saved) {
      const saved = [...result.saved.added, ...result.saved.rules.map(describeRule)]
      this.out(saved.length ? `saved ${saved.join(', ')} to ${result.saved.path}` : `${result.saved.path} already lists ${domains.join(', ')}`)
      if (result.saved.needsTrust) this.reporter.warn(`${result.saved.path} now widens the sandbox and is not trusted: it applies from the next start once you approve it: agent-sandbox trust ${quoteArg(ws.path)}`)
    }
  }
}

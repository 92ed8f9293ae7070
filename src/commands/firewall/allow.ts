import {Args, Flags} from '../../cli/params.js'
import {Command, type Input} from '../../cli/command.js'
import {branchFlag} from '../../cli/flags.js'
import {allowDomains, parseForFlag, parseMaxUploadFlag, splitDomainsAndPath, type GrantSummary} from '../../lib/network/firewall-allow.js'
import {formatSize} from '../../lib/network/gateway/grants.js'
import {describeRule} from '../../lib/network/gateway/rules.js'
import {resolveWorkspace} from '../../lib/workspace.js'
import {quoteArg} from '../../lib/util/shell-quote.js'

export default class FirewallAllow extends Command {
  static override summary = "Allow more domains (or more methods and paths of a domain) in the running sandbox's firewall, at once and without a restart."
  static override description =
    'Each domain also allows its subdomains; *.example.com is accepted too. --methods and --paths add an httpRule for each domain to the running egress gateway (over an exec into the gateway container, which the sandbox cannot reach): a host whose rules restrict it gets the rule besides them (e.g. PUT on the npm registry, which is read-only by default); a domain this command newly allows gets it as its only rule; a host already allowed without rules keeps every method and path. With --save the domains (and rules) are also added to the workspace\'s .agent-sandbox/config.json (written on the host: the sandbox cannot write it; a file you had trusted stays trusted, an untrusted one must be approved with `agent-sandbox trust` before rules that widen apply); live additions last until the container restarts, saved ones apply from the next start. A stopped sandbox only gets the config change. --for, --once and --max-upload limit the live grant: it expires after the duration (its names are refused by the sandbox\'s DNS again, and the gateway refuses its requests saying the grant expired), lets one request out at the gateway (the name resolves for 60 s, or --for), or lets at most that many request bytes out to the host (headers and bodies; what a passed-through TLS connection sends); the request that would cross the budget is refused. Allowing an entry again replaces its grant (without limits: for the sandbox\'s life); a name the defaults or the config allow keeps that. The workspace path, if given, comes last and must contain a "/" (e.g. ./app) or be an existing directory.'
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
    for: Flags.string({description: 'the grant expires after this long (e.g. 30s, 10m, 2h, 1h30m): the names are refused again'}),
    json: Flags.boolean({description: 'print the result as JSON'}),
    'max-upload': Flags.string({description: 'the grant lets at most this many request bytes out to the host (bytes, or k, m, g: KiB, MiB, GiB; e.g. 100k, 5m)'}),
    methods: Flags.string({description: 'an httpRule for the domains: the methods it admits, comma-separated (e.g. GET,HEAD,PUT); with --paths, on those paths only'}),
    once: Flags.boolean({description: 'the grant lets one request out at the gateway, then none (the name resolves for 60 s, or --for)'}),
    paths: Flags.string({description: "an httpRule for the domains: the path globs it admits, comma-separated (e.g. '/myorg/*'; * any characters, ? one); with --methods, for those methods only"}),
    save: Flags.boolean({description: "also add the domains (and the rule) to the workspace's .agent-sandbox/config.json"}),
  }

  async run({argv, flags}: Input<typeof FirewallAllow>): Promise<number | void> {
    const {domains, path} = splitDomainsAndPath(argv as string[])
    const ws = resolveWorkspace(path)
    const engine = await this.engine(flags)
    const rule = {methods: flags.methods, paths: flags.paths}
    const limits = {
      ...(flags.for === undefined ? {} : {forMs: parseForFlag(flags.for)}),
      ...(flags.once ? {once: true} : {}),
      ...(flags['max-upload'] === undefined ? {} : {maxUploadBytes: parseMaxUploadFlag(flags['max-upload'])}),
    }
    const result = await allowDomains({engine, reporter: this.reporter}, ws, domains, {branch: flags.branch, save: flags.save, rule, ...limits})
    if (!result.live) this.reporter.warn(`${result.container} is not running: only the config was changed; the domains apply from its next start`)
    if (flags.json) return this.outJson(result)
    const grant = grantText(result.grant)
    for (const d of result.added) this.out(`allowed ${d} in ${result.container} (live${grant})`)
    for (const d of result.renewed) this.out(`granted ${d} anew in ${result.container} (live${grant})`)
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

/** `, until <ISO>, once, max-upload 5m`: the grant's limits after `live`. */
function grantText(grant: GrantSummary | undefined): string {
  if (!grant) return ''
  const parts = [grant.expiresAt ? `until ${grant.expiresAt}` : '', grant.kind === 'once' ? 'one request' : '', grant.maxUploadBytes === null ? '' : `max-upload ${formatSize(grant.maxUploadBytes)}`]
  return parts.filter(Boolean).map((p) => `, ${p}`).join('')
}

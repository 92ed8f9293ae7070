/**
 * `firewall allow`: domains (and httpRules) added to a running sandbox's
 * firewall and gateway, and with --save written to the workspace's
 * config.json, keeping the user's approval of a file they had approved.
 */
import {chmodSync, chownSync, existsSync, readFileSync, renameSync, statSync, unlinkSync, writeFileSync} from 'node:fs'
import {dirname, join, resolve} from 'node:path'
import {parseConfigText, readConfigFile, userConfigPath, workspaceConfigPath} from '../config/layers.js'
import {loadSettings} from '../config/load.js'
import {checkConfigFile} from '../config/schema.js'
import {isWebEntry, parseAllowEntry} from '../util/allow-entry.js'
import {carryConfigApproval, configTrust, lowerSettings} from '../config/trust.js'
import type {Context} from '../context.js'
import {ConfigError, NotReadyError, SandboxError, UsageError} from '../errors.js'
import {SANDBOX_EXEC} from '../contract.js'
import {baseImageDir} from '../util/assets.js'
import {quoteArg} from '../util/shell-quote.js'
import {Names, requireInitialised, type Workspace} from '../workspace.js'
import {allowlistMatch, parseDomainList} from './gateway/policy.js'
import {isHttpRule, layerWithRule, planRuleAdd, type HttpRule} from './gateway/rules.js'
import {recordLiveRule} from './gateway-live-rules.js'
import {describeGateway, findRunning, FIREWALL_ALLOW, gatewayAddRule, gatewayAllow, hasGateway, lastLine, NOT_READY} from './firewall.js'
import {formatDuration, formatSize, parseGrantDuration, parseGrantSize, type Grant} from './gateway/grants.js'

/** Validate allowlist entries (`example.com`, `*.example.com`, `name:PORT`, `name:PORT/udp`) into their one written form; every bad one is named. */
export function validateDomains(domains: string[]): string[] {
  if (domains.length === 0) throw new UsageError('no domain given', {hint: 'e.g. agent-sandbox firewall allow api.example.com'})
  const parsed = domains.map((d) => ({d, p: parseAllowEntry(d)}))
  const bad = parsed.filter((x) => !x.p.ok)
  if (bad.length) {
    const reason = bad[0].p.ok ? '' : bad[0].p.reason
    throw new UsageError(`not a valid allowlist entry: ${bad.map((x) => JSON.stringify(x.d)).join(', ')}`, {
      hint: `${reason} (no scheme, path or IP address)`,
    })
  }
  return [...new Set(parsed.map((x) => (x.p.ok ? x.p.entry.text : x.d)))]
}

/** The last argument is the workspace path if it contains a "/", is "." or "..", or (after a domain) names a directory. */
export function splitDomainsAndPath(argv: string[], cwd = process.cwd()): {domains: string[]; path?: string} {
  if (argv.length === 0) throw new UsageError('no domain given', {hint: 'e.g. agent-sandbox firewall allow api.example.com'})
  const last = argv.at(-1) as string
  const isDir = (p: string) => existsSync(resolve(cwd, p)) && statSync(resolve(cwd, p)).isDirectory()
  const looksLikePath = last.includes('/') || last === '.' || last === '..' || (argv.length > 1 && isDir(last))
  if (!looksLikePath) return {domains: argv}
  if (argv.length === 1) throw new UsageError(`no domain given (${last} is the workspace path)`, {hint: 'put the domains first: agent-sandbox firewall allow api.example.com [path]'})
  return {domains: argv.slice(0, -1), path: last}
}

/** What `--methods` and `--paths` ask for: comma-separated, as typed. */
export interface RuleFlags {
  methods?: string
  paths?: string
}

const list = (text: string) => text.split(',').map((p) => p.trim())

/** The httpRule `--methods`/`--paths` give each domain (none without them); every bad method or path is named. Pure. */
export function rulesFromFlags(domains: string[], flags: RuleFlags): HttpRule[] {
  if (flags.methods === undefined && flags.paths === undefined) return []
  const methods = flags.methods === undefined ? undefined : list(flags.methods)
  const paths = flags.paths === undefined ? undefined : list(flags.paths)
  const badMethods = (methods ?? []).filter((m) => !/^[A-Za-z]+$/.test(m))
  if (badMethods.length || methods?.length === 0) {
    throw new UsageError(`--methods: not an HTTP method: ${badMethods.map((m) => JSON.stringify(m)).join(', ') || '(none given)'}`, {
      hint: 'give methods as letters, comma-separated, e.g. --methods GET,HEAD,PUT',
    })
  }
  const badPaths = (paths ?? []).filter((p) => !/^\/\S*$/.test(p))
  if (badPaths.length || paths?.length === 0) {
    throw new UsageError(`--paths: not a path pattern: ${badPaths.map((p) => JSON.stringify(p)).join(', ') || '(none given)'}`, {
      hint: "start each pattern with / and leave out spaces, comma-separated, e.g. --paths '/myorg/*' (* matches any characters, / included; ? one)",
    })
  }
  return domains.map((host) => ({host, ...(methods ? {methods: methods.map((m) => m.toUpperCase())} : {}), ...(paths ? {paths} : {})}))
}

export interface RuleOutcome {
  rule: HttpRule
  /** `added`; `present`: the same rule is in force; `unrestricted`: the host already allows every method and path (the rule would narrow it). */
  action: 'added' | 'present' | 'unrestricted'
}

/** How long a `--once` grant lasts unless --for says: long enough for the retry to resolve the name. */
export const ONCE_LIFE_MS = 60_000

/** The limits of a live grant (`--for`, `--once`, `--max-upload`): none makes it last for the sandbox's life. */
export interface GrantLimits {
  /** It expires this long after it is made, at the firewall (DNS, port ipsets) and the gateway alike. */
  forMs?: number
  /** It lets one request (or passed-through connection) out at the gateway, then none; it lasts ONCE_LIFE_MS unless forMs says. */
  once?: boolean
  /** Request bytes it lets out at the gateway, in all (headers and bodies; what a passed-through tunnel sends). */
  maxUploadBytes?: number
}

/** The grant `firewall allow` made (--json): `allow` lasts for the sandbox's life, `for` expires, `once` lets one request out. */
export interface GrantSummary {
  kind: 'allow' | 'for' | 'once'
  /** ISO time it expires, or null. */
  expiresAt: string | null
  maxUploadBytes: number | null
}

/** `--for` as ms; a UsageError naming the fix when it is not a duration. Pure. */
export function parseForFlag(text: string): number {
  const ms = parseGrantDuration(text)
  if (ms === undefined) throw new UsageError(`--for: not a duration: ${JSON.stringify(text)}`, {hint: 'give a number and a unit (ms, s, m, h, d), e.g. --for 30s, --for 10m or --for 1h30m'})
  return ms
}

/** `--max-upload` as bytes; a UsageError naming the fix when it is not a size. Pure. */
export function parseMaxUploadFlag(text: string): number {
  const bytes = parseGrantSize(text)
  if (bytes === undefined) throw new UsageError(`--max-upload: not a size: ${JSON.stringify(text)}`, {hint: 'give bytes, or a number with k, m or g (KiB, MiB, GiB), e.g. --max-upload 100k or --max-upload 5m'})
  return bytes
}

/** The longest --for: a year (a longer one is the sandbox's life). */
const MAX_FOR_MS = 365 * 86_400_000

/** The limits checked, and what the firewall and the gateway are told (`now` in ms). Pure. */
export function planGrant(limits: GrantLimits, now: number): {summary: GrantSummary; firewallArgs: string[]; gateway: Omit<Grant, 'entry' | 'at'>} {
  const bad = (what: string, v: unknown) => new UsageError(`${what} must be a positive whole number, not ${JSON.stringify(v)}`, {hint: `e.g. ${what === 'forMs' ? '--for 10m' : '--max-upload 5m'}`})
  if (limits.forMs !== undefined && !(Number.isSafeInteger(limits.forMs) && limits.forMs > 0)) throw bad('forMs', limits.forMs)
  if (limits.maxUploadBytes !== undefined && !(Number.isSafeInteger(limits.maxUploadBytes) && limits.maxUploadBytes > 0)) throw bad('maxUploadBytes', limits.maxUploadBytes)
  if (limits.forMs !== undefined && limits.forMs > MAX_FOR_MS) {
    throw new UsageError(`--for is at most 365 days, not ${Math.round(limits.forMs / 86_400_000)} days`, {hint: "leave --for out for a grant that lasts the sandbox's life"})
  }
  const life = limits.forMs ?? (limits.once ? ONCE_LIFE_MS : undefined)
  const until = life === undefined ? undefined : now + life
  return {
    summary: {kind: limits.once ? 'once' : limits.forMs !== undefined ? 'for' : 'allow', expiresAt: until === undefined ? null : new Date(until).toISOString(), maxUploadBytes: limits.maxUploadBytes ?? null},
    // The firewall counts whole seconds: it lets go at most a second after the gateway.
    // --limited: the gateway counts this grant, so granting the entry again without limits must replace it.
    firewallArgs: [...(until === undefined ? [] : ['--until', String(Math.ceil(until / 1000))]), ...(limits.once || limits.maxUploadBytes !== undefined ? ['--limited'] : [])],
    gateway: {
      ...(until === undefined ? {} : {until}),
      ...(limits.forMs === undefined ? {} : {forMs: limits.forMs}),
      ...(limits.once ? {once: true} : {}),
      ...(limits.maxUploadBytes === undefined ? {} : {maxUpload: limits.maxUploadBytes}),
    },
  }
}

const hasLimits = (l: GrantLimits) => l.forMs !== undefined || Boolean(l.once) || l.maxUploadBytes !== undefined

/** The limits as the flags that give them, for messages: `--for 10m --once --max-upload 5m`. */
export function limitFlags(l: GrantLimits): string {
  return [l.forMs === undefined ? '' : `--for ${formatDuration(l.forMs)}`, l.once ? '--once' : '', l.maxUploadBytes === undefined ? '' : `--max-upload ${formatSize(l.maxUploadBytes)}`].filter(Boolean).join(' ')
}

export interface AllowResult {
  container: string
  /** false: the sandbox was not running, so only the config was changed. */
  live: boolean
  added: string[]
  /** Entries an earlier `firewall allow` had added: their grant was replaced by this one. */
  renewed: string[]
  alreadyAllowed: string[]
  /** The grant of the entries added or renewed (live only). */
  grant?: GrantSummary
  /** httpRules (--methods, --paths), live or, for a stopped sandbox, as the config would have them. */
  rules: RuleOutcome[]
  saved?: {path: string; added: string[]; rules: HttpRule[]; needsTrust: boolean}
}

/**
 * Add domains to the running sandbox's allowlist (no restart) and, with `save`,
 * to the workspace's .agent-sandbox/config.json; with `rule` flags, an httpRule
 * for each to the running gateway (and the file). Nothing is changed unless
 * every domain and rule is valid, and the config is checked before the sandbox
 * is touched.
 */
export async function allowDomains(
  ctx: Context,
  ws: Workspace,
  domains: string[],
  /** forMs (a grant that expires), once (one request) and maxUploadBytes (an upload budget): GrantLimits. */
  options: {branch?: string; save?: boolean; rule?: RuleFlags; forMs?: number; once?: boolean; maxUploadBytes?: number} = {},
): Promise<AllowResult> {
  const valid = validateDomains(domains)
  const limited = hasLimits(options)
  const plan = planGrant(options, Date.now())
  if (limited && options.save) throw new UsageError(`${limitFlags(options)} limit a live grant: --save makes a lasting one`, {hint: 'drop --save, or the limits'})
  if ((options.once || options.maxUploadBytes !== undefined) && !valid.every(isWebEntry)) {
    throw new UsageError('--once and --max-upload are counted by the egress gateway, which sees web traffic only: give host names without a port', {hint: 'a name:PORT entry takes --for alone'})
  }
  if ((options.rule?.methods !== undefined || options.rule?.paths !== undefined) && !valid.every(isWebEntry)) {
    throw new UsageError('--methods and --paths apply to web traffic: give host names without a port', {hint: 'allow name:PORT entries in a command of their own'})
  }
  if (limited && (options.rule?.methods !== undefined || options.rule?.paths !== undefined)) {
    throw new UsageError(`--methods and --paths add a rule for the sandbox's life: ${limitFlags(options)} cannot limit it`, {hint: 'drop the limits, or grant the host in a command of its own'})
  }
  const rules = rulesFromFlags(valid, options.rule ?? {})
  const name = Names.container(ws, options.branch)
  const path = workspaceConfigPath(ws.path)
  if (options.save) {
    requireInitialised(ws)
    planSave(path, valid, rules, ctx.env) // a file that cannot take them fails here, before anything changes
  }
  const found = await findRunning(ctx, ws, options.branch)
  if (found instanceof SandboxError && !options.save) throw found
  const sandbox = found instanceof SandboxError ? undefined : found
  if (!sandbox && limited) throw found instanceof SandboxError ? found : new SandboxError(`${name} is not running`)
  const result: AllowResult = {container: name, live: false, added: [], renewed: [], alreadyAllowed: [], rules: []}
  if (sandbox) {
    if (sandbox.network !== 'firewall') {
      throw new SandboxError(`${sandbox.name} runs with network mode "${sandbox.network}": there is no firewall allowlist to add to`, {
        hint: `restart it with the firewall: agent-sandbox stop ${quoteArg(ws.path)} && agent-sandbox start ${quoteArg(ws.path)} --network firewall`,
      })
    }
    if ((rules.length || options.once || options.maxUploadBytes !== undefined) && !hasGateway(sandbox)) {
      throw new SandboxError(`${sandbox.name} has no egress gateway (made by an older agent-sandbox): httpRules, --once and --max-upload cannot apply`, {
        hint: `recreate it: agent-sandbox rm ${quoteArg(ws.path)} && agent-sandbox start ${quoteArg(ws.path)}`,
      })
    }
    const r = await ctx.engine.containers.exec(sandbox.id, [SANDBOX_EXEC, FIREWALL_ALLOW, ...plan.firewallArgs, ...valid], {user: 'root'})
    if (r.exitCode === NOT_READY) throw new NotReadyError(`${sandbox.name} is not ready: ${lastLine(r.stderr)}`, {hint: `restart it (agent-sandbox stop, then start) or see: docker logs ${sandbox.name}`})
    if (r.exitCode !== 0) {
      throw new SandboxError(`firewall-allow failed in ${sandbox.name} (exit ${r.exitCode}): ${lastLine(r.stderr) || lastLine(r.stdout) || 'no message'}`, {
        hint: `see the firewall's log: docker exec ${sandbox.name} cat /run/agent-sandbox/firewall.log`,
      })
    }
    result.live = true
    for (const line of r.stdout.split('\n')) {
      const added = /^firewall-allow: added (\S+)$/.exec(line)
      const renewed = /^firewall-allow: renewed (\S+)$/.exec(line)
      const already = /^firewall-allow: (\S+) is already allowed$/.exec(line)
      if (added) result.added.push(added[1])
      if (renewed) result.renewed.push(renewed[1])
      if (already) result.alreadyAllowed.push(already[1])
    }
    if (result.added.length || result.renewed.length) result.grant = plan.summary
    // The gateway holds its own grant of each web entry: a renewed one's replaces the earlier.
    const web = [...result.added, ...result.renewed].filter(isWebEntry)
    if (web.length && hasGateway(sandbox)) await gatewayAllow(ctx, sandbox.name, web, plan.gateway)
    if (rules.length) {
      const inForce = (await describeGateway(ctx, sandbox.name)).rules
      for (const rule of rules) {
        const action = planRuleAdd(inForce, rule, result.added.includes(rule.host))
        if (action === 'add') {
          await gatewayAddRule(ctx, sandbox.name, rule)
          if (sandbox.startedAt) recordLiveRule(sandbox.name, sandbox.startedAt, rule, ctx.env)
          inForce.push(rule)
        }
        result.rules.push({rule, action: action === 'add' ? 'added' : action})
      }
    }
  } else {
    // Stopped: as the config would have them at the next start.
    const {settings} = loadSettings({workspacePath: ws.path, env: ctx.env, untrusted: 'report'})
    const allowed = [...parseDomainList(readFileSync(join(baseImageDir, 'default-domains.txt'), 'utf8')), ...settings.allowDomains]
    for (const rule of rules) {
      const action = planRuleAdd(settings.httpRules, rule, !allowlistMatch(rule.host.replace(/^\*\./, ''), allowed))
      result.rules.push({rule, action: action === 'add' ? 'added' : action})
    }
  }
  if (options.save) {
    const planned = planSave(path, valid, result.rules.filter((o) => o.action !== 'unrestricted').map((o) => o.rule), ctx.env)
    const written = writeSave(planned)
    // The user added these themselves: a file they had approved stays approved.
    const changed = planned.added.length > 0 || planned.rules.length > 0
    if (changed) carryConfigApproval(ws.path, planned.before, planned.text, ctx.env)
    result.saved = {...written, rules: planned.rules, needsTrust: changed && needsTrust(ws.path, planned.text, ctx.env)}
  }
  return result
}

/** Whether the file as written widens the sandbox without the user's approval (it would be refused at the next start). */
function needsTrust(workspacePath: string, text: string, env: NodeJS.ProcessEnv = process.env): boolean {
  const layer = parseConfigText(text, workspaceConfigPath(workspacePath))
  return configTrust(workspacePath, Buffer.from(text), layer, readConfigFile(userConfigPath(env)), env).refused.length > 0
}

interface SavePlan {
  path: string
  text: string
  /** The file as it was, for carrying its approval over (config/trust.ts). */
  before?: string
  added: string[]
  /** httpRules added to the file. */
  rules: HttpRule[]
  existed: boolean
}

/** Read and validate the workspace config, and compute its new text. Writes nothing. */
function planSave(path: string, domains: string[], rules: HttpRule[], env: NodeJS.ProcessEnv = process.env): SavePlan {
  let text: string | undefined
  try {
    text = readFileSync(path, 'utf8')
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw new ConfigError(`cannot read ${path}: ${(error as Error).message}`, {cause: error})
  }
  if (text !== undefined) parseConfigText(text, path) // a broken file is reported, never overwritten
  const json = (text === undefined ? {} : JSON.parse(text)) as Record<string, unknown>
  const current = Array.isArray(json.allowDomains) ? (json.allowDomains as string[]) : []
  const have = new Set(current.map((d) => d.toLowerCase()))
  const added = domains.filter((d) => !have.has(d))
  let next = added.length ? {...json, allowDomains: [...current, ...added]} : json
  // A host the file names gets the file's rules only (per host, a higher layer replaces): start from what is in force below.
  const fileRules = Array.isArray(json.httpRules) ? (json.httpRules as unknown[]).filter(isHttpRule) : []
  const lower = rules.length ? lowerSettings(readConfigFile(userConfigPath(env))).httpRules : []
  const httpRules = rules.reduce<HttpRule[]>((layer, rule) => layerWithRule(layer, lower, rule), fileRules)
  const newRules = rules.filter((r) => !fileRules.some((f) => JSON.stringify(f) === JSON.stringify(r)))
  if (newRules.length) next = {...next, httpRules}
  const checked = checkConfigFile(next)
  if (!checked.success) {
    throw new ConfigError(`${path}: adding ${[...added, ...newRules.map((r) => r.host)].join(', ')} would make it invalid: ${checked.issue.message}`, {hint: 'fix the file by hand'})
  }
  return {path, text: `${JSON.stringify(next, null, 2)}\n`, before: text, added, rules: newRules, existed: text !== undefined}
}

/** Replace the config file atomically (temp file + rename), keeping its owner and mode. */
function writeSave(plan: SavePlan): {path: string; added: string[]} {
  if (plan.added.length === 0 && plan.rules.length === 0) return {path: plan.path, added: []}
  const dir = dirname(plan.path)
  const owner = statSync(plan.existed ? plan.path : dir)
  const mode = plan.existed ? owner.mode & 0o777 : 0o644
  const tmp = join(dir, `.config.json.${process.pid}.${Date.now()}.tmp`)
  try {
    writeFileSync(tmp, plan.text, {flag: 'wx', mode})
    chmodSync(tmp, mode)
    if (process.getuid?.() === 0) chownSync(tmp, owner.uid, owner.gid)
    renameSync(tmp, plan.path)
  } catch (error) {
    try {
      unlinkSync(tmp)
    } catch {
      // nothing to remove
    }
    throw new ConfigError(`cannot write ${plan.path}: ${(error as Error).message}`, {cause: error})
  }
  return {path: plan.path, added: plan.added}
}


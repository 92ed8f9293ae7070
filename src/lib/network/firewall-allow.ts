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

export interface AllowResult {
  container: string
  /** false: the sandbox was not running, so only the config was changed. */
  live: boolean
  added: string[]
  alreadyAllowed: string[]
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
  /** forMs (a grant that lapses), once (one request) and maxUploadBytes: declared, not yet applied. */
  options: {branch?: string; save?: boolean; rule?: RuleFlags; forMs?: number; once?: boolean; maxUploadBytes?: number} = {},
): Promise<AllowResult> {
  const valid = validateDomains(domains)
  if ((options.rule?.methods !== undefined || options.rule?.paths !== undefined) && !valid.every(isWebEntry)) {
    throw new UsageError('--methods and --paths apply to web traffic: give host names without a port', {hint: 'allow name:PORT entries in a command of their own'})
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
  const result: AllowResult = {container: name, live: false, added: [], alreadyAllowed: [], rules: []}
  if (sandbox) {
    if (sandbox.network !== 'firewall') {
      throw new SandboxError(`${sandbox.name} runs with network mode "${sandbox.network}": there is no firewall allowlist to add to`, {
        hint: `restart it with the firewall: agent-sandbox stop ${quoteArg(ws.path)} && agent-sandbox start ${quoteArg(ws.path)} --network firewall`,
      })
    }
    if (rules.length && !hasGateway(sandbox)) {
      throw new SandboxError(`${sandbox.name} has no egress gateway (made by an older agent-sandbox): httpRules cannot apply`, {
        hint: `recreate it: agent-sandbox rm ${quoteArg(ws.path)} && agent-sandbox start ${quoteArg(ws.path)}`,
      })
    }
    const r = await ctx.engine.containers.exec(sandbox.id, [SANDBOX_EXEC, FIREWALL_ALLOW, ...valid], {user: 'root'})
    if (r.exitCode === NOT_READY) throw new NotReadyError(`${sandbox.name} is not ready: ${lastLine(r.stderr)}`, {hint: `restart it (agent-sandbox stop, then start) or see: docker logs ${sandbox.name}`})
    if (r.exitCode !== 0) {
      throw new SandboxError(`firewall-allow failed in ${sandbox.name} (exit ${r.exitCode}): ${lastLine(r.stderr) || lastLine(r.stdout) || 'no message'}`, {
        hint: `see the firewall's log: docker exec ${sandbox.name} cat /run/agent-sandbox/firewall.log`,
      })
    }
    result.live = true
    for (const line of r.stdout.split('\n')) {
      const added = /^firewall-allow: added (\S+)$/.exec(line)
      const already = /^firewall-allow: (\S+) is already allowed$/.exec(line)
      if (added) result.added.push(added[1])
      if (already) result.alreadyAllowed.push(already[1])
    }
    const web = result.added.filter(isWebEntry)
    if (web.length && hasGateway(sandbox)) await gatewayAllow(ctx, sandbox.name, web)
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


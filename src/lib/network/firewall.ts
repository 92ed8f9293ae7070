/**
 * The egress firewall of a running sandbox, seen from the host: its status
 * (firewall-status, run as root inside), live additions to the allowlist
 * (firewall-allow, as root) saved to the workspace config on the host side, and
 * the egress gateway's request log. `doctor` checks all of it: sandbox/doctor.ts.
 */
import {chmodSync, chownSync, existsSync, readFileSync, renameSync, statSync, unlinkSync, writeFileSync} from 'node:fs'
import {dirname, join, resolve} from 'node:path'
import {checkConfigFile, type NetworkMode} from '../config/schema.js'
import {isWebEntry, parseAllowEntry} from '../config/allow-entry.js'
import {allowedBy, parseDeniedLine, type DeniedConnection, type ResolvedAddress} from './firewall-denied.js'
import {loadSettings, parseConfigText, readConfigFile, userConfigPath, workspaceConfigPath} from '../config/load.js'
import {carryConfigApproval, configTrust, lowerSettings} from '../config/trust.js'
import type {ContainerInfo} from '../engine/index.js'
import {ConfigError, NotReadyError, SandboxError, throwIfAborted, UsageError} from '../errors.js'
import type {Context} from '../context.js'
import {quoteArg, requireInitialised} from '../workspace.js'
import {SANDBOX_EXEC} from '../sandbox/spec.js'
import {Labels, Names, type Workspace} from '../workspace.js'
import {formatRequest, parseRequestLog, REQUEST_LOG, type RequestLogEntry} from './gateway/log.js'
import {GATEWAY_DEFAULTS, gatewayCommand} from './gateway/ports.js'
import {isHttpRule, layerWithRule, planRuleAdd, type HttpRule} from './gateway/rules.js'
import {allowlistMatch, parseDomainList} from './gateway/policy.js'
import {recordLiveRule} from './gateway-ca.js'
import {baseImageDir} from '../util/assets.js'

const FIREWALL_STATUS = '/usr/local/bin/firewall-status'
const FIREWALL_ALLOW = '/usr/local/sbin/firewall-allow'
/** sandbox-exec's exit code when set-up failed or did not finish. */
/** sandbox-exec's exit when the sandbox is not ready: nothing ran. */
export const NOT_READY = 125

export interface RunningSandbox {
  name: string
  id: string
  network: NetworkMode
  labels?: Record<string, string>
  env?: string[]
  startedAt?: string
}

/** The workspace's sandbox if it is running, else why not. */
async function findRunning(ctx: Context, ws: Workspace, branch?: string): Promise<RunningSandbox | SandboxError> {
  const name = Names.container(ws, branch)
  const info = await ctx.engine.containers.inspect(name)
  if (info?.running) return {name, id: info.id, network: networkOf(info), labels: info.labels, env: info.env, startedAt: info.startedAt}
  const branchArg = branch === undefined ? '' : ` --branch ${quoteArg(branch)}`
  return new SandboxError(`no running sandbox for ${ws.path}${branch === undefined ? '' : ` (branch ${branch})`}: ${info ? `${name} is ${info.status}` : `${name} does not exist`}`, {
    hint: `start it first: agent-sandbox start ${quoteArg(ws.path)}${branchArg}`,
  })
}

/** The workspace's sandbox, which must be running. */
export async function requireRunning(ctx: Context, ws: Workspace, branch?: string): Promise<RunningSandbox> {
  const found = await findRunning(ctx, ws, branch)
  if (found instanceof SandboxError) throw found
  return found
}

function networkOf(info: ContainerInfo): NetworkMode {
  const label = info.labels[Labels.network]
  return label === 'none' || label === 'open' ? label : 'firewall'
}

// ---- status ------------------------------------------------------------------

/** What firewall-status --json prints. */
export interface RawFirewallStatus {
  backend: string
  rules: string[]
  rules6: string[]
  rulesReadable: boolean
  allowlist: string[]
  ipsets: Record<string, number | null>
  deniedDns: string[]
  deniedConnections: string[]
  resolved?: ResolvedAddress[]
}

export interface FirewallStatus extends Omit<RawFirewallStatus, 'deniedConnections'> {
  container: string
  network: NetworkMode
  deniedConnections: DeniedConnection[]
  /** The egress gateway: `none` for a sandbox made without one. */
  gateway: 'running' | 'down' | 'none'
  /** Its most recent requests, oldest first. */
  requests: RequestLogEntry[]
}

export async function firewallStatus(ctx: Context, ws: Workspace, options: {branch?: string} = {}): Promise<FirewallStatus | {container: string; network: NetworkMode}> {
  const sandbox = await requireRunning(ctx, ws, options.branch)
  if (sandbox.network !== 'firewall') return {container: sandbox.name, network: sandbox.network}
  return readStatus(ctx, sandbox)
}

export async function readStatus(ctx: Context, sandbox: RunningSandbox): Promise<FirewallStatus> {
  const [result, gateway] = await Promise.all([ctx.engine.containers.exec(sandbox.id, [FIREWALL_STATUS, '--json'], {user: 'root'}), gatewayRequests(ctx, sandbox, 20)])
  if (result.exitCode !== 0) {
    throw new SandboxError(`firewall-status failed in ${sandbox.name} (exit ${result.exitCode}): ${lastLine(result.stderr) || 'no message'}`, {
      hint: `see the firewall's own log: docker exec ${sandbox.name} cat /run/agent-sandbox/firewall.log`,
    })
  }
  return {...parseStatus(result.stdout, sandbox), ...gateway}
}

/** Whether the sandbox was made with an egress gateway (its firewall redirects to one). */
export function hasGateway(sandbox: RunningSandbox): boolean {
  return sandbox.network === 'firewall' && (sandbox.env ?? []).some((e) => e.startsWith('AGENT_SANDBOX_GATEWAY_UID='))
}

const GATEWAY_LOG = `${GATEWAY_DEFAULTS.stateDir}/${REQUEST_LOG}`

/** The gateway's state and its last `lines` requests (none when it is down: its log went with it). */
async function gatewayRequests(ctx: Context, sandbox: RunningSandbox, lines: number): Promise<Pick<FirewallStatus, 'gateway' | 'requests'>> {
  if (!hasGateway(sandbox)) return {gateway: 'none', requests: []}
  const info = await ctx.engine.containers.inspect(Names.gateway(sandbox.name))
  if (!info?.running) return {gateway: 'down', requests: []}
  return {gateway: 'running', requests: await gatewayLogEntries(ctx, info.id, lines)}
}

/** A running gateway's last `lines` requests (all of them without `lines`); none when it has no log yet. */
export async function gatewayLogEntries(ctx: Context, gatewayId: string, lines?: number): Promise<RequestLogEntry[]> {
  const r = await ctx.engine.containers.exec(gatewayId, lines === undefined ? ['cat', GATEWAY_LOG] : ['tail', '-n', String(lines), GATEWAY_LOG])
  return r.exitCode === 0 ? parseRequestLog(r.stdout) : []
}

/**
 * The gateway's request log: the last `lines` entries, then with `follow`
 * each new one as it is written, until `signal` aborts. Entries go to
 * `onEntry`, in order.
 */
export async function requestLog(ctx: Context, ws: Workspace, options: {branch?: string; lines?: number; follow?: boolean; onEntry: (e: RequestLogEntry) => void}): Promise<void> {
  const sandbox = await requireRunning(ctx, ws, options.branch)
  if (!hasGateway(sandbox)) {
    throw new SandboxError(`${sandbox.name} has no egress gateway (network mode "${sandbox.network}", or made by an older agent-sandbox): there is no request log`, {
      hint: `recreate it with the firewall: agent-sandbox rm ${quoteArg(ws.path)} && agent-sandbox start ${quoteArg(ws.path)}`,
    })
  }
  const name = Names.gateway(sandbox.name)
  const info = await ctx.engine.containers.inspect(name)
  if (!info?.running) {
    throw new NotReadyError(`the egress gateway ${name} is not running: ${sandbox.name} has no web access`, {hint: `start it again: agent-sandbox start ${quoteArg(ws.path)}`})
  }
  const lines = String(options.lines ?? 50)
  let rest = ''
  const onStdout = (chunk: Buffer) => {
    const text = rest + chunk.toString('utf8')
    const cut = text.lastIndexOf('\n')
    rest = text.slice(cut + 1)
    for (const e of parseRequestLog(text.slice(0, cut + 1))) options.onEntry(e)
  }
  // tail -F follows the log across its rotation.
  const cmd = options.follow ? ['tail', '-n', lines, '-F', GATEWAY_LOG] : ['tail', '-n', lines, GATEWAY_LOG]
  // --follow lasts until the caller aborts (Ctrl-C), which ends it as it ends `tail -f`.
  const r = await ctx.engine.containers.exec(info.id, cmd, {onStdout, collect: false, signal: ctx.signal})
  throwIfAborted(ctx.signal)
  if (r.exitCode !== 0 && r.exitCode !== -1 && !/No such file/.test(r.stderr)) {
    throw new SandboxError(`cannot read the request log in ${name} (exit ${r.exitCode}): ${lastLine(r.stderr) || 'no message'}`)
  }
}

export {formatRequest, parseDeniedLine, type DeniedConnection}

export function parseStatus(text: string, sandbox: Pick<RunningSandbox, 'name' | 'network'>): FirewallStatus {
  let raw: RawFirewallStatus
  try {
    raw = JSON.parse(text) as RawFirewallStatus
  } catch (error) {
    throw new SandboxError(`firewall-status printed something that is not JSON: ${text.slice(0, 120)}`, {cause: error})
  }
  return {
    container: sandbox.name,
    network: sandbox.network,
    backend: raw.backend,
    rules: raw.rules ?? [],
    rules6: raw.rules6 ?? [],
    rulesReadable: raw.rulesReadable,
    allowlist: raw.allowlist ?? [],
    ipsets: raw.ipsets ?? {},
    deniedDns: raw.deniedDns ?? [],
    deniedConnections: (raw.deniedConnections ?? []).map(parseDeniedLine).map((c) => {
      const entry = allowedBy(c, raw.allowlist ?? [], raw.resolved ?? [])
      return entry ? {...c, allowedBy: entry} : c
    }),
    gateway: 'none',
    requests: [],
  }
}

export function formatStatus(status: FirewallStatus | {container: string; network: NetworkMode}): string {
  if (!('rules' in status)) {
    return status.network === 'none'
      ? `${status.container}: network mode "none": no network at all, so no firewall`
      : `${status.container}: network mode "open": egress is NOT filtered (no firewall)`
  }
  const out: string[] = [`${status.container}: network mode "firewall", iptables backend ${status.backend}`, '']
  const section = (title: string, lines: string[], empty = '(none)') => {
    out.push(title, ...(lines.length ? lines.map((l) => `  ${l}`) : [`  ${empty}`]), '')
  }
  if (status.rulesReadable) {
    section('Rules in force (IPv4):', status.rules)
    section('Rules in force (IPv6):', status.rules6, '(none loaded: IPv6 is disabled in this sandbox)')
  } else {
    out.push('Rules in force: not readable', '')
  }
  section(`Allowlist (${status.allowlist.length} entries, each with its subdomains; a name alone is TCP 80/443 through the gateway):`, status.allowlist)
  out.push(
    `IP sets: ${Object.entries(status.ipsets)
      .map(([k, v]) => `${k}=${v ?? '?'}`)
      .join('  ')}`,
    '',
  )
  section('Denied DNS names (most recent last):', status.deniedDns)
  if (status.gateway === 'down') out.push('Egress gateway: NOT RUNNING: no web traffic leaves (restart it with agent-sandbox start)', '')
  if (status.gateway === 'running') section('Recent requests through the egress gateway (most recent last):', status.requests.map(formatRequest))
  const rows = status.deniedConnections.map((c) => (c.time ? [c.time, c.protocol, c.source, c.destination, c.allowedBy ?? '-'] : ['', '', '', c.line, '']))
  section('Denied connections (most recent last; ALLOWED BY: the allowDomains entry that would allow it):', table(rows.length ? [['TIME', 'PROTO', 'FROM', 'TO', 'ALLOWED BY'], ...rows] : []))
  return out.join('\n').trimEnd()
}

export function table(rows: string[][]): string[] {
  if (rows.length === 0) return []
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)))
  return rows.map((r) => r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i]))).join('  '))
}

// ---- allow -------------------------------------------------------------------

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
export async function allowDomains(ctx: Context, ws: Workspace, domains: string[], options: {branch?: string; save?: boolean; rule?: RuleFlags} = {}): Promise<AllowResult> {
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

/** Add domains to the running gateway's own allowlist (it decides by name; the firewall only by address). */
export async function gatewayAllow(ctx: Context, sandboxName: string, domains: string[]): Promise<void> {
  const name = Names.gateway(sandboxName)
  const r = await ctx.engine.containers.exec(name, gatewayCommand(['--allow', ...domains])).catch((error: unknown) => ({exitCode: -1, stdout: '', stderr: String(error)}))
  if (r.exitCode !== 0) {
    throw new SandboxError(`the firewall allows ${domains.join(', ')}, but the egress gateway ${name} could not be told (exit ${r.exitCode}): ${lastLine(r.stderr) || 'no message'}`, {
      hint: 'web requests to them are refused until the gateway is restarted: agent-sandbox start',
    })
  }
}

/** An httpRule for the running gateway (gateway.ts --rule): in force for the next request, no restart. */
export async function gatewayAddRule(ctx: Context, sandboxName: string, rule: HttpRule): Promise<void> {
  const name = Names.gateway(sandboxName)
  const r = await ctx.engine.containers.exec(name, gatewayCommand(['--rule', JSON.stringify(rule)])).catch((error: unknown) => ({exitCode: -1, stdout: '', stderr: String(error)}))
  if (r.exitCode !== 0) {
    throw new SandboxError(`the egress gateway ${name} could not take the rule for ${rule.host} (exit ${r.exitCode}): ${lastLine(r.stderr) || 'no message'}`, {
      hint: 'check that it runs (agent-sandbox firewall status); agent-sandbox start makes it anew',
    })
  }
}

/** What the running gateway has in force: its rules (configured and live) and the masked secrets' names and hosts (never values). */
export interface GatewayDescription {
  rules: HttpRule[]
  live: HttpRule[]
  masked: Array<{name: string; hosts: string[]}>
}

export async function describeGateway(ctx: Context, sandboxName: string): Promise<GatewayDescription> {
  const name = Names.gateway(sandboxName)
  const r = await ctx.engine.containers.exec(name, gatewayCommand(['--describe'])).catch((error: unknown) => ({exitCode: -1, stdout: '', stderr: String(error)}))
  try {
    if (r.exitCode === 0) return JSON.parse(r.stdout) as GatewayDescription
  } catch {
    // reported below
  }
  throw new NotReadyError(`cannot read the rules of the egress gateway ${name} (exit ${r.exitCode}): ${lastLine(r.stderr) || lastLine(r.stdout) || 'no message'}`, {
    hint: 'its image may predate live rules, or it is not running: agent-sandbox start makes it anew',
  })
}

// ---- doctor ------------------------------------------------------------------

/** The last non-empty line of a process's output (the one that says why). */
export function lastLine(text: string): string {
  return text.trim().split('\n').filter(Boolean).pop() ?? ''
}

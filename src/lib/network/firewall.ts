/**
 * The egress firewall of a running sandbox, seen from the host: its status
 * (firewall-status, run as root inside), the egress gateway's request log and
 * live rules; `firewall allow` is firewall-allow.ts. `doctor` checks all of it: sandbox/doctor.ts.
 */
import {PassThrough} from 'node:stream'
import type {NetworkMode} from '../config/schema.js'
import {isWebEntry} from '../util/allow-entry.js'
import {allowedBy, parseDeniedLine, type DeniedConnection, type ResolvedAddress} from './firewall-denied.js'
import type {ContainerInfo} from '../engine/index.js'
import {NotReadyError, SandboxError, throwIfAborted} from '../errors.js'
import type {Context} from '../context.js'
import {quoteArg} from '../util/shell-quote.js'
import {Labels, Names, type Workspace} from '../workspace.js'
import {formatRequest, parseRequestLog, REQUEST_LOG, type RequestLogEntry} from './gateway/log.js'
import {GATEWAY_DEFAULTS, gatewayCommand} from './gateway/ports.js'
import {allowlistMatch} from './gateway/policy.js'
import {dnsApprovalLine} from './gateway/approval.js'
import type {HttpRule} from './gateway/rules.js'
import type {Grant} from './gateway/grants.js'

export const FIREWALL_STATUS = '/usr/local/bin/firewall-status'
export const FIREWALL_ALLOW = '/usr/local/sbin/firewall-allow'
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
export async function findRunning(ctx: Context, ws: Workspace, branch?: string): Promise<RunningSandbox | SandboxError> {
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
  return readFirewallStatus(ctx, sandbox)
}

export async function readFirewallStatus(ctx: Context, sandbox: RunningSandbox): Promise<FirewallStatus> {
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
/** `sh -c FOLLOW follow LINES LOG`: tail -F of LOG until its input ends; reaped (the gateway's PID 1 reaps no orphan). */
const FOLLOW = 'tail -n "$1" -F "$2" & t=$!; cat > /dev/null; kill "$t" 2> /dev/null; wait "$t"'

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
  // tail -F follows the log across its rotation. It lasts until the caller aborts (Ctrl-C), which closes the
  // exec's connection; the engine does not end an exec's process then, but closes its input: the shell
  // waiting on that input ends tail, so no follower is left behind in the gateway.
  const cmd = options.follow ? ['sh', '-c', FOLLOW, 'follow', lines, GATEWAY_LOG] : ['tail', '-n', lines, GATEWAY_LOG]
  const stdin = options.follow ? new PassThrough() : undefined
  const r = await ctx.engine.containers.exec(info.id, cmd, {onStdout, collect: false, signal: ctx.signal, stdin})
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
  const dnsLine = (name: string) => (allowlistMatch(name.replace(/\.$/, '').toLowerCase(), status.allowlist) ? name : dnsApprovalLine(name.replace(/\.$/, '')))
  section('Denied DNS names (most recent last):', status.deniedDns.map(dnsLine))
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

/**
 * Grant allowlist entries in the running gateway (it decides by name; the firewall only by address), with
 * the grant's limits (grants.ts). Only web entries: a `name:PORT` entry is the firewall's alone and never
 * reaches the gateway.
 */
export async function gatewayAllow(ctx: Context, sandboxName: string, entries: string[], limits: Omit<Grant, 'entry' | 'at'> = {}): Promise<void> {
  const domains = entries.filter(isWebEntry)
  if (domains.length === 0) return
  const name = Names.gateway(sandboxName)
  const limited = Object.keys(limits).length ? ['--limits', JSON.stringify(limits)] : []
  const r = await ctx.engine.containers.exec(name, gatewayCommand(['--allow', ...limited, ...domains])).catch((error: unknown) => ({exitCode: -1, stdout: '', stderr: String(error)}))
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

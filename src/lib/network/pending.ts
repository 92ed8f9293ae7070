/**
 * The queue of pending approvals of a running sandbox, derived on the host
 * from what the sandbox already records: the egress gateway's request log (a
 * host refused by the allowlist, a method or path refused by httpRules) and
 * the firewall's dnsmasq log (a DNS name refused). An entry leaves the queue
 * once a grant covers it, or once `firewall deny` clears it; the cleared ones
 * are kept on the host beside the sandbox's gateway CA (gateway-ca.ts), per
 * start of the sandbox.
 */
import {mkdirSync, readFileSync, renameSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import type {Context} from '../context.js'
import {SandboxError} from '../errors.js'
import {quoteArg} from '../util/shell-quote.js'
import {Names, type Workspace} from '../workspace.js'
import {dnsApprovalLine, grantCommand, grantedPath, NOT_ALLOWLISTED, refusalReason} from './gateway/approval.js'
import {refusalText} from './gateway/forward.js'
import type {RequestLogEntry} from './gateway/log.js'
import {allowlistMatch} from './gateway/policy.js'
import {judgeHttpRules, type HttpRule} from './gateway/rules.js'
import {gatewayCaDir} from './gateway-ca.js'
import {describeGateway, FIREWALL_STATUS, gatewayLogEntries, hasGateway, lastLine, requireRunning, type RawFirewallStatus} from './firewall.js'

export interface PendingApproval {
  /** `host`: refused by the allowlist; `rule`: a method or path refused by the host's httpRules; `dns`: a name dnsmasq refused. */
  kind: 'host' | 'rule' | 'dns'
  host: string
  method?: string
  path?: string
  /** How many refusals it stands for, and the first and last (none for a DNS name: its log has no times). */
  count: number
  first?: string
  last?: string
  /** The one line the agent got (its 403 body), or for a DNS name the line `firewall status` shows. */
  line: string
  /** The command that grants it. */
  command: string
}

/** What is in force now: an entry a grant covers is no longer pending. */
export interface InForce {
  allowlist: string[]
  rules: HttpRule[]
  /** Host (lower-case) → ISO time `firewall deny` cleared it. */
  denied: Record<string, string>
}

const webAllowed = (host: string, allowlist: string[]) => allowlistMatch(host.toLowerCase(), allowlist) !== undefined

/** The queue from the request log (oldest first) and the names dnsmasq refused; most recent last. Pure. */
export function derivePending(log: RequestLogEntry[], deniedDns: string[], now: InForce): PendingApproval[] {
  const byKey = new Map<string, PendingApproval>()
  for (const e of log) {
    if (e.decision !== 'blocked') continue
    const command = grantCommand(e)
    if (!command) continue
    const kind = e.rule === NOT_ALLOWLISTED ? 'host' : 'rule'
    const key = kind === 'host' ? `host ${e.host}` : `rule ${e.host} ${e.method} ${e.path}`
    const seen = byKey.get(key)
    if (seen) {
      byKey.delete(key) // re-inserted: most recent last
      byKey.set(key, {...seen, count: seen.count + 1, last: e.time})
      continue
    }
    const line = refusalText(refusalReason(e, kind === 'rule')).trimEnd()
    byKey.set(key, {kind, host: e.host, ...(kind === 'rule' ? {method: e.method, path: grantedPath(e)} : {}), count: 1, first: e.time, last: e.time, line, command})
  }
  const out = [...byKey.values()].filter((p) => {
    const cleared = now.denied[p.host.toLowerCase()]
    if (cleared && p.last && p.last <= cleared) return false
    if (p.kind === 'host') return !webAllowed(p.host, now.allowlist)
    return webAllowed(p.host, now.allowlist) && !judgeHttpRules(p.host, p.method ?? '', p.path ?? '', now.rules).allowed
  })
  const inQueue = new Set(out.filter((p) => p.kind === 'host').map((p) => p.host.toLowerCase()))
  const dnsNames = deniedDns.map((raw) => raw.replace(/\.$/, '').toLowerCase())
  // A name of one label is tried with the resolver's search domains first (Podman's `dns.podman`):
  // `name.<search>` stands for `name` itself, which was queried too, allowlisted or refused.
  const known = new Set([...dnsNames, ...log.map((e) => e.host.toLowerCase())])
  const searchExpansion = (name: string) => {
    const label = name.slice(0, Math.max(0, name.indexOf('.')))
    return label !== '' && (known.has(label) || webAllowed(label, now.allowlist))
  }
  for (const name of dnsNames) {
    if (!name || inQueue.has(name) || webAllowed(name, now.allowlist) || now.denied[name] || searchExpansion(name)) continue
    inQueue.add(name)
    out.push({kind: 'dns', host: name, count: 1, line: dnsApprovalLine(name), command: `agent-sandbox firewall allow ${quoteArg(name)}`})
  }
  return out
}

/** The pending approvals of the workspace's running, firewalled sandbox. */
export async function pendingApprovals(ctx: Context, ws: Workspace, options: {branch?: string} = {}): Promise<{container: string; pending: PendingApproval[]}> {
  const sandbox = await requireRunning(ctx, ws, options.branch)
  if (sandbox.network !== 'firewall') {
    throw new SandboxError(`${sandbox.name} runs with network mode "${sandbox.network}": nothing is refused, so nothing waits for approval`, {hint: `restart it with the firewall: agent-sandbox start ${quoteArg(ws.path)} --network firewall`})
  }
  const withGateway = hasGateway(sandbox)
  const gatewayName = Names.gateway(sandbox.name)
  const [status, log, rules] = await Promise.all([
    ctx.engine.containers.exec(sandbox.id, [FIREWALL_STATUS, '--json'], {user: 'root'}),
    withGateway ? gatewayLogEntries(ctx, gatewayName) : Promise.resolve([]),
    withGateway ? describeGateway(ctx, sandbox.name).then((d) => d.rules, () => []) : Promise.resolve([]),
  ])
  if (status.exitCode !== 0) throw new SandboxError(`firewall-status failed in ${sandbox.name} (exit ${status.exitCode}): ${lastLine(status.stderr) || 'no message'}`)
  const raw = JSON.parse(status.stdout) as Partial<RawFirewallStatus>
  const denied = deniedHosts(sandbox.name, sandbox.startedAt ?? '', ctx.env ?? process.env)
  return {container: sandbox.name, pending: derivePending(log, raw.deniedDns ?? [], {allowlist: raw.allowlist ?? [], rules, denied})}
}

// ---- firewall deny ---------------------------------------------------------------

interface DeniedFile {
  startedAt: string
  denied: Record<string, string>
}

const deniedFile = (container: string, env: NodeJS.ProcessEnv) => join(gatewayCaDir(container, env), 'pending-denied.json')

function deniedHosts(container: string, startedAt: string, env: NodeJS.ProcessEnv): Record<string, string> {
  try {
    const saved = JSON.parse(readFileSync(deniedFile(container, env), 'utf8')) as DeniedFile
    return saved.startedAt === startedAt && saved.denied && typeof saved.denied === 'object' ? saved.denied : {}
  } catch {
    return {}
  }
}

/** Clear the pending entries of `hosts` (refusals up to now; a later refusal is pending again). Returns those that were pending. */
export async function denyPending(ctx: Context, ws: Workspace, hosts: string[], options: {branch?: string} = {}): Promise<{container: string; cleared: string[]; notPending: string[]}> {
  const {container, pending} = await pendingApprovals(ctx, ws, options)
  const sandbox = await requireRunning(ctx, ws, options.branch)
  const names = hosts.map((h) => h.replace(/\.$/, '').toLowerCase())
  const queued = new Set(pending.map((p) => p.host.toLowerCase()))
  const cleared = names.filter((h) => queued.has(h))
  const startedAt = sandbox.startedAt ?? ''
  const env = ctx.env ?? process.env
  const denied = deniedHosts(container, startedAt, env)
  const time = new Date().toISOString()
  for (const h of cleared) denied[h] = time
  const dir = gatewayCaDir(container, env)
  mkdirSync(dir, {recursive: true, mode: 0o700})
  const tmp = `${deniedFile(container, env)}.${process.pid}.tmp`
  writeFileSync(tmp, `${JSON.stringify({startedAt, denied} satisfies DeniedFile)}\n`, {mode: 0o600})
  renameSync(tmp, deniedFile(container, env))
  return {container, cleared, notPending: names.filter((h) => !queued.has(h))}
}

/**
 * `doctor`: does the running sandbox hold? The firewall's rules checked as
 * root, the ways out tried as `node` (doctor.sh, inside), the push gate, the
 * egress gateway, the DNS watch and the hook configuration's mounts.
 */
import {join} from 'node:path'
import {readFileSync} from 'node:fs'
import {baseImageDir} from '../util/assets.js'
import {NotReadyError, SandboxError} from '../errors.js'
import type {Context} from '../context.js'
import {parseHookConfigLabel} from '../git/hook-config.js'
import {checkAgentLogins} from './doctor-logins.js'
import {describeGateway, hasGateway, lastLine, NOT_READY, readFirewallStatus, requireRunning, table, type FirewallStatus, type GatewayDescription, type RunningSandbox} from '../network/firewall.js'
import {allowlistMatch, isIpLiteral, normaliseHost, parseDomainEnv} from '../network/gateway/policy.js'
import {ruleHostMatches, rulesFor} from '../network/gateway/rules.js'
import {parseRequestLog, REQUEST_LOG} from '../network/gateway/log.js'
import {randomBytes} from 'node:crypto'
import {GATEWAY_DEFAULTS} from '../network/gateway/ports.js'
import type {NetworkMode} from '../config/schema.js'
import {SANDBOX_EXEC, SANDBOX_USER} from '../contract.js'
import {workspaceMountPath} from './spec-sandbox.js'
import {Labels, Names, type Workspace} from '../workspace.js'
import {GHAPP_SECRET} from '../github/plan.js'
import {sidecarChecks} from './health.js'
import {CONTAINER_TOKEN_PATH} from '../github/token-store.js'

export type CheckStatus = 'pass' | 'fail' | 'skip'

export interface DoctorCheck {
  name: string
  status: CheckStatus
  detail: string
}

export interface DoctorReport {
  container: string
  network: NetworkMode
  ok: boolean
  checks: DoctorCheck[]
}

/**
 * The rules in force, from firewall-status run as root: default-deny policies,
 * a final REJECT, and no ACCEPT in OUTPUT that is not one of ours.
 */
export function checkFirewallRules(status: FirewallStatus, peerPorts: string[] = []): DoctorCheck[] {
  if (!status.rulesReadable) return [{name: 'rules', status: 'fail', detail: 'the rules could not be read as root'}]
  const checks = [checkFamily('rules-ipv4', status.rules, 'icmp-port-unreachable', peerPorts), checkFamily('rules-ipv6', status.rules6, 'icmp6-port-unreachable', peerPorts)]
  checks.push(
    status.allowlist.length
      ? {name: 'allowlist', status: 'pass', detail: `${status.allowlist.length} domains`}
      : {name: 'allowlist', status: 'fail', detail: 'empty or missing (/run/agent-sandbox/allowlist)'},
  )
  const sets = ['agent-sandbox-allow4', 'agent-sandbox-allow6']
  const missing = sets.filter((s) => typeof status.ipsets[s] !== 'number')
  checks.push(
    missing.length
      ? {name: 'ipsets', status: 'fail', detail: `missing: ${missing.join(', ')}`}
      : {name: 'ipsets', status: 'pass', detail: sets.map((s) => `${s}=${status.ipsets[s]}`).join(' ')},
  )
  return checks
}

/** ACCEPT rules init-firewall.sh writes in OUTPUT: each is limited by one of these. */
const QUALIFIED_ACCEPT = [
  /^-A OUTPUT -o lo -j ACCEPT $/,
  /^-A OUTPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT $/,
  // allowlisted names: TCP 80 and 443 only (the gateway's uid alone, with a gateway)
  /^-A OUTPUT -p tcp -m multiport --dports 80,443 (-m owner --uid-owner \d+ )?-m set --match-set agent-sandbox-(allow4|allow6|net4) dst -j ACCEPT $/,
  // DNS out for the resolver's uid (dnsmasq, or root for Docker's embedded DNS), and loopback resolvers
  /^-A OUTPUT (-d \S+ )?-p (udp|tcp) -m (udp|tcp) --dport 53 -m owner --uid-owner \d+ -j ACCEPT $/,
  /^-A OUTPUT -d (127\.[\d.]+|::1)(\/\d+)? -m owner --uid-owner \d+ -j ACCEPT $/,
  /^-A OUTPUT -p ipv6-icmp -m icmp6 --icmpv6-type \d+ -m hl --hl-eq 255 -j ACCEPT $/,
  // the agent's web traffic, redirected to the egress gateway on loopback
  /^-A OUTPUT -d (127\.0\.0\.1\/32|::1\/128) -p tcp -m multiport --dports \d+,\d+ -j ACCEPT $/,
]

function checkFamily(name: string, rules: string[], reject: string, peerPorts: string[] = []): DoctorCheck {
  if (rules.length === 0) {
    return name === 'rules-ipv6'
      ? {name, status: 'pass', detail: 'no IPv6 rules loaded: IPv6 is disabled in this sandbox (init-firewall refuses to start otherwise)'}
      : {name, status: 'fail', detail: 'no IPv4 rules loaded'}
  }
  const problems: string[] = []
  for (const chain of ['INPUT', 'FORWARD', 'OUTPUT']) {
    const policy = rules.find((r) => r.startsWith(`-P ${chain} `))
    if (policy !== `-P ${chain} DROP`) problems.push(`${chain} policy is ${policy?.split(' ')[2] ?? 'unknown'}, not DROP`)
  }
  const output = rules.filter((r) => r.startsWith('-A OUTPUT '))
  for (const rule of output) {
    if (/ -j ACCEPT$/.test(rule) && !QUALIFIED_ACCEPT.some((q) => q.test(`${rule} `))) problems.push(`unexpected rule: ${rule}`)
  }
  // Declared ports: each ACCEPT names its own port and that port's set, nothing wider.
  for (const rule of rules.filter((r) => r.startsWith('-A AGENT-SANDBOX-PORTS '))) {
    const m = /^-A AGENT-SANDBOX-PORTS -p (tcp|udp) -m (tcp|udp) --dport (\d+) -m set --match-set agent-sandbox-(tcp|udp)(\d+)-[46] dst -j ACCEPT$/.exec(rule)
    if (!m || m[1] !== m[4] || m[3] !== m[5]) problems.push(`unexpected rule: ${rule}`)
  }
  // Inbound: a published port from the publisher's addresses (-s), or from any peer only where the user published it beyond loopback.
  const input = rules.filter((r) => r.startsWith('-A INPUT '))
  const related = input.findIndex((r) => r.includes('--ctstate RELATED,ESTABLISHED'))
  const redirect = input.findIndex((r) => / --icmpv?6?-type (redirect|5|137)\b.* -j DROP$/.test(r))
  if (redirect === -1 || redirect > related) problems.push('redirects from peers are not dropped before replies are accepted')
  for (const rule of input.filter((r) => / -j ACCEPT$/.test(r))) {
    const port = /^-A INPUT (-s \S+ )?-p tcp -m tcp --dport (\d+) -j ACCEPT$/.exec(rule)
    const known = /^-A INPUT (-i lo|-m conntrack --ctstate RELATED,ESTABLISHED|-p ipv6-icmp -m icmp6 --icmpv6-type (135|136)(\/0)? -m hl --hl-eq 255) -j ACCEPT$/.test(rule)
    if (!known && !(port && (port[1] || peerPorts.includes(port[2])))) problems.push(`inbound rule open to any peer: ${rule}`)
  }
  const last = output.at(-1)
  if (last !== `-A OUTPUT -j REJECT --reject-with ${reject}`) problems.push(`OUTPUT does not end with a REJECT (last rule: ${last ?? 'none'})`)
  if (!output.some((r) => r.includes('-j NFLOG'))) problems.push('denied packets are not logged (no NFLOG rule)')
  return problems.length
    ? {name, status: 'fail', detail: problems.join('; ')}
    : {name, status: 'pass', detail: `policy DROP, ${output.length} OUTPUT rules ending in REJECT, every ACCEPT limited to loopback, replies, DNS, allowlisted names' TCP 80/443 or a declared port; inbound only from the port publisher`}
}

/** Lines `pass|fail|skip<TAB>name<TAB>detail` from doctor.sh. */
export function parseDoctorOutput(text: string): DoctorCheck[] {
  const checks: DoctorCheck[] = []
  for (const line of text.split('\n')) {
    const [status, name, ...rest] = line.split('\t')
    if ((status === 'pass' || status === 'fail' || status === 'skip') && name) checks.push({name, status, detail: rest.join(' ')})
  }
  return checks
}

/** root-env.sh, for a root command the CLI runs in the sandbox without a script of its own. */
function rootEnvScript(): string {
  return readFileSync(join(baseImageDir, 'root-env.sh'), 'utf8')
}

export function doctorScript(): string {
  // With the libraries it sources, which an older image may not have.
  return ['mount-lib.sh', 'root-env.sh', 'doctor.sh'].map((f) => readFileSync(join(baseImageDir, f), 'utf8')).join('\n')
}

/**
 * One root exec reads the rules (firewall-status), one exec as `node` runs this
 * CLI's copy of doctor.sh through sandbox-exec, so that it also works on images
 * built before the script was installed in them.
 */
export async function runDoctor(ctx: Context, ws: Workspace, options: {branch?: string} = {}): Promise<DoctorReport> {
  const sandbox = await requireRunning(ctx, ws, options.branch)
  const checks: DoctorCheck[] = []
  const status = sandbox.network === 'firewall' ? await readFirewallStatus(ctx, sandbox) : undefined
  const peerPorts = ((sandbox.env ?? []).find((e) => e.startsWith('AGENT_SANDBOX_INBOUND_PEER_PORTS='))?.split('=')[1] ?? '').split(',').filter(Boolean)
  if (status) checks.push(...checkFirewallRules(status, peerPorts))
  else checks.push({name: 'network-mode', status: sandbox.network === 'none' ? 'pass' : 'fail', detail: sandbox.network === 'none' ? 'none: no network at all' : 'open: egress is NOT filtered'})
  // The protected mounts as root: in a compromised sandbox every process of node is killed (mount-watch.sh).
  const m = await ctx.engine.containers.exec(sandbox.id, ['bash', '-c', doctorScript(), 'sandbox-doctor', '--mounts'], {user: 'root'})
  const mounts = parseDoctorOutput(m.stdout)
  if ((m.exitCode !== 0 && m.exitCode !== 1) || mounts.length === 0) {
    throw new SandboxError(`doctor.sh --mounts failed in ${sandbox.name} (exit ${m.exitCode}): ${lastLine(m.stderr) || 'no checks reported'}`)
  }
  checks.push(...mounts)
  if (mounts.some((c) => c.name === 'compromised' && c.status === 'fail')) {
    checks.push({name: 'probes', status: 'skip', detail: 'not run: every process of node is killed in a compromised sandbox; restart it (agent-sandbox exec or start)'})
    return {container: sandbox.name, network: sandbox.network, ok: false, checks}
  }
  const r = await ctx.engine.containers.exec(sandbox.id, [SANDBOX_EXEC, 'bash', '-c', doctorScript(), 'sandbox-doctor', '--no-mounts'], {user: SANDBOX_USER})
  if (r.exitCode === NOT_READY) throw new NotReadyError(`${sandbox.name} is not ready: ${lastLine(r.stderr)}`, {hint: `restart it (agent-sandbox stop, then start) or see: docker logs ${sandbox.name}`})
  const probes = parseDoctorOutput(r.stdout)
  if ((r.exitCode !== 0 && r.exitCode !== 1) || probes.length === 0) {
    throw new SandboxError(`doctor.sh failed in ${sandbox.name} (exit ${r.exitCode}): ${lastLine(r.stderr) || 'no checks reported'}`)
  }
  if (r.exitCode === 1 && !probes.some((c) => c.status === 'fail')) {
    throw new SandboxError(`doctor.sh exited 1 in ${sandbox.name} without reporting a failed check: ${lastLine(r.stderr)}`)
  }
  checks.push(...probes, await checkHookConfig(ctx, sandbox, workspaceMountPath(ws)), await checkAgentLogins(ctx, sandbox.id))
  // Each sidecar as health.ts defines a whole sandbox; a failure names its repair.
  const info = await ctx.engine.containers.inspect(sandbox.id)
  if (info) checks.push(...(await sidecarChecks(ctx, info)))
  if (status) checks.push(await checkGateway(ctx, sandbox, status), ...(await checkGatewayProbes(ctx, sandbox, status)))
  return {container: sandbox.name, network: sandbox.network, ok: !checks.some((c) => c.status === 'fail'), checks}
}

/**
 * The egress gateway: running, answering the agent (a request for a name no
 * allowlist has must come back refused by the gateway itself), the firewall's
 * redirects to it in place, and ports 80/443 closed to every other uid.
 */
async function checkGateway(ctx: Context, sandbox: RunningSandbox, status: FirewallStatus): Promise<DoctorCheck> {
  const name = 'egress-gateway'
  if (!hasGateway(sandbox)) return {name, status: 'skip', detail: 'this sandbox was made without an egress gateway (an older agent-sandbox): recreate it to get one'}
  if (status.gateway !== 'running') return {name, status: 'fail', detail: `${Names.gateway(sandbox.name)} is not running: web traffic is refused (fail closed); run agent-sandbox start to restart it`}
  const uid = (sandbox.env ?? []).find((e) => e.startsWith('AGENT_SANDBOX_GATEWAY_UID='))?.split('=')[1]
  const problems: string[] = []
  const web = status.rules.filter((r) => r.includes('--dports 80,443') && r.includes('-j ACCEPT'))
  if (!web.length || !web.every((r) => r.includes(` --uid-owner ${uid} `))) problems.push("ports 80/443 of allowlisted addresses are not closed to every uid but the gateway's")
  const ipt = status.backend === 'legacy' ? 'iptables-legacy' : 'iptables'
  const [nat, probe] = await Promise.all([
    // As root's scripts do (root-env.sh): iptables reads XTABLES_LIBDIR and more from the container's environment, the agent's.
    ctx.engine.containers.exec(sandbox.id, ['bash', '-c', `${rootEnvScript()}\nclean_root_env\nexec "$@"`, 'root-env', ipt, '-t', 'nat', '-S', 'AGENT-SANDBOX-GW'], {user: 'root'}),
    ctx.engine.containers.exec(
      sandbox.id,
      [SANDBOX_EXEC, 'curl', '-sS', '-o', '/dev/null', '-w', '%{http_code} %header{x-agent-sandbox}', '--max-time', '5', '-H', 'Host: agent-sandbox-selftest.invalid', `http://127.0.0.1:${GATEWAY_DEFAULTS.httpPort}/`],
      {user: SANDBOX_USER},
    ),
  ])
  const redirects = nat.stdout.split('\n').filter((l) => l.includes('-j REDIRECT')).length
  if (redirects < 2) problems.push(`the firewall does not redirect web traffic to the gateway (${redirects} redirect rules)`)
  if (probe.stdout.trim() !== '403 blocked') problems.push(`the gateway did not refuse a name outside the allowlist (${probe.stdout.trim() || lastLine(probe.stderr) || `curl exit ${probe.exitCode}`})`)
  return problems.length
    ? {name, status: 'fail', detail: problems.join('; ')}
    : {name, status: 'pass', detail: `running; ${redirects} redirect rules; only its uid ${uid} reaches ports 80/443; refuses names outside the allowlist`}
}

/** What doctor sends the gateway from inside the sandbox, or why a probe does not apply. */
export interface GatewayProbes {
  secret: {name: string; host: string} | {skip: string}
  method: {host: string; method: string} | {skip: string}
}

const PROBE_METHODS = ['DELETE', 'PUT', 'POST', 'PATCH']

/**
 * The probes' targets: for a masked secret, an allowlisted name it is not
 * declared for (the sandbox's own allowDomains first, so that a test's own
 * site is chosen over a public default); for the rules, a blocked method of an
 * allowlisted host they restrict (the last-merged rules first: workspace and
 * live ones before the defaults). The gateway refuses both before it resolves
 * or connects anywhere, so a gateway that holds sends nothing out. Pure.
 */
export function planGatewayProbes(described: Pick<GatewayDescription, 'rules' | 'masked'>, allowlist: string[], ownDomains: string[]): GatewayProbes {
  const names = [...new Set([...ownDomains, ...allowlist].map((d) => normaliseHost(d.replace(/^\*\./, ''))).filter((d): d is string => d !== undefined && !isIpLiteral(d)))]
  let secret: GatewayProbes['secret'] = {skip: 'no masked secretEnv in this sandbox'}
  for (const s of described.masked) {
    const host = names.find((n) => !s.hosts.some((h) => ruleHostMatches(h, n)))
    secret = host ? {name: s.name, host} : {skip: `every allowlisted name is declared for ${s.name}`}
    if (host) break
  }
  let method: GatewayProbes['method'] = {skip: 'no httpRules restrict the methods of an allowlisted host'}
  for (const rule of [...described.rules].reverse()) {
    const host = rule.host.startsWith('*.') ? `agent-sandbox-doctor.${rule.host.slice(2)}` : rule.host.toLowerCase()
    if (!allowlistMatch(host, allowlist)) continue
    const mine = rulesFor(host, described.rules)
    const blocked = PROBE_METHODS.find((m) => mine.every((r) => r.methods !== undefined && !r.methods.includes(m)))
    if (blocked) {
      method = {host, method: blocked}
      break
    }
  }
  return {secret, method}
}

/**
 * The gateway's refusals, tried from inside the sandbox as the agent: a
 * masked secret's surrogate sent to a name it is not declared for, and a
 * method the rules do not admit. Each must come back refused by the gateway
 * (403, x-agent-sandbox: blocked) and be in its request log with the reason.
 */
async function checkGatewayProbes(ctx: Context, sandbox: RunningSandbox, status: FirewallStatus): Promise<DoctorCheck[]> {
  const rows = {secret: 'gateway-masked-secrets', method: 'gateway-http-rules'}
  if (!hasGateway(sandbox)) return Object.values(rows).map((name) => ({name, status: 'skip' as const, detail: 'this sandbox has no egress gateway'}))
  const fail = (detail: string) => Object.values(rows).map((name) => ({name, status: 'fail' as const, detail}))
  if (status.gateway !== 'running') return fail(`${Names.gateway(sandbox.name)} is not running: its refusals cannot be shown (web traffic is refused, fail closed); run agent-sandbox start`)
  let described: GatewayDescription
  try {
    described = await describeGateway(ctx, sandbox.name)
  } catch (error) {
    return fail((error as Error).message)
  }
  const own = parseDomainEnv((sandbox.env ?? []).find((e) => e.startsWith('AGENT_SANDBOX_ALLOW_DOMAINS='))?.slice('AGENT_SANDBOX_ALLOW_DOMAINS='.length))
  const probes = planGatewayProbes(described, status.allowlist, own)
  const nonce = randomBytes(6).toString('hex')
  const path = (what: string) => `/agent-sandbox-doctor/${nonce}/${what}`
  const curl = `curl -sS -o /dev/null -w '%{http_code} %header{x-agent-sandbox}\\n' --max-time 5 http://127.0.0.1:${GATEWAY_DEFAULTS.httpPort}`
  // One exec as the agent: the surrogate is read from its own environment (the CLI never sees it).
  const script = [
    'set -u',
    // The GitHub App's surrogate is a file (github/token-store.ts), a secretEnv one a variable.
    `secret() { local v; if [ "$1" = ${GHAPP_SECRET} ]; then v=$(cat ${CONTAINER_TOKEN_PATH} 2> /dev/null); else v=\${!1:-}; fi; [ -n "$v" ] || { echo "no-surrogate"; return; }; ` +
      curl +
      '"$3" -H "Host: $2" -H "X-Agent-Sandbox-Doctor: $v" || echo "curl-failed"; }',
    'method() { ' + curl + '"$3" -X "$2" -H "Host: $1" || echo "curl-failed"; }',
    'if [ "$1" = - ]; then echo skip; else secret "$1" "$2" "$3"; fi',
    'if [ "$4" = - ]; then echo skip; else method "$4" "$5" "$6"; fi',
  ].join('\n')
  const s = 'skip' in probes.secret ? ['-', '-', '-'] : [probes.secret.name, probes.secret.host, path('secret')]
  const m = 'skip' in probes.method ? ['-', '-', '-'] : [probes.method.host, probes.method.method, path('method')]
  const r = await ctx.engine.containers.exec(sandbox.id, [SANDBOX_EXEC, 'bash', '-c', script, 'gateway-probes', ...s, ...m], {user: SANDBOX_USER})
  const [secretOut = '', methodOut = ''] = r.stdout.split('\n')
  const logged = await ctx.engine.containers.exec(Names.gateway(sandbox.name), ['grep', '-F', nonce, `${GATEWAY_DEFAULTS.stateDir}/${REQUEST_LOG}`])
  const entries = parseRequestLog(logged.stdout)
  const judge = (name: string, what: string, out: string, probePath: string, reason: string): DoctorCheck => {
    if (out.trim() !== '403 blocked') return {name, status: 'fail', detail: `${what} was not refused by the gateway (${out.trim() || lastLine(r.stderr) || `exit ${r.exitCode}`})`}
    const entry = entries.find((e) => e.path === probePath)
    if (!entry || entry.decision !== 'blocked' || !entry.rule.startsWith(reason)) return {name, status: 'fail', detail: `${what} was refused, but the request log does not say so (${entry ? entry.rule : 'no entry'})`}
    return {name, status: 'pass', detail: `${what}: refused (403) and logged: ${entry.rule}`}
  }
  return [
    'skip' in probes.secret
      ? {name: rows.secret, status: 'skip', detail: probes.secret.skip}
      : judge(rows.secret, `${probes.secret.name}'s surrogate sent to ${probes.secret.host}`, secretOut, path('secret'), `secret ${probes.secret.name} is not for ${probes.secret.host}`),
    'skip' in probes.method
      ? {name: rows.method, status: 'skip', detail: probes.method.skip}
      : judge(rows.method, `${probes.method.method} to ${probes.method.host}`, methodOut, path('method'), `method ${probes.method.method} not in`),
  ]
}

/** The hook frameworks' configuration found at creation is read-only for the agent (a real access(W_OK) as the agent). */
async function checkHookConfig(ctx: Context, sandbox: RunningSandbox, root: string): Promise<DoctorCheck> {
  const found = parseHookConfigLabel(sandbox.labels?.[Labels.hookConfig])
  if (!found) return {name: 'hook-config', status: 'skip', detail: 'no hook framework detected at creation (or protectHookConfig is false)'}
  const what = `${found.frameworks.join(', ')}${found.embedded.length ? `; package.json ${found.embedded.join(', ')} run from HEAD` : ''}`
  if (!found.protect.length) return {name: 'hook-config', status: 'pass', detail: `${what}; no configuration file to protect`}
  const r = await ctx.engine.containers.exec(sandbox.id, [SANDBOX_EXEC, 'sh', '-c', 'for f; do [ -w "$f" ] && printf "%s\\n" "$f"; done; exit 0', 'hook-config', ...found.protect.map((p) => `${root}/${p}`)], {user: SANDBOX_USER})
  const writable = r.stdout.split('\n').filter(Boolean)
  if (r.exitCode !== 0) return {name: 'hook-config', status: 'fail', detail: `could not check ${found.protect.join(', ')}: ${lastLine(r.stderr)}`}
  if (writable.length) return {name: 'hook-config', status: 'fail', detail: `${what}; writable by the agent: ${writable.join(', ')}`}
  return {name: 'hook-config', status: 'pass', detail: `${what}; read-only: ${found.protect.join(', ')}`}
}

export function formatDoctor(report: DoctorReport): string {
  const rows = report.checks.map((c) => [c.status.toUpperCase(), c.name, c.detail])
  const count = (s: CheckStatus) => report.checks.filter((c) => c.status === s).length
  return [
    `${report.container} (network mode "${report.network}")`,
    ...table([['RESULT', 'CHECK', 'DETAIL'], ...rows]),
    '',
    `${count('pass')} passed, ${count('fail')} failed, ${count('skip')} skipped${report.ok ? '' : ': this sandbox does NOT hold'}`,
  ].join('\n')
}

/**
 * A sandbox's egress gateway as a container (its program is network/gateway/):
 * (re)made and handed its CA and secrets over an exec's stdin, waited for until
 * it serves, and made anew for a running sandbox with what was added live.
 * A one-shot run's gateway starts here too.
 */
import type {ContainerInfo} from '../engine/index.js'
import {NotReadyError} from '../errors.js'
import {STATE_DIR} from '../contract.js'
import {silentReporter} from '../reporter.js'
import {Labels, type Workspace} from '../workspace.js'
import type {Context} from '../context.js'
import {GATEWAY_DEFAULTS, SECRETS_FILE} from '../network/gateway/ports.js'
import type {GatewaySecrets} from '../network/gateway/server.js'
import {liveRules} from '../network/gateway-live-rules.js'
import {gatewayAddRule, gatewayAllow} from '../network/firewall.js'
import {ghappSecret, type GhappPlan} from '../github/plan.js'
import {readToken, tokenPaths} from '../github/token-store.js'
import {deliverToGateway} from '../github/refresher.js'
import type {SandboxSpec} from './spec.js'
import {toCreateOptions} from './spec-render.js'
import {engineTraits, heldSecrets, prepareSandbox, type SandboxOptions} from './prepare.js'
import {removeCompanion} from './remove-companion.js'

const GATEWAY_PORTS = [GATEWAY_DEFAULTS.httpPort, GATEWAY_DEFAULTS.tlsPort]

/**
 * (Re)create and start a sandbox's egress gateway, and wait until it serves:
 * the sandbox's web traffic is redirected to it, so a sandbox without it has
 * no web at all (fail closed). If it does not come up, start fails (exit 6)
 * with its last message.
 */
export async function startGatewayContainer(ctx: Context, gateway: SandboxSpec, secrets: GatewaySecrets | undefined, ghapp: GhappPlan | undefined, created?: Promise<string>): Promise<void> {
  const id = await (created ?? createGateway(ctx, gateway))
  await ctx.engine.containers.start(id)
  const env = ctx.env ?? process.env
  // The App token as it is on the host now (the refresher may renew it at any time: see below).
  const app = ghapp && ghappSecret(ghapp, env)
  const all = secrets && {...secrets, secrets: [...(secrets.secrets ?? []), ...(app ? [app] : [])]}
  const [httpPort, tlsPort] = GATEWAY_PORTS
  // One exec, no node of its own: first the secrets, before it is probed ready, into its tmpfs over stdin (so
  // neither docker inspect nor the sandbox sees them; renamed into place, so that the gateway never reads half
  // of them); then bash's /dev/tcp, retried (the gateway's own uid may connect to itself).
  const file = `${GATEWAY_DEFAULTS.stateDir}/${SECRETS_FILE}`
  const hand = all ? `(umask 077 && cat > ${file}.new && mv -f ${file}.new ${file}) || exit 3; ` : ''
  // Every 20 ms for 10 s: node boots in about 0.1 s here, and a coarser step would add up to its length to every start.
  const probe = `${hand}for i in $(seq 500); do (: < /dev/tcp/127.0.0.1/${httpPort} && : < /dev/tcp/127.0.0.1/${tlsPort}) 2> /dev/null && exit 0; sleep 0.02; done; exit 1`
  const result = await ctx.engine.containers
    .exec(id, ['bash', '-c', probe], all ? {stdin: JSON.stringify(all)} : {})
    .catch((error: unknown) => ({exitCode: -1, stdout: '', stderr: String(error)}))
  const handed = {exitCode: result.exitCode === 3 ? 3 : 0, stderr: result.stderr}
  if (result.exitCode === 0) {
    // A renewal between reading the token and handing it over went to the gateway this one replaced: hand it again.
    const now = ghapp && app ? readToken(tokenPaths(ghapp.name, env)) : undefined
    if (ghapp && now && now !== app?.value) await deliverToGateway(ctx.engine, ghapp.name, now)
    return
  }
  const info = await ctx.engine.containers.inspect(id)
  const logs = info ? await ctx.engine.containers.logs(id, 20).catch(() => '') : ''
  const lines = [...logs.split('\n'), ...handed.stderr.split('\n')].map((l) => l.trim())
  // Its own last word, else node's error line (node ends a crash with its version, which says nothing).
  const reason =
    lines.filter((l) => l.startsWith('egress-gateway: ')).pop()?.replace(/^egress-gateway: /, '') ??
    lines.find((l) => /^\w*Error: /.test(l)) ??
    (info?.running ? (handed.exitCode === 0 ? 'it does not listen' : 'it did not take its secrets') : 'it exited')
  throw new NotReadyError(`the egress gateway ${gateway.name} did not start: ${reason}`, {hint: 'without it the sandbox has no web access; fix the cause and run start again'})
}

/**
 * Create a gateway container (any left with its name goes first). The container
 * whose network namespace it joins must exist, not yet run: a run creates its
 * gateway while the run container starts.
 */
export async function createGateway(ctx: Context, gateway: SandboxSpec): Promise<string> {
  await removeCompanion(ctx, gateway.name)
  return ctx.engine.containers.create(toCreateOptions(gateway))
}

/**
 * A one-shot run's gateway: started in the run container's network namespace
 * while its entrypoint waits (entrypoint.sh wait_gateway) for the gateway's TLS
 * port to accept. The gateway listens only once it holds its CA and secrets
 * (src/gateway.ts), and before the command starts nothing else in that
 * namespace listens there: the command so never starts before the gateway is
 * ready.
 */
export async function startRunGateway(ctx: Context, gateway: SandboxSpec, secrets: GatewaySecrets | undefined, created: Promise<string>): Promise<void> {
  await startGatewayContainer(ctx, gateway, secrets, undefined, created)
}

/**
 * A running sandbox's gateway, made anew (it does not serve the sandbox:
 * health.ts), with what `firewall allow` added live since the sandbox started.
 */
export async function remakeGateway(ctx: Context, ws: Workspace, sandbox: ContainerInfo, options: SandboxOptions): Promise<void> {
  // Every surrogate the sandbox holds, whatever this command's environment has: those sent elsewhere stay refused.
  const prepared = await prepareSandbox(ws, {...options, held: heldSecrets(sandbox), ...(await engineTraits(ctx))}, ctx.env)
  if (!prepared.gateway) return
  const reporter = ctx.reporter ?? silentReporter
  for (const n of prepared.unvalued) {
    reporter.warn(`secretEnv ${n} is not set here: the new egress gateway of ${sandbox.name} refuses its surrogate at every host, its own too; set ${n} and run the command again to restore it`)
  }
  if (sandbox.labels[Labels.spec] !== prepared.spec.labels[Labels.spec]) {
    reporter.warn(`the settings or secretEnv variables differ from those ${sandbox.name} was started with: its new gateway follows the current ones; restart the sandbox (agent-sandbox stop, then start) to bring both in line`)
  }
  await startGatewayContainer(ctx, prepared.gateway, prepared.gatewaySecrets, prepared.ghapp)
  // Domains added live since the sandbox started (firewall allow) are in its firewall's allowlist only.
  const saved = await ctx.engine.containers.exec(sandbox.id, ['cat', `${STATE_DIR}/allowlist`])
  const grants = await ctx.engine.containers.exec(sandbox.id, ['cat', `${STATE_DIR}/grants`])
  const domains = saved.exitCode === 0 ? lastingEntries(saved.stdout, grants.exitCode === 0 ? grants.stdout : '') : []
  if (domains.length) await gatewayAllow(ctx, sandbox.name, domains)
  // Its live httpRules are kept on the host, per start of the sandbox (gateway-ca.ts).
  for (const rule of liveRules(sandbox.name, sandbox.startedAt, ctx.env)) await gatewayAddRule(ctx, sandbox.name, rule)
}

/**
 * The firewall's allowlist entries a gateway made anew is given again: all but those of a grant that
 * expires or is limited (`ENTRY UNTIL [limited]` in the firewall's grants file: UNTIL not 0, or
 * `limited`). Such a grant's expiry, once or upload budget lived in the old gateway: it is not made
 * again unlimited, the user grants it anew. Pure.
 */
export function lastingEntries(allowlist: string, grants: string): string[] {
  const expiring = new Set(
    grants
      .split('\n')
      .map((l) => l.trim().split(/\s+/))
      .filter(([entry, until, limited]) => entry && ((until && until !== '0') || limited))
      .map(([entry]) => entry),
  )
  return allowlist.split('\n').filter((e) => e && !expiring.has(e))
}

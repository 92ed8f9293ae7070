/**
 * The one definition of a whole sandbox: the sandbox runs, and each of its
 * sidecars (the push gate, the egress gateway) runs, was started after the
 * sandbox (so it is in the sandbox's current network namespace: one started
 * before an engine-level restart of the sandbox serves a namespace that is
 * gone), and listens there (which means it holds its state: the gateway
 * listens only once it has been handed its CA and secrets, and a gate or
 * gateway that the engine restarted on its own has lost them or its
 * namespace). `start`, `exec` and `shell` check this on their way in
 * (sandbox-exec's /dev/tcp connects on the warm path, sidecarFaults after a
 * refusal), and lifecycle.ts repairs what is found; `doctor` names the repair.
 */
import type {ContainerInfo} from '../engine/index.js'
import type {Context} from '../context.js'
import {GATEWAY_DEFAULTS} from '../network/gateway/ports.js'
import {Labels, Names} from '../workspace.js'
import {GATE_PORT} from '../contract.js'

export type Sidecar = 'gate' | 'gateway'

/** A sidecar that does not serve its sandbox, and why. */
export interface SidecarFault {
  sidecar: Sidecar
  /** The sidecar container's name. */
  name: string
  why: string
}

/** What each sidecar is called in a message, and the port it listens on in the sandbox's network namespace. */
const SIDECARS: Record<Sidecar, {what: string; port: number}> = {
  gate: {what: 'push gate', port: GATE_PORT},
  gateway: {what: 'egress gateway', port: GATEWAY_DEFAULTS.tlsPort},
}

/** The sidecars a sandbox has: a gate when its git goes through one, a gateway with network firewall. Pure. */
export function sidecarsOf(sandbox: Pick<ContainerInfo, 'labels' | 'env'>): Sidecar[] {
  const sidecars: Sidecar[] = []
  if (sandbox.labels[Labels.git] === 'gate' && sandbox.labels[Labels.kind] === 'sandbox') sidecars.push('gate')
  if (sandbox.env.some((e) => e.startsWith('AGENT_SANDBOX_GATEWAY_UID='))) sidecars.push('gateway')
  return sidecars
}

export function sidecarName(sidecar: Sidecar, sandbox: string): string {
  return sidecar === 'gate' ? Names.gate(sandbox) : Names.gateway(sandbox)
}

/**
 * Why a sidecar container does not serve its running sandbox, from the engine's
 * view alone (undefined: it may, if it listens). Pure.
 */
export function engineFault(sidecar: Pick<ContainerInfo, 'running' | 'startedAt'> | undefined, sandbox: Pick<ContainerInfo, 'startedAt'>): string | undefined {
  if (!sidecar) return 'was missing'
  if (!sidecar.running) return 'was stopped'
  if (Date.parse(sidecar.startedAt) < Date.parse(sandbox.startedAt)) return 'was left in the network of an earlier start of the sandbox'
  return undefined
}

/**
 * The sidecars that do not serve a running sandbox: one inspect each, and for
 * those the engine shows running, one exec in the sandbox that connects to
 * their ports (bash's /dev/tcp, as sandbox-exec does).
 */
export async function sidecarFaults(ctx: Context, sandbox: ContainerInfo): Promise<SidecarFault[]> {
  const sidecars = sidecarsOf(sandbox)
  if (sidecars.length === 0) return []
  const seen = await Promise.all(sidecars.map(async (sidecar) => ({sidecar, name: sidecarName(sidecar, sandbox.name), info: await ctx.engine.containers.inspect(sidecarName(sidecar, sandbox.name))})))
  const faults: SidecarFault[] = []
  const running: typeof seen = []
  for (const s of seen) {
    const why = engineFault(s.info, sandbox)
    if (why) faults.push({sidecar: s.sidecar, name: s.name, why})
    else running.push(s)
  }
  if (running.length) {
    const silent = await notListening(ctx, sandbox.id, running.map((s) => SIDECARS[s.sidecar].port))
    for (const s of running) {
      if (silent.includes(SIDECARS[s.sidecar].port)) faults.push({sidecar: s.sidecar, name: s.name, why: 'did not listen in the sandbox (it lost its state or its network in a restart)'})
    }
  }
  return faults
}

/** Which of `ports` nothing listens on in the sandbox's network namespace (all of them when the exec itself fails). */
async function notListening(ctx: Context, sandbox: string, ports: number[]): Promise<number[]> {
  const script = 'for p; do { exec 3<> "/dev/tcp/127.0.0.1/$p"; } 2> /dev/null && exec 3>&- || echo "$p"; done'
  const r = await ctx.engine.containers.exec(sandbox, ['bash', '-c', script, 'sidecar-probe', ...ports.map(String)], {user: 'root'}).catch(() => undefined)
  if (!r || r.exitCode !== 0) return ports
  return r.stdout.split('\n').filter(Boolean).map(Number)
}

/** The one line a repair prints. Pure. */
export function repairLine(sandbox: string, fault: SidecarFault): string {
  return `repairing ${sandbox}: its ${SIDECARS[fault.sidecar].what} ${fault.name} ${fault.why}; making it anew`
}

/** doctor's rows for the sidecars: each passes, fails naming the repair, or is skipped for a sandbox without one. */
export async function sidecarChecks(ctx: Context, sandbox: ContainerInfo): Promise<Array<{name: string; status: 'pass' | 'fail' | 'skip'; detail: string}>> {
  const faults = await sidecarFaults(ctx, sandbox)
  const own = sidecarsOf(sandbox)
  return (['gate', 'gateway'] as const).map((sidecar) => {
    const name = `sidecar-${sidecar}`
    const {what, port} = SIDECARS[sidecar]
    if (!own.includes(sidecar)) return {name, status: 'skip' as const, detail: `this sandbox has no ${what}`}
    const fault = faults.find((f) => f.sidecar === sidecar)
    if (fault) {
      return {name, status: 'fail' as const, detail: `${fault.name} ${fault.why}; repair: run agent-sandbox start (or any exec or shell) on the host, which makes it anew`}
    }
    return {name, status: 'pass' as const, detail: `${sidecarName(sidecar, sandbox.name)} runs, was started after the sandbox, and listens on 127.0.0.1:${port} in its network`}
  })
}

/**
 * A sandbox's push gate as a container: (re)made as the sandbox starts, checked
 * to be serving, and made anew when it no longer serves a running sandbox.
 */
import type {ContainerInfo} from '../engine/index.js'
import {NotReadyError} from '../errors.js'
import {Names, type Workspace} from '../workspace.js'
import type {Context} from '../context.js'
import type {SandboxSpec} from './spec.js'
import {toCreateOptions} from './spec-render.js'
import {engineTraits, prepareSandbox, type SandboxOptions} from './prepare.js'
import {removeCompanion} from './remove-companion.js'

/**
 * (Re)create and start a sandbox's push gate. It joins the sandbox's network
 * namespace as it starts, so it is made anew whenever the sandbox (re)starts.
 */
export async function startGate(ctx: Context, gate: SandboxSpec): Promise<void> {
  await removeCompanion(ctx, gate.name)
  const id = await ctx.engine.containers.create(toCreateOptions(gate))
  await ctx.engine.containers.start(id)
}

/** The gate must be serving: if its program stopped, say why (its last log line). */
export async function checkGate(ctx: Context, name: string): Promise<void> {
  const info = await ctx.engine.containers.inspect(name)
  if (info?.running) return
  const logs = info ? await ctx.engine.containers.logs(info.id, 5).catch(() => '') : ''
  const reason = logs.split('\n').filter((l) => l.startsWith('git-gate: ')).pop()?.replace(/^git-gate: /, '') ?? 'it exited'
  throw new NotReadyError(`the push gate ${name} did not start: ${reason}`, {hint: 'fix the cause and run start again'})
}

/** A running sandbox's gate, made anew (it does not serve the sandbox: health.ts). */
export async function remakeGate(ctx: Context, ws: Workspace, sandbox: ContainerInfo, options: SandboxOptions): Promise<void> {
  const name = Names.gate(sandbox.name)
  const prepared = await prepareSandbox(ws, {...options, ...(await engineTraits(ctx))}, ctx.env)
  if (!prepared.gate) return
  await startGate(ctx, prepared.gate)
  await checkGate(ctx, name)
}

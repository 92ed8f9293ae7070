/**
 * A companion container (a sandbox's push gate or egress gateway, a run's
 * gateway) removed by name: before it is made anew, and with its sandbox.
 */
import type {Context} from '../context.js'

/** Remove a gate or gateway (a run's too) by name: missing is fine. */
export async function removeCompanion(ctx: Context, name: string): Promise<void> {
  const existing = await ctx.engine.containers.inspect(name)
  if (existing) await ctx.engine.containers.remove(existing.id, {force: true})
}

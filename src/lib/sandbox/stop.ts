/**
 * `stop`: the sandbox and its push gate, without the lifecycle module (settings,
 * zod, the spec): stopping needs the engine and the names, nothing else.
 */
import type {Engine} from '../engine/index.js'
import {Names, type Workspace} from '../workspace.js'

/**
 * Stop the sandbox, then signal its gate and gateway to end (they live in its
 * network namespace, which has no network once it stops). The engine does not
 * wait for a signalled container, so the sidecars' teardown follows on its
 * side; asked after the stop has returned, it does not compete with the stop
 * the user waits for (bench `stop`: 1.48× against 1.60× with all three at once,
 * docs/PERFORMANCE.md). A start makes them anew anyway.
 */
export async function stopSandbox(ctx: {engine: Engine}, ws: Workspace, branch?: string): Promise<'stopped' | 'not-running' | 'missing'> {
  const name = Names.container(ws, branch)
  const sandbox = await ctx.engine.containers.stop(name)
  await Promise.all([ctx.engine.containers.kill(Names.gate(name), 'SIGTERM'), ctx.engine.containers.kill(Names.gateway(name), 'SIGTERM')])
  return sandbox
}

/**
 * `stop`: the sandbox and its push gate, without the lifecycle module (settings,
 * zod, the spec): stopping needs the engine and the names, nothing else.
 */
import type {Engine} from '../engine/index.js'
import {Names, type Workspace} from '../workspace.js'

/**
 * Stop the sandbox and signal its gate and gateway to end (they live in its
 * network namespace, which has no network once it stops), all three at once.
 * The engine does not wait for a signalled container, so `stop` costs one
 * container stop: the sidecars' own teardown follows on the engine's side, and
 * a start makes them anew anyway.
 */
export async function stopSandbox(ctx: {engine: Engine}, ws: Workspace, branch?: string): Promise<'stopped' | 'not-running' | 'missing'> {
  const name = Names.container(ws, branch)
  const [sandbox] = await Promise.all([ctx.engine.containers.stop(name), ctx.engine.containers.kill(Names.gate(name), 'SIGTERM'), ctx.engine.containers.kill(Names.gateway(name), 'SIGTERM')])
  return sandbox
}

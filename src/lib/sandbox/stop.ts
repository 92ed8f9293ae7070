/**
 * `stop`: the sandbox and its push gate, without the lifecycle module (settings,
 * zod, the spec): stopping needs the engine and the names, nothing else.
 */
import type {Engine} from '../engine/index.js'
import {Names, type Workspace} from '../workspace.js'

/** Stop the sandbox, its gate and its gateway (which live in the sandbox's network namespace: it goes with it). */
export async function stopSandbox(ctx: {engine: Engine}, ws: Workspace, branch?: string): Promise<'stopped' | 'not-running' | 'missing'> {
  const name = Names.container(ws, branch)
  // By name, both at once: no inspect first, the engine says what each one was.
  const [sandbox] = await Promise.all([ctx.engine.containers.stop(name), ctx.engine.containers.stop(Names.gate(name), 1), ctx.engine.containers.stop(Names.gateway(name), 1)])
  return sandbox
}

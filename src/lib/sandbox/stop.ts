/**
 * `stop`: the sandbox and its push gate, without the lifecycle module (settings,
 * the schema, the spec): stopping needs the engine and the names, nothing else.
 */
import type {Engine} from '../engine/index.js'
import {Names, type Workspace} from '../workspace.js'
import {pullGatewayLogins} from '../logins/login-sync.js'

/**
 * Stop the sandbox, then signal its gate and gateway to end (they live in its
 * network namespace, which has no network once it stops). The engine does not
 * wait for a signalled container, and neither does `stop`: the two signals
 * are handed to the engine and not waited for (`answer: false`), so the
 * sidecars' teardown follows on the engine's side after the command has
 * returned, and never competes with the stop the user waits for (bench
 * `stop`, docs/PERFORMANCE.md). A sidecar the signal misses (the engine
 * failed it) is made anew by the next start anyway, and holds no network.
 */
export async function stopSandbox(ctx: {engine: Engine}, ws: Workspace, branch?: string): Promise<'stopped' | 'not-running' | 'missing'> {
  const name = Names.container(ws, branch)
  // Tokens its gateway minted (logins/login-sync.ts) go to the host's store first: the gateway's tmpfs goes with it.
  await pullGatewayLogins(ctx.engine, Names.gateway(name))
  const sandbox = await ctx.engine.containers.stop(name)
  await Promise.all([Names.gate(name), Names.gateway(name)].map((sidecar) => ctx.engine.containers.kill(sidecar, 'SIGTERM', {answer: false})))
  return sandbox
}

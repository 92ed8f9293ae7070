/**
 * Short-lived helper containers (branch provisioning, agent config volumes),
 * made from a spec (buildHelperSpec) over the engine API like every other
 * container of ours: created, given their input as a file, attached, started,
 * waited for and removed, whatever happens.
 */
import type {Context} from '../context.js'
import {untilAborted} from '../errors.js'
import {tarArchive} from '../util/tar.js'
import type {SandboxSpec} from './spec.js'
import {toCreateOptions} from './spec-render.js'

/** Where a helper finds its input (`exec < HELPER_INPUT` in its program). */
export const HELPER_INPUT = '/tmp/agent-sandbox-input'

export interface HelperOutcome {
  exitCode: number
  stdout: string
  stderr: string
}

export async function runHelper(ctx: Context, spec: SandboxSpec, options: {input?: Buffer; timeoutMs?: number} = {}): Promise<HelperOutcome> {
  const {containers} = ctx.engine
  const id = await containers.create(toCreateOptions(spec))
  let timer: NodeJS.Timeout | undefined
  try {
    if (options.input) await containers.putArchive(id, '/tmp', tarArchive([{name: HELPER_INPUT.slice('/tmp/'.length), content: options.input}]))
    const out: Buffer[] = []
    const err: Buffer[] = []
    const {ended} = await containers.attach(id, {onStdout: (c) => out.push(c), onStderr: (c) => err.push(c)})
    await containers.start(id)
    if (options.timeoutMs) timer = setTimeout(() => void containers.kill(id).catch(() => undefined), options.timeoutMs)
    const exitCode = await untilAborted(ctx.signal, containers.wait(id))
    await ended
    return {exitCode, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8')}
  } finally {
    clearTimeout(timer)
    await containers.remove(id, {force: true}).catch(() => undefined)
  }
}

/**
 * A compromised sandbox: mount-watch (base-image/mount-watch.sh) found that the
 * host detached one of its read-only protected mounts (a rename over the mount
 * point, or its directory removed: Linux detaches the mount in every other
 * mount namespace), killed every process of `node`, and wrote the reason to
 * STATE_DIR/compromised. Only a restart brings the mounts back.
 */
import type {Engine} from '../engine/index.js'
import {NotReadyError} from '../errors.js'
import {STATE_DIR} from '../contract.js'

export const COMPROMISED_FILE = `${STATE_DIR}/compromised`
/** sandbox-exec's exit code when it refuses (set-up failed, not ready, or compromised). */
export const SANDBOX_EXEC_REFUSED = 125

/** The reason in the container's compromised marker, or undefined when there is none (one root exec). */
export async function compromisedReason(engine: Engine, container: string): Promise<string | undefined> {
  const r = await engine.containers.exec(container, ['cat', COMPROMISED_FILE], {user: 'root'}).catch(() => undefined)
  if (!r || r.exitCode !== 0) return undefined
  return r.stdout.trim().split('\n')[0] || 'a protected path was unmounted'
}

/** The container path mount-watch named in its reason. Pure. */
export function lostMount(reason: string): string | undefined {
  return /^protected path (.*) was unmounted/.exec(reason)?.[1]
}

/** Refusal: the restart could not put the read-only mounts back (exit 6). */
export class MountsNotRestoredError extends NotReadyError {}

/** `restarted NAME: REASON`, the one line a restart prints. Pure. */
export function restartNotice(name: string, reason: string): string {
  return `restarted ${name} to restore its read-only mounts: ${reason}`
}

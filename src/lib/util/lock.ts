/** Per-workspace locks on the host, so racing CLI calls serialise instead of colliding. */
import {mkdirSync, writeFileSync} from 'node:fs'
import {homedir} from 'node:os'
import {join} from 'node:path'
import {ConflictError} from '../errors.js'
import {lazyImport} from './lazy-import.js'

export function lockDir(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_CACHE_HOME || join(env.HOME || homedir(), '.cache')
  return join(base, 'agent-sandbox', 'locks')
}

/** Run `work` while holding the named lock (waits up to ~2 minutes for another holder). */
export async function withLock<T>(name: string, work: () => Promise<T>, env: NodeJS.ProcessEnv = process.env): Promise<T> {
  const {default: lockfile} = await lazyImport<{default: typeof import('proper-lockfile')}>('proper-lockfile')
  const dir = lockDir(env)
  mkdirSync(dir, {recursive: true})
  const file = join(dir, name.replace(/[^A-Za-z0-9_.-]/g, '_'))
  writeFileSync(file, '', {flag: 'a'})
  let release: () => Promise<void>
  try {
    release = await lockfile.lock(file, {
      stale: 20_000,
      update: 5_000,
      retries: {retries: 600, factor: 1.2, minTimeout: 50, maxTimeout: 250},
      realpath: false,
    })
  } catch (error) {
    throw new ConflictError(`another agent-sandbox command holds the lock ${file}`, {
      cause: error,
      hint: 'wait for it to finish; if none is running, the lock clears itself within 20 s',
    })
  }
  try {
    return await work()
  } finally {
    await release().catch(() => undefined)
  }
}

/**
 * The per-sandbox token refresher that `start` launches when no daemon runs:
 * this CLI's own `token-daemon --container NAME`, detached. Here, in the command
 * layer, because the library never starts the CLI (src/lib/github/refresher.ts
 * takes this as its launcher).
 */
import {join} from 'node:path'
import type {RefresherLauncher} from '../lib/github/refresher.js'
import {packageRoot} from '../lib/util/assets.js'
import {builtin} from '../lib/util/lazy-import.js'

export const launchRefresher: RefresherLauncher = (name, {log, cwd, env}) => {
  // node:child_process only now: every command's context carries this launcher, and few call it.
  const {spawn} = builtin<typeof import('node:child_process')>('node:child_process')
  const child = spawn(process.execPath, [join(packageRoot, 'bin', 'run.cjs'), 'token-daemon', '--container', name], {
    detached: true,
    stdio: ['ignore', log, log],
    env,
    cwd,
  })
  child.unref()
  return child.pid
}

/**
 * The endpoint of the current `docker context` (Docker Desktop, colima and
 * remote hosts use contexts), read from the CLI's own files without running it.
 */
import {readFileSync} from 'node:fs'
import {homedir} from 'node:os'
import {join} from 'node:path'
import {sha256Hex} from '../util/hash.js'

export function currentContextHost(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const configDir = env.DOCKER_CONFIG || join(homedir(), '.docker')
  let name = env.DOCKER_CONTEXT
  if (!name) {
    try {
      const config = JSON.parse(readFileSync(join(configDir, 'config.json'), 'utf8')) as {currentContext?: string}
      name = config.currentContext
    } catch {
      return undefined
    }
  }
  if (!name || name === 'default') return undefined
  const id = sha256Hex(name)
  try {
    const meta = JSON.parse(readFileSync(join(configDir, 'contexts', 'meta', id, 'meta.json'), 'utf8')) as {
      Endpoints?: {docker?: {Host?: string}}
    }
    return meta.Endpoints?.docker?.Host || undefined
  } catch {
    return undefined
  }
}

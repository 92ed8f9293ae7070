/** The host's git identity (user.name and user.email), and nothing else of its config. */
import {run} from '../util/proc.js'

export async function hostGitIdentity(): Promise<{name?: string; email?: string}> {
  const read = async (key: string) => {
    try {
      const result = await run('git', ['config', '--global', '--get', key], {allowFailure: true, timeoutMs: 5000})
      return result.exitCode === 0 ? result.stdout.trim() || undefined : undefined
    } catch {
      return undefined // no git on the host
    }
  }
  const [name, email] = await Promise.all([read('user.name'), read('user.email')])
  return {name, email}
}

/**
 * doctor's `agent-logins` check: no real credential of the agents' logins is
 * visible in the sandbox. A root exec lists the SHA-256 of every token-like
 * string in the files an agent could read (home, /tmp, /run, /etc, /var/tmp)
 * and in every process's environment and command line; the CLI compares them
 * with the hashes of the real values it holds (the host's login store, and
 * ANTHROPIC_API_KEY and OPENAI_API_KEY as set here). No value is printed or
 * sent either way.
 */
import {createHash} from 'node:crypto'
import {readFileSync} from 'node:fs'
import {join} from 'node:path'
import {baseImageDir} from '../util/assets.js'
import type {Context} from '../context.js'
import {allStoredLogins} from '../logins/login-store.js'
import {VENDOR_KEY_VARIABLES} from '../network/gateway/agent-logins.js'

/** base-image/credential-hashes.js, run as root under the image's node: one hash per distinct token-like string. */
function hashScript(): string {
  return readFileSync(join(baseImageDir, 'credential-hashes.js'), 'utf8')
}

const sha = (v: string) => createHash('sha256').update(v).digest('hex')

/** The real values to look for, by hash, with their names. */
export function credentialHashes(env: NodeJS.ProcessEnv): Map<string, string> {
  const out = new Map<string, string>()
  for (const l of allStoredLogins(env)) out.set(sha(l.value), l.name)
  for (const name of Object.keys(VENDOR_KEY_VARIABLES)) if (env[name]) out.set(sha(env[name] as string), name)
  return out
}

/** One row of doctor's table (doctor.ts DoctorCheck). */
export async function checkAgentLogins(ctx: Context, sandboxId: string): Promise<{name: string; status: 'pass' | 'fail' | 'skip'; detail: string}> {
  const name = 'agent-logins'
  const wanted = credentialHashes(ctx.env ?? process.env)
  if (!wanted.size) return {name, status: 'skip', detail: 'no agent login is stored on this host, and neither ANTHROPIC_API_KEY nor OPENAI_API_KEY is set here'}
  const r = await ctx.engine.containers.exec(sandboxId, ['node', '-e', hashScript()], {user: 'root'})
  if (r.exitCode !== 0) return {name, status: 'fail', detail: `could not search the sandbox (exit ${r.exitCode})`}
  const found = new Set<string>()
  for (const line of r.stdout.split('\n')) {
    const hit = wanted.get(line.trim())
    if (hit) found.add(hit)
  }
  if (found.size) return {name, status: 'fail', detail: `real credentials visible in the sandbox: ${[...found].join(', ')} (re-import with --auth, without --plain)`}
  return {name, status: 'pass', detail: `none of ${wanted.size} real credentials is in the sandbox's files, environments or command lines`}
}

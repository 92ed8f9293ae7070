/**
 * `init --clone owner/repo`: clone on the host with an installation token,
 * through the same askpass helper the image uses. The token sits in a 0600
 * file in a private temp directory for the length of the clone; it never
 * appears in the remote URL, git's argv or environment, or any output, and
 * host credential helpers are switched off so none of them stores it.
 */
import {chmodSync, lchownSync, lstatSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {dirname, join} from 'node:path'
import {baseImageDir} from '../util/assets.js'
import {UsageError} from '../errors.js'
import {run} from '../util/proc.js'
import {cloneUrl, GithubAppError, mintInstallationToken, urlOrigin, type AppConfig, type TokenMinter} from './app.js'

export interface CloneOptions {
  mint?: TokenMinter
  env?: NodeJS.ProcessEnv
}

/** Refuse a target that exists and is not an empty directory (git's own rule), before minting anything. */
export function checkCloneTarget(target: string): void {
  let entries: string[]
  try {
    if (!statSync(target).isDirectory()) throw new UsageError(`${target} exists and is not a directory`, {hint: 'pass another path to clone into'})
    entries = readdirSync(target)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') {
      if (!existsDir(dirname(target))) throw new UsageError(`${dirname(target)} does not exist`, {hint: 'create it first, or pass another path'})
      return
    }
    throw error
  }
  if (entries.length) throw new UsageError(`${target} already exists and is not empty`, {hint: 'pass another path to clone into (init --clone owner/repo PATH)'})
}

function existsDir(path: string): boolean {
  try {
    return statSync(path).isDirectory()
  } catch {
    return false
  }
}

/** The script git runs as GIT_ASKPASS: the packaged helper, told where the token is. */
export function askpassScript(helper: string): string {
  return `#!/bin/sh\n# agent-sandbox init --clone: answers git's prompts from a temporary token file.\nexec bash '${helper.replaceAll("'", `'\\''`)}' "$@"\n`
}

export async function cloneWithApp(config: AppConfig, slug: {owner: string; repo: string}, target: string, options: CloneOptions = {}): Promise<void> {
  checkCloneTarget(target)
  const createdTarget = !existsDir(target)
  const minted = await (options.mint ?? mintInstallationToken)(config)
  const temp = mkdtempSync(join(tmpdir(), 'agent-sandbox-clone-'))
  chmodSync(temp, 0o700)
  const tokenFile = join(temp, 'ghapp_token')
  const askpass = join(temp, 'askpass')
  try {
    writeFileSync(tokenFile, `${minted.token}\n`, {mode: 0o600, flag: 'wx'})
    writeFileSync(askpass, askpassScript(join(baseImageDir, 'git-askpass-ghapp.sh')), {mode: 0o700, flag: 'wx'})
    const url = cloneUrl(config, slug)
    const result = await run('git', ['-c', 'credential.helper=', 'clone', '--quiet', '--', url, target], {
      env: {
        GIT_ASKPASS: askpass,
        GIT_TERMINAL_PROMPT: '0',
        AGENT_SANDBOX_GHAPP_TOKEN_FILE: tokenFile,
        AGENT_SANDBOX_GHAPP_GIT_ORIGIN: urlOrigin(config.gitUrl),
      },
      allowFailure: true,
    })
    if (result.exitCode !== 0) {
      if (createdTarget) rmSync(target, {recursive: true, force: true})
      const last = (result.stderr || result.stdout).trim().split('\n').filter(Boolean).pop() ?? ''
      throw new GithubAppError(`git clone ${url} failed${last ? `: ${last.split(minted.token).join('***')}` : ''}`, {
        hint: 'check that the App is installed on the repository with Contents access (docs/github-app.md)',
      })
    }
  } finally {
    rmSync(temp, {recursive: true, force: true})
  }
  giveCloneToParentOwner(target)
}

/** Run as root (sudo), the clone belongs to whoever owns the directory it was cloned into. */
function giveCloneToParentOwner(target: string): void {
  if (process.getuid?.() !== 0) return
  const parent = statSync(dirname(target))
  if (parent.uid === 0) return
  const walk = (path: string) => {
    lchownSync(path, parent.uid, parent.gid) // never follow a link out of the clone
    if (lstatSync(path).isDirectory()) for (const entry of readdirSync(path)) walk(join(path, entry))
  }
  walk(target)
}

/**
 * The host's own git, run on the host repository of a workspace as the user:
 * as whoever runs the CLI, or, when that is root and the workspace belongs to
 * someone else, as the workspace's owner (with the owner's HOME), so that
 * every file git writes in `.git` stays the owner's and the repository's hooks
 * run as the owner, never as root.
 */
import {existsSync, readFileSync, statSync} from 'node:fs'
import {join} from 'node:path'
import {UsageError} from '../errors.js'
import {run, type ProcOptions, type ProcResult} from '../util/proc.js'
import type {Workspace} from '../workspace.js'

/** The home directory of a uid in a passwd file's text, or undefined. Pure. */
export function homeOfUid(passwd: string, uid: number): string | undefined {
  for (const line of passwd.split('\n')) {
    const fields = line.split(':')
    if (fields.length >= 7 && Number(fields[2]) === uid && fields[2] !== '') return fields[5] || undefined
  }
  return undefined
}

/** Who runs host git for a workspace: undefined for ourselves, else the owner to switch to (we are root, the owner is not). */
export function hostGitUser(ws: Pick<Workspace, 'uid' | 'gid'>, ourUid = process.getuid?.()): {uid: number; gid: number} | undefined {
  return ourUid === 0 && ws.uid !== 0 ? {uid: ws.uid, gid: ws.gid} : undefined
}

/** The environment host git runs with as another user: that user's HOME (none when it has no readable one), and none of root's XDG directories. */
function ownerEnv(uid: number): Record<string, string | undefined> {
  let passwd = ''
  try {
    passwd = readFileSync('/etc/passwd', 'utf8')
  } catch {
    // No passwd file: no HOME, so git reads no global config.
  }
  const home = homeOfUid(passwd, uid)
  return {HOME: home && existsSync(home) ? home : undefined, XDG_CONFIG_HOME: undefined, XDG_DATA_HOME: undefined, XDG_STATE_HOME: undefined, XDG_CACHE_HOME: undefined}
}

/** The host repository's git directory: `<workspace>/.git`, which must be a directory (the push gate writes only such a one). */
export function hostGitDir(ws: Workspace): string {
  const dir = join(ws.path, '.git')
  let isDir = false
  try {
    isDir = statSync(dir).isDirectory()
  } catch {
    // missing
  }
  if (!isDir) {
    throw new UsageError(`${ws.path} has no .git directory, so no sandbox can push to it`, {hint: 'review works on a workspace that is a git repository with its own .git directory'})
  }
  return dir
}

export interface HostGitOptions extends Omit<ProcOptions, 'user' | 'cwd'> {
  /**
   * Run in the work tree (what moves a checked-out branch needs). By default
   * git runs inside the git directory, where it has no work tree: what it
   * reports of commits then does not depend on the work tree's files
   * (`.gitattributes` there could hide a binary file from a diff).
   */
  inWorkTree?: boolean
}

/** Run the host's git on the workspace's repository as the user (see the module's comment). */
export function hostGit(ws: Workspace, args: string[], options: HostGitOptions = {}): Promise<ProcResult> {
  const user = hostGitUser(ws)
  const {inWorkTree, ...rest} = options
  return run('git', args, {
    timeoutMs: 60_000,
    ...rest,
    cwd: inWorkTree ? ws.path : hostGitDir(ws),
    env: {...(user ? ownerEnv(user.uid) : {}), GIT_TERMINAL_PROMPT: '0', ...rest.env},
    ...(user ? {user} : {}),
  })
}

/** Host git's trimmed stdout; throws (CommandFailedError) when it fails. */
export async function hostGitText(ws: Workspace, args: string[], options: HostGitOptions = {}): Promise<string> {
  return (await hostGit(ws, args, options)).stdout.trim()
}

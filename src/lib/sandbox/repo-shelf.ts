/**
 * Branch mode: the per-repo repo-shelf volume holds one non-bare repository
 * and a worktree per branch. Provisioning runs the image's provision-shelf
 * script in a short-lived container from the base image (never the host's own
 * git), serialised per repo with a lock. The branch name travels as an
 * argument, never through a shell.
 */
import {existsSync, statSync} from 'node:fs'
import {join, posix} from 'node:path'
import {randomBytes} from 'node:crypto'
import {loadSettings} from '../config/load.js'
import {hooksDirOf} from '../git/hook-config.js'
import type {NetworkMode} from '../config/schema.js'
import {ConflictError, SandboxError, UsageError} from '../errors.js'
import {ensureBaseImage} from '../images/build.js'
import {withLock} from '../util/lock.js'
import {run} from '../util/proc.js'
import {silentReporter, type Reporter} from '../reporter.js'
import {checkDockerNetwork, wantsRelabel} from './spec.js'
import {buildHelperSpec} from './spec-companions.js'
import {workspaceMountPath} from './spec-sandbox.js'
import {runHelper} from './helper.js'
import type {MountSpec} from '../engine/types.js'
import {Labels, Names, sanitizeBranch, validateBranch, type Workspace} from '../workspace.js'
import type {Context} from '../context.js'

export interface HostRepoInfo {
  originUrl?: string
  /** Where hooks live, as a path inside every sandbox (read-only there). */
  hooksPath: string
  /** A local origin that must be mounted for provisioning to reach it. */
  localOrigin?: string
}

/** Map the host's core.hooksPath to a path inside the sandbox (hooksDirOf, the one reading of it). Pure. */
export function sandboxHooksPath(ws: Workspace, hostHooksPath: string | undefined): {path: string; warning?: string} {
  const mount = workspaceMountPath(ws)
  const dir = hooksDirOf(hostHooksPath, ws.path)
  if (dir === undefined) {
    return {
      path: posix.join(mount, '.git', 'hooks'),
      warning: `core.hooksPath ${hostHooksPath} is outside the workspace, so sandboxes cannot see it; using .git/hooks`,
    }
  }
  return {path: posix.join(mount, dir)}
}

/** A local-path origin (`/srv/repo.git`, `file:///srv/repo.git`), or undefined for a network URL. */
export function localOriginPath(url: string): string | undefined {
  if (url.startsWith('file://')) return decodeURIComponent(url.slice('file://'.length))
  if (url.startsWith('/')) return url
  return undefined
}

async function hostGit(ws: Workspace, args: string[]): Promise<string | undefined> {
  const result = await run('git', ['-c', `safe.directory=${ws.path}`, '-C', ws.path, ...args], {allowFailure: true, timeoutMs: 10_000})
  return result.exitCode === 0 ? result.stdout.trim() || undefined : undefined
}

export async function hostRepoInfo(ws: Workspace, reporter: Reporter = silentReporter): Promise<HostRepoInfo> {
  const gitDir = join(ws.path, '.git')
  if (!existsSync(gitDir) || !statSync(gitDir).isDirectory()) {
    throw new UsageError(`branch mode needs a git repository, and ${ws.path} has no .git directory`, {
      hint: 'run git init (and commit) in the workspace, or work in bind mode without --branch',
    })
  }
  const [originUrl, hooks] = await Promise.all([hostGit(ws, ['config', '--get', 'remote.origin.url']), hostGit(ws, ['config', '--get', 'core.hooksPath'])])
  const mapped = sandboxHooksPath(ws, hooks)
  if (mapped.warning) reporter.warn(mapped.warning)
  const local = originUrl ? localOriginPath(originUrl) : undefined
  return {originUrl, hooksPath: mapped.path, localOrigin: local && existsSync(local) ? local : undefined}
}

export interface ProvisionResult {
  branch: string
  worktree: string
  source: string
  origin: 'reachable' | 'unreachable' | 'none'
}

/** `checkout`'s one-line result. */
export function describeCheckout(result: ProvisionResult): string {
  return `${result.worktree} (${result.source}; origin ${result.origin})`
}

/** The uid/gid that owns the shelf: the workspace owner, or `node`'s 1000 for a root-owned workspace. */
function shelfOwner(ws: Workspace): {uid: number; gid: number} {
  return ws.uid === 0 ? {uid: 1000, gid: 1000} : {uid: ws.uid, gid: ws.gid}
}

interface HelperRun {
  entrypoint: string
  args: string[]
  network: string
  /** Read-only host directories besides the workspace (a local origin). */
  extraBinds?: string[]
  baseTag: string
  /** Relabel the host directories for SELinux (spec.ts wantsRelabel). */
  relabel: boolean
}

/** Run one of the image's shelf scripts in a short-lived root container with the shelf and the workspace (read-only). */
async function runShelfHelper(ctx: Context, ws: Workspace, helper: HelperRun) {
  const readOnly = (dir: string, target: string): MountSpec => ({type: 'bind', source: dir, target, readOnly: true, ...(helper.relabel ? {relabel: 'shared' as const} : {})})
  const spec = buildHelperSpec({
    kind: 'provision',
    name: `agent-sandbox-shelf-${ws.hash.slice(0, 12)}-${randomBytes(4).toString('hex')}`,
    baseTag: helper.baseTag,
    labels: {[Labels.workspace]: ws.path},
    network: helper.network,
    capAdd: ['CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'SETUID', 'SETGID'],
    mounts: [
      {type: 'volume', source: Names.shelfVolume(ws), target: '/repo-shelf', readOnly: false},
      readOnly(ws.path, workspaceMountPath(ws)),
      ...(helper.extraBinds ?? []).map((dir) => readOnly(dir, dir)),
    ],
    entrypoint: [helper.entrypoint],
    cmd: helper.args,
    userns: await ctx.engine.userns(),
  })
  return runHelper(ctx, spec)
}

function relayWarnings(stderr: string, reporter: Reporter): void {
  for (const line of stderr.split('\n')) {
    const m = /^(?:provision-shelf|shelf-remove-worktree): warning: (.*)$/.exec(line)
    if (m) reporter.warn(m[1])
  }
}

function lastError(stderr: string): string {
  return (
    stderr
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l && !l.includes(': warning: '))
      .pop()
      ?.replace(/^(provision-shelf|shelf-remove-worktree): /, '') ?? 'unknown error'
  )
}

export interface ProvisionOptions {
  /** The sandbox's network mode and --allow-host-network, for the check of dockerNetwork (spec.ts). */
  network?: NetworkMode
  allowHostNetwork?: boolean
  baseTag?: string
}

/** Provision the shelf and the branch's worktree. Idempotent; serialised per repo. */
export async function provisionBranch(ctx: Context, ws: Workspace, branch: string, options: ProvisionOptions = {}): Promise<ProvisionResult> {
  const {engine} = ctx
  const reporter = ctx.reporter ?? silentReporter
  validateBranch(branch)
  const {settings} = loadSettings({workspacePath: ws.path, env: ctx.env})
  const baseTag = options.baseTag ?? settings.baseTag
  const info = await hostRepoInfo(ws, reporter)
  await ensureBaseImage(engine, baseTag)
  const owner = shelfOwner(ws)
  const network = info.originUrl && !localOriginPath(info.originUrl) ? settings.dockerNetwork : 'none'
  if (network !== 'none') checkDockerNetwork(network, options.network ?? settings.network, options.allowHostNetwork)
  const relabel = wantsRelabel(settings.selinuxRelabel, await engine.selinux())
  return withLock(
    `shelf-${ws.hash}`,
    async () => {
      await engine.volumes.ensure(Names.shelfVolume(ws), {
        [Labels.managed]: 'true',
        [Labels.workspace]: ws.path,
        [Labels.hash]: ws.hash,
        [Labels.volume]: 'shelf',
      })
      const result = await reporter.step(`Provisioning worktree for ${branch}`, () =>
        runShelfHelper(ctx, ws, {
          entrypoint: '/usr/local/sbin/provision-shelf',
          args: [ws.repoName, branch, sanitizeBranch(branch), info.originUrl ?? '', info.hooksPath, String(owner.uid), String(owner.gid)],
          network,
          extraBinds: info.localOrigin ? [info.localOrigin] : [],
          baseTag,
          relabel,
        }),
      )
      relayWarnings(result.stderr, reporter)
      if (result.exitCode !== 0) {
        throw new SandboxError(`provisioning branch ${branch} failed: ${lastError(result.stderr)}`, {
          hint: 'the repo-shelf is left consistent; fix the cause and run the same command again',
        })
      }
      const fields = Object.fromEntries(
        result.stdout
          .split('\n')
          .map((l) => /^shelf: (\w+)=(.*)$/.exec(l))
          .filter((m): m is RegExpExecArray => m !== null)
          .map((m) => [m[1], m[2]]),
      )
      return {branch, worktree: fields.worktree, source: fields.source, origin: fields.origin as ProvisionResult['origin']}
    },
    ctx.env,
  )
}

export interface RemoveWorktreeResult {
  worktree: 'removed' | 'absent'
}

/** Remove a branch's worktree; refuses (ConflictError, listing what would be lost) unless `force`. */
export async function removeWorktree(ctx: Context, ws: Workspace, branch: string, options: ProvisionOptions & {force?: boolean} = {}): Promise<RemoveWorktreeResult> {
  const {engine} = ctx
  validateBranch(branch)
  const {settings} = loadSettings({workspacePath: ws.path, env: ctx.env})
  const baseTag = options.baseTag ?? settings.baseTag
  await ensureBaseImage(engine, baseTag)
  if (!(await engine.volumes.inspect(Names.shelfVolume(ws)))) return {worktree: 'absent'}
  const owner = shelfOwner(ws)
  return withLock(
    `shelf-${ws.hash}`,
    async () => {
      const result = await runShelfHelper(ctx, ws, {
        entrypoint: '/usr/local/sbin/shelf-remove-worktree',
        args: [branch, sanitizeBranch(branch), options.force ? '1' : '0', String(owner.uid), String(owner.gid)],
        network: 'none',
        baseTag,
        relabel: wantsRelabel(settings.selinuxRelabel, await engine.selinux()),
      })
      if (result.exitCode === 3) {
        const lost = result.stdout
          .split('\n')
          .filter((l) => l.startsWith('lost: '))
          .map((l) => l.slice('lost: '.length))
        const shown = lost.slice(0, 5).join('; ') + (lost.length > 5 ? `; and ${lost.length - 5} more` : '')
        throw new ConflictError(`the worktree of ${branch} holds work that would be lost: ${shown}`, {
          hint: `commit and push it (git push host ${branch}), or pass --force to discard it`,
        })
      }
      if (result.exitCode !== 0) throw new SandboxError(`removing the worktree of ${branch} failed: ${lastError(result.stderr)}`)
      return {worktree: result.stdout.includes('worktree: removed') ? 'removed' : 'absent'}
    },
    ctx.env,
  )
}

/**
 * Push review: what the sandboxes of a workspace pushed that waits for the
 * user. The push gate keeps a push it does not let through (a protected
 * branch, or a branch behind the host) as `refs/sandbox/<branch>` in the host
 * repository; this module lists those refs with their commits, diffstat and
 * flags (review-flags.ts), shows one's diff, and rejects one. Approving is
 * review-approve.ts. Every git command is the host's own, as the user
 * (host-git.ts); the gates' logs (gate-log.ts) say which sandbox pushed what.
 */
import type {Context} from '../context.js'
import type {Engine} from '../engine/index.js'
import {isSandboxError, UsageError} from '../errors.js'
import type {Reporter} from '../reporter.js'
import {validateBranch, type Workspace} from '../workspace.js'
import {readGatePushes, type GatePush} from './gate-log.js'
import {hooksDirOf} from './hook-config.js'
import {hostGit, hostGitText} from './host-git.js'
import {diffstatOf, packageHookKeys, parseBatchCheck, parseRawNumstat, reviewFlags, type ChangedFile, type Diffstat, type ReviewFlag} from './review-flags.js'

export const KEPT_PREFIX = 'refs/sandbox/'
/** The most commits a listing names for one push (the count is always whole). */
const MAX_LISTED_COMMITS = 50

export interface KeptCommit {
  commit: string
  author: string
  /** Author date, ISO 8601. */
  date: string
  subject: string
}

export interface KeptFile {
  path: string
  status: string
  added?: number
  deleted?: number
  binary: boolean
}

export interface KeptPush {
  branch: string
  /** `refs/sandbox/<branch>`. */
  ref: string
  commit: string
  /** The host's branch of that name now; null when the host has no such branch. */
  hostCommit: string | null
  /** Where the push's own commits start: its merge base with the host's branch (with HEAD when there is none); null when unrelated. */
  base: string | null
  /** Approving moves the host's branch without a merge. */
  fastForward: boolean
  /** Commits the host's branch has that the push has not. */
  behind: number
  /** The push's own commits (base..commit), newest first; at most MAX_LISTED_COMMITS of commitCount. */
  commits: KeptCommit[]
  commitCount: number
  diffstat: Diffstat
  files: KeptFile[]
  flags: ReviewFlag[]
  /** The sandbox whose gate took this exact push, when its gate's log still has it. */
  pushedBy: {sandbox: string; sandboxBranch: string; at?: string} | null
}

/** A push a gate let straight through (refs/heads/*, refs/tags/*), from its log. */
export interface PushedThrough {
  ref: string
  old: string
  new: string
  at?: string
  /** The pushed commit's subject, when the host has it. */
  subject?: string
}

export interface SandboxPushes {
  sandbox: string
  sandboxBranch: string
  pushes: PushedThrough[]
}

export interface ReviewListing {
  workspace: string
  kept: KeptPush[]
  /** With `all`: every sandbox's pushes that went straight through, from its gate's log. */
  pushed?: SandboxPushes[]
}

export interface ReviewContext {
  /** For the gates' logs; without one (the engine is down) the listing names no sandbox. */
  engine?: Engine
  reporter?: Reporter
}

const ZERO = /^0+$/

/** A commit's id, or null when `rev` does not name one. */
export async function resolveCommit(ws: Workspace, rev: string): Promise<string | null> {
  const r = await hostGit(ws, ['rev-parse', '--verify', '--quiet', '--end-of-options', `${rev}^{commit}`], {allowFailure: true})
  return r.exitCode === 0 ? r.stdout.trim() : null
}

/** Whether `a` is an ancestor of `b` (or the same commit). */
export async function isAncestor(ws: Workspace, a: string, b: string): Promise<boolean> {
  const r = await hostGit(ws, ['merge-base', '--is-ancestor', a, b], {allowFailure: true})
  if (r.exitCode > 1) await hostGit(ws, ['merge-base', '--is-ancestor', a, b]) // throws with git's message
  return r.exitCode === 0
}

/** The commit a sandbox keeps for `branch`; a UsageError when none waits. */
export async function keptCommit(ws: Workspace, branch: string): Promise<string> {
  validateBranch(branch)
  const commit = await resolveCommit(ws, `${KEPT_PREFIX}${branch}`)
  if (!commit) {
    throw new UsageError(`no push of ${branch} waits for review: ${KEPT_PREFIX}${branch} does not exist in ${ws.path}`, {
      hint: 'agent-sandbox review lists the pushes that wait',
    })
  }
  return commit
}

/** The kept pushes of a workspace, as [branch, commit]. */
export async function keptRefs(ws: Workspace): Promise<Array<[string, string]>> {
  const out = await hostGitText(ws, ['for-each-ref', '--format=%(objectname) %(refname)', KEPT_PREFIX])
  return out
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const space = line.indexOf(' ')
      return [line.slice(space + 1).slice(KEPT_PREFIX.length), line.slice(0, space)] as [string, string]
    })
}

/** Where a kept push starts, and how it stands against the host's branch. */
async function standing(ws: Workspace, commit: string, hostCommit: string | null): Promise<{base: string | null; fastForward: boolean; behind: number}> {
  const against = hostCommit ?? (await resolveCommit(ws, 'HEAD'))
  if (!against) return {base: null, fastForward: hostCommit === null, behind: 0}
  const r = await hostGit(ws, ['merge-base', against, commit], {allowFailure: true})
  const base = r.exitCode === 0 ? r.stdout.trim() : null
  if (!hostCommit) return {base, fastForward: true, behind: 0}
  const behind = Number(await hostGitText(ws, ['rev-list', '--count', `${commit}..${hostCommit}`]))
  return {base, fastForward: base === hostCommit, behind}
}

/** The empty tree's id in this repository's hash (a diff base for a push unrelated to the host). */
async function emptyTree(ws: Workspace): Promise<string> {
  return hostGitText(ws, ['hash-object', '-t', 'tree', '--stdin'], {input: ''})
}

/** The changed files from `base` to `commit`, with their flags. */
export async function diffOf(ws: Workspace, base: string, commit: string): Promise<{files: ChangedFile[]; flags: ReviewFlag[]}> {
  const diff = await hostGit(ws, ['diff', '--raw', '--numstat', '-z', '--no-renames', '--no-abbrev', '--no-textconv', '--no-ext-diff', base, commit, '--'])
  const files = parseRawNumstat(diff.stdout)
  const blobs = files.filter((f) => f.status !== 'D' && !ZERO.test(f.newBlob) && f.newMode !== '160000').map((f) => f.newBlob)
  const sizes = blobs.length ? parseBatchCheck((await hostGit(ws, ['cat-file', '--batch-check'], {input: `${blobs.join('\n')}\n`})).stdout) : new Map<string, number>()
  const hookKeysChanged: string[] = []
  for (const file of files.filter((f) => f.path === 'package.json' || f.path.endsWith('/package.json'))) {
    const [before, after] = await Promise.all([blobText(ws, file.oldBlob), blobText(ws, file.newBlob)])
    if (packageHookKeys(before) !== packageHookKeys(after)) hookKeysChanged.push(file.path)
  }
  const hooksPath = await hostGit(ws, ['config', '--get', 'core.hooksPath'], {allowFailure: true})
  const hooksDir = hooksDirOf(hooksPath.exitCode === 0 ? hooksPath.stdout.trim() : undefined, ws.path)
  return {files, flags: reviewFlags(files, {sizes, hooksDir, hookKeysChanged})}
}

async function blobText(ws: Workspace, blob: string): Promise<string | undefined> {
  if (ZERO.test(blob)) return undefined
  const r = await hostGit(ws, ['cat-file', 'blob', blob], {allowFailure: true})
  return r.exitCode === 0 ? r.stdout : undefined
}

/** The commits in base..commit (all of commit's without a base), newest first, at most `max`. */
async function commitsOf(ws: Workspace, base: string | null, commit: string, max: number): Promise<{commits: KeptCommit[]; count: number}> {
  const range = base ? [`${base}..${commit}`] : [commit]
  const count = Number(await hostGitText(ws, ['rev-list', '--count', ...range]))
  const log = await hostGitText(ws, ['log', `--max-count=${max}`, '--format=%H%x00%an%x00%aI%x00%s%x00', ...range, '--'])
  const fields = log.split('\0').map((f) => f.replace(/^\n/, ''))
  const commits: KeptCommit[] = []
  for (let i = 0; i + 3 < fields.length; i += 4) commits.push({commit: fields[i], author: fields[i + 1], date: fields[i + 2], subject: fields[i + 3]})
  return {commits, count}
}

/** One kept push, described for review. */
export async function describeKeptPush(ws: Workspace, branch: string, commit: string, gatePushes: readonly GatePush[] = []): Promise<KeptPush> {
  const ref = `${KEPT_PREFIX}${branch}`
  const hostCommit = await resolveCommit(ws, `refs/heads/${branch}`)
  const {base, fastForward, behind} = await standing(ws, commit, hostCommit)
  const [{commits, count}, {files, flags}] = await Promise.all([commitsOf(ws, base, commit, MAX_LISTED_COMMITS), diffOf(ws, base ?? (await emptyTree(ws)), commit)])
  const by = [...gatePushes].reverse().find((p) => p.ref === ref && p.new === commit)
  return {
    branch,
    ref,
    commit,
    hostCommit,
    base,
    fastForward,
    behind,
    commits,
    commitCount: count,
    diffstat: diffstatOf(files),
    files: files.map(({path, status, added, deleted, binary}) => ({path, status, ...(added === undefined ? {} : {added, deleted}), binary})),
    flags,
    pushedBy: by ? {sandbox: by.sandbox, sandboxBranch: by.sandboxBranch, ...(by.at ? {at: by.at} : {})} : null,
  }
}

/** The gates' pushes, or none (with a warning) when the engine cannot be asked; with `required`, its error. */
async function gatePushesOf(ctx: ReviewContext, ws: Workspace, required: boolean): Promise<GatePush[]> {
  if (!ctx.engine) return []
  try {
    return await readGatePushes(ctx.engine, ws)
  } catch (error) {
    if (required || !isSandboxError(error)) throw error
    ctx.reporter?.warn(`the gates' logs could not be read (${error.message}): the listing does not say which sandbox pushed what`)
    return []
  }
}

/** Every push of the workspace's sandboxes that waits for the user; with `all`, also those that went straight through. */
export async function listReview(ctx: ReviewContext, ws: Workspace, options: {all?: boolean} = {}): Promise<ReviewListing> {
  const refs = await keptRefs(ws)
  const gatePushes = refs.length || options.all ? await gatePushesOf(ctx, ws, Boolean(options.all)) : []
  const kept: KeptPush[] = []
  for (const [branch, commit] of refs) kept.push(await describeKeptPush(ws, branch, commit, gatePushes))
  const listing: ReviewListing = {workspace: ws.path, kept}
  if (options.all) listing.pushed = await pushedThrough(ws, gatePushes)
  return listing
}

/** The gates' pushes to branches and tags, sandbox by sandbox, with the pushed commits' subjects. */
async function pushedThrough(ws: Workspace, gatePushes: readonly GatePush[]): Promise<SandboxPushes[]> {
  const through = gatePushes.filter((p) => p.ref.startsWith('refs/heads/') || p.ref.startsWith('refs/tags/'))
  const subjects = new Map<string, string>()
  const wanted = [...new Set(through.map((p) => p.new))]
  if (wanted.length) {
    // One call for every pushed commit; a commit the host no longer has is simply left without a subject.
    const r = await hostGit(ws, ['cat-file', '--batch-check=%(objectname) %(objecttype)'], {input: `${wanted.join('\n')}\n`})
    const commits = r.stdout.split('\n').filter((l) => l.endsWith(' commit')).map((l) => l.split(' ')[0])
    if (commits.length) {
      const log = await hostGitText(ws, ['log', '--no-walk=unsorted', '--format=%H %s', ...commits, '--'])
      for (const line of log.split('\n')) subjects.set(line.slice(0, line.indexOf(' ')), line.slice(line.indexOf(' ') + 1))
    }
  }
  const bySandbox = new Map<string, SandboxPushes>()
  for (const p of through) {
    const entry = bySandbox.get(p.sandbox) ?? {sandbox: p.sandbox, sandboxBranch: p.sandboxBranch, pushes: []}
    entry.pushes.push({ref: p.ref, old: p.old, new: p.new, ...(p.at ? {at: p.at} : {}), ...(subjects.has(p.new) ? {subject: subjects.get(p.new)} : {})})
    bySandbox.set(p.sandbox, entry)
  }
  return [...bySandbox.values()]
}

/**
 * Show a kept push's diff (from where it starts to the kept commit) with the
 * host's git on the caller's terminal: git pages it as it pages its own diffs
 * (GIT_PAGER, core.pager, PAGER) when stdout is a terminal, and does not otherwise.
 */
export async function showKeptPush(ctx: Pick<Context, 'signal' | 'foreground'>, ws: Workspace, branch: string): Promise<number> {
  const commit = await keptCommit(ws, branch)
  const {base} = await standing(ws, commit, await resolveCommit(ws, `refs/heads/${branch}`))
  const from = base ?? (await emptyTree(ws))
  // The pager owns the terminal meanwhile: Ctrl-C is its own.
  const release = ctx.foreground?.()
  try {
    const r = await hostGit(ws, ['diff', '--stat', '--summary', '--patch', from, commit, '--'], {inherit: true, allowFailure: true, timeoutMs: 0, signal: ctx.signal})
    return r.exitCode
  } finally {
    release?.()
  }
}

/** Delete a kept push (the sandbox's own branch keeps its commits). */
export async function rejectKeptPush(ws: Workspace, branch: string): Promise<{branch: string; ref: string; commit: string}> {
  const commit = await keptCommit(ws, branch)
  const ref = `${KEPT_PREFIX}${branch}`
  await hostGit(ws, ['update-ref', '-d', ref, commit])
  return {branch, ref, commit}
}

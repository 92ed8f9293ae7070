/**
 * Approving a kept push (`refs/sandbox/<branch>`): the host's branch moves to
 * it, as the user, through a push of the host repository into itself
 * (`git push . <commit>:refs/heads/<branch>`). receive-pack then runs the
 * host's own receive hooks (pre-receive, update, reference-transaction,
 * post-receive, post-update): the hooks a push that the gate had let through
 * would have run (docs/decisions/0340-review-approve-through-receive-pack.md).
 *
 * Fast-forward only, unless `merge` asks for a merge commit; a lease on the
 * branch's value makes a branch that moves meanwhile refuse the update. A
 * branch the host has checked out moves with its work tree: in bind mode the
 * shared work tree already holds the pushed files, so only the index follows
 * (as with the gate's own push-to-checkout); otherwise git updates a clean
 * work tree (receive.denyCurrentBranch=updateInstead) and a dirty one refuses.
 */
import {lstatSync, readlinkSync, rmSync} from 'node:fs'
import {join} from 'node:path'
import {randomBytes} from 'node:crypto'
import {ConflictError, SandboxError} from '../errors.js'
import type {Reporter} from '../reporter.js'
import type {Workspace} from '../workspace.js'
import {hostGit, hostGitDir, hostGitText} from './host-git.js'
import {parseRawNumstat} from './review-flags.js'
import {isAncestor, KEPT_PREFIX, keptCommit, resolveCommit} from './review.js'

/** The host's branch moved since the push: approving would not be a fast-forward. */
export class HostBranchMovedError extends ConflictError {}

export type ApproveOutcome = 'fast-forward' | 'created' | 'merge' | 'already-contained'

export interface ApproveResult {
  branch: string
  outcome: ApproveOutcome
  /** The branch's commit before and after. */
  previous: string | null
  commit: string
  /** The kept push's commit. */
  kept: string
  /** How the host's checkout followed: only its index (bind mode), its work tree too, or not at all (the branch is not checked out). */
  checkout: 'index' | 'work-tree' | 'none'
  /** The kept ref was deleted (false: the sandbox pushed anew meanwhile, so it stays for review). */
  keptRemoved: boolean
}

export interface ApproveOptions {
  merge?: boolean
}

/** `git merge-tree` and `git commit-tree`: a merge commit of the host's branch and the kept push, without touching any work tree. */
async function mergeCommit(ws: Workspace, branch: string, host: string, kept: string): Promise<string> {
  const r = await hostGit(ws, ['merge-tree', '--write-tree', '--name-only', '--no-messages', host, kept], {allowFailure: true})
  if (r.exitCode === 1) {
    const conflicts = r.stdout.split('\n').slice(1).filter(Boolean)
    throw new ConflictError(`merging ${KEPT_PREFIX}${branch} into ${branch} conflicts in ${conflicts.slice(0, 5).join(', ')}${conflicts.length > 5 ? ', …' : ''}`, {
      hint: `merge it by hand (git merge ${KEPT_PREFIX}${branch}), or have the agent rebase and push again`,
    })
  }
  if (r.exitCode !== 0) {
    throw new SandboxError(`git merge-tree failed: ${r.stderr.trim().split('\n').pop() ?? ''}`, {hint: '--merge needs git 2.38 or later on the host'})
  }
  const tree = r.stdout.split('\n')[0].trim()
  const commit = await hostGit(ws, ['commit-tree', tree, '-p', host, '-p', kept, '-m', `Merge ${KEPT_PREFIX}${branch} into ${branch}`], {allowFailure: true})
  if (commit.exitCode !== 0) {
    throw new SandboxError(`git could not make the merge commit: ${commit.stderr.trim().split('\n').pop() ?? ''}`, {hint: 'a merge commit needs your git identity: git config --global user.name and user.email'})
  }
  return commit.stdout.trim()
}

/**
 * Whether the work tree already holds `to` wherever `to` differs from `from`
 * (content, executable bit, symbolic links; removed paths absent), reached
 * through no symbolic link. What a bind-mode sandbox's shared work tree holds
 * after the agent committed there.
 */
async function workTreeHolds(ws: Workspace, from: string, to: string): Promise<boolean> {
  const changes = parseRawNumstat((await hostGit(ws, ['diff-tree', '-r', '-z', '--no-renames', from, to, '--'])).stdout)
  const files: Array<{path: string; blob: string}> = []
  for (const change of changes) {
    if (linkOnTheWay(ws.path, change.path)) return false
    const full = join(ws.path, change.path)
    const st = lstatSync(full, {throwIfNoEntry: false})
    if (change.status === 'D') {
      if (st) return false
      continue
    }
    if (!st) return false
    if (change.newMode === '120000') {
      if (!st.isSymbolicLink()) return false
      if ((await hostGitText(ws, ['hash-object', '--stdin'], {input: readlinkSync(full)})) !== change.newBlob) return false
      continue
    }
    if (change.newMode !== '100644' && change.newMode !== '100755') return false
    if (!st.isFile() || Boolean(st.mode & 0o100) !== (change.newMode === '100755')) return false
    files.push({path: change.path, blob: change.newBlob})
  }
  if (!files.length) return true
  const hashes = (await hostGitText(ws, ['hash-object', '--no-filters', '--stdin-paths'], {input: `${files.map((f) => f.path).join('\n')}\n`, inWorkTree: true})).split('\n')
  return files.every((f, i) => hashes[i] === f.blob)
}

/** Whether a directory on the way to `path` (relative to root) is a symbolic link. */
function linkOnTheWay(root: string, path: string): boolean {
  const parts = path.split('/').slice(0, -1)
  for (let i = 1; i <= parts.length; i++) {
    if (lstatSync(join(root, ...parts.slice(0, i)), {throwIfNoEntry: false})?.isSymbolicLink()) return true
  }
  return false
}

/** Whether moving the index from `from` to `to` keeps what the user staged (a two-tree merge into a scratch index). */
async function indexFollows(ws: Workspace, from: string, to: string): Promise<boolean> {
  const scratch = join(hostGitDir(ws), `agent-sandbox-review-${randomBytes(6).toString('hex')}.index`)
  try {
    const r = await hostGit(ws, ['read-tree', '-m', '-i', `--index-output=${scratch}`, from, to], {allowFailure: true, inWorkTree: true})
    return r.exitCode === 0
  } finally {
    rmSync(scratch, {force: true})
    rmSync(`${scratch}.lock`, {force: true})
  }
}

/** Whether the checkout has changes git knows of (tracked files, the index); untracked files are git's to check. */
async function checkoutDirty(ws: Workspace): Promise<boolean> {
  await hostGit(ws, ['update-index', '-q', '--refresh'], {allowFailure: true, inWorkTree: true})
  const files = await hostGit(ws, ['diff-files', '--quiet', '--ignore-submodules', '--'], {allowFailure: true, inWorkTree: true})
  const index = await hostGit(ws, ['diff-index', '--quiet', '--cached', '--ignore-submodules', 'HEAD', '--'], {allowFailure: true, inWorkTree: true})
  return files.exitCode !== 0 || index.exitCode !== 0
}

/** How the push must treat the branch when the host has it checked out: git's receive.denyCurrentBranch, and what follows. */
async function checkoutPlan(ws: Workspace, branch: string, host: string | null, target: string): Promise<{deny?: 'ignore' | 'updateInstead'; checkout: ApproveResult['checkout']}> {
  const head = await hostGit(ws, ['symbolic-ref', '-q', 'HEAD'], {allowFailure: true})
  if (head.stdout.trim() !== `refs/heads/${branch}`) return {checkout: 'none'}
  if (host && (await workTreeHolds(ws, host, target))) {
    if (!(await indexFollows(ws, host, target))) {
      throw new ConflictError(`${branch} is checked out on the host, and what is staged there conflicts with the push`, {hint: 'commit or unstage it, then approve again'})
    }
    return {deny: 'ignore', checkout: 'index'}
  }
  if (await checkoutDirty(ws)) {
    throw new ConflictError(`${branch} is checked out on the host, and its work tree has changes that are not the push's`, {hint: 'commit or stash them, then approve again'})
  }
  return {deny: 'updateInstead', checkout: 'work-tree'}
}

/** The reason git gives for a ref it did not update (` ! [remote rejected] a -> b (reason)`). Pure. */
export function pushRefusal(stderr: string): {stale: boolean; reason: string} {
  const line = stderr.split('\n').find((l) => /^\s*!\s+\[(remote )?rejected\]/.test(l))
  const reason = line ? (/\(([^)]*)\)\s*$/.exec(line)?.[1] ?? line.trim()) : (stderr.trim().split('\n').pop() ?? 'git push failed')
  return {stale: reason === 'stale info' || reason === 'fetch first' || reason === 'non-fast-forward', reason}
}

/** What the host's hooks print (git's `remote:` lines), passed on line by line as it comes; git's own report stays out (the error says it in one line). */
function hookOutput(reporter: Reporter | undefined): (chunk: Buffer) => void {
  let pending = ''
  return (chunk) => {
    const lines = (pending + chunk.toString('utf8')).split('\n')
    pending = lines.pop() ?? ''
    for (const line of lines) if (line.startsWith('remote: ')) reporter?.output(Buffer.from(`${line.replace(/\s+$/, '')}\n`))
  }
}

/** Move the host's branch to the kept push, as the user, with the host's hooks; then delete the kept ref. */
export async function approveKeptPush(ctx: {reporter?: Reporter}, ws: Workspace, branch: string, options: ApproveOptions = {}): Promise<ApproveResult> {
  const kept = await keptCommit(ws, branch)
  const ref = `${KEPT_PREFIX}${branch}`
  const host = await resolveCommit(ws, `refs/heads/${branch}`)
  const removeKept = async () => (await hostGit(ws, ['update-ref', '-d', ref, kept], {allowFailure: true})).exitCode === 0
  if (host && (await isAncestor(ws, kept, host))) {
    return {branch, outcome: 'already-contained', previous: host, commit: host, kept, checkout: 'none', keptRemoved: await removeKept()}
  }
  const fastForward = !host || (await isAncestor(ws, host, kept))
  if (!fastForward && !options.merge) {
    throw new HostBranchMovedError(`${branch} moved on the host since the push: ${ref} is not a fast-forward of it`, {
      hint: `see it with agent-sandbox review show ${branch}; approve with --merge, or have the agent fetch, rebase and push again`,
    })
  }
  const outcome: ApproveOutcome = !host ? 'created' : options.merge ? 'merge' : 'fast-forward'
  const target = outcome === 'merge' && host ? await mergeCommit(ws, branch, host, kept) : kept
  const plan = await checkoutPlan(ws, branch, host, target)

  const pushed = await hostGit(
    ws,
    [
      'push',
      '--quiet',
      // The receive hooks are the host's gate; pre-push is for pushes to elsewhere.
      '--no-verify',
      ...(plan.deny ? [`--receive-pack=git -c receive.denyCurrentBranch=${plan.deny} receive-pack`] : []),
      `--force-with-lease=refs/heads/${branch}:${host ?? ''}`,
      '.',
      `${target}:refs/heads/${branch}`,
    ],
    // No time limit: the host's hooks take what they take.
    {allowFailure: true, inWorkTree: true, timeoutMs: 0, onOutput: hookOutput(ctx.reporter)},
  )
  if (pushed.exitCode !== 0) {
    const refusal = pushRefusal(pushed.stderr)
    if (refusal.stale) throw new HostBranchMovedError(`${branch} moved on the host while it was being approved`, {hint: 'review it again: agent-sandbox review'})
    throw new SandboxError(`the host repository refused to move ${branch}: ${refusal.reason}`, {hint: "the host's hooks or git said why, above"})
  }
  if (plan.checkout === 'index' && host) {
    const follow = await hostGit(ws, ['read-tree', '-m', '-i', host, target], {allowFailure: true, inWorkTree: true})
    if (follow.exitCode !== 0) ctx.reporter?.warn(`${branch} moved, but the host's index did not follow (${follow.stderr.trim().split('\n').pop()}): git reset -q makes it match the work tree's commit`)
  }
  return {branch, outcome, previous: host, commit: target, kept, checkout: plan.checkout, keptRemoved: await removeKept()}
}

/**
 * Push review on a real repository in a temporary directory (the host's git,
 * no engine): listing, approving in each standing of the branch, rejecting.
 * The integration test (test/integration/review.test.ts) does the same with
 * pushes a real gate kept.
 */
import {execFileSync} from 'node:child_process'
import {chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterEach, beforeEach, describe, expect, it} from 'vitest'
import {ConflictError, SandboxError, UsageError} from '../../src/lib/errors.js'
import {approveKeptPush, HostBranchMovedError} from '../../src/lib/git/review-approve.js'
import {listReview, rejectKeptPush} from '../../src/lib/git/review.js'
import {describeWorkspace, type Workspace} from '../../src/lib/workspace.js'

let dir: string
let ws: Workspace

function git(...args: string[]): string {
  return execFileSync('git', ['-c', 'user.name=T', '-c', 'user.email=t@example.invalid', '-C', dir, ...args], {encoding: 'utf8', env: {...process.env, GIT_CONFIG_NOSYSTEM: '1'}}).trim()
}

function write(path: string, text: string, mode?: number): void {
  mkdirSync(join(dir, path, '..'), {recursive: true})
  writeFileSync(join(dir, path), text)
  if (mode) chmodSync(join(dir, path), mode)
}

/** A commit on a side branch kept as refs/sandbox/<branch> (as the gate keeps one), the checkout left on `back`. */
function keep(branch: string, from: string, files: Record<string, string>, back = 'main'): string {
  git('checkout', '-q', '-B', 'agent', from)
  for (const [path, text] of Object.entries(files)) write(path, text)
  git('add', '-A')
  git('commit', '-q', '-m', `agent: ${Object.keys(files).join(' ')}`)
  const commit = git('rev-parse', 'HEAD')
  git('update-ref', `refs/sandbox/${branch}`, commit)
  git('checkout', '-q', back)
  git('branch', '-q', '-D', 'agent')
  return commit
}

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'review-git-'))
  git('init', '-q', '-b', 'main')
  git('config', 'user.name', 'Host User')
  git('config', 'user.email', 'host@example.invalid')
  write('README.md', 'hello\n')
  git('add', '-A')
  git('commit', '-q', '-m', 'initial')
  git('branch', 'release')
  ws = describeWorkspace(dir, process.getuid?.() ?? 0, process.getgid?.() ?? 0)
})

afterEach(() => rmSync(dir, {recursive: true, force: true}))

describe('listReview', () => {
  it('lists each kept ref with its commits, files and flags, and nothing else', async () => {
    expect((await listReview({}, ws)).kept).toEqual([])
    write('run.sh', '#!/bin/sh\n', 0o755)
    git('checkout', '-q', '-b', 'work')
    git('add', 'run.sh')
    git('commit', '-q', '-m', 'an executable')
    const commit = keep('release', 'work', {'.github/workflows/ci.yml': 'on: push\n', 'yarn.lock': '#\n'})
    git('branch', '-q', '-D', 'work')
    const {kept} = await listReview({}, ws)
    expect(kept).toHaveLength(1)
    expect(kept[0]).toMatchObject({branch: 'release', ref: 'refs/sandbox/release', commit, fastForward: true, behind: 0, commitCount: 2, pushedBy: null})
    expect(kept[0].commits.map((c) => c.subject)).toEqual(['agent: .github/workflows/ci.yml yarn.lock', 'an executable'])
    expect(kept[0].diffstat).toEqual({files: 3, insertions: 3, deletions: 0})
    expect(kept[0].flags).toEqual([
      {flag: 'ci', paths: ['.github/workflows/ci.yml']},
      {flag: 'lockfile', paths: ['yarn.lock']},
      {flag: 'new-executable', paths: ['run.sh']},
    ])
  })

  it('sees a binary file for what it is, whatever the work tree\'s .gitattributes says', async () => {
    write('.gitattributes', '* diff\n')
    keep('release', 'main', {'blob.dat': 'a\0b'})
    const {kept} = await listReview({}, ws)
    expect(kept[0].flags).toEqual([{flag: 'binary', paths: ['blob.dat']}])
  })

  it('says how far the host moved since', async () => {
    keep('release', 'main', {'a.txt': 'a\n'})
    git('checkout', '-q', 'release')
    git('commit', '-q', '--allow-empty', '-m', 'host 1')
    git('commit', '-q', '--allow-empty', '-m', 'host 2')
    git('checkout', '-q', 'main')
    const {kept} = await listReview({}, ws)
    expect(kept[0]).toMatchObject({fastForward: false, behind: 2, commitCount: 1})
  })
})

describe('approveKeptPush', () => {
  it('fast-forwards a branch that is not checked out, runs the host\'s receive hooks but not pre-push, and deletes the kept ref', async () => {
    const commit = keep('release', 'main', {'a.txt': 'a\n'})
    for (const hook of ['pre-receive', 'post-receive', 'pre-push']) write(`.git/hooks/${hook}`, `#!/bin/sh\necho ${hook} >> "$GIT_DIR/../hooks.log"; cat >> "$GIT_DIR/../hooks.log"\n`, 0o755)
    const before = git('rev-parse', 'release')
    const result = await approveKeptPush({}, ws, 'release')
    expect(result).toEqual({branch: 'release', outcome: 'fast-forward', previous: before, commit, kept: commit, checkout: 'none', keptRemoved: true})
    expect(git('rev-parse', 'release')).toBe(commit)
    expect(readFileSync(join(dir, 'hooks.log'), 'utf8')).toBe(`pre-receive\n${before} ${commit} refs/heads/release\npost-receive\n${before} ${commit} refs/heads/release\n`)
    expect(git('for-each-ref', 'refs/sandbox/')).toBe('')
  })

  it('refuses when the branch moved, and merges with --merge', async () => {
    const commit = keep('release', 'main', {'a.txt': 'a\n'})
    git('checkout', '-q', 'release')
    git('commit', '-q', '--allow-empty', '-m', 'host moved')
    git('checkout', '-q', 'main')
    const moved = git('rev-parse', 'release')
    const error = await approveKeptPush({}, ws, 'release').catch((e: unknown) => e)
    expect(error).toBeInstanceOf(HostBranchMovedError)
    expect((error as HostBranchMovedError).exitCode).toBe(7)
    expect((error as Error).message).toBe('release moved on the host since the push: refs/sandbox/release is not a fast-forward of it')
    expect(git('rev-parse', 'release')).toBe(moved)
    const merged = await approveKeptPush({}, ws, 'release', {merge: true})
    expect(merged).toMatchObject({outcome: 'merge', previous: moved, kept: commit, keptRemoved: true})
    expect(git('rev-parse', 'release^1', 'release^2').split('\n')).toEqual([moved, commit])
    expect(git('log', '-1', '--format=%s%n%an', 'release')).toBe('Merge refs/sandbox/release into release\nHost User')
  })

  it('a merge that conflicts refuses and moves nothing', async () => {
    keep('release', 'main', {'README.md': 'agent\n'})
    git('checkout', '-q', 'release')
    write('README.md', 'host\n')
    git('commit', '-q', '-am', 'host edits README')
    git('checkout', '-q', 'main')
    const before = git('rev-parse', 'release')
    const error = await approveKeptPush({}, ws, 'release', {merge: true}).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(ConflictError)
    expect((error as Error).message).toBe('merging refs/sandbox/release into release conflicts in README.md')
    expect(git('rev-parse', 'release')).toBe(before)
  })

  it('the checked-out branch whose work tree already holds the push (bind mode): only the index follows, and status is clean', async () => {
    const commit = keep('main', 'main', {'a.txt': 'a\n', 'README.md': 'changed\n'})
    // What the shared work tree holds after the agent committed in it.
    write('a.txt', 'a\n')
    write('README.md', 'changed\n')
    const result = await approveKeptPush({}, ws, 'main')
    expect(result).toMatchObject({outcome: 'fast-forward', commit, checkout: 'index'})
    expect(git('status', '--porcelain')).toBe('')
  })

  it('the checked-out branch with a clean work tree is updated; with changes of its own it refuses', async () => {
    const commit = keep('main', 'main', {'a.txt': 'a\n'})
    write('README.md', 'the user is editing\n')
    const error = await approveKeptPush({}, ws, 'main').catch((e: unknown) => e)
    expect(error).toBeInstanceOf(ConflictError)
    expect((error as Error).message).toBe("main is checked out on the host, and its work tree has changes that are not the push's")
    git('checkout', '-q', '--', 'README.md')
    expect(await approveKeptPush({}, ws, 'main')).toMatchObject({commit, checkout: 'work-tree'})
    expect(readFileSync(join(dir, 'a.txt'), 'utf8')).toBe('a\n')
    expect(git('status', '--porcelain')).toBe('')
  })

  it('a hook that refuses leaves the branch and the kept ref where they were', async () => {
    keep('release', 'main', {'a.txt': 'a\n'})
    write('.git/hooks/pre-receive', '#!/bin/sh\necho "not today" >&2\nexit 1\n', 0o755)
    const before = git('rev-parse', 'release')
    const error = await approveKeptPush({}, ws, 'release').catch((e: unknown) => e)
    expect(error).toBeInstanceOf(SandboxError)
    expect((error as Error).message).toBe('the host repository refused to move release: pre-receive hook declined')
    expect(git('rev-parse', 'release')).toBe(before)
    expect(git('for-each-ref', '--format=%(refname)', 'refs/sandbox/')).toBe('refs/sandbox/release')
  })

  it('creates a branch the host does not have, and says when the branch already holds the push', async () => {
    const commit = keep('newbranch', 'main', {'n.txt': 'n\n'})
    expect(await approveKeptPush({}, ws, 'newbranch')).toMatchObject({outcome: 'created', previous: null, commit})
    git('update-ref', 'refs/sandbox/release', 'main')
    expect(await approveKeptPush({}, ws, 'release')).toMatchObject({outcome: 'already-contained', keptRemoved: true})
    expect(existsSync(join(dir, '.git', 'refs', 'sandbox', 'release'))).toBe(false)
  })
})

describe('rejectKeptPush', () => {
  it('deletes the kept ref and nothing else; a branch with none is bad input', async () => {
    const commit = keep('release', 'main', {'a.txt': 'a\n'})
    const before = git('rev-parse', 'release')
    expect(await rejectKeptPush(ws, 'release')).toEqual({branch: 'release', ref: 'refs/sandbox/release', commit})
    expect(git('for-each-ref', 'refs/sandbox/')).toBe('')
    expect(git('rev-parse', 'release')).toBe(before)
    const error = await rejectKeptPush(ws, 'release').catch((e: unknown) => e)
    expect(error).toBeInstanceOf(UsageError)
    expect((error as Error).message).toMatch(/^no push of release waits for review: refs\/sandbox\/release does not exist in /)
    await expect(rejectKeptPush(ws, '../x')).rejects.toThrow(/not a valid git branch name/)
  })
})

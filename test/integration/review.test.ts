/**
 * Push review on the real engine: pushes a real gate kept as
 * refs/sandbox/<branch> (the default branch, and a branch protected by the
 * workspace's config) are listed with their flags, approved as the
 * workspace's owner with the host's own hook running, refused when the host's
 * branch moved, and rejected. One bind-mode sandbox for the whole file; every
 * host-side git command runs as the workspace's owner, never as root.
 */
import {chmodSync, mkdirSync, readFileSync, statSync, writeFileSync} from 'node:fs'
import {dirname, join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {cleanupUnder, cli, hostGitOk, configuredWorkspace, removeWorkspace, run, sbx, TEST_ROOT, TEST_UID} from './helpers.js'

let ws: string
let home: string
let MARK: string
let sandbox: string

/** git on the host in the workspace, as its owner. */
const userOk = (...args: string[]): Promise<string> => hostGitOk(ws, home, ...args)

const keptRefs = () => userOk('for-each-ref', '--format=%(refname)', 'refs/sandbox/')

async function reviewJson(...extra: string[]): Promise<any> {
  const r = await cli(['review', ws, '--json', ...extra])
  expect(r.exitCode, r.stderr).toBe(0)
  return JSON.parse(r.stdout)
}

beforeAll(async () => {
  // The default branch (main) is always protected; the config adds release.
  ws = await configuredWorkspace('review', {protectedBranches: ['release']})
  home = join(dirname(ws), 'home')
  MARK = join(dirname(ws), 'mark')
  mkdirSync(home)
  mkdirSync(MARK)
  await run('chown', ['-R', `${TEST_UID}:${TEST_UID}`, dirname(ws)])
  await userOk('config', 'user.name', 'Host User')
  await userOk('config', 'user.email', 'user@example.invalid')
  await userOk('add', '.agent-sandbox')
  await userOk('commit', '-q', '-m', 'agent-sandbox set-up')
  await userOk('branch', 'release')
  expect(await userOk('status', '--porcelain'), 'a clean host checkout to start from').toBe('')
  const start = await cli(['start', ws])
  expect(start.exitCode, start.stderr).toBe(0)
  sandbox = JSON.parse((await cli(['list', '--json'])).stdout).find((s: {path: string; branch: string}) => s.path === ws && !s.branch).name
  const setup = await sbx(ws, 'sh', '-c', 'git config user.name Agent && git config user.email agent@example.invalid')
  expect(setup.exitCode, setup.stderr).toBe(0)
})

afterAll(async () => {
  await cleanupUnder(TEST_ROOT)
  removeWorkspace(ws)
})

describe('review', () => {
  let kept: string

  it('lists a push the gate kept for the protected default branch, with its commit, diffstat, flags and sandbox', async () => {
    expect((await reviewJson()).kept).toEqual([])
    const push = await sbx(ws, 'sh', '-c', [
      'set -e',
      'mkdir -p .github/workflows && printf "on: push\\n" > .github/workflows/ci.yml',
      'printf "{}\\n" > package-lock.json',
      'printf "#!/bin/sh\\necho hi\\n" > run.sh && chmod +x run.sh',
      'git add -A && git commit -q -m "CI, a lockfile and a script"',
      'git push host HEAD:main',
    ].join('\n'))
    expect(push.exitCode, 'the push to main itself fails').not.toBe(0)
    expect(push.stderr).toContain('is kept on the host as refs/sandbox/main for the user to review')
    kept = await userOk('rev-parse', 'refs/sandbox/main')
    const main = await userOk('rev-parse', 'main')

    const listing = await reviewJson()
    expect(listing.workspace).toBe(ws)
    expect(listing.kept).toHaveLength(1)
    const [entry] = listing.kept
    expect(entry).toMatchObject({branch: 'main', ref: 'refs/sandbox/main', commit: kept, hostCommit: main, base: main, fastForward: true, behind: 0, commitCount: 1})
    expect(entry.commits.map((c: {subject: string}) => c.subject)).toEqual(['CI, a lockfile and a script'])
    expect(entry.diffstat).toEqual({files: 3, insertions: 4, deletions: 0})
    expect(entry.flags).toEqual([
      {flag: 'ci', paths: ['.github/workflows/ci.yml']},
      {flag: 'lockfile', paths: ['package-lock.json']},
      {flag: 'new-executable', paths: ['run.sh']},
    ])
    expect(entry.pushedBy).toMatchObject({sandbox, sandboxBranch: ''})
    expect(entry.pushedBy.at).toMatch(/^\d{4}-\d\d-\d\dT/)

    const text = await cli(['review', ws])
    expect(text.exitCode, text.stderr).toBe(0)
    expect(text.stdout).toContain('CI workflow: .github/workflows/ci.yml')
    expect(text.stdout).toContain(`pushed by ${sandbox}`)
  })

  it('show prints the diff without a pager when stdout is not a terminal', async () => {
    const r = await cli(['review', 'show', 'main', ws], {env: {GIT_PAGER: 'false', PAGER: 'false'}})
    expect(r.exitCode, r.stderr).toBe(0)
    expect(r.stdout).toContain('diff --git a/.github/workflows/ci.yml b/.github/workflows/ci.yml')
    expect(r.stdout).toContain('create mode 100755 run.sh')
  })

  it("approve fast-forwards the host's main as the workspace's owner, runs the host's hook, and deletes the kept ref", async () => {
    const before = await userOk('rev-parse', 'main')
    // The host's own hook, installed by its owner: it notes who ran it and what moved.
    const hook = join(ws, '.git', 'hooks', 'post-receive')
    writeFileSync(hook, `#!/bin/sh\n[ -d ${MARK} ] || exit 0\nwhile read old new ref; do echo "$(id -u) $old $new $ref" >> ${MARK}/post-receive; done\n`)
    chmodSync(hook, 0o755)
    await run('chown', [`${TEST_UID}:${TEST_UID}`, hook])

    const r = await cli(['review', 'approve', 'main', ws])
    expect(r.exitCode, r.stderr).toBe(0)
    expect(r.stdout).toContain(`fast-forwarded main: ${before.slice(0, 12)} -> ${kept.slice(0, 12)}`)
    expect(await userOk('rev-parse', 'main')).toBe(kept)
    expect(readFileSync(join(MARK, 'post-receive'), 'utf8')).toBe(`${TEST_UID} ${before} ${kept} refs/heads/main\n`)
    expect(statSync(join(MARK, 'post-receive')).uid).toBe(TEST_UID)
    expect(await keptRefs()).toBe('')
    // The shared work tree already held the push: only the host's index followed, so its status is clean.
    expect(await userOk('status', '--porcelain')).toBe('')
    const rootOwned = await run('find', [join(ws, '.git'), '-user', '0'])
    expect(rootOwned.stdout.trim(), 'files root left in the host .git').toBe('')
  })

  it('approve refuses in one line when the host branch moved since the push, and moves nothing', async () => {
    const push = await sbx(ws, 'sh', '-c', 'set -e; echo feature > feature.txt; git add feature.txt; git commit -q -m feature; git push host HEAD:release')
    expect(push.exitCode).not.toBe(0)
    expect(push.stderr).toContain('kept on the host as refs/sandbox/release')
    // The user moves release on the host meanwhile.
    const moved = await userOk('commit-tree', 'release^{tree}', '-p', 'release', '-m', 'the user moves release')
    await userOk('update-ref', 'refs/heads/release', moved)

    const entry = (await reviewJson()).kept.find((k: {branch: string}) => k.branch === 'release')
    expect(entry).toMatchObject({fastForward: false, behind: 1, commitCount: 2})
    const r = await cli(['review', 'approve', 'release', ws])
    expect(r.exitCode).toBe(7)
    expect(r.stderr.trim().split('\n')).toEqual([
      'agent-sandbox: error: release moved on the host since the push: refs/sandbox/release is not a fast-forward of it (hint: see it with agent-sandbox review show release; approve with --merge, or have the agent fetch, rebase and push again)',
    ])
    expect(await userOk('rev-parse', 'release')).toBe(moved)
    expect(await keptRefs()).toBe('refs/sandbox/release')
  })

  it('reject deletes the kept ref and leaves the branch', async () => {
    const release = await userOk('rev-parse', 'release')
    const r = await cli(['review', 'reject', 'release', ws])
    expect(r.exitCode, r.stderr).toBe(0)
    expect(r.stdout).toMatch(/^rejected refs\/sandbox\/release \([0-9a-f]{12}\); release did not move$/)
    expect(await keptRefs()).toBe('')
    expect(await userOk('rev-parse', 'release')).toBe(release)
    const again = await cli(['review', 'reject', 'release', ws])
    expect(again.exitCode).toBe(2)
    expect(again.stderr).toMatch(/no push of release waits for review/)
  })

  it('--all also lists what the gate let straight through, by sandbox', async () => {
    const push = await sbx(ws, 'sh', '-c', 'git push -q host HEAD:refs/heads/feat && git rev-parse HEAD')
    expect(push.exitCode, push.stderr).toBe(0)
    const head = push.stdout.trim().split('\n').pop()
    const listing = await reviewJson('--all')
    expect(listing.kept).toEqual([])
    const mine = listing.pushed.find((s: {sandbox: string}) => s.sandbox === sandbox)
    expect(mine.sandboxBranch).toBe('')
    expect(mine.pushes).toContainEqual(expect.objectContaining({ref: 'refs/heads/feat', new: head, subject: 'feature'}))
    // A kept push is not a push that went through.
    expect(mine.pushes.map((p: {ref: string}) => p.ref)).not.toContain('refs/sandbox/main')
    const text = await cli(['review', ws, '--all'])
    expect(text.stdout).toContain(`no push waits for review in ${ws}`)
    expect(text.stdout).toMatch(/\n {4}\S+ \S+ {2}feat {2}new [0-9a-f]{12} {2}feature/)
  })
})

/**
 * Branch mode on the real engine: repo-shelf, worktrees, `git push
 * host <branch>`, hooks from the host, naming, concurrency and removal.
 * Origins here are never reachable (no network): provisioning falls back to
 * the host repository, as the issue requires.
 */
import {chmodSync, existsSync, mkdirSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {cleanupUnder, cli, docker, initWorkspace, makeWorkspace, removeWorkspace, run, TEST_ROOT, TEST_UID} from './helpers.js'

const created: string[] = []
afterAll(async () => {
  await cleanupUnder(TEST_ROOT)
  for (const path of created) removeWorkspace(path)
})

async function repo(name: string, options: {origin?: string} = {}): Promise<string> {
  const ws = await makeWorkspace(name)
  created.push(ws)
  if (options.origin) await hostGit(ws, 'remote', 'add', 'origin', options.origin)
  await initWorkspace(ws)
  return ws
}

function inBranch(ws: string, branch: string, script: string) {
  return cli(['exec', ws, '--branch', branch, '--', 'sh', '-c', script])
}

/** git on the host repo, which belongs to the test owner, not to us (root). */
async function hostGit(ws: string, ...args: string[]): Promise<string> {
  const r = await run('git', ['-c', `safe.directory=${ws}`, '-c', 'user.name=T', '-c', 'user.email=t@t.invalid', '-C', ws, ...args])
  if (r.exitCode !== 0 && args[0] !== 'rev-parse' && args[0] !== 'log') throw new Error(`git ${args.join(' ')}: ${r.stderr}`)
  return r.stdout.trim()
}

describe('two branch sandboxes on one shelf', () => {
  let ws: string
  let a: any
  let b: any
  beforeAll(async () => {
    // An origin that cannot be reached (loopback port 9 refuses at once).
    ws = await repo('shelf', {origin: 'http://127.0.0.1:9/shelf.git'})
    const [ra, rb] = await Promise.all([cli(['start', ws, '--branch', 'feat/a', '--json']), cli(['start', ws, '--branch', 'feat-b', '--json'])])
    expect(ra.exitCode, ra.stderr).toBe(0)
    expect(rb.exitCode, rb.stderr).toBe(0)
    expect(ra.stderr).toMatch(/origin .* cannot be reached; provisioning from the host repository/)
    a = JSON.parse(ra.stdout)
    b = JSON.parse(rb.stdout)
  })

  it('share one shelf volume, with their own containers and working directories', async () => {
    expect(a.name).toMatch(/^agent-sandbox-shelf-feat__a-[0-9a-f]{8}-[0-9a-f]{32}$/)
    expect(b.name).toMatch(/^agent-sandbox-shelf-feat-b-[0-9a-f]{32}$/)
    expect(a.workdir).toMatch(/^\/repo-shelf\/worktrees\/feat__a-[0-9a-f]{8}$/)
    expect(b.workdir).toBe('/repo-shelf/worktrees/feat-b')
    const va = (await docker('container', 'inspect', '--format', '{{range .Mounts}}{{.Name}}:{{.Destination}} {{end}}', a.name)).stdout
    const vb = (await docker('container', 'inspect', '--format', '{{range .Mounts}}{{.Name}}:{{.Destination}} {{end}}', b.name)).stdout
    const shelf = /(agent-sbx-repo-[0-9a-f]{32}):\/repo-shelf/.exec(va)?.[1]
    expect(shelf).toBeDefined()
    expect(vb).toContain(`${shelf}:/repo-shelf`)
    const wa = await inBranch(ws, 'feat/a', 'pwd; git rev-parse --abbrev-ref HEAD; echo only-a > a.txt')
    expect(wa.stdout.split('\n').slice(0, 2)).toEqual([a.workdir, 'feat/a'])
    const wb = await inBranch(ws, 'feat-b', 'pwd; git rev-parse --abbrev-ref HEAD; ls')
    expect(wb.stdout).toContain('feat-b')
    expect(wb.stdout).not.toContain('a.txt')
  })

  it('commits and pushes to the host with `git push host <branch>`; the host keeps main checked out', async () => {
    const r = await inBranch(ws, 'feat/a', 'git add a.txt && git commit -qm "from sandbox a" && git push host feat/a')
    expect(r.exitCode, r.stderr).toBe(0)
    expect(await hostGit(ws, 'log', '--format=%s', '-1', 'feat/a')).toBe('from sandbox a')
    expect(await hostGit(ws, 'rev-parse', '--abbrev-ref', 'HEAD')).toBe('main')
    expect(existsSync(join(ws, 'a.txt'))).toBe(false) // the host's checkout is untouched
  })

  it('refuses to push the protected default branch, and the branch the host has checked out', async () => {
    const before = await hostGit(ws, 'rev-parse', 'main')
    const r = await inBranch(ws, 'feat/a', '/usr/bin/git push host HEAD:main')
    expect(r.exitCode).not.toBe(0)
    expect(r.stderr).toMatch(/main is a protected branch; propose it for review instead: git push host HEAD:refs\/sandbox\/main/)
    expect(await hostGit(ws, 'rev-parse', 'main')).toBe(before)
    // The user checks out another branch on the host: the gate will not move it under them.
    await hostGit(ws, 'branch', 'checked-out', 'main')
    await hostGit(ws, 'symbolic-ref', 'HEAD', 'refs/heads/checked-out')
    try {
      const out = await inBranch(ws, 'feat/a', 'git push host HEAD:checked-out')
      expect(out.exitCode).not.toBe(0)
      expect(out.stderr).toMatch(/branch is currently checked out/)
      expect(await hostGit(ws, 'rev-parse', 'checked-out')).toBe(before)
    } finally {
      await hostGit(ws, 'symbolic-ref', 'HEAD', 'refs/heads/main')
    }
  })

  it('blocks force, delete and mirror pushes to host', async () => {
    const before = await hostGit(ws, 'rev-parse', 'feat/a')
    for (const push of ['git push --force host HEAD~1:feat/a', 'git push host +HEAD~1:feat/a', 'git push host --delete feat/a', 'git push host :feat/a', 'git push --mirror host']) {
      const r = await inBranch(ws, 'feat/a', push)
      expect(r.exitCode, push).not.toBe(0)
      expect(r.stderr, push).toMatch(/agent-sandbox: blocked/)
    }
    expect(await hostGit(ws, 'rev-parse', 'feat/a')).toBe(before)
  })

  it('keeps the shelf repository config out of the agent’s reach', async () => {
    const r = await inBranch(ws, 'feat/a', 'echo "[core]" >> /repo-shelf/repo/.git/config; mv /repo-shelf/repo/.git/config /tmp/x; rm -f /repo-shelf/repo/.git/config; /usr/bin/git config --local core.hooksPath /tmp')
    expect(r.exitCode).not.toBe(0)
    const hooks = await inBranch(ws, 'feat/a', '/usr/bin/git config core.hooksPath')
    expect(hooks.stdout.trim()).toBe('/workspace/shelf/.git/hooks')
  })

  it('list shows the mode, branch and working directory of each', async () => {
    const bind = await cli(['start', ws, '--json'])
    expect(bind.exitCode, bind.stderr).toBe(0)
    const rows = JSON.parse((await cli(['list', '--json'])).stdout) as any[]
    const mine = rows.filter((r) => r.path === ws)
    expect(mine.map((r) => [r.mode, r.branch, r.workdir]).sort()).toEqual(
      [
        ['bind', '', '/workspace/shelf'],
        ['branch', 'feat-b', b.workdir],
        ['branch', 'feat/a', a.workdir],
      ].sort(),
    )
    for (const row of mine) expect(row.volumes.some((v: string) => v.startsWith('agent-sbx-repo-'))).toBe(true)
  })

  it('from a bind-mode sandbox, a worktree in the shelf can be used directly', async () => {
    const r = await cli(['exec', ws, '--', 'sh', '-c', `cd /repo-shelf/worktrees/feat-b && echo via-bind > bind.txt && git add bind.txt && git commit -qm "from bind mode" && git log --format=%s -1`])
    expect(r.exitCode, r.stderr).toBe(0)
    expect(r.stdout.trim()).toBe('from bind mode')
    const seen = await inBranch(ws, 'feat-b', 'git log --format=%s -1')
    expect(seen.stdout.trim()).toBe('from bind mode')
  })

  it('rm --worktree refuses while work would be lost, and removes it once pushed (or with --force)', async () => {
    const refused = await cli(['rm', ws, '--branch', 'feat-b', '--worktree'])
    expect(refused.exitCode).toBe(7)
    expect(refused.stderr).toMatch(/would be lost: unpushed .*from bind mode/)
    expect((await docker('container', 'inspect', b.name)).exitCode).toBe(0) // nothing was removed
    const push = await inBranch(ws, 'feat-b', 'git push host feat-b')
    expect(push.exitCode, push.stderr).toBe(0)
    await inBranch(ws, 'feat-b', 'echo dirty > dirty.txt')
    const dirty = await cli(['rm', ws, '--branch', 'feat-b', '--worktree'])
    expect(dirty.exitCode).toBe(7)
    expect(dirty.stderr).toMatch(/uncommitted \?\? dirty\.txt/)
    const forced = await cli(['rm', ws, '--branch', 'feat-b', '--worktree', '--force', '--json'])
    expect(forced.exitCode, forced.stderr).toBe(0)
    expect(JSON.parse(forced.stdout)).toMatchObject({container: 'removed', worktree: 'removed'})
    const gone = await cli(['exec', ws, '--', 'test', '-e', '/repo-shelf/worktrees/feat-b'])
    expect(gone.exitCode).toBe(1)
    // The branch and its pushed commit are still in the host.
    expect(await hostGit(ws, 'log', '--format=%s', '-1', 'feat-b')).toBe('from bind mode')
  })
})

describe('provisioning', () => {
  it('starts five branch sandboxes in parallel on a fresh shelf', async () => {
    const ws = await repo('five')
    const branches = ['p1', 'p2', 'p3', 'p4', 'p5']
    const results = await Promise.all(branches.map((br) => cli(['start', ws, '--branch', br, '--json'])))
    for (const r of results) expect(r.exitCode, r.stderr).toBe(0)
    const names = new Set(results.map((r) => JSON.parse(r.stdout).name))
    expect(names.size).toBe(5)
    for (const br of branches) {
      const r = await inBranch(ws, br, 'git rev-parse --abbrev-ref HEAD')
      expect(r.stdout.trim()).toBe(br)
    }
  })

  it('gives look-alike branch names their own worktrees and refuses names git refuses, running nothing', async () => {
    const ws = await repo('names')
    const slash = await cli(['checkout', 'feat/x', ws, '--json'])
    const under = await cli(['checkout', 'feat__x', ws, '--json'])
    expect(slash.exitCode, slash.stderr).toBe(0)
    expect(under.exitCode, under.stderr).toBe(0)
    expect(JSON.parse(slash.stdout).worktree).not.toBe(JSON.parse(under.stdout).worktree)
    for (const bad of ['feat/x y', '$(touch /tmp/pwned)', '-rf', 'a..b']) {
      const r = await cli(['checkout', '--', bad, ws])
      expect(r.exitCode, bad).toBe(2)
      expect(r.stderr).toMatch(/not a valid git branch name/)
      const s = await cli(['start', ws, `--branch=${bad}`])
      expect(s.exitCode, bad).toBe(2)
    }
    expect(existsSync('/tmp/pwned')).toBe(false)
    const pwned = await cli(['exec', ws, '--', 'sh', '-c', 'ls /tmp/pwned /repo-shelf/worktrees'])
    expect(pwned.stdout).not.toMatch(/pwned/)
  })

  it('starts an existing host branch from the host, and a new one from the default branch (master here)', async () => {
    const ws = await makeWorkspace('master-repo')
    created.push(ws)
    await hostGit(ws, 'branch', '-m', 'main', 'master')
    await hostGit(ws, 'branch', 'existing')
    await hostGit(ws, 'commit', '--allow-empty', '-qm', 'on master only')
    await run('chown', ['-R', `${TEST_UID}:${TEST_UID}`, ws])
    await initWorkspace(ws)
    const existing = await cli(['checkout', 'existing', ws, '--json'])
    expect(existing.exitCode, existing.stderr).toBe(0)
    expect(JSON.parse(existing.stdout).source).toBe('host/existing')
    const fresh = await cli(['checkout', 'brand-new', ws, '--json'])
    expect(fresh.exitCode, fresh.stderr).toBe(0)
    expect(JSON.parse(fresh.stdout).source).toBe('new from host/master')
    const log = await inBranch(ws, 'brand-new', 'git log --format=%s -1')
    expect(log.stdout.trim()).toBe('on master only')
    const again = await cli(['checkout', 'brand-new', ws, '--json'])
    expect(JSON.parse(again.stdout).source).toBe('existing')
  })

  it('runs a failing host .husky/pre-commit hook in worktrees too', async () => {
    const ws = await makeWorkspace('husky', {files: {'README.md': 'x\n', '.husky/pre-commit': '#!/bin/sh\necho "husky says no" >&2\nexit 1\n'}})
    created.push(ws)
    chmodSync(join(ws, '.husky', 'pre-commit'), 0o755)
    await hostGit(ws, 'config', 'core.hooksPath', '.husky')
    await initWorkspace(ws)
    const r = await inBranch(ws, 'hooked', 'echo y > y.txt && git add y.txt && git commit -m "should not land"')
    expect(r.exitCode).not.toBe(0)
    expect(r.stderr).toContain('husky says no')
    const log = await inBranch(ws, 'hooked', 'git log --format=%s -1')
    expect(log.stdout.trim()).toBe('initial')
    // Nor can the agent edit the hook: it is the host's file, mounted read-only.
    const edit = await inBranch(ws, 'hooked', 'echo "exit 0" > /workspace/husky/.husky/pre-commit')
    expect(edit.exitCode).not.toBe(0)
  })

  it('refuses branch mode outside a git repository', async () => {
    const ws = await makeWorkspace('plain', {git: false})
    created.push(ws)
    mkdirSync(join(ws, '.agent-sandbox'))
    writeFileSync(join(ws, '.agent-sandbox', 'Dockerfile'), 'ARG BASE_IMAGE_TAG=latest\nFROM agent-sandbox-base:${BASE_IMAGE_TAG}\n')
    const r = await cli(['checkout', 'x', ws])
    expect(r.exitCode).toBe(2)
    expect(r.stderr).toMatch(/needs a git repository/)
  })
})

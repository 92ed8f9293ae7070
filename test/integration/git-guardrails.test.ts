/**
 * Inside a real sandbox: the git wrapper is on every PATH, refuses
 * skipping hooks and rewriting history, and the host's .git/config and hooks
 * are out of the agent's reach (it has a git directory of its own, whose
 * pinned keys keep the hooks on), while honest work (commits, branches,
 * fast-forward pushes) goes through.
 */
import {chmodSync, readFileSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {cleanupUnder, cli, initWorkspace, makeWorkspace, removeWorkspace, run, sbx, TEST_ROOT, TEST_UID} from './helpers.js'

let ws: string
const hook = '#!/bin/sh\nif [ -f ALLOW_COMMIT ]; then exit 0; fi\necho "pre-commit: lint failed" >&2\nexit 1\n'

async function hostGit(...args: string[]) {
  return run('git', ['-c', `safe.directory=*`, '-C', ws, ...args])
}

beforeAll(async () => {
  ws = await makeWorkspace('guarded')
  writeFileSync(join(ws, '.git', 'hooks', 'pre-commit'), hook)
  chmodSync(join(ws, '.git', 'hooks', 'pre-commit'), 0o755)
  // A bare remote inside the workspace, so that pushes stay on this machine.
  await run('git', ['init', '-q', '--bare', join(ws, 'remote.git')])
  await hostGit('remote', 'add', 'origin', '/workspace/guarded/remote.git')
  await run('git', ['-c', 'safe.directory=*', '-C', ws, 'push', '-q', join(ws, 'remote.git'), 'main'])
  writeFileSync(join(ws, '.git', 'info', 'exclude'), 'remote.git\nALLOW_COMMIT\n')
  await run('chown', ['-R', `${TEST_UID}:${TEST_UID}`, ws])
  await initWorkspace(ws)
  expect((await cli(['start', ws])).exitCode).toBe(0)
})

afterAll(async () => {
  await cleanupUnder(TEST_ROOT)
  removeWorkspace(ws)
})

/** The agent's main (its own git directory; the host's moves only through the gate). */
const head = async () => (await sbx(ws, 'git', 'rev-parse', 'main')).stdout.trim()
const remoteHead = async () => (await run('git', ['-c', 'safe.directory=*', '--git-dir', join(ws, 'remote.git'), 'rev-parse', 'main'])).stdout.trim()

describe('git guardrails in the sandbox', () => {
  it('puts the wrapper ahead of the real git for exec, sh, login and interactive shells', async () => {
    for (const shell of [['sh', '-c', 'command -v git'], ['bash', '-lc', 'command -v git'], ['bash', '-ic', 'command -v git']]) {
      const r = await sbx(ws, ...shell)
      expect(r.stdout.trim().split('\n').pop(), shell.join(' ')).toBe('/usr/local/bin/git')
    }
  })

  it('refuses git commit --no-verify (and -n) in the bind-mounted workspace; the hook still runs', async () => {
    const before = await head()
    for (const attempt of ['git commit --allow-empty --no-verify -m x', 'git commit --allow-empty -nm x', 'git commit --allow-empty --no-verif -m x', 'HUSKY=0 git commit --allow-empty -m x', 'git -c core.hooksPath=/dev/null commit --allow-empty -m x']) {
      const r = await sbx(ws, 'sh', '-c', attempt)
      expect(r.exitCode, attempt).not.toBe(0)
      expect(r.stderr, attempt).toMatch(/agent-sandbox: blocked/)
    }
    const hooked = await sbx(ws, 'git', 'commit', '--allow-empty', '-m', 'plain commit runs the hook')
    expect(hooked.exitCode).not.toBe(0)
    expect(hooked.stderr).toContain('pre-commit: lint failed')
    expect(await head()).toBe(before)
  })

  it('keeps the host .git/config and hooks out of reach; the sandbox\'s own config cannot turn the hooks off', async () => {
    const configBefore = readFileSync(join(ws, '.git', 'config'), 'utf8')
    const attempts = [
      '/usr/bin/git config core.hooksPath /tmp/hooks',
      '/usr/bin/git config --local core.fsmonitor "touch /tmp/x"',
      '/usr/bin/git config core.pager "sh -c id"',
      'printf "[core]\\n\\thooksPath = /tmp/hooks\\n" >> .git/config',
      'echo "exit 0" > .git/hooks/pre-commit',
      'echo x >> .git/config.worktree',
      'cp .git/config /tmp/c && mv -f /tmp/c .git/config.worktree',
      'echo "exit 0" > /host-git/hooks/pre-commit',
      'echo x >> /host-git/config',
    ]
    for (const attempt of attempts) await sbx(ws, 'sh', '-c', attempt)
    expect(readFileSync(join(ws, '.git', 'config'), 'utf8')).toBe(configBefore)
    expect(readFileSync(join(ws, '.git', 'hooks', 'pre-commit'), 'utf8')).toBe(hook)
    // The pinned keys still win, so the repository's hook still runs.
    const hooked = await sbx(ws, 'git', 'commit', '--allow-empty', '-m', 'the hook still runs')
    expect(hooked.exitCode).not.toBe(0)
    expect(hooked.stderr).toContain('pre-commit: lint failed')
    const pinned = await sbx(ws, 'sh', '-c', '/usr/bin/git config core.hooksPath; /usr/bin/git config core.fsmonitor; /usr/bin/git config agent-sandbox.hooksDir')
    expect(pinned.stdout.split('\n').filter(Boolean)).toEqual(['/var/lib/agent-sandbox/hooks', 'false', '/host-git/hooks'])
    // Everyday settings are the agent's own.
    const name = await sbx(ws, 'git', 'config', 'user.name', 'Sandbox User')
    expect(name.exitCode, name.stderr).toBe(0)
    expect((await sbx(ws, 'git', 'config', 'user.name')).stdout.trim()).toBe('Sandbox User')
    expect(readFileSync(join(ws, '.git', 'config'), 'utf8')).toBe(configBefore)
  })

  it('lets honest work through: commits, branches, fast-forward pushes, tags', async () => {
    writeFileSync(join(ws, 'ALLOW_COMMIT'), '')
    const r = await sbx(ws, 'sh', '-c', [
      'echo change > file.txt',
      'git add file.txt',
      'git commit -q -m "explain push --force and --no-verify in a message"',
      'git checkout -q -b topic',
      'git commit -q --allow-empty -m "on topic"',
      'git checkout -q main',
      'git push -q origin main',
      'git push -q origin topic',
      'git tag v1 && git push -q origin v1',
      'git push --dry-run origin main',
      'git log -n 1 --format=%s main',
    ].join(' && '))
    expect(r.exitCode, r.stderr).toBe(0)
    expect(r.stdout.trim().split('\n').pop()).toBe('explain push --force and --no-verify in a message')
    expect(await remoteHead()).toBe(await head())
  })

  it('refuses force pushes, deletions and ref writes around the porcelain; the remote is untouched', async () => {
    const before = await remoteHead()
    for (const attempt of [
      'git push -f origin HEAD~1:main',
      'git push --force-with-lease origin HEAD~1:main',
      'git push origin +HEAD~1:main',
      'git push origin :topic',
      'git push --delete origin topic',
      'git push --mirror origin',
      'git update-ref refs/heads/main HEAD~1',
      'git -c alias.p="push --force" p origin HEAD~1:main',
    ]) {
      const r = await sbx(ws, 'sh', '-c', attempt)
      expect(r.exitCode, attempt).not.toBe(0)
      expect(r.stderr.trim().split('\n').filter((l) => l.startsWith('agent-sandbox: blocked')), attempt).toHaveLength(1)
    }
    expect(await remoteHead()).toBe(before)
    const topic = await run('git', ['-c', 'safe.directory=*', '--git-dir', join(ws, 'remote.git'), 'rev-parse', '--verify', 'topic'])
    expect(topic.exitCode).toBe(0)
  })
})

/**
 * The host detaches a protected mount (a rename over the
 * mount point, or the mounted directory removed), and mount-watch stops the
 * agent. For each host action, done as the workspace owner: the agent's
 * long-running process dies, sandbox-exec refuses, doctor names the mount, and
 * the next `exec` restarts the sandbox with the mount back.
 */
import {execa, type ResultPromise} from 'execa'
import {chmodSync, readFileSync} from 'node:fs'
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {BIN, cleanupUnder, cli, docker, initWorkspace, makeWorkspace, removeWorkspace, run, sbx, TEST_GID, TEST_ROOT, TEST_UID} from './helpers.js'

const HOOK = '#!/bin/sh\necho host hook\n'
let ws: string
let name: string
let repo: string

/** A command run on the host as the workspace owner. */
function asOwner(command: string, ...args: string[]) {
  return run('setpriv', ['--reuid', String(TEST_UID), '--regid', String(TEST_GID), '--clear-groups', command, ...args], {cwd: ws, env: {HOME: '/tmp', PATH: process.env.PATH ?? ''}})
}

async function start(): Promise<void> {
  const r = await cli(['start', ws, '--json'])
  expect(r.exitCode, r.stderr).toBe(0)
  name = JSON.parse(r.stdout).name
}

/** A long-running agent process, started through the CLI; resolves once it runs. */
async function agentProcess(): Promise<{child: ResultPromise}> {
  const child = execa(BIN, ['exec', ws, '--', 'sleep', '300'], {reject: false, stdin: 'ignore'})
  for (let i = 0; i < 200; i++) {
    if ((await docker('exec', name, 'pgrep', '-u', 'node', '-x', 'sleep')).exitCode === 0) return {child}
    await new Promise((r) => setTimeout(r, 50))
  }
  child.kill()
  throw new Error('sleep never started')
}

async function doctor(): Promise<{exitCode: number; checks: Array<{name: string; status: string; detail: string}>}> {
  const r = await cli(['doctor', ws, '--json'])
  return {exitCode: r.exitCode, checks: JSON.parse(r.stdout || '{"checks":[]}').checks}
}

/** The checks for one host action that detaches `relative`'s mount. */
async function expectCaughtAndRestored(relative: string, mount: string, action: () => Promise<void>): Promise<void> {
  await start()
  const {child: agent} = await agentProcess()
  await action()
  const after = readFileSync(join(ws, relative), 'utf8')
  // The long-running process is killed (137 through the CLI).
  const ended = await Promise.race([agent, new Promise<undefined>((r) => setTimeout(() => r(undefined), 10_000))])
  expect(ended, 'the agent process outlived the lost mount').toBeDefined()
  expect(ended!.exitCode).toBe(137)
  // Seen by an event (a mount-table change or inotify), not by the timed check every 10 s.
  const log = await docker('exec', name, 'cat', '/run/agent-sandbox/mount-watch.log')
  expect(log.stdout, log.stderr).toContain(`protected path ${repo}/${mount} was unmounted: seen by an event (`)
  // A fresh exec is refused, and the host file is not written.
  const write = await docker('exec', '-u', 'node', name, '/usr/local/bin/sandbox-exec', 'sh', '-c', `echo x >> ${relative}`)
  expect(write.exitCode, write.stderr).toBe(125)
  expect(write.stderr).toContain(`protected path ${repo}/${mount} was unmounted`)
  expect(write.stderr).toContain('must be restarted')
  expect(readFileSync(join(ws, relative), 'utf8')).toBe(after)
  // doctor fails, naming the mount, before anything restarts the sandbox.
  const sick = await doctor()
  expect(sick.exitCode).toBe(1)
  expect(sick.checks).toContainEqual(expect.objectContaining({name: `mount:${repo}/${mount}`, status: 'fail'}))
  expect(sick.checks).toContainEqual(expect.objectContaining({name: 'compromised', status: 'fail'}))
  // The next exec restarts it and runs; the mount is back.
  const again = await sbx(ws, 'true')
  expect(again.exitCode, again.stderr).toBe(0)
  expect(again.stderr).toContain(`restarted ${name}`)
  expect(again.stderr.trim().split('\n')).toHaveLength(1)
  const refused = await sbx(ws, 'sh', '-c', `echo x >> ${relative}`)
  expect(refused.exitCode).not.toBe(0)
  expect(refused.stderr).toContain('Read-only file system')
  expect(readFileSync(join(ws, relative), 'utf8')).toBe(after)
  const healthy = await doctor()
  expect(healthy.checks.filter((c) => c.status === 'fail')).toEqual([])
  expect(healthy.exitCode).toBe(0)
  expect(healthy.checks).toContainEqual(expect.objectContaining({name: `mount:${repo}/${mount}`, status: 'pass'}))
}

beforeAll(async () => {
  ws = await makeWorkspace('watch ws', {
    files: {'README.md': '# watch\n', '.husky/pre-commit': HOOK, '.agent-precommit/user-context.json': '{"user":"me"}\n'},
  })
  repo = '/workspace/watch ws'
  // mkdtemp makes the parent 0700: the owner must reach the workspace to run git in it.
  chmodSync(join(ws, '..'), 0o755)
  // A branch without .husky, made as the owner.
  const git = (...args: string[]) => asOwner('git', '-c', 'user.name=T', '-c', 'user.email=t@example.invalid', ...args)
  for (const step of [['checkout', '-q', '-b', 'no-husky'], ['rm', '-rq', '.husky'], ['commit', '-qm', 'drop husky'], ['checkout', '-q', 'main']]) {
    const r = await git(...step)
    if (r.exitCode !== 0) throw new Error(`git ${step.join(' ')}: ${r.stderr}`)
  }
  await initWorkspace(ws)
}, 600_000)

afterAll(async () => {
  await cleanupUnder(TEST_ROOT)
  if (ws) removeWorkspace(ws)
})

describe('a protected mount detached by the host', () => {
  it('a branch switch that removes .husky and brings it back', async () => {
    await expectCaughtAndRestored('.husky/pre-commit', '.husky', async () => {
      const away = await asOwner('git', 'checkout', '-q', 'no-husky')
      expect(away.exitCode, away.stderr).toBe(0)
      const back = await asOwner('git', 'checkout', '-q', 'main')
      expect(back.exitCode, back.stderr).toBe(0)
    })
    expect(readFileSync(join(ws, '.husky/pre-commit'), 'utf8')).toBe(HOOK)
  })

  it('a hook manager reinstalling .husky (rm -rf, mkdir, write a hook)', async () => {
    await expectCaughtAndRestored('.husky/pre-commit', '.husky', async () => {
      const r = await asOwner('sh', '-c', `rm -rf .husky && mkdir .husky && printf '%s' '${HOOK}' > .husky/pre-commit`)
      expect(r.exitCode, r.stderr).toBe(0)
    })
  })

  it('an editor saving a protected file by rename (.agent-precommit/user-context.json)', async () => {
    await expectCaughtAndRestored('.agent-precommit/user-context.json', '.agent-precommit/user-context.json', async () => {
      const r = await asOwner('sh', '-c', `printf '{"user":"edited"}\\n' > .agent-precommit/.ctx.tmp && mv .agent-precommit/.ctx.tmp .agent-precommit/user-context.json`)
      expect(r.exitCode, r.stderr).toBe(0)
    })
    expect(readFileSync(join(ws, '.agent-precommit/user-context.json'), 'utf8')).toBe('{"user":"edited"}\n')
  })

  it('an editor saving .agent-sandbox/config.json by rename: the directory mount holds, nothing is killed', async () => {
    await start()
    const {child: agent} = await agentProcess()
    const config = readFileSync(join(ws, '.agent-sandbox/config.json'), 'utf8')
    const r = await asOwner('sh', '-c', `printf '%s' '${config.replaceAll("'", '')}' > .agent-sandbox/.config.tmp && mv .agent-sandbox/.config.tmp .agent-sandbox/config.json`)
    expect(r.exitCode, r.stderr).toBe(0)
    await new Promise((res) => setTimeout(res, 500))
    expect((await docker('exec', name, 'pgrep', '-u', 'node', '-x', 'sleep')).exitCode).toBe(0)
    const refused = await sbx(ws, 'sh', '-c', 'echo x >> .agent-sandbox/config.json')
    expect(refused.stderr).toContain('Read-only file system')
    agent.kill()
    await agent
  })

  it('start restarts a running compromised sandbox', async () => {
    await start()
    await compromise('rm -rf .husky && mkdir .husky && printf x > .husky/pre-commit')
    expect((await docker('exec', name, 'cat', '/run/agent-sandbox/mount-watch.log')).stdout).toContain('was unmounted: seen by an event (')
    const started = await cli(['start', ws, '--json'])
    expect(started.exitCode, started.stderr).toBe(0)
    expect(started.stderr).toContain(`restarted ${name}`)
    expect(JSON.parse(started.stdout).action).toBe('started')
    expect((await sbx(ws, 'sh', '-c', 'echo x >> .husky/pre-commit')).stderr).toContain('Read-only file system')
  })

  it('refuses with exit 6 when the lost path cannot be mounted again (now a symbolic link)', async () => {
    await start()
    await compromise('rm -rf .husky && ln -s /tmp .husky')
    const refused = await cli(['exec', ws, '--', 'true'])
    expect(refused.exitCode, refused.stderr).toBe(6)
    expect(refused.stderr).toContain('cannot restore the read-only mount')
    const fixed = await asOwner('sh', '-c', `rm .husky && mkdir .husky && printf '%s' '${HOOK}' > .husky/pre-commit`)
    expect(fixed.exitCode, fixed.stderr).toBe(0)
    const again = await sbx(ws, 'sh', '-c', 'echo x >> .husky/pre-commit')
    expect(again.stderr).toContain('Read-only file system')
  })
})

/** Run a host command as the owner and wait until mount-watch has marked the sandbox. */
async function compromise(script: string): Promise<void> {
  const r = await asOwner('sh', '-c', script)
  expect(r.exitCode, r.stderr).toBe(0)
  for (let i = 0; i < 100; i++) {
    if ((await docker('exec', name, 'test', '-e', '/run/agent-sandbox/compromised')).exitCode === 0) return
    await new Promise((res) => setTimeout(res, 50))
  }
  throw new Error('mount-watch did not mark the sandbox compromised')
}

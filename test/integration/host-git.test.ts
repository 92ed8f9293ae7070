/**
 * The agent never writes the host's .git, whatever the user does on
 * the host while the sandbox runs, and every push to the host goes through
 * the gate. A real engine, real git, a workspace owned by a non-root user and
 * every host-side command run as that user.
 *
 * The planted commands `touch` files in a host directory that no container
 * mounts (MARK), so a marker appears only if the host's git ran one of them.
 */
import {chmodSync, existsSync, mkdirSync, readdirSync, readFileSync} from 'node:fs'
import {dirname, join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {cleanupUnder, cli, hostGitOk, docker, initWorkspace, makeWorkspace, removeWorkspace, run, sbx, TEST_ROOT, TEST_UID} from './helpers.js'

let ws: string
let MARK: string
let home: string
let origin: string

/** git on the host in the workspace, as its owner. */
const userOk = (...args: string[]): Promise<string> => hostGitOk(ws, home, ...args)

/** Every way we know to plant a command for the host's git, tried from inside as the agent. */
function plantScript(tag: string): string {
  // git appends arguments to fsmonitor and pager commands: `; :` swallows them.
  const cmd = (what: string) => `touch ${MARK}/pwned-${tag}-${what}; :`
  return [
    'set +e',
    `printf '[core]\\n\\tfsmonitor = ${cmd('fsmonitor-plain')}\\n' >> .git/config`,
    `/usr/bin/git config core.fsmonitor '${cmd('fsmonitor-git')}'`,
    `/usr/bin/git config core.hooksPath /tmp/evil-hooks`,
    `mkdir -p /tmp/evil-hooks .git/hooks && printf '#!/bin/sh\\n${cmd('hook')}\\n' | tee /tmp/evil-hooks/pre-commit .git/hooks/pre-commit >/dev/null && chmod +x /tmp/evil-hooks/pre-commit .git/hooks/pre-commit`,
    `printf '#!/bin/sh\\n${cmd('hostgit-hook')}\\n' > /host-git/hooks/pre-commit`,
    `printf '[core]\\n\\tfsmonitor = ${cmd('hostgit-config')}\\n' >> /host-git/config`,
    `printf '${cmd('husky')}\\n' >> .husky/pre-commit`,
    `cp .git/config /tmp/c && printf '[core]\\n\\tpager = ${cmd('pager')}\\n' >> /tmp/c && mv -f /tmp/c .git/config`,
    'true',
  ].join('\n')
}

/** The user's next git status and commit on the host run nothing the agent planted. */
async function expectNothingPlanted(tag: string): Promise<void> {
  const config = readFileSync(join(ws, '.git', 'config'), 'utf8')
  expect(config, 'host .git/config').not.toContain('pwned')
  expect(readFileSync(join(ws, '.husky', 'pre-commit'), 'utf8'), 'host .husky/pre-commit').not.toContain('pwned')
  for (const hook of readdirSync(join(ws, '.git', 'hooks'))) {
    expect(readFileSync(join(ws, '.git', 'hooks', hook), 'utf8'), hook).not.toContain('pwned')
  }
  await userOk('status', '--short')
  await userOk('commit', '-q', '--allow-empty', '-m', `probe after ${tag}`)
  expect(readdirSync(MARK).filter((f) => f.startsWith('pwned')), 'markers of planted commands that ran on the host').toEqual([])
}

beforeAll(async () => {
  ws = await makeWorkspace('hostgit', {files: {'README.md': '# host git\n', '.husky/pre-commit': '#!/bin/sh\nexit 0\n'}})
  MARK = join(dirname(ws), 'mark')
  home = join(dirname(ws), 'home')
  origin = join(dirname(ws), 'origin.git')
  mkdirSync(MARK)
  mkdirSync(home)
  chmodSync(join(ws, '.husky', 'pre-commit'), 0o755)
  await run('chown', [`${TEST_UID}:${TEST_UID}`, MARK, home, dirname(ws)])
  await run('setpriv', ['--reuid', String(TEST_UID), '--regid', String(TEST_UID), '--clear-groups', 'git', 'init', '-q', '--bare', origin])
  await userOk('config', 'user.name', 'Host User')
  await userOk('config', 'user.email', 'user@example.invalid')
  await userOk('config', 'core.hooksPath', '.husky')
  await userOk('remote', 'add', 'origin', origin)
  await userOk('push', '-q', 'origin', 'main')
  await userOk('checkout', '-q', '-b', 'feat')
  await initWorkspace(ws)
  await run('chown', ['-R', `${TEST_UID}:${TEST_UID}`, ws])
  await userOk('add', '.agent-sandbox', '.husky')
  await userOk('commit', '-q', '-m', 'agent-sandbox set-up')
  // A branch without .husky, for the branch switch below.
  await userOk('checkout', '-q', '-b', 'nohusky')
  await userOk('rm', '-q', '-r', '.husky')
  await userOk('commit', '-q', '-m', 'no husky here')
  await userOk('checkout', '-q', 'feat')
  await userOk('push', '-q', 'origin', 'HEAD:x')
  await userOk('fetch', '-q', 'origin')
  expect(await userOk('status', '--porcelain'), 'a clean host checkout to start from').toBe('')
  const start = await cli(['start', ws])
  expect(start.exitCode, start.stderr).toBe(0)
})

afterAll(async () => {
  await cleanupUnder(TEST_ROOT)
  removeWorkspace(ws)
})

describe('the host .git is never the agent\'s to write', () => {
  it('control: a command planted in the host .git/config does run on the host (the markers work)', async () => {
    await userOk('config', 'core.fsmonitor', `touch ${MARK}/control; :`)
    await userOk('status', '--short')
    await userOk('config', '--unset', 'core.fsmonitor')
    expect(existsSync(join(MARK, 'control'))).toBe(true)
  })

  it('gives the agent a git directory of its own, with the host .git read-only and the pinned keys winning', async () => {
    const r = await sbx(ws, 'sh', '-c', 'git rev-parse --abbrev-ref HEAD; git config agent-sandbox.hooksDir; git config core.fsmonitor; touch /host-git/x 2>&1; ls -ld .git | cut -c1-10; git config core.hooksPath')
    expect(r.exitCode, r.stderr).toBe(0)
    const [branch, hooks, fsmonitor, touch, mode, dispatcher] = r.stdout.split('\n')
    expect(branch).toBe('feat')
    // Hooks run through the dispatcher, which runs the host's from here.
    expect(hooks).toBe('/workspace/hostgit/.husky')
    expect(dispatcher).toBe('/var/lib/agent-sandbox/hooks')
    expect(fsmonitor).toBe('false')
    expect(touch).toMatch(/Read-only file system/)
    expect(mode).toBe('drwxrwxr-t')
    // The agent's git agrees with the host's about the work tree at once.
    expect((await sbx(ws, 'git', 'status', '--porcelain')).stdout).toBe('')
  })

  const hostActions: Array<[string, () => Promise<unknown>]> = [
    ['git config', () => userOk('config', 'user.name', 'Renamed User')],
    ['git remote add', () => userOk('remote', 'add', 'extra', join(dirname(ws), 'extra.git'))],
    ['git branch -u', () => userOk('branch', '-u', 'origin/main', 'main')],
    ['git push -u', () => userOk('push', '-q', '-u', 'origin', 'feat')],
    ['git gc', () => userOk('gc', '-q')],
    ['git pack-refs --all', () => userOk('pack-refs', '--all')],
    ['git fetch', () => userOk('fetch', '-q', 'origin')],
    // These replace .husky itself, which detaches its read-only mount: mount-watch stops the
    // agent, and the next exec restarts the sandbox with the mount back (docs/security.md).
    [
      'a branch switch that removes .husky and brings it back',
      async () => {
        await userOk('checkout', '-q', 'nohusky')
        await userOk('checkout', '-q', 'feat')
      },
    ],
    [
      'a hooks reinstall',
      () => run('setpriv', ['--reuid', String(TEST_UID), '--regid', String(TEST_UID), '--clear-groups', 'sh', '-c', 'rm -rf .husky && mkdir .husky && printf "#!/bin/sh\\nexit 0\\n" > .husky/pre-commit && chmod +x .husky/pre-commit'], {cwd: ws}),
    ],
  ]
  it.each(hostActions)('after the user runs %s on the host, nothing planted from inside runs on the host', async (action, hostAction) => {
    await hostAction()
    const tag = action.replace(/[^a-z]+/g, '_')
    const plant = await sbx(ws, 'sh', '-c', plantScript(tag))
    expect(plant.exitCode, plant.stderr).toBe(0)
    // The pinned keys still win inside, whatever the agent wrote to its own config.
    const pinned = await sbx(ws, 'sh', '-c', 'git config core.fsmonitor; git config core.hooksPath; git config agent-sandbox.hooksDir')
    expect(pinned.stdout.split('\n')).toEqual(['false', '/var/lib/agent-sandbox/hooks', '/workspace/hostgit/.husky'])
    await expectNothingPlanted(tag)
  })
})

describe('everyday git inside, and the gate', () => {
  it('works: config, commit, amend, branch, stash, rebase, push -u, checkout -b x origin/x, remote add', async () => {
    const r = await sbx(ws, 'sh', '-c', [
      'set -e',
      'git config user.name Agent && git config user.email agent@example.invalid',
      'echo one > work.txt && git add work.txt && git commit -q -m one',
      'echo two >> work.txt && git commit -q -a --amend -m "one, amended"',
      'git branch side && git checkout -q side && echo side > side.txt && git add side.txt && git commit -q -m side && git checkout -q feat',
      'echo three >> work.txt && git commit -q -am three',
      'echo stashed > stash.txt && git add stash.txt && git stash -q && test ! -e stash.txt && git stash pop -q && git rm -q -f stash.txt',
      'git checkout -q side && git rebase -q feat && git checkout -q feat',
      'git push -q -u host feat',
      'git config --get branch.feat.remote',
      'git checkout -q -b x origin/x && git checkout -q feat',
      'git remote add other /tmp/other.git && git remote',
    ].join('\n'))
    expect(r.exitCode, r.stderr).toBe(0)
    expect(r.stdout).toContain('host\n')
    expect(r.stdout).toMatch(/other/)
  })

  it('bind mode: the host sees the agent\'s pushed commits, and its git status is clean', async () => {
    const agentHead = (await sbx(ws, 'git', 'rev-parse', 'feat')).stdout.trim()
    expect(await userOk('rev-parse', 'feat')).toBe(agentHead)
    expect(await userOk('log', '-1', '--format=%s', 'feat')).toBe('three')
    expect(await userOk('status', '--porcelain')).toBe('')
  })

  it('the gate refuses a force push, a delete and a push to the protected branch, even with /usr/bin/git', async () => {
    const before = {feat: await userOk('rev-parse', 'feat'), main: await userOk('rev-parse', 'main')}
    for (const attempt of ['/usr/bin/git push host +HEAD~1:feat', '/usr/bin/git push --force host HEAD~1:feat', '/usr/bin/git push host :feat', '/usr/bin/git push host --delete feat', '/usr/bin/git push host HEAD:main', '/usr/bin/git push host HEAD:refs/remotes/origin/main']) {
      const r = await sbx(ws, 'sh', '-c', attempt)
      expect(r.exitCode, attempt).not.toBe(0)
      expect(r.stderr, attempt).toMatch(/refused|rejected/)
    }
    expect({feat: await userOk('rev-parse', 'feat'), main: await userOk('rev-parse', 'main')}).toEqual(before)
    // Through the wrapper, the refused commit is kept for review under refs/sandbox/, in one line.
    const kept = await sbx(ws, 'git', 'push', 'host', 'HEAD:main')
    expect(kept.exitCode).not.toBe(0)
    expect(kept.stderr).toContain(`agent-sandbox: main was not updated; your commit ${before.feat.slice(0, 12)} is kept on the host as refs/sandbox/main for the user to review`)
    expect(await userOk('rev-parse', 'refs/sandbox/main')).toBe(before.feat)
    expect(await userOk('rev-parse', 'main')).toBe(before.main)
  })

  it('follows the user\'s commits on the host; a push behind the host is refused with a hint', async () => {
    await userOk('commit', '-q', '--allow-empty', '-m', 'the user commits on the host')
    const host = await userOk('rev-parse', 'feat')
    // The agent's branch follows the host's (the work tree is shared), with nothing to do.
    expect((await sbx(ws, 'git', 'rev-parse', 'feat')).stdout.trim()).toBe(host)
    expect((await sbx(ws, 'git', 'status', '--porcelain')).stdout).toBe('')
    await userOk('commit', '-q', '--allow-empty', '-m', 'the user commits again')
    const r = await sbx(ws, 'sh', '-c', 'git reset -q --soft HEAD~1 && git commit -q --allow-empty -m "agent, diverged from the host" && /usr/bin/git push --force host feat')
    expect(r.exitCode).not.toBe(0)
    expect(r.stderr).toMatch(/not a fast-forward.*git push host HEAD:refs\/sandbox\/feat/)
    expect(await userOk('log', '-1', '--format=%s', 'feat')).toBe('the user commits again')
  })

  it('branch mode: the host checkout cannot be written from a branch sandbox; pushes go through the gate', async () => {
    const readme = readFileSync(join(ws, 'README.md'), 'utf8')
    const r = await cli(['exec', ws, '--branch', 'b1', '--', 'sh', '-c', [
      'for attempt in "touch /workspace/hostgit/new" "echo x >> /workspace/hostgit/README.md" "echo x >> /workspace/hostgit/.git/config" "rm -rf /workspace/hostgit/.git/hooks"; do',
      '  sh -c "$attempt" 2>/dev/null && echo "WROTE: $attempt"',
      'done',
      'git commit -q --allow-empty -m "from b1" && git push -q host b1 && echo pushed',
    ].join('\n')])
    expect(r.exitCode, r.stderr).toBe(0)
    expect(r.stdout).not.toContain('WROTE')
    expect(r.stdout).toContain('pushed')
    expect(readFileSync(join(ws, 'README.md'), 'utf8')).toBe(readme)
    expect(existsSync(join(ws, 'new'))).toBe(false)
    expect(await userOk('log', '-1', '--format=%s', 'b1')).toBe('from b1')
  })

  it('the gate is its own container: no capabilities, read-only root, only the sandbox\'s network', async () => {
    const name = JSON.parse((await cli(['list', '--json'])).stdout).find((s: {path: string; branch: string}) => s.path === ws && !s.branch).name
    const gate = JSON.parse((await docker('container', 'inspect', `${name}-gate`)).stdout)[0]
    expect(gate.State.Running).toBe(true)
    expect(gate.HostConfig.CapAdd ?? []).toEqual([])
    expect(gate.HostConfig.ReadonlyRootfs).toBe(true)
    // No capabilities at all (Podman lists the dropped ones where Docker says ALL).
    const caps = await docker('exec', `${name}-gate`, 'grep', '-E', '^Cap(Eff|Prm|Bnd)', '/proc/1/status')
    expect(caps.stdout).toMatch(/CapEff:\s+0+\n/)
    expect(caps.stdout).toMatch(/CapPrm:\s+0+\n/)
    expect(caps.stdout).toMatch(/CapBnd:\s+0+$/m)
    expect(gate.HostConfig.NetworkMode).toMatch(/^container:/)
    expect(gate.Config.User).toBe(`${TEST_UID}:${TEST_UID}`)
    // The agent cannot see the gate's processes.
    const ps = await sbx(ws, 'sh', '-c', 'ps -eo args')
    expect(ps.stdout).not.toContain('git daemon')
  })

  it('doctor checks the host .git, the pinned config and the gate, and fails while the gate is down', async () => {
    const name = JSON.parse((await cli(['list', '--json'])).stdout).find((s: {path: string; branch: string}) => s.path === ws && !s.branch).name
    const status = (report: any, check: string) => report.checks.find((c: any) => c.name === check)?.status
    const ok = await cli(['doctor', ws, '--json'])
    const report = JSON.parse(ok.stdout)
    for (const check of ['host-git-config', 'host-git-hooks', 'git-pinned-config', 'git-pinned-replace', 'git-pinned-keys', 'git-gate']) {
      expect(status(report, check), `${check}: ${JSON.stringify(report.checks.find((c: any) => c.name === check))}`).toBe('pass')
    }
    expect(ok.exitCode, ok.stderr).toBe(0)
    expect((await docker('stop', '-t', '1', `${name}-gate`)).exitCode).toBe(0)
    const down = await cli(['doctor', ws, '--json'])
    expect(down.exitCode).toBe(1)
    expect(status(JSON.parse(down.stdout), 'git-gate')).toBe('fail')
    // start brings a stopped gate back.
    expect((await cli(['start', ws])).exitCode).toBe(0)
    expect(JSON.parse((await docker('container', 'inspect', `${name}-gate`)).stdout)[0].State.Running).toBe(true)
    expect((await cli(['doctor', ws])).exitCode).toBe(0)
  })

  it('the gate serves only the host repository: a repository the agent makes in the work tree is refused, and its config runs nothing', async () => {
    const r = await sbx(ws, 'sh', '-c', [
      '/usr/bin/git init -q --bare evil.git',
      'printf "#!/bin/sh\\ntouch %s/pwned-alternate-refs\\n" > evil.git/x.sh && chmod +x evil.git/x.sh',
      '/usr/bin/git --git-dir=evil.git config core.alternateRefsCommand "/gate/ws/evil.git/x.sh; true"',
      '/usr/bin/git ls-remote git://127.0.0.1:19418/ws/evil.git 2>&1; echo "ls-remote=$?"',
      '/usr/bin/git push git://127.0.0.1:19418/ws/evil.git HEAD:refs/heads/x 2>&1; echo "push=$?"',
      '/usr/bin/git ls-remote git://127.0.0.1:19418/ws 2>&1; echo "worktree path=$?"',
      'rm -rf evil.git',
    ].join('\n').replaceAll('%s', MARK))
    expect(r.stdout).toMatch(/ls-remote=128/)
    expect(r.stdout).toMatch(/push=128/)
    expect(r.stdout).toMatch(/worktree path=128/)
    expect(existsSync(join(MARK, 'pwned-alternate-refs'))).toBe(false)
    // control: the host repository itself is served
    expect((await sbx(ws, 'git', 'ls-remote', '--heads', 'host')).exitCode).toBe(0)
  })

  it("the host's own hooks directory in the work tree (core.hooksPath) is read-only inside, and nothing the agent configures runs before the firewall", async () => {
    await run('setpriv', ['--reuid', String(TEST_UID), '--regid', String(TEST_UID), '--clear-groups', 'mkdir', '-p', join(ws, '.githooks')])
    await userOk('config', 'core.hooksPath', '.githooks')
    try {
      // The agent's own .git: a hook for every ref update, and the pinned settings off.
      const plant = await sbx(ws, 'sh', '-c', [
        'mkdir -p /home/node/h',
        `printf '#!/bin/sh\\ntouch /workspace/hostgit/.ran-before-firewall-$(id -u)\\n' > /home/node/h/reference-transaction`,
        'chmod +x /home/node/h/reference-transaction',
        '/usr/bin/git config core.hooksPath /home/node/h',
        '/usr/bin/git config extensions.worktreeConfig false',
      ].join(' && '))
      expect(plant.exitCode, plant.stderr).toBe(0)
      expect((await cli(['stop', ws])).exitCode).toBe(0)
      await userOk('commit', '-q', '--allow-empty', '-m', 'the host moves, so the next start syncs refs')
      const start = await cli(['start', ws])
      expect(start.exitCode, start.stderr).toBe(0)
      expect(readdirSync(ws).filter((f) => f.startsWith('.ran-before-firewall'))).toEqual([])
      const write = await sbx(ws, 'sh', '-c', 'echo "touch /tmp/x" > .githooks/pre-receive')
      expect(write.exitCode).not.toBe(0)
      expect(write.stderr).toMatch(/Read-only file system/)
      // The next command switched the pinned settings back on.
      expect((await sbx(ws, '/usr/bin/git', 'config', 'core.hooksPath')).stdout.trim()).toBe('/var/lib/agent-sandbox/hooks')
    } finally {
      await userOk('config', 'core.hooksPath', '.husky')
      expect((await cli(['stop', ws])).exitCode).toBe(0)
      expect((await cli(['start', ws])).exitCode).toBe(0)
    }
  })

  it('an older sandbox still running (no git label) keeps working, and start says in one line what to run', async () => {
    const name = JSON.parse((await cli(['list', '--json'])).stdout).find((s: {path: string; branch: string}) => s.path === ws && !s.branch).name
    const image = JSON.parse((await docker('container', 'inspect', name)).stdout)[0].Config.Image
    // The gate and the gateway first: Podman keeps a container that another one's network depends on.
    expect((await docker('rm', '-f', `${name}-gate`, `${name}-gateway`)).exitCode).toBe(0)
    expect((await docker('rm', '-f', name)).exitCode).toBe(0)
    // What an earlier version made: the workspace read-write, with no git directory of its own and no gate.
    const old = await docker('run', '-d', '--name', name, '--label', 'dev.agent-sandbox.managed=true', '--label', 'dev.agent-sandbox.kind=sandbox',
      '--label', `dev.agent-sandbox.workspace=${ws}`, '--label', 'dev.agent-sandbox.mode=bind', '--env', 'AGENT_SANDBOX_NETWORK=none',
      '--env', `AGENT_SANDBOX_UID=${TEST_UID}`, '--mount', `type=bind,source=${ws},target=/workspace/hostgit`, image)
    expect(old.exitCode, old.stderr).toBe(0)
    const r = await cli(['start', ws])
    expect(r.exitCode, r.stderr).toBe(0)
    expect(r.exitCode, r.stderr).toBe(0)
    expect(r.stderr.trim().split('\n').filter((l) => l.includes('older agent-sandbox'))).toEqual([
      `warning: ${name} was started by an older agent-sandbox, in which the agent can write the host's .git; restart it: agent-sandbox stop && agent-sandbox start`,
    ])
    expect((await cli(['stop', ws])).exitCode).toBe(0)
    const again = await cli(['start', ws])
    expect(again.exitCode, again.stderr).toBe(0)
    expect(again.stderr).not.toContain('older agent-sandbox')
    expect(JSON.parse((await docker('container', 'inspect', name)).stdout)[0].Config.Labels['dev.agent-sandbox.git']).toBe('gate')
  })

  it('rm --volumes removes the git volume and the gate', async () => {
    expect((await cli(['rm', ws, '--branch', 'b1'])).exitCode).toBe(0)
    const r = await cli(['rm', ws, '--volumes', '--yes'])
    expect(r.exitCode, r.stderr).toBe(0)
    expect(r.stdout).toMatch(/-git removed/)
    const left = await docker('ps', '-a', '--filter', `label=dev.agent-sandbox.workspace=${ws}`, '--format', '{{.Names}}')
    expect(left.stdout.trim()).toBe('')
  })
})

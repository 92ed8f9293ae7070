/**
 * An engine behind ssh:// (one engine client for every transport).
 * The CLI reaches it as the docker CLI does, through `ssh … docker system
 * dial-stdio`, with our own Engine API client on top. A real sshd of the
 * test's own, on loopback only, in front of this machine's engine.
 */
import {spawn, type ChildProcess} from 'node:child_process'
import {chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {cleanupUnder, cli, freePort, initWorkspace, makeWorkspace, removeWorkspace, run, TEST_ROOT} from './helpers.js'

let dir: string
let sshd: ChildProcess
let env: Record<string, string>
let ws: string

/** An ssh wrapper the CLI runs (AGENT_SANDBOX_SSH), with a config of the test's own: root's ~/.ssh is not ours to change. */
function sshWrapper(name: string, config: string): string {
  const path = join(dir, name)
  writeFileSync(join(dir, `${name}.config`), config)
  writeFileSync(path, `#!/bin/sh\nexec ssh -F ${join(dir, `${name}.config`)} "$@"\n`)
  chmodSync(path, 0o755)
  return path
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'asb-ssh-'))
  const keygen = (file: string) => run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', join(dir, file)])
  expect((await keygen('host_key')).exitCode).toBe(0)
  expect((await keygen('user_key')).exitCode).toBe(0)
  expect((await keygen('other_key')).exitCode).toBe(0)
  await run('cp', [join(dir, 'user_key.pub'), join(dir, 'authorized_keys')])
  const port = await freePort()
  writeFileSync(
    join(dir, 'sshd_config'),
    [
      `Port ${port}`,
      'ListenAddress 127.0.0.1',
      `HostKey ${join(dir, 'host_key')}`,
      `PidFile ${join(dir, 'sshd.pid')}`,
      `AuthorizedKeysFile ${join(dir, 'authorized_keys')}`,
      'PermitRootLogin prohibit-password',
      'PasswordAuthentication no',
      'KbdInteractiveAuthentication no',
      'UsePAM no',
      'StrictModes no',
      '',
    ].join('\n'),
  )
  mkdirSync('/run/sshd', {recursive: true}) // sshd's privilege separation directory
  sshd = spawn('/usr/sbin/sshd', ['-D', '-e', '-f', join(dir, 'sshd_config')], {stdio: ['ignore', 'ignore', 'pipe']})
  let log = ''
  sshd.stderr?.on('data', (chunk) => (log += chunk))
  const common = ['StrictHostKeyChecking no', 'UserKnownHostsFile /dev/null', 'LogLevel ERROR', 'IdentitiesOnly yes']
  const good = sshWrapper('ssh-good', ['Host *', `  IdentityFile ${join(dir, 'user_key')}`, ...common.map((l) => `  ${l}`), ''].join('\n'))
  env = {DOCKER_HOST: `ssh://root@127.0.0.1:${port}`, AGENT_SANDBOX_SSH: good}
  // Wait until sshd answers (bounded).
  for (let i = 0; i < 50; i++) {
    const probe = await run(good, ['-p', String(port), 'root@127.0.0.1', 'true'])
    if (probe.exitCode === 0) break
    if (i === 49) throw new Error(`sshd did not come up: ${log}`)
    await new Promise((r) => setTimeout(r, 100))
  }
  ws = await makeWorkspace('over-ssh')
  await initWorkspace(ws)
})

afterAll(async () => {
  await cleanupUnder(TEST_ROOT)
  removeWorkspace(ws)
  sshd?.kill()
  rmSync(dir, {recursive: true, force: true})
})

describe('an engine behind ssh://', () => {
  it('lists, starts, execs with stdin, stops and removes through ssh, as on the local socket', async () => {
    // This run's own sandboxes only: others may come and go on a shared engine between the two calls.
    // Without `status` ("Up 2 seconds"), which moves between two calls.
    const ours = (stdout: string) =>
      (JSON.parse(stdout) as Array<{path: string; status?: string}>).filter((s) => s.path.startsWith(TEST_ROOT)).map(({status: _status, ...row}) => row)
    const local = await cli(['list', '--json'])
    const remote = await cli(['list', '--json'], {env})
    expect(remote.exitCode, remote.stderr).toBe(0)
    expect(ours(remote.stdout)).toEqual(ours(local.stdout))
    const start = await cli(['start', ws, '--json'], {env})
    expect(start.exitCode, start.stderr).toBe(0)
    expect(JSON.parse(start.stdout).action).toBe('created')
    const exec = await cli(['exec', ws, '--', 'sh', '-c', 'cat; echo "uid=$(id -u)"; exit 7'], {env, input: 'through ssh\n'})
    expect(exec.stdout).toBe('through ssh\nuid=1234')
    expect(exec.exitCode).toBe(7)
    const listed = ours((await cli(['list', '--json'], {env})).stdout)
    expect(listed).toEqual(ours((await cli(['list', '--json'])).stdout))
    const running = listed.find((s) => s.path === ws) as {running?: boolean} | undefined
    expect(running?.running).toBe(true)
    expect((await cli(['stop', ws], {env})).exitCode).toBe(0)
    expect((await cli(['rm', ws], {env})).exitCode).toBe(0)
    expect(JSON.parse((await cli(['list', '--json'])).stdout).find((s: {path: string}) => s.path === ws)).toBeUndefined()
  })

  it('a key the host does not accept is one line with exit 3 and what to check; nothing is created', async () => {
    const bad = sshWrapper('ssh-bad', ['Host *', `  IdentityFile ${join(dir, 'other_key')}`, '  StrictHostKeyChecking no', '  UserKnownHostsFile /dev/null', '  LogLevel ERROR', '  IdentitiesOnly yes', ''].join('\n'))
    const r = await cli(['start', ws], {env: {...env, AGENT_SANDBOX_SSH: bad}})
    expect(r.exitCode).toBe(3)
    const lines = r.stderr.trim().split('\n')
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(/^agent-sandbox: error: ssh could not log in to the engine's host for ssh:\/\/root@127\.0\.0\.1:\d+: .*Permission denied.*\(hint: check that `ssh root@127\.0\.0\.1 -p \d+ docker version` works without a prompt/)
    expect(JSON.parse((await cli(['list', '--json'])).stdout).find((s: {path: string}) => s.path === ws)).toBeUndefined()
  })

  it('nothing listening: refused, exit 3', async () => {
    const port = await freePort()
    const r = await cli(['list'], {env: {...env, DOCKER_HOST: `ssh://root@127.0.0.1:${port}`}})
    expect(r.exitCode).toBe(3)
    expect(r.stderr.trim()).toMatch(/refused the connection \(ECONNREFUSED\)/)
  })
})

/**
 * Bad input and faults: one-line errors with a fix, documented exit codes, and
 * nothing half-made.
 */
import {existsSync, mkdirSync, readdirSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {afterAll, describe, expect, it} from 'vitest'
import {BIN, cleanupUnder, cli, docker, initWorkspace, makeWorkspace, removeWorkspace, run, sbx, TEST_ROOT} from './helpers.js'

const created: string[] = []
afterAll(async () => {
  await cleanupUnder(TEST_ROOT)
  for (const path of created) removeWorkspace(path)
})

function oneLine(stderr: string): string {
  const lines = stderr.trim().split('\n')
  expect(lines, stderr).toHaveLength(1)
  expect(lines[0]).toMatch(/^agent-sandbox: error: .+\(hint: .+\)$/)
  return lines[0]
}

describe('paths', () => {
  it('refuses a path that does not exist, or is a file', async () => {
    const missing = await cli(['start', '/nonexistent/agent-sandbox-it'])
    expect(missing.exitCode).toBe(2)
    expect(oneLine(missing.stderr)).toContain('does not exist: /nonexistent/agent-sandbox-it')
    const ws = await makeWorkspace('files')
    created.push(ws)
    const file = await cli(['exec', join(ws, 'README.md'), '--', 'true'])
    expect(file.exitCode).toBe(2)
    expect(oneLine(file.stderr)).toContain('not a directory')
  })

  it('refuses a workspace that was never initialised, with a hint to run init', async () => {
    const ws = await makeWorkspace('fresh')
    created.push(ws)
    for (const command of [['start', ws], ['exec', ws, '--', 'true'], ['build', ws]]) {
      const r = await cli(command)
      expect(r.exitCode, command.join(' ')).toBe(4)
      expect(oneLine(r.stderr)).toContain(`agent-sandbox init`)
    }
    expect(readdirSync(ws).sort()).toEqual(['.git', 'README.md'])
  })

  it('works with spaces, quotes, unicode and $(…) in the workspace name, and runs none of it', async () => {
    const ws = await makeWorkspace(`it's "q" $(touch pwned) ü`)
    created.push(ws)
    await initWorkspace(ws)
    if (process.env.AGENT_SANDBOX_ENGINE === 'podman') {
      // Podman 4 cannot mount a path with a double quote: refused cleanly, nothing made (docs/podman.md).
      const refused = await sbx(ws, 'true')
      expect(refused.exitCode).toBe(2)
      expect(refused.stderr.trim().split('\n').pop()).toMatch(/^agent-sandbox: error: this engine cannot mount a path that contains a double quote .*\(hint: /)
      expect((await docker('ps', '-aq', '--filter', `label=dev.agent-sandbox.workspace=${ws}`)).stdout.trim()).toBe('')
      return
    }
    const r = await sbx(ws, 'sh', '-c', 'pwd; ls')
    expect(r.exitCode, r.stderr).toBe(0)
    expect(r.stdout).toContain(`/workspace/it's "q" $(touch pwned) ü`)
    expect(existsSync(join(ws, 'pwned'))).toBe(false)
    expect(existsSync(join(ws, '..', 'pwned'))).toBe(false)
    expect(existsSync(join(process.cwd(), 'pwned'))).toBe(false)
    const shown = await cli(['show-run', ws])
    expect(shown.exitCode).toBe(0)
    // Evaluated by a shell with `docker` stubbed out, every word survives intact and nothing runs.
    const words = await run('sh', ['-c', `docker() { printf '%s\\n' "$@"; }; mkdir() { :; }; touch() { :; }; ${shown.stdout}`], {cwd: ws})
    expect(words.exitCode, words.stderr).toBe(0)
    const csv = (field: string) => `"${field.replaceAll('"', '""')}"`
    expect(words.stdout.split('\n')).toContain(`type=bind,${csv(`source=${ws}`)},${csv(`target=/workspace/it's "q" $(touch pwned) ü`)}`)
    expect(existsSync(join(ws, 'pwned'))).toBe(false)
  })
})

describe('the engine', () => {
  it('reports a missing socket, a refused connection and a bad DOCKER_HOST', async () => {
    const ws = await makeWorkspace('engine')
    created.push(ws)
    mkdirSync(join(ws, '.agent-sandbox'))
    writeFileSync(join(ws, '.agent-sandbox', 'Dockerfile'), 'FROM agent-sandbox-base:latest\n')
    const noSocket = await cli(['start', ws], {env: {DOCKER_HOST: 'unix:///tmp/agent-sandbox-it-no.sock'}})
    expect(noSocket.exitCode).toBe(3)
    expect(oneLine(noSocket.stderr)).toContain('no container engine socket at /tmp/agent-sandbox-it-no.sock')
    const refused = await cli(['list'], {env: {DOCKER_HOST: 'tcp://127.0.0.1:9'}})
    expect(refused.exitCode).toBe(3)
    expect(oneLine(refused.stderr)).toContain('refused')
    const bad = await cli(['list'], {env: {DOCKER_HOST: 'ftp://nowhere'}})
    expect(bad.exitCode).toBe(2)
    expect(oneLine(bad.stderr)).toContain('DOCKER_HOST is not a valid engine address')
    // build-base says so before it asks npm for versions (it used to fail with exit 5 and a tar error).
    const base = await cli(['build-base', '--tag', 'no-engine'], {env: {DOCKER_HOST: 'unix:///tmp/agent-sandbox-it-no.sock'}})
    expect(base.exitCode).toBe(3)
    expect(oneLine(base.stderr)).toContain('no container engine socket at /tmp/agent-sandbox-it-no.sock')
    expect(base.stderr).not.toContain('Resolving tool versions')
  })

  it('reports a missing image with the command that builds it, and creates nothing', async () => {
    const ws = await makeWorkspace('noimage')
    created.push(ws)
    await initWorkspace(ws)
    const image = (await docker('images', '--filter', `label=dev.agent-sandbox.workspace=${ws}`, '--format', '{{.Repository}}:{{.Tag}}')).stdout.trim()
    expect(image).not.toBe('')
    await docker('rmi', '-f', image)
    const r = await cli(['start', ws])
    expect(r.exitCode).toBe(4)
    expect(oneLine(r.stderr)).toMatch(/is missing.*agent-sandbox build/)
    const ps = await docker('ps', '-aq', '--filter', `label=dev.agent-sandbox.workspace=${ws}`)
    expect(ps.stdout.trim()).toBe('')
    const built = await cli(['start', ws, '--build'])
    expect(built.exitCode, built.stderr).toBe(0)
  })
})

describe('usage', () => {
  it('exec without -- or without a command is a usage error', async () => {
    const noDash = await cli(['exec', '.'])
    expect(noDash.exitCode).toBe(2)
    expect(oneLine(noDash.stderr)).toContain('no command given')
    // run too, whatever comes before: the command must follow --.
    for (const argv of [['run', 'npm', 'test'], ['run', '--env', 'HOME', 'npm', 'test'], ['run', '--keep', '--']]) {
      const r = await cli(argv)
      expect(r.exitCode, argv.join(' ')).toBe(2)
      expect(oneLine(r.stderr), argv.join(' ')).toBe('agent-sandbox: error: no command given (hint: put the command after --, e.g. agent-sandbox run -- npm test)')
    }
    const unknown = await cli(['start', '--no-such-flag'])
    expect(unknown.exitCode).toBe(2)
    const badNetwork = await cli(['start', '--network', 'sideways'])
    expect(badNetwork.exitCode).toBe(2)
  })

  // Every command line goes through the one parser (src/cli/parse.ts); help is oclif's, from the same definitions.
  it('a bad flag, value or argument is one line naming it, with the command\'s help as the hint; --help is help', async () => {
    for (const argv of [
      ['exec', '--network', 'sideways', '--', 'true'],
      ['exec', '--bogus', '--', 'true'],
      ['exec', '--branch', 'a', '--branch', 'b', '--', 'true'],
      ['list', '--bogus'],
      ['shell', '--engine', 'lxc'],
      ['firewall', 'allow', '--bogus', 'x.example'],
      ['checkout'],
      ['rm', 'a', 'b'],
    ]) {
      const r = await cli(argv)
      expect(r.exitCode, argv.join(' ')).toBe(2)
      expect(r.stderr.trim().split('\n'), argv.join(' ')).toHaveLength(1)
      expect(r.stderr, argv.join(' ')).toMatch(/^agent-sandbox: error: .*\(hint: see agent-sandbox [a-z ]+ --help\)$/m)
    }
    for (const argv of [['exec', '--help'], ['list', '--help'], ['shell', '--help'], ['firewall', 'allow', '-h']]) {
      const r = await cli(argv)
      expect(r.exitCode, argv.join(' ')).toBe(0)
      expect(r.stdout, argv.join(' ')).toMatch(/USAGE\s+\$ agent-sandbox /)
    }
  })

  // A reader that goes away (`agent-sandbox list | head -1`) ends the command as SIGPIPE would: 141, and not a word.
  it('a closed stdout ends the command with 141 and nothing on stderr', async () => {
    const {spawn} = await import('node:child_process')
    const outcome = await new Promise<{code: number | null; stderr: string}>((resolve) => {
      const child = spawn(BIN, ['config', '--json'], {stdio: ['ignore', 'pipe', 'pipe'], env: {...process.env, XDG_STATE_HOME: join(TEST_ROOT, 'state')}})
      // Closed before the CLI (20 ms of node start-up at the least) writes anything.
      child.stdout.destroy()
      let stderr = ''
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
      child.on('close', (code) => resolve({code, stderr}))
    })
    expect(outcome).toEqual({code: 141, stderr: ''})
    // The control: with a reader, the same command succeeds.
    expect((await cli(['config', '--json'])).exitCode).toBe(0)
  })
})

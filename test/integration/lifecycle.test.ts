/**
 * The daily loop against the real engine: start, exec, shell, stop,
 * rm, show-run, list, volume; protected paths; concurrency; history.
 */
import {execa} from 'execa'
import {createHash} from 'node:crypto'
import {existsSync, readFileSync, statSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {BIN, cleanupUnder, cli, docker, freePort, initWorkspace, inspect, makeWorkspace, removeWorkspace, run, sbx, TEST_ROOT, TEST_UID} from './helpers.js'

const created: string[] = []
async function workspace(name = 'ws', options = {}): Promise<string> {
  const path = await makeWorkspace(name, options)
  created.push(path)
  await initWorkspace(path)
  return path
}

async function containerName(path: string, extra: string[] = []): Promise<string> {
  const r = await cli(['start', path, '--json', ...extra])
  expect(r.exitCode, r.stderr).toBe(0)
  return JSON.parse(r.stdout).name as string
}

afterAll(async () => {
  await cleanupUnder(TEST_ROOT)
  for (const path of created) removeWorkspace(path)
})

describe('start and exec', () => {
  let ws: string
  let name: string
  beforeAll(async () => {
    ws = await workspace('my repo')
    name = await containerName(ws)
  })

  it('runs commands as node in the workspace and propagates the exit code', async () => {
    const id = await sbx(ws, 'id', '-un')
    expect(id.exitCode).toBe(0)
    expect(id.stdout.trim()).toBe('node')
    const pwd = await sbx(ws, 'pwd')
    expect(pwd.stdout.trim()).toBe('/workspace/my repo')
    const ls = await sbx(ws, 'cat', 'README.md')
    expect(ls.stdout).toContain('# test workspace')
    const seven = await sbx(ws, 'sh', '-c', 'exit 7')
    expect(seven.exitCode).toBe(7)
  })

  it('streams stdout and stderr separately and passes stdin through', async () => {
    const r = await cli(['exec', ws, '--', 'sh', '-c', 'echo out; echo err >&2; cat'], {input: 'from-stdin\n'})
    expect(r.exitCode).toBe(0)
    expect(r.stdout).toContain('out')
    expect(r.stdout).toContain('from-stdin')
    expect(r.stdout).not.toContain('err')
    expect(r.stderr).toContain('err')
  })

  it('streams megabytes both ways with stdin closed at its end, and Ctrl-C ends a session with 130', async () => {
    const input = `${'0123456789abcdef'.repeat(4096)}\n`.repeat(64) // 4 MiB
    const r = await cli(['exec', ws, '--', 'sh', '-c', 'sha256sum | cut -d" " -f1; head -c 3000000 /dev/zero | tr "\\0" x; echo; echo done >&2'], {input})
    expect(r.exitCode, r.stderr).toBe(0)
    const [digest, xs] = r.stdout.split('\n')
    expect(digest).toBe(createHash('sha256').update(input).digest('hex'))
    expect(xs).toBe('x'.repeat(3_000_000))
    expect(r.stderr.trim()).toBe('done')

    const child = execa(BIN, ['exec', ws, '--', 'sh', '-c', 'echo started; sleep 60'], {reject: false, stdin: 'pipe'})
    await new Promise<void>((resolve) => child.stdout!.on('data', (chunk: Buffer) => chunk.toString().includes('started') && resolve()))
    child.kill('SIGINT')
    const ended = await child
    expect(ended.exitCode).toBe(130)
  })

  it('ends with 141, as docker exec does, when its reader goes away (exec -- yes | head -1)', async () => {
    const piped = await run('bash', ['-c', 'set -o pipefail; "$0" exec "$1" -- yes | head -1', BIN, ws])
    expect(piped.stdout).toBe('y')
    expect(piped.exitCode).toBe(141)
    expect(piped.stderr).toBe('')
  })

  it('passes arguments with spaces, quotes and $(…) through untouched', async () => {
    const tricky = `a b 'c' "d" $(touch /tmp/pwned) \`id\``
    const r = await sbx(ws, 'printf', '%s', tricky)
    expect(r.stdout).toBe(tricky)
    expect((await sbx(ws, 'test', '-e', '/tmp/pwned')).exitCode).toBe(1)
  })

  it('writes files that appear on the host, owned by the workspace owner', async () => {
    const r = await sbx(ws, 'sh', '-c', 'echo hello > written-inside.txt')
    expect(r.exitCode, r.stderr).toBe(0)
    const file = join(ws, 'written-inside.txt')
    expect(readFileSync(file, 'utf8')).toBe('hello\n')
    expect(statSync(file).uid).toBe(TEST_UID)
  })

  it('has the sandbox marker, no engine socket and no variable pointing at one', async () => {
    expect((await sbx(ws, 'test', '-f', '/.agent-sandbox')).exitCode).toBe(0)
    const sockets = await sbx(ws, 'sh', '-c', 'ls -la /var/run/docker.sock /run/docker.sock /run/podman/podman.sock 2>&1; env')
    expect(sockets.stdout).not.toMatch(/^s/m) // no socket files listed
    expect(sockets.stdout).not.toMatch(/DOCKER_HOST|CONTAINER_HOST/)
    const info = await inspect(name)
    expect(info.HostConfig.Privileged).toBe(false)
    // The capabilities the container really has (engine-independent: Podman lists CapDrop
    // expanded): CHOWN DAC_OVERRIDE FOWNER KILL SETGID SETUID NET_BIND_SERVICE NET_ADMIN NET_RAW.
    const bounding = await docker('exec', '-u', 'root', name, 'grep', 'CapBnd', '/proc/1/status')
    expect(bounding.stdout.trim()).toBe('CapBnd:\t00000000000034eb')
    expect(info.HostConfig.SecurityOpt).toContain('no-new-privileges')
    expect(JSON.stringify(info.Mounts)).not.toMatch(/docker\.sock|podman\.sock/)
  })

  it('gives node no capabilities and no sudo', async () => {
    const caps = await sbx(ws, 'sh', '-c', 'grep -E "^Cap(Eff|Prm)" /proc/self/status')
    expect(caps.stdout).toMatch(/CapEff:\s+0+$/m)
    expect(caps.stdout).toMatch(/CapPrm:\s+0+/)
    const sudo = await sbx(ws, 'sudo', '-n', 'true')
    expect(sudo.exitCode).not.toBe(0)
  })

  it('is idempotent: a running sandbox is left alone', async () => {
    const before = await inspect(name)
    const r = await cli(['start', ws, '--json'])
    expect(r.exitCode).toBe(0)
    expect(JSON.parse(r.stdout).action).toBe('running')
    const after = await inspect(name)
    expect(after.Id).toBe(before.Id)
    expect(after.State.StartedAt).toBe(before.State.StartedAt)
  })

  it('protected paths refuse writes from inside, including ones absent at start', async () => {
    const attempts = [
      'touch /host-git/hooks/pre-commit',
      'rm -rf /host-git/hooks',
      'echo x > /host-git/config',
      'rm -rf .git',
      'mv .git .git-moved',
      'touch .husky/pre-commit',
      'rmdir .husky',
      'echo "{}" > .agent-sandbox/config.json',
      'rm -rf .agent-sandbox',
      'mv .agent-sandbox gone',
      'echo x > .agent-precommit/user-context.json',
      'rm -rf .agent-precommit',
    ]
    for (const attempt of attempts) {
      const r = await sbx(ws, 'sh', '-c', attempt)
      expect(r.exitCode, `${attempt} should fail`).not.toBe(0)
    }
    expect(readFileSync(join(ws, '.agent-sandbox', 'config.json'), 'utf8')).toContain('protectedPaths')
    expect(existsSync(join(ws, '.agent-sandbox'))).toBe(true)
  })

  it('stop keeps the container and its volumes, its gate and gateway end with it; exec starts all three again', async () => {
    const sidecars = [`${name}-gate`, `${name}-gateway`]
    for (const s of sidecars) expect((await inspect(s)).State.Running, s).toBe(true)
    const stop = await cli(['stop', ws])
    expect(stop.exitCode).toBe(0)
    expect((await inspect(name)).State.Running).toBe(false)
    // stop signals the sidecars and returns: they end within moments, never lingering in a namespace with no network.
    const deadline = Date.now() + 10_000
    let running = sidecars
    while (running.length && Date.now() < deadline) {
      running = (await Promise.all(sidecars.map(async (s) => ((await inspect(s))?.State.Running ? s : undefined)))).filter((s) => s !== undefined)
      if (running.length) await new Promise((r) => setTimeout(r, 100))
    }
    expect(running).toEqual([])
    const r = await sbx(ws, 'cat', 'written-inside.txt')
    expect(r.exitCode).toBe(0)
    expect((await inspect(name)).State.Running).toBe(true)
    for (const s of sidecars) expect((await inspect(s)).State.Running, s).toBe(true)
  })
})

describe('history, rm and volumes', () => {
  it('keeps shell history across rm and start; rm --volumes removes it', async () => {
    const ws = await workspace('hist')
    const name = await containerName(ws)
    const write = await sbx(ws, 'bash', '-ic', 'echo marker-one-42; history -s "echo marker-one-42"; history -a')
    expect(write.exitCode, write.stderr).toBe(0)
    const rm = await cli(['rm', ws])
    expect(rm.exitCode).toBe(0)
    expect(await inspect(name)).toBeUndefined()
    await containerName(ws)
    const read = await sbx(ws, 'cat', '/commandhistory/.bash_history')
    expect(read.stdout).toContain('marker-one-42')
    const refused = await cli(['rm', ws, '--volumes'])
    expect(refused.exitCode).toBe(2)
    expect(refused.stderr).toContain('--yes')
    const rmAll = await cli(['rm', ws, '--volumes', '--yes'])
    expect(rmAll.exitCode, rmAll.stderr).toBe(0)
    const hash = name.split('-').pop()
    expect((await docker('volume', 'inspect', `agent-sandbox-${hash}-history`)).exitCode).not.toBe(0)
    // The shared agent config volumes are never removed by a workspace's rm.
    expect((await docker('volume', 'inspect', 'agent-sandbox-codex-config')).exitCode).toBe(0)
  })
})

describe('several workspaces', () => {
  it('gives two workspaces two isolated containers, and list --json shows both', async () => {
    const a = await workspace('alpha')
    const b = await workspace('beta')
    const [na, nb] = await Promise.all([containerName(a), containerName(b)])
    expect(na).not.toBe(nb)
    await sbx(a, 'sh', '-c', 'echo secret-a > only-a.txt')
    const seen = await sbx(b, 'sh', '-c', 'ls /workspace; cat /workspace/alpha/only-a.txt')
    expect(seen.stdout).not.toContain('alpha')
    expect(seen.exitCode).not.toBe(0)
    await cli(['stop', b])
    const list = await cli(['list', '--json'])
    expect(list.exitCode).toBe(0)
    const rows = JSON.parse(list.stdout) as Array<Record<string, any>>
    const ra = rows.find((r) => r.name === na)
    const rb = rows.find((r) => r.name === nb)
    expect(ra).toMatchObject({path: a, repo: 'alpha', mode: 'bind', running: true, workdir: '/workspace/alpha'})
    expect(rb).toMatchObject({path: b, repo: 'beta', mode: 'bind', running: false})
    expect(ra?.volumes).toEqual(expect.arrayContaining(['agent-sandbox-claude-code-config', 'agent-sandbox-codex-config']))
    const ps = await docker('ps', '-a', '--filter', 'label=dev.agent-sandbox.kind=sandbox', '--format', '{{.Names}}')
    for (const row of rows) expect(ps.stdout.split('\n')).toContain(row.name)
    const table = await cli(['list'])
    expect(table.stdout).toContain(na)
  })

  it('two concurrent starts on one workspace end with one container and no error', async () => {
    const ws = await workspace('race')
    const [r1, r2] = await Promise.all([cli(['start', ws, '--json']), cli(['start', ws, '--json'])])
    expect(r1.exitCode, r1.stderr).toBe(0)
    expect(r2.exitCode, r2.stderr).toBe(0)
    const ps = await docker('ps', '-a', '--filter', `label=dev.agent-sandbox.workspace=${ws}`, '--format', '{{.Label "dev.agent-sandbox.kind"}}')
    expect(ps.stdout.trim().split('\n').sort()).toEqual(['gate', 'gateway', 'sandbox'])
    expect([JSON.parse(r1.stdout).action, JSON.parse(r2.stdout).action].sort()).toEqual(['created', 'running'])
  })

  it('Ctrl-C during start leaves nothing the next start cannot recover from', async () => {
    const ws = await workspace('interrupt')
    const child = execa(BIN, ['start', ws], {reject: false})
    // Interrupt as soon as the container exists.
    const deadline = Date.now() + 60_000
    while (Date.now() < deadline) {
      const ps = await docker('ps', '-a', '-q', '--filter', `label=dev.agent-sandbox.workspace=${ws}`)
      if (ps.stdout.trim()) break
      await new Promise((r) => setTimeout(r, 20))
    }
    child.kill('SIGINT')
    await child
    const again = await cli(['start', ws, '--json'])
    expect(again.exitCode, again.stderr).toBe(0)
    expect((await sbx(ws, 'true')).exitCode).toBe(0)
    const ps = await docker('ps', '-a', '--filter', `label=dev.agent-sandbox.workspace=${ws}`, '--format', '{{.Label "dev.agent-sandbox.kind"}}')
    expect(ps.stdout.trim().split('\n').sort()).toEqual(['gate', 'gateway', 'sandbox'])
  })
})

describe('show-run', () => {
  it('prints a docker run command that creates the same container as start', async () => {
    const ws = await workspace('show run')
    const port = await freePort()
    writeFileSync(
      join(ws, '.agent-sandbox', 'config.json'),
      JSON.stringify({env: {PLAIN: 'visible', API_TOKEN: 'tok-very-secret-1234'}, ports: [`${port}:8080`], protectedPaths: ['docs/private']}),
    )
    const name = await containerName(ws)
    const a = await inspect(name)
    const gateA = await inspect(`${name}-gate`)
    const gatewayA = await inspect(`${name}-gateway`)
    const shown = await cli(['show-run', ws])
    expect(shown.exitCode, shown.stderr).toBe(0)
    expect(shown.stdout).not.toContain('tok-very-secret-1234')
    expect(shown.stdout).toContain('--env API_TOKEN ')
    expect((await cli(['rm', ws])).exitCode).toBe(0)
    const made = await run('sh', ['-c', shown.stdout], {env: {...process.env, API_TOKEN: 'tok-very-secret-1234'} as Record<string, string>})
    expect(made.exitCode, made.stderr).toBe(0)
    const b = await inspect(name)
    const pick = (c: any) => ({
      mounts: c.Mounts.map((m: any) => `${m.Type}:${m.Type === 'volume' ? m.Name : m.Source}:${m.Destination}:${m.RW}`).sort(),
      env: c.Config.Env.filter((e: string) => !e.startsWith('HOSTNAME=')).sort(), // Podman adds the container id
      user: c.Config.User,
      workdir: c.Config.WorkingDir,
      capAdd: c.HostConfig.CapAdd.map((cap: string) => cap.replace(/^CAP_/, '')).sort(), // the docker CLI spells them CAP_*
      capDrop: c.HostConfig.CapDrop,
      securityOpt: c.HostConfig.SecurityOpt,
      init: c.HostConfig.Init,
      network: c.HostConfig.NetworkMode,
      tmpfs: c.HostConfig.Tmpfs,
      ports: c.HostConfig.PortBindings,
      labels: c.Config.Labels,
      image: c.Config.Image,
    })
    expect(pick(b)).toEqual(pick(a))
    // Its push gate too (the network namespace names the sandbox, by name or by id).
    const gateB = await inspect(`${name}-gate`)
    const pickGate = (c: any) => ({
      mounts: c.Mounts.map((m: any) => `${m.Type}:${m.Source}:${m.Destination}:${m.RW}`).sort(),
      env: c.Config.Env.filter((e: string) => !e.startsWith('HOSTNAME=')).sort(),
      user: c.Config.User,
      capAdd: c.HostConfig.CapAdd ?? [],
      capDrop: c.HostConfig.CapDrop,
      securityOpt: c.HostConfig.SecurityOpt,
      tmpfs: c.HostConfig.Tmpfs,
      labels: c.Config.Labels,
      image: c.Config.Image,
      entrypoint: c.Config.Entrypoint,
      readOnly: c.HostConfig.ReadonlyRootfs,
    })
    expect(pickGate(gateB)).toEqual(pickGate(gateA))
    expect(gateB.HostConfig.NetworkMode).toMatch(new RegExp(`^container:(${name}|${b.Id})$`))
    expect(gateB.State.Running).toBe(true)
    // And its egress gateway.
    const gatewayB = await inspect(`${name}-gateway`)
    expect({...pickGate(gatewayB), cmd: gatewayB.Config.Cmd}).toEqual({...pickGate(gatewayA), cmd: gatewayA.Config.Cmd})
    expect(gatewayB.HostConfig.NetworkMode).toMatch(new RegExp(`^container:(${name}|${b.Id})$`))
    expect(gatewayB.State.Running).toBe(true)
    // And the one made from show-run is a working sandbox that start adopts.
    const r = await cli(['start', ws, '--json'])
    expect(r.exitCode, r.stderr).toBe(0)
  })
})

describe('SELinux relabelling (forced on: this host has no SELinux, so the engine accepts the labels and changes nothing)', () => {
  it('mounts binds with :z, works, provisions branches, and show-run makes the same container', async () => {
    const ws = await workspace('relabel')
    writeFileSync(join(ws, '.agent-sandbox', 'config.json'), JSON.stringify({selinuxRelabel: 'on'}))
    const name = await containerName(ws)
    const a = await inspect(name)
    const binds = (c: any) => c.Mounts.filter((m: any) => m.Type === 'bind').map((m: any) => `${m.Source}:${m.Destination}:${m.RW ? 'rw' : 'ro'}`).sort()
    expect(binds(a)).toContain(`${ws}:/workspace/relabel:rw`)
    expect(binds(a)).toContain(`${ws}/.agent-sandbox:/workspace/relabel/.agent-sandbox:ro`)
    if (process.env.AGENT_SANDBOX_ENGINE === 'podman') {
      // Podman's inspect rewrites every mount as a bind string and keeps no relabel option where SELinux is off.
      expect(a.HostConfig.Binds).toContain(`${ws}:/workspace/relabel:rw,rprivate,rbind`)
    } else {
      // Docker keeps the create request's binds: the relabel option is there.
      expect(a.HostConfig.Binds).toContain(`${ws}:/workspace/relabel:z`)
      expect(a.HostConfig.Binds).toContain(`${ws}/.agent-sandbox:/workspace/relabel/.agent-sandbox:ro,z`)
      expect((a.HostConfig.Mounts ?? []).filter((m: any) => m.Type === 'bind')).toEqual([])
    }
    expect((await sbx(ws, 'sh', '-c', 'touch relabelled && ! touch .agent-sandbox/x')).exitCode).toBe(0)
    expect(statSync(join(ws, 'relabelled')).uid).toBe(TEST_UID)
    const checkout = await cli(['checkout', 'feat', ws])
    expect(checkout.exitCode, checkout.stderr).toBe(0)
    const shown = await cli(['show-run', ws])
    expect(shown.exitCode, shown.stderr).toBe(0)
    expect(shown.stdout).toContain(` --volume ${ws}:/workspace/relabel:z `)
    expect((await cli(['rm', ws])).exitCode).toBe(0)
    expect((await run('sh', ['-c', shown.stdout])).exitCode).toBe(0)
    const b = await inspect(name)
    expect([...b.HostConfig.Binds].sort()).toEqual([...a.HostConfig.Binds].sort())
    expect(binds(b)).toEqual(binds(a))
    expect(b.Config.Labels['dev.agent-sandbox.spec']).toBe(a.Config.Labels['dev.agent-sandbox.spec'])
  })
})

describe('volume', () => {
  it('prints the config volume names', async () => {
    const r = await cli(['volume'])
    expect(r.exitCode).toBe(0)
    expect(r.stdout.trim().split('\n')).toEqual(['agent-sandbox-claude-code-config', 'agent-sandbox-codex-config'])
  })
})

describe('shell through a real pseudo-terminal', () => {
  it('gets a prompt, runs a command and exits with its code', async () => {
    const ws = await workspace('shell')
    await containerName(ws)
    const session = `sbx-it-${process.pid}`
    const exitFile = join(ws, '..', 'shell-exit')
    const cmd = `'${BIN}' shell '${ws}'; echo $? > '${exitFile}'`
    await run('tmux', ['new-session', '-d', '-s', session, '-x', '120', '-y', '30', cmd])
    try {
      const screen = async () => (await run('tmux', ['capture-pane', '-p', '-t', session])).stdout
      const waitFor = async (pattern: RegExp) => {
        const deadline = Date.now() + 60_000
        while (Date.now() < deadline) {
          if (pattern.test(await screen())) return
          await new Promise((r) => setTimeout(r, 100))
        }
        throw new Error(`timed out waiting for ${pattern}; screen:\n${await screen()}`)
      }
      await waitFor(/\[sandbox\][^\n]*\$/)
      await run('tmux', ['send-keys', '-t', session, 'echo tty=$(tty) user=$(id -un) answer=$((6*7))', 'Enter'])
      await waitFor(/answer=42/)
      const text = await screen()
      expect(text).toMatch(/tty=\/dev\/pts\/\d+ user=node answer=42/)
      expect(text).toContain('/workspace/shell')
      await run('tmux', ['send-keys', '-t', session, 'exit 5', 'Enter'])
      const deadline = Date.now() + 30_000
      while (!existsSync(exitFile) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100))
      expect(readFileSync(exitFile, 'utf8').trim()).toBe('5')
    } finally {
      await run('tmux', ['kill-session', '-t', session])
    }
  })
})

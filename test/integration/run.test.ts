/**
 * One-shot runs, resource limits, secrets by reference, and the
 * SandboxManager API, on the real engine.
 */
import {execa} from 'execa'
import {writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {SandboxManager} from '../../src/index.js'
import {cleanupUnder, cli, docker, initWorkspace, makeWorkspace, removeWorkspace, TEST_ROOT, TEST_STATE_HOME, trustWorkspace} from './helpers.js'

const created: string[] = []
let ws: string
const netName = `agent-sandbox-runit-${process.pid}`
const target = `agent-sandbox-runit-target-${process.pid}`

async function runContainers(): Promise<string[]> {
  const r = await docker('ps', '-a', '--filter', `label=dev.agent-sandbox.workspace=${ws}`, '--filter', 'label=dev.agent-sandbox.kind=run', '--format', '{{.Names}}')
  return r.stdout.split('\n').filter(Boolean)
}

beforeAll(async () => {
  ws = await makeWorkspace('runs')
  created.push(ws)
  await initWorkspace(ws)
  // A target of our own on a network of our own, for the network tests.
  await docker('network', 'create', netName)
  // It listens on 8080: a name alone opens 80 and 443 only, so the config declares target:8080.
  const t = await docker('run', '-d', '--name', target, '--network', netName, '--entrypoint', 'node', 'agent-sandbox-base:latest', '-e', "require('http').createServer((q,r)=>r.end('target-ok')).listen(8080)")
  expect(t.exitCode, t.stderr).toBe(0)
  writeFileSync(join(ws, '.agent-sandbox', 'config.json'), JSON.stringify({dockerNetwork: netName, allowDomains: [target, `${target}:8080`]}))
  // The test's own widening settings: approved, as their user would.
  await trustWorkspace(ws)
})

afterAll(async () => {
  await docker('rm', '-f', target)
  await cleanupUnder(TEST_ROOT)
  await docker('network', 'rm', netName)
  for (const path of created) removeWorkspace(path)
})

describe('run', () => {
  it('propagates the exit code, streams both streams, and leaves no container behind', async () => {
    const r = await cli(['run', ws, '--', 'sh', '-c', 'id -un; echo to-stderr >&2; exit 3'])
    expect(r.exitCode).toBe(3)
    expect(r.stdout.trim()).toBe('node')
    expect(r.stderr).toContain('to-stderr')
    expect(await runContainers()).toEqual([])
  })

  it('keeps the container with --keep', async () => {
    const r = await cli(['run', ws, '--keep', '--', 'true'])
    expect(r.exitCode, r.stderr).toBe(0)
    const kept = await runContainers()
    expect(kept).toHaveLength(1)
    expect(r.stderr).toContain(kept[0])
    await docker('rm', '-f', ...kept)
  })

  it('kills the run at --timeout with the documented exit code', async () => {
    const r = await cli(['run', ws, '--timeout', '2s', '--', 'sleep', '60'])
    expect(r.exitCode).toBe(124)
    expect(r.stderr).toMatch(/timed out after 2s; the container was killed/)
    expect(await runContainers()).toEqual([])
  })

  it('reports an out-of-memory kill under --memory', async () => {
    const r = await cli(['run', ws, '--memory', '64m', '--', 'node', '-e', 'const a=[];for(;;)a.push(Buffer.alloc(1e6,1))'])
    expect(r.exitCode).toBe(137)
    expect(r.stderr).toMatch(/killed: out of memory \(limit 64m\)/)
    expect(r.stderr).not.toMatch(/entrypoint\.sh/)
  })

  it('reports forks refused by --pids-limit when the command ends by itself', async () => {
    const r = await cli(['run', ws, '--pids-limit', '64', '--', 'bash', '-c', 'for i in $(seq 100); do sleep 2 & done 2>/dev/null; wait'])
    expect(r.stderr).toMatch(/pids limit was reached \(\d+ forks refused\)/)
  })

  it('contains a real fork bomb under --pids-limit, and the host stays responsive', async () => {
    const r = await cli(['run', ws, '--pids-limit', '64', '--timeout', '8s', '--', 'bash', '-c', 'f() { f | f & }; f; exec sleep 60'])
    expect(r.exitCode).toBe(124)
    expect(r.stderr).toMatch(/pids limit was reached \(the sandbox was at its limit of 64 processes\)/)
    const host = await execa('sh', ['-c', 'echo alive'])
    expect(host.stdout).toBe('alive')
    expect(await runContainers()).toEqual([])
  })

  it('--network none cannot reach a test container; firewall (allowlisted) can', async () => {
    const none = await cli(['run', ws, '--network', 'none', '--', 'sh', '-c', `ip route; curl -sS --max-time 5 http://${target}:8080/`])
    expect(none.exitCode).not.toBe(0)
    expect(none.stdout).not.toContain('target-ok')
    const fw = await cli(['run', ws, '--', 'curl', '-sS', '--max-time', '10', `http://${target}:8080/`])
    expect(fw.exitCode, fw.stderr).toBe(0)
    expect(fw.stdout).toBe('target-ok')
  })

  it('--env NAME passes the value without printing it anywhere', async () => {
    const secret = 'tok-run-secret-8d1f3a'
    const env = {RUN_IT_TOKEN: secret}
    const r = await cli(['run', ws, '--env', 'RUN_IT_TOKEN', '--', 'sh', '-c', `test "$RUN_IT_TOKEN" = ${secret} && echo value-matches; echo "$RUN_IT_TOKEN"`], {env})
    expect(r.exitCode, r.stderr).toBe(0)
    expect(r.stdout).toContain('value-matches')
    expect(r.stdout + r.stderr).not.toContain(secret)
    writeFileSync(join(ws, '.agent-sandbox', 'config.json'), JSON.stringify({dockerNetwork: netName, allowDomains: [target, `${target}:8080`], secretEnv: ['RUN_IT_TOKEN']}))
    await trustWorkspace(ws)
    const shown = await cli(['show-run', ws], {env})
    expect(shown.exitCode).toBe(0)
    expect(shown.stdout).toContain('--env RUN_IT_TOKEN ')
    expect(shown.stdout).not.toContain(secret)
    writeFileSync(join(ws, '.agent-sandbox', 'config.json'), JSON.stringify({dockerNetwork: netName, allowDomains: [target, `${target}:8080`]}))
    await trustWorkspace(ws)
    const unset = await cli(['run', ws, '--env', 'NOT_SET_ANYWHERE_X', '--', 'true'])
    expect(unset.exitCode).toBe(2)
  })

  it('aborts before the command when the firewall cannot be set up (fail-secure)', async () => {
    const broken = await makeWorkspace('broken-fw')
    created.push(broken)
    await initWorkspace(broken)
    writeFileSync(
      join(broken, '.agent-sandbox', 'Dockerfile'),
      'ARG BASE_IMAGE_TAG=latest\nFROM agent-sandbox-base:${BASE_IMAGE_TAG}\nRUN for f in /usr/sbin/iptables-restore /usr/sbin/iptables-nft-restore /usr/sbin/iptables-legacy-restore; do ln -sf /bin/false "$f"; done\n',
    )
    await trustWorkspace(broken)
    expect((await cli(['build', broken])).exitCode).toBe(0)
    const r = await cli(['run', broken, '--', 'sh', '-c', 'echo COMMAND-RAN'])
    expect(r.exitCode).toBe(6)
    expect(r.stdout + r.stderr).not.toContain('COMMAND-RAN')
    expect(r.stderr).toMatch(/run aborted before the command started: firewall set-up failed/)
    const none = await cli(['run', broken, '--network', 'none', '--', 'echo', 'ran-without-network'])
    expect(none.stdout).toContain('ran-without-network')
  })

  it('refuses bad flag values with a one-line error', async () => {
    for (const args of [['--timeout', 'soon'], ['--memory', 'lots'], ['--pids-limit', '3']]) {
      const r = await cli(['run', ws, ...args, '--', 'true'])
      expect(r.exitCode, args.join(' ')).toBe(2)
      expect(r.stderr.trim().split('\n')).toHaveLength(1)
    }
  })

  it('start applies limits, and list shows them', async () => {
    const r = await cli(['start', ws, '--memory', '256m', '--pids-limit', '300', '--json'])
    expect(r.exitCode, r.stderr).toBe(0)
    const name = JSON.parse(r.stdout).name
    const info = JSON.parse((await docker('container', 'inspect', name)).stdout)[0]
    expect(info.HostConfig.Memory).toBe(256 * 1024 * 1024)
    expect(info.HostConfig.PidsLimit).toBe(300)
    const rows = JSON.parse((await cli(['list', '--json'])).stdout) as any[]
    expect(rows.find((row) => row.name === name)?.limits).toEqual({memory: '256m', pids: 300})
    await cli(['rm', ws])
  })
})

describe('SandboxManager API', () => {
  it('creates, executes with streaming callbacks, times out and destroys', async () => {
    const manager = new SandboxManager({env: {...process.env, XDG_STATE_HOME: TEST_STATE_HOME}})
    expect(await manager.isAvailable()).toBe(true)
    const sandbox = await manager.createSandbox({workspacePath: ws, limits: {memory: '512m'}})
    try {
      const chunks: string[] = []
      const result = await sandbox.execute('sh', ['-c', 'echo one; echo two >&2; cat; exit 4'], {
        stdin: 'from-stdin\n',
        env: {API_VAR: 'x'},
        onStdout: (c) => chunks.push(c.toString()),
      })
      expect(result.exitCode).toBe(4)
      expect(result.stdout).toBe('one\nfrom-stdin\n')
      expect(result.stderr).toBe('two\n')
      expect(chunks.join('')).toBe(result.stdout)
      expect(result.timedOut).toBe(false)
      const who = await sandbox.execute('id', ['-un'])
      expect(who.stdout.trim()).toBe('node')
      // API sandboxes have no network unless asked.
      const net = await sandbox.execute('sh', ['-c', 'ip route | wc -l'])
      expect(net.stdout.trim()).toBe('0')
      const slow = await sandbox.execute('sleep', ['30'], {timeoutMs: 1500})
      expect(slow.timedOut).toBe(true)
    } finally {
      await sandbox.destroy()
    }
    expect((await docker('container', 'inspect', sandbox.name)).exitCode).not.toBe(0)
    await expect(sandbox.execute('true')).rejects.toThrow(/destroyed/)
  })

  it('runs ten sandboxes in parallel, each with its own container, and leaves nothing behind', async () => {
    const manager = new SandboxManager({env: {...process.env, XDG_STATE_HOME: TEST_STATE_HOME}})
    const sandboxes = await Promise.all(Array.from({length: 10}, () => manager.createSandbox({workspacePath: ws, network: 'firewall', limits: {pids: 128}})))
    try {
      expect(new Set(sandboxes.map((s) => s.id)).size).toBe(10)
      const results = await Promise.all(sandboxes.map((s, i) => s.execute('sh', ['-c', `echo task-${i}`])))
      results.forEach((r, i) => expect(r.stdout.trim()).toBe(`task-${i}`))
    } finally {
      await Promise.all(sandboxes.map((s) => s.destroy()))
    }
    const left = await docker('ps', '-a', '--filter', `label=dev.agent-sandbox.workspace=${ws}`, '--filter', 'label=dev.agent-sandbox.kind=api', '-q')
    expect(left.stdout.trim()).toBe('')
  })

  it('reports an engine that is not there', async () => {
    const manager = new SandboxManager({env: {...process.env, DOCKER_HOST: 'unix:///tmp/agent-sandbox-no-engine.sock'}})
    expect(await manager.isAvailable()).toBe(false)
    await expect(manager.createSandbox({workspacePath: ws})).rejects.toMatchObject({name: 'EngineError'})
  })
})

/**
 * Rootless Podman: the CLI run as an ordinary user against that
 * user's own Podman service, as scripts/setup-rootless-podman.sh sets it up
 * (user asbx-rootless, its socket under /run/user/<uid>). The test runner is
 * root; every CLI call, git call and file the tests make is the user's.
 *
 * The user's root in its containers is its own uid; without `--userns keep-id`
 * the workspace would be root's inside and `node` could not write to it.
 */
import {execa} from 'execa'
import {existsSync, readFileSync, statSync} from 'node:fs'
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {BIN, freePort} from '../integration/helpers.js'

const USER = 'asbx-rootless'
const HOME = `/home/${USER}`
const ROOT = join(HOME, `it-${(process.env.AGENT_SANDBOX_IT_ID ?? 'main').replace(/[^A-Za-z0-9_-]/g, '_')}`)
let uid = 0
let env: Record<string, string> = {}

interface Result {
  exitCode: number
  stdout: string
  stderr: string
}

/** Run a command as the rootless user, in its environment. */
async function asUser(command: string[], options: {cwd?: string; input?: string} = {}): Promise<Result> {
  const envArgs = Object.entries(env).map(([k, v]) => `${k}=${v}`)
  const r = await execa('runuser', ['-u', USER, '--', 'env', '-i', ...envArgs, ...command], {
    cwd: options.cwd ?? HOME,
    input: options.input,
    stdin: options.input === undefined ? 'ignore' : undefined,
    reject: false,
    timeout: 600_000,
  })
  return {exitCode: r.exitCode ?? -1, stdout: r.stdout, stderr: r.stderr}
}

const cli = (...args: string[]) => asUser([BIN, ...args])
const podman = (...args: string[]) => asUser(['podman', '--remote', ...args])

/** A git repository of the user's, with one commit. */
async function repo(name: string): Promise<string> {
  const path = join(ROOT, name)
  const script = `set -e; mkdir -p "$1"; cd "$1"; git init -q -b main; echo hi > README.md; git add README.md; git -c user.name=it -c user.email=it@example.invalid commit -q -m init`
  const r = await asUser(['bash', '-c', script, 'repo', path])
  if (r.exitCode !== 0) throw new Error(`making ${path}: ${r.stderr}`)
  return path
}

function mustPass(r: Result, what: string): Result {
  if (r.exitCode !== 0) throw new Error(`${what} failed (${r.exitCode}): ${r.stderr.trim().split('\n').pop()}`)
  return r
}

beforeAll(async () => {
  const id = await execa('id', ['-u', USER], {reject: false})
  if (id.exitCode !== 0) throw new Error(`no user ${USER}: run scripts/setup-rootless-podman.sh first`)
  uid = Number(id.stdout.trim())
  const sock = `/run/user/${uid}/podman/podman.sock`
  if (!existsSync(sock)) throw new Error(`no rootless Podman socket at ${sock}: run scripts/setup-rootless-podman.sh first`)
  env = {
    HOME,
    USER,
    PATH: '/usr/local/bin:/usr/bin:/bin',
    XDG_RUNTIME_DIR: `/run/user/${uid}`,
    DOCKER_HOST: `unix://${sock}`,
    CONTAINER_HOST: `unix://${sock}`,
    AGENT_SANDBOX_GITHUB_META: '0',
  }
  await asUser(['rm', '-rf', ROOT])
  mustPass(await asUser(['mkdir', '-p', ROOT]), 'mkdir')
}, 120_000)

afterAll(async () => {
  // Everything this suite made is labelled with a workspace under ROOT.
  const ps = await podman('ps', '-a', '--format', '{{.ID}} {{index .Labels "dev.agent-sandbox.workspace"}} {{index .Labels "dev.agent-sandbox.kind"}}')
  const rows = ps.stdout.split('\n').filter((line) => line.split(' ')[1]?.startsWith(`${ROOT}/`))
  // Gates first: Podman keeps a container that another one's network and user namespace depend on.
  const ids = [...rows.filter((line) => line.split(' ')[2] === 'gate'), ...rows.filter((line) => line.split(' ')[2] !== 'gate')].map((line) => line.split(' ')[0])
  if (ids.length) await podman('rm', '-f', ...ids)
  const vols = await podman('volume', 'ls', '--format', '{{.Name}} {{index .Labels "dev.agent-sandbox.workspace"}}')
  const names = vols.stdout.split('\n').filter((line) => line.split(' ')[1]?.startsWith(`${ROOT}/`)).map((line) => line.split(' ')[0])
  if (names.length) await podman('volume', 'rm', '-f', ...names)
  const images = await podman('images', '--format', '{{.ID}} {{index .Labels "dev.agent-sandbox.workspace"}}')
  const imageIds = images.stdout.split('\n').filter((line) => line.split(' ')[1]?.startsWith(`${ROOT}/`)).map((line) => line.split(' ')[0])
  if (imageIds.length) await podman('rmi', '-f', ...new Set(imageIds))
  await asUser(['rm', '-rf', ROOT])
}, 300_000)

describe('rootless Podman', () => {
  let ws = ''

  beforeAll(async () => {
    ws = await repo('app')
    mustPass(await cli('init', ws), 'init')
    mustPass(await cli('start', ws), 'start')
  }, 600_000)

  it('runs the sandbox in the keep-id user namespace: node is your uid, and what it writes is yours on the host', async () => {
    const r = mustPass(await cli('exec', ws, '--', 'sh', '-c', 'id -u; id -un; cat /proc/self/uid_map; touch from-exec'), 'exec')
    const [id, name, ...map] = r.stdout.trim().split('\n')
    expect(id).toBe(String(uid))
    expect(name).toBe('node')
    // keep-id: your uid maps to itself (a plain rootless container maps 0 to it instead).
    expect(map.map((line) => line.trim().split(/\s+/))).toContainEqual([String(uid), '0', '1'])
    expect(statSync(join(ws, 'from-exec')).uid).toBe(uid)
    expect(statSync(join(ws, 'from-exec')).gid).toBe(uid)
  })

  it('one-shot runs use it too', async () => {
    const r = mustPass(await cli('run', ws, '--', 'sh', '-c', 'id -u; touch from-run'), 'run')
    expect(r.stdout.trim()).toBe(String(uid))
    expect(statSync(join(ws, 'from-run')).uid).toBe(uid)
  })

  it('the firewall is installed and doctor passes', async () => {
    const r = await cli('doctor', ws, '--json')
    const report = JSON.parse(r.stdout || '{}')
    expect(r.exitCode, JSON.stringify(report.checks?.filter((c: {status: string}) => c.status !== 'pass'))).toBe(0)
    const names = (await podman('ps', '--format', '{{.Names}}', '--filter', `label=dev.agent-sandbox.workspace=${ws}`, '--filter', 'label=dev.agent-sandbox.kind=sandbox')).stdout.trim()
    const rules = mustPass(await podman('exec', '--user', 'root', names, 'iptables', '-S', 'OUTPUT'), 'iptables -S')
    expect(rules.stdout).toContain('-P OUTPUT DROP')
  })

  it('branch mode: the helper containers share the namespace, so a commit in the worktree can be pushed to the host', async () => {
    mustPass(await cli('checkout', 'feat', ws), 'checkout')
    const commit = 'git -c user.name=it -c user.email=it@example.invalid commit -q --allow-empty -m "from the worktree" && git push -q host feat && id -u'
    const r = mustPass(await cli('exec', ws, '--branch', 'feat', '--', 'sh', '-c', commit), 'commit and push')
    expect(r.stdout.trim()).toBe(String(uid))
    const log = mustPass(await asUser(['git', '-C', ws, 'log', '--format=%s', '-1', 'feat']), 'git log')
    expect(log.stdout.trim()).toBe('from the worktree')
  })

  it('show-run prints the same container for podman, with --userns keep-id', async () => {
    const r = mustPass(await cli('show-run', ws), 'show-run')
    expect(r.stdout).toMatch(/^podman run /)
    expect(r.stdout).toContain(' --userns keep-id ')
  })

  it('limits are enforced, or refused when the engine would drop them, leaving nothing behind', async () => {
    const info = mustPass(await podman('info', '--format', '{{.Host.CgroupsVersion}}'), 'podman info')
    const before = (await podman('ps', '-aq')).stdout
    const r = await cli('run', '--memory', '64m', ws, '--', 'sh', '-c', 'cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes')
    if (info.stdout.trim() === 'v1') {
      // Rootless Podman cannot apply limits on cgroup v1, and says so only in its own log.
      expect(r.exitCode).toBe(3)
      expect(r.stderr.trim().split('\n')).toHaveLength(1)
      expect(r.stderr).toMatch(/^agent-sandbox: error: the engine accepted but does not enforce the memory limit .*\(hint: /)
    } else {
      expect(r.exitCode, r.stderr).toBe(0)
      expect(Number(r.stdout.trim())).toBe(64 * 1024 * 1024)
    }
    expect((await podman('ps', '-aq')).stdout).toBe(before)
  })

  it('a published port answers the user on the host (inbound is accepted only from the port publisher)', async () => {
    const served = await repo('ports')
    mustPass(await cli('init', served), 'init')
    const hostPort = await freePort()
    const config = JSON.stringify({ports: [`127.0.0.1:${hostPort}:3000`], env: {AGENT_SANDBOX_GITHUB_META: '0'}})
    mustPass(await asUser(['sh', '-c', 'printf "%s\\n" "$1" > "$2"', 'sh', config, join(served, '.agent-sandbox', 'config.json')]), 'config')
    mustPass(await cli('trust', served, '--yes'), 'trust')
    mustPass(await cli('start', served), 'start')
    try {
      const listen = "require('http').createServer((q, r) => r.end('served')).listen(3000, '0.0.0.0')"
      mustPass(await cli('exec', served, '--', 'bash', '-c', `nohup node -e "${listen}" > /dev/null 2>&1 &`), 'server in the sandbox')
      let got: Result = {exitCode: -1, stdout: '', stderr: ''}
      for (let i = 0; i < 40 && got.stdout !== 'served'; i++) {
        if (i > 0) await new Promise((resolve) => setTimeout(resolve, 250))
        got = await asUser(['curl', '-sS', '--max-time', '5', `http://127.0.0.1:${hostPort}/`])
      }
      expect(got.stdout, got.stderr).toBe('served')
    } finally {
      mustPass(await cli('rm', served, '--volumes', '--yes'), 'rm')
    }
  })

  it('rm --volumes removes the sandboxes and their volumes', async () => {
    for (const args of [['rm', ws, '--branch', 'feat'], ['rm', ws, '--volumes', '--yes']]) mustPass(await cli(...args), args.join(' '))
    const left = await podman('ps', '-aq', '--filter', `label=dev.agent-sandbox.workspace=${ws}`)
    expect(left.stdout.trim()).toBe('')
    expect(readFileSync(join(ws, 'README.md'), 'utf8')).toBe('hi\n')
  })
})

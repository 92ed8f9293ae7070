// @ts-check
/**
 * What idle sandboxes cost (docs/PERFORMANCE.md, rows `idle` and
 * `idle-memory`), on the real engine. Not a timed test: run it by hand after
 * changing anything that runs in a sandbox while nobody uses it, and copy the
 * numbers.
 *
 *   node bench/idle.js [--sandboxes 5] [--seconds 20] [--base-tag TAG]
 *
 * `idle`: start SANDBOXES sandboxes (each with its push gate and egress
 * gateway) and, as the raw floor, one plain container of the base image
 * running `sleep infinity`; let them settle, then read each container's CPU
 * time from its cgroup on the host (v2 `cpu.stat` usage_usec, v1
 * `cpuacct.usage`) before and after SECONDS of doing nothing. Reported: CPU
 * milliseconds per second per sandbox (its three containers together), and
 * per container kind.
 * `idle-memory`: the first sandbox's three containers at the end: the
 * resident memory of every process in them (the sum of VmRSS, which counts a
 * shared library once per process) and the cgroups' anonymous memory (v2
 * `anon`, v1 `total_rss`).
 * Works on Docker and on Podman (DOCKER_HOST at its socket). Needs root (it
 * reads the host's /proc and /sys/fs/cgroup) and the CLI built.
 */
import {execFileSync} from 'node:child_process'
import {chownSync, existsSync, mkdirSync, mkdtempSync, readFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join, resolve} from 'node:path'
import {fileURLToPath} from 'node:url'
import {removeScratchWorkspace} from './lib/fixtures.js'

const REPO = resolve(fileURLToPath(new URL('..', import.meta.url)))
const BIN = join(REPO, 'bin', 'agent-sandbox')
const args = process.argv.slice(2)
const opt = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback)
const count = Number(opt('--sandboxes', '5'))
const seconds = Number(opt('--seconds', '20'))
const baseTag = opt('--base-tag', process.env.AGENT_SANDBOX_BASE_TAG) ?? 'latest'
const env = {...process.env, AGENT_SANDBOX_BASE_TAG: baseTag}
const OWNER = 1234
const CG = '/sys/fs/cgroup'

/** @param {string} cmd @param {string[]} argv */
const sh = (cmd, argv) => execFileSync(cmd, argv, {env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe']})
const sleep = (s) => execFileSync('sleep', [String(s)])

/** @param {string} name @returns {{cpu: () => number, dirs: string[], memDir: string}} a container's cgroup readers */
function cgroupOf(name) {
  const pid = sh('docker', ['inspect', '-f', '{{.State.Pid}}', name]).trim()
  const lines = readFileSync(`/proc/${pid}/cgroup`, 'utf8').trim().split('\n')
  const v2 = lines.find((l) => l.startsWith('0::'))
  const v1 = (ctrl) => lines.map((l) => l.split(':')).find((f) => f[1].split(',').includes(ctrl))
  if (v2 && !v1('cpuacct')) {
    const dir = join(CG, v2.slice(3))
    const usec = () => Number(/usage_usec (\d+)/.exec(readFileSync(join(dir, 'cpu.stat'), 'utf8'))?.[1])
    return {cpu: () => usec() / 1000, dirs: [dir], memDir: dir}
  }
  const acct = v1('cpuacct')
  const mem = v1('memory')
  if (!acct || !mem) throw new Error(`${name}: no cpuacct or memory cgroup in /proc/${pid}/cgroup`)
  const acctDir = [join(CG, acct[1], acct[2]), join(CG, 'cpuacct', acct[2]), join(CG, 'cpu,cpuacct', acct[2])].find((d) => existsSync(join(d, 'cpuacct.usage')))
  if (!acctDir) throw new Error(`${name}: cpuacct.usage not found for ${acct[2]}`)
  const memDir = join(CG, 'memory', mem[2])
  return {cpu: () => Number(readFileSync(join(acctDir, 'cpuacct.usage'), 'utf8')) / 1e6, dirs: [acctDir], memDir}
}

/** @param {string} memDir @returns {{rss: number, anon: number}} MiB */
function memoryOf(memDir) {
  const procs = readFileSync(join(memDir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean)
  let rss = 0
  for (const pid of procs) {
    try {
      rss += Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0)
    } catch {
      // gone meanwhile
    }
  }
  const stat = readFileSync(join(memDir, 'memory.stat'), 'utf8')
  const anon = Number((/^anon (\d+)/m.exec(stat) ?? /^total_rss (\d+)/m.exec(stat))?.[1] ?? 0)
  return {rss: rss / 1024, anon: anon / 1024 / 1024}
}

const parent = mkdtempSync(join(tmpdir(), 'agent-sandbox-bench-idle-'))
const workspaces = []
const floor = `asb-bench-idle-floor-${process.pid}`
const names = []
try {
  for (let i = 0; i < count; i++) {
    const ws = join(parent, `ws${i}`)
    mkdirSync(ws)
    sh('git', ['-C', ws, 'init', '-q', '-b', 'main'])
    sh('chown', ['-R', `${OWNER}:${OWNER}`, ws])
    chownSync(ws, OWNER, OWNER)
    workspaces.push(ws)
    sh(BIN, ['init', ws])
    names.push(JSON.parse(sh(BIN, ['start', ws, '--json'])).name)
  }
  sh('docker', ['run', '-d', '--name', floor, '--entrypoint', 'sleep', `agent-sandbox-base:${baseTag}`, 'infinity'])
  // Past set-up: the sidecars' start and the watcher's first seconds.
  sleep(5)
  const kinds = ['sandbox', 'gate', 'gateway']
  const containers = names.map((n) => ({sandbox: cgroupOf(n), gate: cgroupOf(`${n}-gate`), gateway: cgroupOf(`${n}-gateway`)}))
  const floorCg = cgroupOf(floor)
  const before = containers.map((c) => kinds.map((k) => c[k].cpu()))
  const floorBefore = floorCg.cpu()
  const t0 = performance.now()
  sleep(seconds)
  const after = containers.map((c) => kinds.map((k) => c[k].cpu()))
  const floorAfter = floorCg.cpu()
  const elapsed = (performance.now() - t0) / 1000
  const perSandbox = after.map((a, i) => a.reduce((s, v, k) => s + v - before[i][k], 0) / elapsed)
  const perKind = kinds.map((_, k) => after.reduce((s, a, i) => s + a[k] - before[i][k], 0) / elapsed / count)
  const sorted = [...perSandbox].sort((a, b) => a - b)
  const fmt = (ms) => ms.toFixed(2)
  console.log(`idle: ${count} sandboxes over ${elapsed.toFixed(1)} s, CPU ms per second per sandbox: min ${fmt(sorted[0])}, median ${fmt(sorted[Math.floor(count / 2)])}, max ${fmt(sorted[count - 1])} (target <= 1)`)
  console.log(`idle: per container, mean: ${kinds.map((k, i) => `${k} ${fmt(perKind[i])}`).join(', ')}; floor (sleep infinity in the base image) ${fmt((floorAfter - floorBefore) / elapsed)}`)
  const mem = kinds.map((k) => memoryOf(containers[0][k].memDir))
  const total = mem.reduce((s, m) => ({rss: s.rss + m.rss, anon: s.anon + m.anon}), {rss: 0, anon: 0})
  console.log(`idle-memory: one sandbox's three containers: VmRSS sum ${total.rss.toFixed(1)} MiB (target <= 32), cgroup anonymous ${total.anon.toFixed(1)} MiB; ${kinds.map((k, i) => `${k} ${mem[i].rss.toFixed(1)}/${mem[i].anon.toFixed(1)}`).join(', ')}`)
  console.log(`idle-memory: floor (sleep infinity) VmRSS ${memoryOf(floorCg.memDir).rss.toFixed(1)} MiB`)
} finally {
  execFileSync('docker', ['rm', '-f', floor], {env, stdio: 'ignore'})
  for (const ws of workspaces) removeScratchWorkspace(BIN, ws, join(ws, '..', '.none'), env)
  execFileSync('rm', ['-rf', parent])
}

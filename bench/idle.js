// @ts-check
/**
 * What idle sandboxes cost (docs/PERFORMANCE.md, rows `idle` and
 * `idle-memory`), on the real engine. Not a timed test: run it by hand after
 * changing anything that runs in a sandbox while nobody uses it, and copy the
 * numbers.
 *
 *   node bench/idle.js [--sandboxes 5] [--seconds 20] [--settle 15] [--base-tag TAG]
 *
 * `idle`: start SANDBOXES sandboxes (each with its push gate and egress
 * gateway) and, as the raw floor, one plain container of the base image
 * running `sleep infinity`; wait until SETTLE seconds have passed since the
 * last `start` returned, then read each container's CPU time from its cgroup
 * on the host (v2 `cpu.stat` usage_usec, v1 `cpuacct.usage`) before and after
 * SECONDS of doing nothing. Reported: CPU milliseconds per second per sandbox
 * (its three containers together), and per container kind.
 * The settling is the rest of start-up, which happens once per start and is
 * reported apart, per sandbox, as the CPU its containers used from the return
 * of its `start` to the idle window: among it the egress gateway's V8 memory
 * reducer, two garbage collections about 8 and 9 s after node starts
 * (docs/PERFORMANCE.md, "Idle sandboxes"). A window that begins sooner
 * (`--settle 5`) counts them as idle.
 * `idle-memory`: the first sandbox's three containers at the end: the
 * resident memory of every process in them (the sum of VmRSS, which counts a
 * shared library once per process) and the cgroups' anonymous memory (v2
 * `anon`, v1 `total_rss`).
 * Reported too: how many execs went into these containers during the window
 * (the engine's events): an exec counts to its container's cgroup, so anything
 * else on the machine that execs into every sandbox makes the run not idle.
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
const settle = Number(opt('--settle', '15'))
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

/** @param {string[]} containerNames @param {number} since @param {number} until @returns {number | undefined} the engine's exec starts into these containers between the two times (s) */
function execsInto(containerNames, since, until) {
  try {
    // Docker's action is `exec_start: COMMAND`, Podman's `exec` (which does not match the filter event=exec_start).
    const out = sh('docker', ['events', '--since', String(since), '--until', String(until), '--filter', 'type=container', '--format', '{{.Action}}\t{{.Actor.Attributes.name}}'])
    const wanted = new Set(containerNames)
    return out
      .split('\n')
      .map((line) => line.split('\t'))
      .filter(([action, name]) => /^exec(_start)?(:|$)/.test(action) && wanted.has(name)).length
  } catch {
    return undefined
  }
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
const kinds = ['sandbox', 'gate', 'gateway']
/** @type {Array<Record<string, {cpu: () => number, dirs: string[], memDir: string}>>} */
const containers = []
/** @type {Array<{at: number, cpu: number[]}>} */
const started = []
try {
  for (let i = 0; i < count; i++) {
    const ws = join(parent, `ws${i}`)
    mkdirSync(ws)
    sh('git', ['-C', ws, 'init', '-q', '-b', 'main'])
    sh('chown', ['-R', `${OWNER}:${OWNER}`, ws])
    chownSync(ws, OWNER, OWNER)
    workspaces.push(ws)
    sh(BIN, ['init', ws])
    const name = JSON.parse(sh(BIN, ['start', ws, '--json'])).name
    names.push(name)
    // Read as soon as its start returns: what follows, up to the idle window, is the rest of its start-up.
    const c = {sandbox: cgroupOf(name), gate: cgroupOf(`${name}-gate`), gateway: cgroupOf(`${name}-gateway`)}
    containers.push(c)
    started.push({at: performance.now(), cpu: kinds.map((k) => c[k].cpu())})
  }
  sh('docker', ['run', '-d', '--name', floor, '--entrypoint', 'sleep', `agent-sandbox-base:${baseTag}`, 'infinity'])
  const floorCg = cgroupOf(floor)
  // Past start-up: the sidecars' first seconds, the watcher's set-up polling, the gateway's memory reducer.
  const waited = (performance.now() - started[count - 1].at) / 1000
  if (settle > waited) sleep((settle - waited).toFixed(1))
  const before = containers.map((c) => kinds.map((k) => c[k].cpu()))
  const floorBefore = floorCg.cpu()
  const t0 = performance.now()
  const since = Math.floor(Date.now() / 1000)
  sleep(seconds)
  const after = containers.map((c) => kinds.map((k) => c[k].cpu()))
  const floorAfter = floorCg.cpu()
  const elapsed = (performance.now() - t0) / 1000
  const execs = execsInto([...names.flatMap((n) => [n, `${n}-gate`, `${n}-gateway`]), floor], since, Math.ceil(Date.now() / 1000))
  const perSandbox = after.map((a, i) => a.reduce((s, v, k) => s + v - before[i][k], 0) / elapsed)
  const perKind = kinds.map((_, k) => after.reduce((s, a, i) => s + a[k] - before[i][k], 0) / elapsed / count)
  const sorted = [...perSandbox].sort((a, b) => a - b)
  const fmt = (ms) => ms.toFixed(2)
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
  const tails = started.map((s, i) => kinds.map((_, k) => before[i][k] - s.cpu[k]))
  const sinceStart = started.map((s) => (t0 - s.at) / 1000)
  console.log(`start-up tail: CPU ms per sandbox from its start's return to the idle window (${sinceStart.map((x) => x.toFixed(0)).join(', ')} s): median ${fmt(median(tails.map((t) => t[0] + t[1] + t[2])))}; per container, median: ${kinds.map((k, i) => `${k} ${fmt(median(tails.map((t) => t[i])))}`).join(', ')}`)
  console.log(`idle: ${count} sandboxes over ${elapsed.toFixed(1)} s, CPU ms per second per sandbox: min ${fmt(sorted[0])}, median ${fmt(sorted[Math.floor(count / 2)])}, max ${fmt(sorted[count - 1])} (target <= 1)`)
  console.log(`idle: per container, mean: ${kinds.map((k, i) => `${k} ${fmt(perKind[i])}`).join(', ')}; floor (sleep infinity in the base image) ${fmt((floorAfter - floorBefore) / elapsed)}`)
  // Anything else on the machine that execs into every sandbox (a `watch`, a `list`) is counted too: its runs are not idle.
  console.log(`idle: execs into these containers during the window: ${execs ?? 'unknown (no engine events)'}${execs ? ' (not idle: the numbers include them)' : ''}`)
  const mem = kinds.map((k) => memoryOf(containers[0][k].memDir))
  const total = mem.reduce((s, m) => ({rss: s.rss + m.rss, anon: s.anon + m.anon}), {rss: 0, anon: 0})
  console.log(`idle-memory: one sandbox's three containers: cgroup anonymous ${total.anon.toFixed(1)} MiB (target <= 32); VmRSS sum ${total.rss.toFixed(1)} MiB (file pages of node and the libraries counted once per process); ${kinds.map((k, i) => `${k} ${mem[i].rss.toFixed(1)}/${mem[i].anon.toFixed(1)}`).join(', ')}`)
  console.log(`idle-memory: floor (sleep infinity) VmRSS ${memoryOf(floorCg.memDir).rss.toFixed(1)} MiB`)
} finally {
  execFileSync('docker', ['rm', '-f', floor], {env, stdio: 'ignore'})
  for (const ws of workspaces) removeScratchWorkspace(BIN, ws, join(ws, '..', '.none'), env)
  execFileSync('rm', ['-rf', parent])
}

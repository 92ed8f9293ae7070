// @ts-check
/**
 * The detection window of mount-watch (docs/security.md): the time from the
 * host's rename over a protected mount point to the agent's process being
 * killed, in a real sandbox on the real engine. Not a timed test: run it by
 * hand after changing mount-watch.sh or its interval, and copy the numbers.
 *
 *   node bench/mount-watch-window.js [--runs 20] [--base-tag TAG]
 *
 * Each run: start the sandbox (a restart after the first, as `exec` does it),
 * start `sleep` as node through sandbox-exec, find its pid on the host, then
 * rename a file over `.agent-precommit/user-context.json` (a read-only file
 * mount) and spin on /proc/PID/stat until the process is dead (state Z, or
 * gone). Host and container share CLOCK_MONOTONIC. Needs root (it reads the
 * sandbox's processes from the host's /proc) and the CLI built.
 */
import {execFileSync} from 'node:child_process'
import {chownSync, mkdirSync, mkdtempSync, readFileSync, renameSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join, resolve} from 'node:path'
import {fileURLToPath} from 'node:url'
import {removeScratchWorkspace} from './lib/fixtures.js'

const REPO = resolve(fileURLToPath(new URL('..', import.meta.url)))
const BIN = join(REPO, 'bin', 'agent-sandbox')
const args = process.argv.slice(2)
const opt = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback)
const runs = Number(opt('--runs', '20'))
const baseTag = opt('--base-tag', process.env.AGENT_SANDBOX_BASE_TAG)
const env = {...process.env, ...(baseTag ? {AGENT_SANDBOX_BASE_TAG: baseTag} : {})}
const OWNER = 1234

/** @param {string} cmd @param {string[]} argv */
const sh = (cmd, argv) => execFileSync(cmd, argv, {env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe']})

const parent = mkdtempSync(join(tmpdir(), 'agent-sandbox-bench-watch-'))
const ws = join(parent, 'ws')
mkdirSync(join(ws, '.agent-precommit'), {recursive: true})
const file = join(ws, '.agent-precommit', 'user-context.json')
writeFileSync(file, '{}\n')
sh('git', ['-C', ws, 'init', '-q', '-b', 'main'])
for (const p of [ws, join(ws, '.agent-precommit'), file]) chownSync(p, OWNER, OWNER)
sh('chown', ['-R', `${OWNER}:${OWNER}`, ws])

/** @returns {string} the host pid of node's `sleep 300` in the sandbox */
function agentPid(name) {
  for (let i = 0; i < 200; i++) {
    const top = sh('docker', ['top', name, '-eo', 'pid,user,args'])
    const line = top.split('\n').find((l) => / sleep 300$/.test(l))
    if (line) return line.trim().split(/\s+/)[0]
    execFileSync('sleep', ['0.05'])
  }
  throw new Error('sleep did not start')
}

/** @param {string} pid */
function dead(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) === 'Z'
  } catch {
    return true
  }
}

const samples = []
try {
  sh(BIN, ['init', ws])
  const name = JSON.parse(sh(BIN, ['start', ws, '--json'])).name
  for (let i = 0; i < runs; i++) {
    // The first exec after a compromise restarts the sandbox (src/lib/sandbox/compromised-marker.ts).
    sh(BIN, ['exec', ws, '--', 'true'])
    sh('docker', ['exec', '-d', '-u', 'node', name, '/usr/local/bin/sandbox-exec', 'sleep', '300'])
    const pid = agentPid(name)
    const tmp = join(ws, '.agent-precommit', '.tmp')
    writeFileSync(tmp, `{"run":${i}}\n`)
    chownSync(tmp, OWNER, OWNER)
    const t0 = performance.now()
    renameSync(tmp, file)
    while (!dead(pid)) {
      if (performance.now() - t0 > 10_000) throw new Error(`run ${i}: the agent process lived 10 s after the rename`)
    }
    samples.push(performance.now() - t0)
  }
} finally {
  removeScratchWorkspace(BIN, ws, parent, env)
}
const sorted = [...samples].sort((a, b) => a - b)
const q = (p) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]
const fmt = (ms) => ms.toFixed(1)
console.log(`mount-watch window over ${sorted.length} runs (ms, host rename to agent process dead): min ${fmt(sorted[0])}, median ${fmt(q(0.5))}, p90 ${fmt(q(0.9))}, max ${fmt(sorted[sorted.length - 1])}`)
console.log(`samples: ${samples.map(fmt).join(' ')}`)

// @ts-check
/**
 * What mount-watch's resolv.conf check costs, and how fast it reacts
 * (docs/design.md, "Robust DNS"), in a real sandbox on the real engine. Not a
 * timed test: run it by hand after changing mount-watch.sh, and copy the numbers.
 *
 *   node bench/dns-watch.js [--seconds 60] [--runs 5] [--base-tag TAG]
 *
 * 1. CPU: inside the sandbox, as root, three extra watchers with their own
 *    state directories poll side by side for SECONDS: the protected mounts only
 *    (as before --dns), the mounts and resolv.conf (--dns, as a sandbox runs it
 *    now), and resolv.conf only; their user+system ticks (100 Hz) are printed.
 * 2. Reaction: RUNS times, root rewrites resolv.conf in place as the engine
 *    does (`nameserver 127.0.0.11`); the time until the sandbox's own watcher
 *    has written it back, and until the resolver answers again.
 */
import {execFileSync} from 'node:child_process'
import {chownSync, mkdirSync, mkdtempSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join, resolve} from 'node:path'
import {fileURLToPath} from 'node:url'
import {removeScratchWorkspace} from './lib/fixtures.js'

const REPO = resolve(fileURLToPath(new URL('..', import.meta.url)))
const BIN = join(REPO, 'bin', 'agent-sandbox')
const args = process.argv.slice(2)
const opt = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback)
const seconds = Number(opt('--seconds', '60'))
const runs = Number(opt('--runs', '5'))
const baseTag = opt('--base-tag', process.env.AGENT_SANDBOX_BASE_TAG)
const env = {...process.env, ...(baseTag ? {AGENT_SANDBOX_BASE_TAG: baseTag} : {})}
const OWNER = 1234

/** @param {string} cmd @param {string[]} argv */
const sh = (cmd, argv) => execFileSync(cmd, argv, {env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe']})

const CPU = `
mkdir -p /tmp/bench-a /tmp/bench-b /tmp/bench-c
: > /tmp/bench-b/ready; : > /tmp/bench-c/ready
AGENT_SANDBOX_STATE_DIR=/tmp/bench-a /usr/local/sbin/mount-watch > /dev/null 2>&1 & a=$!
AGENT_SANDBOX_STATE_DIR=/tmp/bench-b /usr/local/sbin/mount-watch --dns > /dev/null 2>&1 & b=$!
AGENT_SANDBOX_PROTECTED_MOUNTS= AGENT_SANDBOX_STATE_DIR=/tmp/bench-c /usr/local/sbin/mount-watch --dns > /dev/null 2>&1 & c=$!
sleep 1
cpu() { read -r -a f < "/proc/$1/stat"; echo $(( f[13] + f[14] )); }
a0=$(cpu $a) b0=$(cpu $b) c0=$(cpu $c)
sleep "$0"
echo "$(( $(cpu $a) - a0 )) $(( $(cpu $b) - b0 )) $(( $(cpu $c) - c0 ))"
kill $a $b $c`

const REACT = `
ms() { local t=\${EPOCHREALTIME/./}; echo $(( t / 1000 )); }
t0=$(ms)
printf 'nameserver 127.0.0.11\\n' > /etc/resolv.conf
until grep -qx 'nameserver 127.0.0.1' /etc/resolv.conf; do sleep 0.005; done
t1=$(ms)
until dig +time=1 +tries=1 @127.0.0.1 agent-sandbox-selftest.invalid | grep -q NXDOMAIN; do sleep 0.005; done
t2=$(ms)
echo "$(( t1 - t0 )) $(( t2 - t0 ))"`

const parent = mkdtempSync(join(tmpdir(), 'agent-sandbox-bench-dns-'))
const ws = join(parent, 'ws')
mkdirSync(join(ws, '.husky'), {recursive: true})
writeFileSync(join(ws, '.husky', 'pre-commit'), 'true\n')
sh('git', ['-C', ws, 'init', '-q', '-b', 'main'])
sh('git', ['-C', ws, '-c', 'user.name=b', '-c', 'user.email=b@example.invalid', 'add', '-A'])
sh('git', ['-C', ws, '-c', 'user.name=b', '-c', 'user.email=b@example.invalid', 'commit', '-q', '-m', 'i'])
sh('chown', ['-R', `${OWNER}:${OWNER}`, parent])
chownSync(parent, OWNER, OWNER)
try {
  sh(BIN, ['init', ws])
  const name = JSON.parse(sh(BIN, ['start', ws, '--json'])).name
  const [mounts, both, dns] = sh('docker', ['exec', '-u', 'root', name, 'bash', '-c', CPU, String(seconds)]).trim().split(' ').map(Number)
  console.log(`CPU ticks (100 Hz) in ${seconds} s: mounts only ${mounts}, mounts + resolv.conf ${both} (${(both / mounts).toFixed(2)}×), resolv.conf only ${dns}`)
  /** @type {number[]} */ const back = []
  /** @type {number[]} */ const answers = []
  for (let i = 0; i < runs; i++) {
    const [b, a] = sh('docker', ['exec', '-u', 'root', name, 'bash', '-c', REACT]).trim().split(' ').map(Number)
    back.push(b)
    answers.push(a)
    execFileSync('sleep', ['1'])
  }
  const sorted = (/** @type {number[]} */ xs) => [...xs].sort((x, y) => x - y)
  console.log(`resolv.conf written back after (ms): ${sorted(back).join(' ')}`)
  console.log(`resolver answering again after (ms): ${sorted(answers).join(' ')}`)
} finally {
  removeScratchWorkspace(BIN, ws, parent, env)
}

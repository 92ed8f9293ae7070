// @ts-check
/**
 * The synthetic repository for the branch-provisioning scenarios: FILES files
 * and COMMITS commits, fully deterministic (fixed seed, fixed author dates),
 * written with `git fast-import` from a generated stream, then checked out.
 * Cached under /var/cache/agent-sandbox/bench (or ~/.cache/agent-sandbox/bench)
 * keyed by the generator version and size, so reruns reuse it.
 */
import {spawn, spawnSync} from 'node:child_process'
import {existsSync, mkdirSync, renameSync, rmSync, writeFileSync, accessSync, constants} from 'node:fs'
import {homedir} from 'node:os'
import {join} from 'node:path'

/** Bump when the stream below changes: the cache key includes it. */
export const GENERATOR_VERSION = 1

/** mulberry32: a tiny seeded PRNG, so every run writes the same bytes. */
function prng(seed) {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const WORDS = 'alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau upsilon phi chi psi omega const let return if else for while function class import export'.split(' ')

function text(rand, lines) {
  const out = []
  for (let i = 0; i < lines; i++) {
    const n = 3 + Math.floor(rand() * 9)
    const words = []
    for (let j = 0; j < n; j++) words.push(WORDS[Math.floor(rand() * WORDS.length)])
    out.push(words.join(' '))
  }
  return `${out.join('\n')}\n`
}

/** Path of file i: 20 top-level dirs, 10 sub-dirs each, files spread over them. */
function pathOf(i) {
  const top = i % 20
  const sub = Math.floor(i / 20) % 10
  const ext = ['ts', 'js', 'md', 'json', 'txt'][i % 5]
  return `src/m${String(top).padStart(2, '0')}/p${sub}/file${String(i).padStart(5, '0')}.${ext}`
}

/** Write the fast-import stream for the repository to `sink` (a writable). */
export async function writeStream(sink, {files, commits, seed = 42}) {
  const rand = prng(seed)
  const epoch = 1_700_000_000 // fixed author/committer dates: 2023-11-14, one hour apart
  const write = (chunk) => (sink.write(chunk) ? Promise.resolve() : new Promise((r) => sink.once('drain', r)))
  const data = (body) => `data ${Buffer.byteLength(body)}\n${body}\n`
  const header = (n) => {
    const when = `${epoch + n * 3600} +0000`
    return `commit refs/heads/main\nmark :${n + 1}\nauthor Bench Author <bench@example.invalid> ${when}\ncommitter Bench Author <bench@example.invalid> ${when}\n`
  }
  // Commit 0 adds every file.
  await write(header(0) + data('initial import\n'))
  for (let i = 0; i < files; i++) {
    await write(`M 100644 inline ${pathOf(i)}\n${data(text(rand, 8 + Math.floor(rand() * 40)))}`)
  }
  await write('\n')
  // Every later commit edits a few files (and now and then adds one).
  for (let n = 1; n < commits; n++) {
    let body = header(n) + data(`change ${n}: touch ${WORDS[n % WORDS.length]}\n`) + `from :${n}\n`
    const edits = 1 + Math.floor(rand() * 4)
    for (let e = 0; e < edits; e++) {
      body += `M 100644 inline ${pathOf(Math.floor(rand() * files))}\n${data(text(rand, 8 + Math.floor(rand() * 40)))}`
    }
    await write(`${body}\n`)
  }
  await write('done\n')
}

function writable(dir) {
  try {
    mkdirSync(dir, {recursive: true})
    accessSync(dir, constants.W_OK)
    return true
  } catch {
    return false
  }
}

export function cacheRoot(env = process.env) {
  if (env.AGENT_SANDBOX_BENCH_CACHE) return env.AGENT_SANDBOX_BENCH_CACHE
  const system = '/var/cache/agent-sandbox/bench'
  if (writable(system)) return system
  return join(env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'agent-sandbox', 'bench')
}

function git(cwd, args) {
  const r = spawnSync('git', ['-C', cwd, ...args], {encoding: 'utf8', env: {...process.env, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null'}})
  if (r.status !== 0) throw new Error(`git ${args.join(' ')} failed: ${r.stderr.trim()}`)
  return r.stdout
}

/**
 * The cached repository for (files, commits), generated if missing. Owned by
 * `owner` (the workspace owner the bench uses). Returns its path.
 */
export async function ensureRepo({files, commits, owner}, log = (/** @type {string} */ _message) => {}) {
  const key = `repo-v${GENERATOR_VERSION}-${files}f-${commits}c`
  const root = cacheRoot()
  const dir = join(root, key)
  if (existsSync(join(dir, '.bench-complete'))) return dir
  mkdirSync(root, {recursive: true})
  const tmp = `${dir}.tmp-${process.pid}`
  rmSync(tmp, {recursive: true, force: true})
  log(`generating ${files} files / ${commits} commits in ${dir} (once; cached)`)
  const started = Date.now()
  mkdirSync(tmp)
  git(tmp, ['init', '-q', '-b', 'main'])
  const child = spawn('git', ['-C', tmp, 'fast-import', '--quiet', '--done'], {stdio: ['pipe', 'inherit', 'inherit']})
  const exited = new Promise((resolve) => child.on('close', resolve))
  await writeStream(child.stdin, {files, commits})
  child.stdin.end()
  const code = await exited
  if (code !== 0) throw new Error(`git fast-import exited with ${code}`)
  git(tmp, ['repack', '-adq'])
  git(tmp, ['checkout', '-q', '-f', 'main'])
  if (owner !== undefined) spawnSync('chown', ['-R', `${owner}:${owner}`, tmp])
  writeFileSync(join(tmp, '.git', 'info', 'exclude'), '.bench-complete\n')
  writeFileSync(join(tmp, '.bench-complete'), `${new Date().toISOString()}\n`)
  rmSync(dir, {recursive: true, force: true})
  renameSync(tmp, dir)
  log(`generated in ${((Date.now() - started) / 1000).toFixed(1)} s`)
  return dir
}

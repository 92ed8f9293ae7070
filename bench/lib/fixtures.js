// @ts-check
/**
 * What the bench creates, and how it removes it again. Everything is named
 * and labelled for this run: workspaces live under ROOT (so the CLI labels
 * their containers, volumes and images with a path under ROOT), and whatever
 * the bench creates directly carries the label dev.agent-sandbox.bench=<id>
 * and a name starting with asb-bench-<id>-.
 */
import {spawnSync} from 'node:child_process'
import {chownSync, cpSync, mkdirSync, readdirSync, rmSync, statSync, writeFileSync} from 'node:fs'
import {join, resolve} from 'node:path'
import {fileURLToPath} from 'node:url'

export const REPO = resolve(fileURLToPath(new URL('../../', import.meta.url)))
/** The CLI under test: this checkout's, or another build's (AGENT_SANDBOX_BENCH_CLI, to compare before and after a change). */
export const BIN = process.env.AGENT_SANDBOX_BENCH_CLI ? resolve(process.env.AGENT_SANDBOX_BENCH_CLI) : join(REPO, 'bin', 'agent-sandbox')
/** The argv that runs the CLI: the launcher as users run it, or node on another build's entry script. */
export function cliArgv(/** @type {string[]} */ ...args) {
  return /\.[cm]?js$/.test(BIN) ? ['node', BIN, ...args] : [BIN, ...args]
}
/** The base image tag the bench's sandboxes build on (AGENT_SANDBOX_BENCH_BASE_TAG; default latest). */
export const BASE_TAG = process.env.AGENT_SANDBOX_BENCH_BASE_TAG || 'latest'
export const BENCH_LABEL = 'dev.agent-sandbox.bench'
/** The workspace owner: uid 1000, the usual first user on Linux (so `node` needs no renumbering). */
export const OWNER = 1000

export function benchId(env = process.env) {
  return (env.AGENT_SANDBOX_BENCH_ID ?? String(process.pid)).replace(/[^A-Za-z0-9_-]/g, '_')
}

/**
 * @param {string} command
 * @param {string[]} args
 * @param {{cwd?: string, env?: NodeJS.ProcessEnv, input?: string, allowFailure?: boolean}} [options]
 */
export function sh(command, args, options = {}) {
  const r = spawnSync(command, args, {cwd: options.cwd, env: options.env ?? process.env, input: options.input, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024})
  if (r.error) throw new Error(`cannot run ${command}: ${r.error.message}`)
  if (r.status !== 0 && !options.allowFailure) {
    throw new Error(`${command} ${args.slice(0, 4).join(' ')} failed (exit ${r.status}): ${(r.stderr || r.stdout).trim().split('\n').slice(-3).join(' | ')}`)
  }
  return {code: r.status ?? 1, stdout: r.stdout, stderr: r.stderr}
}

export const docker = (/** @type {string[]} */ ...args) => sh('docker', args)

/** The environment the CLI runs with: no AGENT_SANDBOX_* settings from outside, and a user config of the bench's own. */
export function cliEnv(root) {
  /** @type {Record<string, string | undefined>} */
  const env = {XDG_CONFIG_HOME: join(root, 'config'), XDG_STATE_HOME: join(root, 'state')}
  for (const key of Object.keys(process.env)) if (key.startsWith('AGENT_SANDBOX_')) env[key] = undefined
  return env
}

/**
 * The bench's own user config: its base tag, no call to GitHub's meta API from
 * the firewall (tests send traffic only to what they started), and
 * per-workspace agent volumes, so that everything made is labelled with the
 * workspace. In the user's config, not the workspaces': those are trusted.
 */
export function writeUserConfig(root) {
  const dir = join(root, 'config', 'agent-sandbox')
  mkdirSync(dir, {recursive: true})
  const config = {baseTag: BASE_TAG, sharedAgentConfig: false, env: {AGENT_SANDBOX_GITHUB_META: '0'}}
  writeFileSync(join(dir, 'config.json'), `${JSON.stringify(config, null, 2)}\n`)
}

/** Run the built CLI synchronously (set-up only; never timed). */

export function cliSync(root, args, extraEnv = {}) {
  const env = {...process.env, ...extraEnv}
  for (const [k, v] of Object.entries(cliEnv(root))) {
    if (v === undefined) delete env[k]
    else env[k] = v
  }
  const [command, ...rest] = cliArgv(...args)
  return sh(command, rest, {env})
}

function chownTree(path, uid) {
  chownSync(path, uid, uid)
  for (const entry of readdirSync(path, {withFileTypes: true})) {
    const child = join(path, entry.name)
    if (entry.isDirectory()) chownTree(child, uid)
    else chownSync(child, uid, uid)
  }
}

/** A small git workspace with one commit on main, owned by OWNER. */
export function makeGitWorkspace(root, name) {
  const path = join(root, name)
  mkdirSync(path, {recursive: true})
  writeFileSync(join(path, 'README.md'), `# ${name}\n\nA workspace made by the agent-sandbox benchmark.\n`)
  const git = (...args) => sh('git', ['-C', path, '-c', 'user.name=Bench', '-c', 'user.email=bench@example.invalid', '-c', 'commit.gpgsign=false', ...args])
  git('init', '-q', '-b', 'main')
  git('add', '-A')
  git('commit', '-q', '-m', 'initial')
  chownTree(path, OWNER)
  return path
}

/** A copy of the cached generated repository at `dest` (hard links when the file system allows). */
export function copyRepo(source, dest) {
  mkdirSync(join(dest, '..'), {recursive: true})
  const linked = sh('cp', ['-al', source, dest], {allowFailure: true})
  if (linked.code !== 0) {
    rmSync(dest, {recursive: true, force: true})
    cpSync(source, dest, {recursive: true, preserveTimestamps: true})
  }
  rmSync(join(dest, '.bench-complete'), {force: true})
  return dest
}

function lines(text) {
  return text.split('\n').filter(Boolean)
}

/** Remove every container, volume and image this run made; never anything else. Best effort, never throws. */
export function cleanup(id, root, log = (/** @type {string} */ _message) => {}) {
  const quiet = (args) => sh('docker', args, {allowFailure: true})
  const underRoot = (value) => value === root || value.startsWith(`${root}/`)
  try {
    const ps = quiet(['ps', '-a', '--filter', 'label=dev.agent-sandbox.managed=true', '--format', '{{.ID}}\t{{.Label "dev.agent-sandbox.workspace"}}'])
    const ours = lines(ps.stdout)
      .map((l) => l.split('\t'))
      .filter(([, ws]) => ws && underRoot(ws))
      .map(([cid]) => cid)
    const labelled = lines(quiet(['ps', '-aq', '--filter', `label=${BENCH_LABEL}=${id}`]).stdout)
    const containers = [...new Set([...ours, ...labelled])]
    if (containers.length) quiet(['rm', '-f', ...containers])
    const vols = quiet(['volume', 'ls', '--format', '{{.Name}}\t{{.Label "dev.agent-sandbox.workspace"}}\t{{.Label "dev.agent-sandbox.bench"}}'])
    const volumes = lines(vols.stdout)
      .map((l) => l.split('\t'))
      .filter(([, ws, bench]) => (ws && underRoot(ws)) || bench === id)
      .map(([n]) => n)
    if (volumes.length) quiet(['volume', 'rm', '-f', ...volumes])
    const imgs = quiet(['images', '--filter', `label=dev.agent-sandbox.managed=true`, '--format', '{{.ID}}\t{{.Repository}}:{{.Tag}}'])
    for (const [imageId, ref] of lines(imgs.stdout).map((l) => l.split('\t'))) {
      const info = quiet(['image', 'inspect', '--format', '{{index .Config.Labels "dev.agent-sandbox.workspace"}}\t{{index .Config.Labels "dev.agent-sandbox.bench"}}', imageId])
      const [ws, bench] = info.stdout.trim().split('\t')
      if ((ws && underRoot(ws)) || bench === id) quiet(['rmi', '-f', ref.includes('<none>') ? imageId : ref])
    }
    for (const ref of lines(quiet(['images', '--filter', `reference=asb-bench-${id}-*`, '--format', '{{.Repository}}:{{.Tag}}']).stdout)) quiet(['rmi', '-f', ref])
    log(`removed ${containers.length} containers, ${volumes.length} volumes`)
  } catch (error) {
    log(`clean-up of engine resources incomplete: ${error instanceof Error ? error.message : String(error)}`)
  }
  try {
    if (statSync(root, {throwIfNoEntry: false})) rmSync(root, {recursive: true, force: true})
  } catch (error) {
    log(`could not remove ${root}: ${error instanceof Error ? error.message : String(error)}`)
  }
}

/**
 * Remove what a hand-run measurement (mount-watch-window.js, dns-watch.js) made
 * for its one workspace: the sandbox and its volumes, the workspace's image,
 * and PARENT, the temporary directory that holds the workspace. Best effort.
 * @param {string} bin @param {string} ws @param {string} parent @param {NodeJS.ProcessEnv} env
 */
export function removeScratchWorkspace(bin, ws, parent, env) {
  spawnSync(bin, ['rm', ws, '--volumes', '--yes'], {env, stdio: 'ignore'})
  const images = spawnSync('docker', ['images', '-q', '--filter', `label=dev.agent-sandbox.workspace=${ws}`], {env, encoding: 'utf8'})
  const ids = (images.stdout ?? '').split('\n').filter(Boolean)
  if (ids.length) spawnSync('docker', ['rmi', '-f', ...ids], {env, stdio: 'ignore'})
  rmSync(parent, {recursive: true, force: true})
}

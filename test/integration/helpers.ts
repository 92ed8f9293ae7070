/**
 * Integration helpers: run the built CLI as a user would, make real git
 * workspaces, and clean up by label whatever the tests created.
 */
import {execa} from 'execa'
import {chownSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync} from 'node:fs'
import {join, resolve} from 'node:path'
import {fileURLToPath} from 'node:url'

export const REPO = resolve(fileURLToPath(new URL('../../', import.meta.url)))
/** The command users run: the launcher (bin/agent-sandbox), which starts node on ENTRY. */
export const BIN = join(REPO, 'bin', 'agent-sandbox')
/** The CLI's node entry, for tests that pass node its own flags. */
export const ENTRY = join(REPO, 'bin', 'run.cjs')
/**
 * Every workspace a test makes lives under here, so teardown can find its
 * resources by their workspace label. AGENT_SANDBOX_IT_ID keeps concurrent
 * runs on one engine (several developers, or CI) out of each other's way.
 */
export const TEST_ROOT = `/tmp/agent-sandbox-it-${(process.env.AGENT_SANDBOX_IT_ID ?? 'main').replace(/[^A-Za-z0-9_-]/g, '_')}`
/**
 * The trust store (src/lib/config/trust.ts) every CLI call uses unless a test
 * passes its own XDG_STATE_HOME: the real user's approvals stay untouched.
 */
export const TEST_STATE_HOME = join(TEST_ROOT, 'state')
/** The base image the tests' own servers run from: the one the CLI builds on (AGENT_SANDBOX_BASE_TAG). */
export const BASE_TAG = process.env.AGENT_SANDBOX_BASE_TAG || 'latest'
export const BASE_IMAGE = `agent-sandbox-base:${BASE_TAG}`
/** Owner of test workspaces: not root and not 1000, so renumbering `node` is exercised. */
export const TEST_UID = 1234
export const TEST_GID = 1234

export interface Result {
  exitCode: number
  stdout: string
  stderr: string
}

export interface CliOptions {
  cwd?: string
  env?: Record<string, string | undefined>
  input?: string
  timeoutMs?: number
}

/** Run the built CLI, as a user would (bin/agent-sandbox), in a child process. */
export async function cli(args: string[], options: CliOptions = {}): Promise<Result> {
  const result = await execa(BIN, args, {
    cwd: options.cwd ?? REPO,
    env: {AGENT_SANDBOX_DEBUG: undefined, XDG_STATE_HOME: TEST_STATE_HOME, ...options.env},
    input: options.input,
    stdin: options.input === undefined ? 'ignore' : undefined,
    reject: false,
    timeout: options.timeoutMs ?? 600_000,
  })
  return {exitCode: result.exitCode ?? -1, stdout: result.stdout, stderr: result.stderr}
}

export async function run(command: string, args: string[], options: {cwd?: string; input?: string; env?: Record<string, string>} = {}): Promise<Result> {
  const result = await execa(command, args, {cwd: options.cwd, input: options.input, env: options.env, reject: false, stdin: options.input === undefined ? 'ignore' : undefined})
  return {exitCode: result.exitCode ?? -1, stdout: result.stdout, stderr: result.stderr}
}

export async function docker(...args: string[]): Promise<Result> {
  return run('docker', args)
}

export async function inspect(name: string): Promise<any> {
  const r = await docker('container', 'inspect', name)
  if (r.exitCode !== 0) return undefined
  return JSON.parse(r.stdout)[0]
}

function chownTree(path: string, uid: number, gid: number): void {
  chownSync(path, uid, gid)
  for (const entry of readdirSync(path, {withFileTypes: true})) {
    const child = join(path, entry.name)
    if (entry.isDirectory()) chownTree(child, uid, gid)
    else chownSync(child, uid, gid)
  }
}

export interface WorkspaceOptions {
  git?: boolean
  owner?: number
  files?: Record<string, string>
}

/** A fresh workspace directory (a git repo with one commit on `main` by default). */
export async function makeWorkspace(name = 'ws', options: WorkspaceOptions = {}): Promise<string> {
  mkdirSync(TEST_ROOT, {recursive: true})
  const parent = mkdtempSync(join(TEST_ROOT, 't-'))
  const path = join(parent, name)
  mkdirSync(path)
  for (const [file, content] of Object.entries(options.files ?? {'README.md': '# test workspace\n'})) {
    mkdirSync(join(path, file, '..'), {recursive: true})
    writeFileSync(join(path, file), content)
  }
  if (options.git ?? true) {
    const git = (...args: string[]) => run('git', ['-C', path, '-c', 'user.name=Test', '-c', 'user.email=test@example.invalid', ...args])
    await git('init', '-q', '-b', 'main')
    await git('add', '-A')
    await git('commit', '-q', '-m', 'initial')
  }
  const owner = options.owner ?? TEST_UID
  chownTree(path, owner, owner)
  // The parent stands for the owner's home: theirs, so their own git can reach the workspace.
  chownSync(parent, owner, owner)
  return path
}

/** Remove every container, volume and image that belongs to a workspace under `root`. */
export async function cleanupUnder(root: string = TEST_ROOT): Promise<void> {
  const ps = await docker('ps', '-a', '--filter', 'label=dev.agent-sandbox.managed=true', '--format', '{{.ID}}\t{{.Label "dev.agent-sandbox.workspace"}}\t{{.Label "dev.agent-sandbox.kind"}}')
  const rows = ps.stdout
    .split('\n')
    .filter(Boolean)
    .map((line) => line.split('\t'))
    .filter(([, ws]) => ws?.startsWith(root))
  // Gates and gateways first: Podman keeps a container that another one's network depends on.
  const companion = (kind: string | undefined) => kind === 'gate' || kind === 'gateway'
  const gates = rows.filter(([, , kind]) => companion(kind)).map(([id]) => id)
  const others = rows.filter(([, , kind]) => !companion(kind)).map(([id]) => id)
  if (gates.length) await docker('rm', '-f', ...gates)
  if (others.length) await docker('rm', '-f', ...others)
  const vols = await docker('volume', 'ls', '--filter', 'label=dev.agent-sandbox.managed=true', '--format', '{{.Name}}\t{{.Label "dev.agent-sandbox.workspace"}}')
  const names = vols.stdout
    .split('\n')
    .filter(Boolean)
    .map((line) => line.split('\t'))
    .filter(([, ws]) => ws?.startsWith(root))
    .map(([n]) => n)
  if (names.length) await docker('volume', 'rm', '-f', ...names)
  const imgs = await docker('images', '--filter', 'label=dev.agent-sandbox.kind=repo', '--format', '{{.ID}}\t{{.Repository}}:{{.Tag}}')
  for (const line of imgs.stdout.split('\n').filter(Boolean)) {
    const [id, ref] = line.split('\t')
    const info = await docker('image', 'inspect', '--format', '{{index .Config.Labels "dev.agent-sandbox.workspace"}}', id)
    if (info.stdout.trim().startsWith(root)) await docker('rmi', '-f', ref)
  }
}

export function removeWorkspace(path: string): void {
  rmSync(join(path, '..'), {recursive: true, force: true})
}

/** `init` a workspace and return its path; fails the test with the CLI's output if init fails. */
export async function initWorkspace(path: string, extraArgs: string[] = []): Promise<void> {
  const r = await cli(['init', path, ...extraArgs])
  if (r.exitCode !== 0) throw new Error(`init failed (${r.exitCode}): ${r.stderr}`)
}

/** Approve a workspace's own .agent-sandbox/ (a test that writes widening settings, as their user would). */
export async function trustWorkspace(path: string, env: Record<string, string | undefined> = {}): Promise<void> {
  const r = await cli(['trust', path, '--yes'], {env})
  if (r.exitCode !== 0) throw new Error(`trust failed (${r.exitCode}): ${r.stderr}`)
}

/**
 * A fresh, initialised workspace with its own config.json, approved as its user would
 *. GitHub's published ranges stay off: they are fetched from the internet.
 */
export async function configuredWorkspace(role: string, config: Record<string, unknown>): Promise<string> {
  const path = await makeWorkspace(role)
  await initWorkspace(path)
  writeFileSync(join(path, '.agent-sandbox', 'config.json'), `${JSON.stringify({...config, env: {AGENT_SANDBOX_GITHUB_META: '0'}}, null, 2)}\n`)
  await trustWorkspace(path)
  return path
}

/** git on the host in `ws` as the workspace's owner (TEST_UID, never root), with `home` as HOME and no system config. */
export function hostGit(ws: string, home: string, ...args: string[]): Promise<Result> {
  return run('setpriv', ['--reuid', String(TEST_UID), '--regid', String(TEST_UID), '--clear-groups', 'env', `HOME=${home}`, 'GIT_CONFIG_NOSYSTEM=1', 'git', '-C', ws, ...args])
}

/** hostGit that must succeed: its trimmed stdout. */
export async function hostGitOk(ws: string, home: string, ...args: string[]): Promise<string> {
  const r = await hostGit(ws, home, ...args)
  if (r.exitCode !== 0) throw new Error(`host git ${args.join(' ')} failed: ${r.stderr}`)
  return r.stdout.trim()
}

/** The CLI's exec, as the tests use it everywhere. */
export function sbx(path: string, ...command: string[]): Promise<Result> {
  return cli(['exec', path, '--', ...command])
}

/** A loopback TCP port nothing listens on right now (for published ports in tests). */
export async function freePort(): Promise<number> {
  const {createServer} = await import('node:net')
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))))
    })
  })
}

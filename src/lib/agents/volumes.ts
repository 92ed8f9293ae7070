/**
 * The Codex and Claude Code config volumes: seeding them with settings and
 * instructions, importing the host's credentials, and logging out.
 *
 * The file work runs in a short-lived helper container (the base image, no
 * network, a few capabilities) that mounts the volume, so it works whether or
 * not a sandbox is running and never bind-mounts the host's home. File
 * contents reach it as a tar stream on stdin, never in argv or the
 * environment, because they may be credentials.
 */
import {randomBytes} from 'node:crypto'
import {readFileSync} from 'node:fs'
import {homedir} from 'node:os'
import {join} from 'node:path'
import {templatesDir} from '../util/assets.js'
import {loadSettings} from '../config/load.js'
import type {Engine} from '../engine/index.js'
import {CommandFailedError, UsageError} from '../errors.js'
import {ensureBaseImage} from '../images/build.js'
import {silentReporter, type Reporter} from '../reporter.js'
import {isInitialised} from '../workspace.js'
import {Labels, Names, type Workspace} from '../workspace.js'
import {HELPER_INPUT, runHelper} from '../sandbox/helper.js'
import {buildHelperSpec} from '../sandbox/spec-companions.js'
import {tarArchive} from '../util/tar.js'
import {maskCredentialFile} from './login-files.js'
import {loginKey, storeLogins} from '../logins/login-store.js'
import type {Context} from '../context.js'

export type Agent = 'codex' | 'claude'

const AGENT_TITLE: Record<Agent, string> = {codex: 'Codex', claude: 'Claude Code'}

export interface AgentVolume {
  agent: Agent
  name: string
  shared: boolean
  labels: Record<string, string>
  /** Why this volume: the settings, or the path not being a workspace. */
  reason: 'settings' | 'not-initialised'
}

/**
 * The volume an agent's config lives in, with the labels `start` gives it. A
 * directory that is not an initialised workspace has no settings of its own,
 * so it gets the shared volume.
 */
export function agentVolume(agent: Agent, ws: Workspace, initialised: boolean, sharedSetting: boolean): AgentVolume {
  const shared = initialised ? sharedSetting : true
  const name = agent === 'codex' ? Names.codexVolume(ws, shared) : Names.claudeVolume(ws, shared)
  const base = {[Labels.managed]: 'true', [Labels.volume]: 'agent-config'}
  const labels = shared ? base : {...base, [Labels.workspace]: ws.path, [Labels.hash]: ws.hash}
  return {agent, name, shared, labels, reason: initialised ? 'settings' : 'not-initialised'}
}

/** Resolve the volume for a workspace path (or the current directory), reading its settings. */
export function resolveAgentVolume(agent: Agent, ws: Workspace, env: NodeJS.ProcessEnv = process.env): AgentVolume {
  const initialised = isInitialised(ws)
  const {settings} = loadSettings({workspacePath: initialised ? ws.path : undefined, env})
  return agentVolume(agent, ws, initialised, settings.sharedAgentConfig)
}

// ---------------------------------------------------------------------------
// What to write

export type FileOp =
  | {op: 'create' | 'replace'; name: string; mode: 0o600 | 0o644; content: Buffer}
  | {op: 'remove'; name: string}

/** A file read from the host, to be imported. */
export interface HostFile {
  name: string
  source: string
  content: Buffer
}

export interface TemplateContext {
  volume: string
  shared: boolean
}

function template(name: string): string {
  return readFileSync(join(templatesDir, 'agents', name), 'utf8')
}

/** The instructions file (AGENTS.md for Codex, CLAUDE.md for Claude Code). */
export function renderInstructions(text: string, agent: Agent, ctx: TemplateContext): string {
  const sharing = ctx.shared
    ? 'shared by the sandboxes of every repository: keep nothing there that belongs to one of them'
    : "private to this repository's sandbox (`sharedAgentConfig: false`)"
  return text
    .replaceAll('{{configDir}}', agent === 'codex' ? '~/.codex' : '~/.claude')
    .replaceAll('{{volume}}', ctx.volume)
    .replaceAll('{{sharing}}', sharing)
}

/** The settings files an agent's volume is seeded with: name → content. */
export function seedFiles(agent: Agent, ctx: TemplateContext, read: (name: string) => string = template): Array<{name: string; content: string}> {
  const instructions = renderInstructions(read('AGENTS.md'), agent, ctx)
  if (agent === 'codex') {
    return [
      {name: 'config.toml', content: read('codex-config.toml')},
      // Current Codex reads profiles from <name>.config.toml (`codex --profile high`);
      // a legacy [profiles.high] table in config.toml makes `--profile high` fail.
      {name: 'high.config.toml', content: read('codex-high.config.toml')},
      {name: 'AGENTS.md', content: instructions},
    ]
  }
  return [
    {name: 'settings.json', content: read('claude-settings.json')},
    {name: 'CLAUDE.md', content: instructions},
  ]
}

/** Credential files: always replaced on import. Their companions are kept unless --force. */
export const CREDENTIAL_FILES: Record<Agent, {always: string; companion: string}> = {
  codex: {always: 'auth.json', companion: 'profile.json'},
  claude: {always: '.credentials.json', companion: '.claude.json'},
}

/**
 * The operations for `<agent>-init-config`: settings files are created when
 * absent (replaced with --force); the credential file is always replaced; its
 * companion (profile.json, .claude.json) is created when absent (replaced with --force).
 */
export function initOps(agent: Agent, seeds: Array<{name: string; content: string}>, imported: HostFile[], force: boolean): FileOp[] {
  const ops: FileOp[] = seeds.map((s) => ({op: force ? 'replace' : 'create', name: s.name, mode: 0o644, content: Buffer.from(s.content)}))
  for (const file of imported) {
    const always = file.name === CREDENTIAL_FILES[agent].always
    ops.push({op: always || force ? 'replace' : 'create', name: file.name, mode: 0o600, content: file.content})
  }
  return ops
}

export function logoutOps(): FileOp[] {
  return [
    {op: 'remove', name: 'auth.json'},
    {op: 'remove', name: 'profile.json'},
  ]
}

// ---------------------------------------------------------------------------
// Reading the host's credentials

function homeOf(env: NodeJS.ProcessEnv): string {
  return env.HOME || homedir()
}

/** Where the host keeps an agent's credentials (CODEX_HOME and CLAUDE_CONFIG_DIR are honoured). */
export function hostCredentialPaths(agent: Agent, env: NodeJS.ProcessEnv = process.env): Array<{name: string; source: string}> {
  const home = homeOf(env)
  if (agent === 'codex') {
    const dir = env.CODEX_HOME || join(home, '.codex')
    return [
      {name: 'auth.json', source: join(dir, 'auth.json')},
      {name: 'profile.json', source: join(dir, 'profile.json')},
    ]
  }
  const dir = env.CLAUDE_CONFIG_DIR || join(home, '.claude')
  return [
    {name: '.credentials.json', source: join(dir, '.credentials.json')},
    {name: '.claude.json', source: env.CLAUDE_CONFIG_DIR ? join(dir, '.claude.json') : join(home, '.claude.json')},
  ]
}

function readIfPresent(path: string): Buffer | undefined {
  try {
    return readFileSync(path)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'ENOENT' || code === 'ENOTDIR') return undefined
    throw new UsageError(`cannot read ${path}: ${code ?? (error as Error).message}`, {cause: error, hint: 'check the file is readable by you'})
  }
}

/** The host's credential files, read before anything changes. Throws when the required ones are missing. */
export function readHostCredentials(agent: Agent, volume: string, env: NodeJS.ProcessEnv = process.env): HostFile[] {
  const paths = hostCredentialPaths(agent, env)
  const found: HostFile[] = []
  for (const {name, source} of paths) {
    const content = readIfPresent(source)
    if (content !== undefined) found.push({name, source, content})
  }
  if (agent === 'codex' && !found.some((f) => f.name === 'auth.json')) {
    throw new UsageError(`cannot import Codex credentials into ${volume}: ${paths[0].source} does not exist; nothing was changed`, {
      hint: 'log in on the host first with `codex login`, then run this again',
    })
  }
  if (agent === 'claude' && found.length === 0) {
    throw new UsageError(
      `cannot import Claude Code credentials into ${volume}: neither ${paths[0].source} nor ${paths[1].source} exists; nothing was changed`,
      {hint: 'log in on the host first with `claude` then /login (on macOS the credentials stay in the Keychain: log in inside the sandbox instead)'},
    )
  }
  return found
}

// ---------------------------------------------------------------------------
// The helper container


/** The helper's script (see its header for the protocol). */
export function helperScript(): string {
  return template('volume-helper.sh')
}

export type FileAction = 'created' | 'replaced' | 'kept' | 'removed' | 'absent'

export interface HelperResult {
  owner: {uid: number; gid: number}
  files: Array<{name: string; action: FileAction}>
}

export function helperArgs(ops: FileOp[]): string[] {
  return ops.map((o) => (o.op === 'remove' ? `remove::${o.name}` : `${o.op}:${o.mode.toString(8).padStart(4, '0')}:${o.name}`))
}

export function parseHelperOutput(stdout: string): HelperResult {
  const result: HelperResult = {owner: {uid: -1, gid: -1}, files: []}
  for (const line of stdout.split('\n')) {
    const owner = /^owner (\d+):(\d+)$/.exec(line)
    if (owner) {
      result.owner = {uid: Number(owner[1]), gid: Number(owner[2])}
      continue
    }
    const file = /^(created|replaced|kept|removed|absent) (.+)$/.exec(line)
    if (file) result.files.push({name: file[2], action: file[1] as FileAction})
  }
  return result
}

export interface HelperOptions {
  volume: AgentVolume
  baseTag: string
  ops: FileOp[]
}

/**
 * Run the helper container against the volume (created first, with the
 * labels `start` would give it). The container is removed even on failure (runHelper).
 */
export async function runVolumeHelper(ctx: Context, options: HelperOptions): Promise<HelperResult> {
  const {engine} = ctx
  const {volume, ops} = options
  await ensureBaseImage(engine, options.baseTag)
  await engine.volumes.ensure(volume.name, volume.labels)
  const archive = tarArchive(ops.flatMap((o) => (o.op === 'remove' ? [] : [{name: o.name, content: o.content}])))
  const spec = buildHelperSpec({
    kind: 'helper',
    name: `agent-sandbox-helper-${randomBytes(6).toString('hex')}`,
    baseTag: options.baseTag,
    labels: volume.shared ? {} : {[Labels.workspace]: volume.labels[Labels.workspace]},
    network: 'none',
    capAdd: ['CHOWN', 'DAC_OVERRIDE', 'FOWNER'],
    mounts: [{type: 'volume', source: volume.name, target: '/target', readOnly: false}],
    // The script reads the archive (base64) on its stdin: the file runHelper puts in.
    entrypoint: ['/bin/bash', '-c', `exec <${HELPER_INPUT}\n${helperScript()}`, 'volume-helper'],
    cmd: helperArgs(ops),
    userns: await engine.userns(),
  })
  const result = await runHelper(ctx, spec, {input: Buffer.from(archive.toString('base64')), timeoutMs: 120_000})
  if (result.exitCode !== 0) {
    throw new CommandFailedError(`updating volume ${volume.name}`, result.exitCode, result.stderr, {
      hint: `check the volume with: docker volume inspect ${volume.name}`,
    })
  }
  return parseHelperOutput(result.stdout)
}

// ---------------------------------------------------------------------------
// The commands' logic

export interface AgentContext {
  engine: Engine
  reporter?: Reporter
  env?: NodeJS.ProcessEnv
}

export interface InitConfigOptions {
  auth?: boolean
  /** With auth: copy the real credentials into the volume, where the agent can read them (no surrogates). */
  plain?: boolean
  force?: boolean
}

export interface AgentConfigResult {
  agent: Agent
  volume: string
  shared: boolean
  owner: {uid: number; gid: number}
  files: Array<{name: string; action: FileAction; source?: string}>
  /** With --auth: whether the volume holds surrogates (the real values on the host and in the gateway) or the credentials themselves (--plain). */
  credentials?: 'masked' | 'plain'
}

const MASKED_FILES = new Set(['auth.json', '.credentials.json', '.claude.json'])

/**
 * The imported files with surrogates for their tokens; the real values are
 * stored on the host first, so that a volume never holds a surrogate that
 * nothing can swap.
 */
function maskImported(agent: Agent, volume: AgentVolume, imported: HostFile[], env: NodeJS.ProcessEnv): HostFile[] {
  const key = loginKey(volume.name, env)
  // The files that hold tokens; a companion such as Codex's profile.json is copied as it is.
  const masked = imported.map((f) => (MASKED_FILES.has(f.name) ? {file: f, ...maskCredentialFile(agent, f.name, f.content, key, f.source)} : {file: f, content: f.content, logins: []}))
  storeLogins(volume.name, key, masked.flatMap((m) => m.logins), env)
  return masked.map((m) => ({...m.file, content: m.content}))
}

function baseTagFor(ws: Workspace, volume: AgentVolume, env: NodeJS.ProcessEnv): string {
  return loadSettings({workspacePath: volume.reason === 'settings' ? ws.path : undefined, env}).settings.baseTag
}

/** `codex-init-config` / `claude-init-config`. Host files are read (and checked) before anything changes. */
export async function initAgentConfig(ctx: AgentContext, agent: Agent, ws: Workspace, options: InitConfigOptions = {}): Promise<AgentConfigResult> {
  const env = ctx.env ?? process.env
  const reporter = ctx.reporter ?? silentReporter
  const volume = resolveAgentVolume(agent, ws, env)
  const read = options.auth ? readHostCredentials(agent, volume.name, env) : []
  describeVolume(reporter, volume, ws)
  if (options.auth && options.plain) {
    reporter.warn(`--plain: the real ${AGENT_TITLE[agent]} credentials go into ${volume.name}, where the agent can read them and send them to any allowed host`)
  }
  const imported = options.auth && !options.plain ? maskImported(agent, volume, read, env) : read
  const seeds = seedFiles(agent, {volume: volume.name, shared: volume.shared})
  const ops = initOps(agent, seeds, imported, options.force ?? false)
  const result = await reporter.step(`Writing ${AGENT_TITLE[agent]} config to ${volume.name}`, () =>
    runVolumeHelper(ctx, {volume, baseTag: baseTagFor(ws, volume, env), ops}),
  )
  const sources = new Map(imported.map((f) => [f.name, f.source]))
  return {
    agent,
    volume: volume.name,
    shared: volume.shared,
    owner: result.owner,
    files: result.files.map((f) => (sources.has(f.name) ? {...f, source: sources.get(f.name)} : f)),
    ...(options.auth ? {credentials: options.plain ? ('plain' as const) : ('masked' as const)} : {}),
  }
}

/** `codex-logout`: remove auth.json and profile.json from the volume. A missing volume is left missing. */
export async function codexLogout(ctx: AgentContext, ws: Workspace): Promise<AgentConfigResult> {
  const env = ctx.env ?? process.env
  const reporter = ctx.reporter ?? silentReporter
  const volume = resolveAgentVolume('codex', ws, env)
  describeVolume(reporter, volume, ws)
  if (!(await ctx.engine.volumes.inspect(volume.name))) {
    return {agent: 'codex', volume: volume.name, shared: volume.shared, owner: {uid: -1, gid: -1}, files: logoutOps().map((o) => ({name: o.name, action: 'absent'}))}
  }
  const result = await runVolumeHelper(ctx, {volume, baseTag: baseTagFor(ws, volume, env), ops: logoutOps()})
  return {agent: 'codex', volume: volume.name, shared: volume.shared, owner: result.owner, files: result.files}
}

function describeVolume(reporter: Reporter, volume: AgentVolume, ws: Workspace): void {
  const title = AGENT_TITLE[volume.agent]
  if (volume.shared) {
    const why = volume.reason === 'not-initialised' ? ` (${ws.path} is not an agent-sandbox workspace)` : ''
    reporter.info(`${title} config volume: ${volume.name}, shared by all sandboxes${why}`)
  } else {
    reporter.info(`${title} config volume: ${volume.name}, private to ${ws.path} (sharedAgentConfig: false)`)
  }
}

/** One line per file, for the text output. */
export function describeFile(file: {name: string; action: FileAction; source?: string}): string {
  switch (file.action) {
    case 'created':
      return file.source ? `${file.name}: imported from ${file.source}` : `${file.name}: created`
    case 'replaced':
      return file.source ? `${file.name}: imported from ${file.source} (replaced the previous one)` : `${file.name}: overwritten (--force)`
    case 'kept':
      return `${file.name}: exists, left alone (--force overwrites it)`
    case 'removed':
      return `${file.name}: removed`
    case 'absent':
      return `${file.name}: not present`
  }
}

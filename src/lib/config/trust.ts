/**
 * Trust in a workspace's own .agent-sandbox/: a repository is untrusted input:
 * the host keeps, per workspace real path, the SHA-256 of every
 * file in .agent-sandbox/ the user approved (`agent-sandbox trust`, or `init`,
 * which wrote them). A widening setting (widening.ts) or a Dockerfile other
 * than the template applies only while its bytes are the approved ones, or
 * when the workspace matches the user's own `trustedPaths`. The approvals
 * live in trust-store.ts; what `trust` shows is trust-review.ts.
 */
import {lstatSync, readdirSync, readFileSync, readlinkSync, realpathSync, type Stats} from 'node:fs'
import {homedir} from 'node:os'
import {join} from 'node:path'
import {templatesDir} from '../util/assets.js'
import {ConfigError} from '../errors.js'
import {sha256Hex} from '../util/hash.js'
import {quoteArg} from '../util/shell-quote.js'
import {mergeLayers, readConfigFile, userConfigPath} from './layers.js'
import {DEFAULTS, type ConfigFile, type Settings} from './schema.js'
import {readTrustStore, writeTrustStore, type TrustRecord, type TrustStore} from './trust-store.js'
import {workspaceChanges, type ConfigChange, type LowerSettings} from './widening.js'

export const CONFIG_FILE = 'config.json'
export const DOCKERFILE = 'Dockerfile'

/** The bytes of .agent-sandbox/ as read once: what a review shows is what gets approved. */
export interface Snapshot {
  /** SHA-256 per file, sorted by path (symbolic links hash their target, prefixed `symlink:`). */
  files: Record<string, string>
  config?: Buffer
  dockerfile?: Buffer
}

export function agentSandboxDir(workspacePath: string): string {
  return join(workspacePath, '.agent-sandbox')
}

/**
 * The files agent-sandbox reads itself (config.json, the Dockerfile the build
 * uses) must be regular files in a real .agent-sandbox/ directory: a link is
 * hashed as its target's name, not its bytes, so its bytes would never be the
 * approved ones, and fs calls that follow links (existsSync, readFileSync, the
 * engine's build) would see a different file than the trust check (a linked
 * Dockerfile once built unapproved). FIFOs, sockets and devices are refused
 * anywhere in .agent-sandbox/: they have no bytes to hash.
 */
function irregularEntry(path: string, stat: Stats, dir: boolean): ConfigError {
  const kind = stat.isSymbolicLink() ? 'a symbolic link' : stat.isDirectory() ? 'a directory' : 'not a regular file'
  if (dir) return new ConfigError(`${path} is ${kind}: it must be a directory in the workspace itself`, {hint: 'replace the link with the directory it points to'})
  const fix = stat.isSymbolicLink() ? 'replace the link with a copy of the file it points to' : 'replace it with a regular file, or remove it'
  return new ConfigError(`${path} is ${kind}: agent-sandbox reads only regular files in .agent-sandbox/`, {hint: fix})
}

/** Refuse a linked .agent-sandbox/, or a config.json or Dockerfile that is not a regular file (see irregularEntry); false without .agent-sandbox/. */
export function assertRegularAgentSandbox(workspacePath: string): boolean {
  const root = agentSandboxDir(workspacePath)
  const rootStat = lstatOrUndefined(root)
  if (!rootStat) return false
  if (!rootStat.isDirectory()) throw irregularEntry(root, rootStat, true)
  for (const name of [CONFIG_FILE, DOCKERFILE]) {
    const stat = lstatOrUndefined(join(root, name))
    if (stat && !stat.isFile()) throw irregularEntry(join(root, name), stat, false)
  }
  return true
}

function lstatOrUndefined(path: string): Stats | undefined {
  try {
    return lstatSync(path)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT' || (error as NodeJS.ErrnoException).code === 'ENOTDIR') return undefined
    throw error
  }
}

/** Hash every regular file (and link) under .agent-sandbox/: the build context and the config. */
export function snapshotDir(workspacePath: string): Snapshot {
  const root = agentSandboxDir(workspacePath)
  const entries: Array<[string, string]> = []
  const snapshot: Snapshot = {files: {}}
  if (!assertRegularAgentSandbox(workspacePath)) return snapshot
  const walk = (rel: string) => {
    let names: string[]
    try {
      names = readdirSync(join(root, rel))
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT' && rel === '') return
      throw error
    }
    for (const name of names) {
      const relPath = rel ? `${rel}/${name}` : name
      const full = join(root, relPath)
      const stat = lstatSync(full)
      if ((relPath === CONFIG_FILE || relPath === DOCKERFILE) && !stat.isFile()) throw irregularEntry(full, stat, false)
      if (stat.isDirectory()) walk(relPath)
      else if (stat.isSymbolicLink()) entries.push([relPath, sha256Hex(`symlink:${readlinkSync(full)}`)])
      else if (stat.isFile()) {
        const bytes = readFileSync(full)
        entries.push([relPath, sha256Hex(bytes)])
        if (relPath === CONFIG_FILE) snapshot.config = bytes
        if (relPath === DOCKERFILE) snapshot.dockerfile = bytes
      } else throw irregularEntry(full, stat, false)
    }
  }
  walk('')
  entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
  snapshot.files = Object.fromEntries(entries)
  return snapshot
}

/** The repo Dockerfile `init` writes, for a base tag. */
export function renderRepoDockerfile(template: string, baseTag: string): string {
  return template.replace(/^ARG BASE_IMAGE_TAG=.*$/m, `ARG BASE_IMAGE_TAG=${baseTag}`)
}

export function templateDockerfile(baseTag = 'latest'): string {
  return renderRepoDockerfile(readFileSync(join(templatesDir, DOCKERFILE), 'utf8'), baseTag)
}

/** The template exactly as `init` writes it (any base tag): it builds nothing of the repository's own. */
export function isTemplateDockerfile(text: string): boolean {
  const tag = /^ARG BASE_IMAGE_TAG=([A-Za-z0-9_][A-Za-z0-9_.-]{0,127})$/m.exec(text)?.[1]
  return tag !== undefined && text === templateDockerfile(tag)
}

function expandHome(glob: string, env: NodeJS.ProcessEnv): string {
  return glob.startsWith('~/') ? join(env.HOME || homedir(), glob.slice(2)) : glob
}

/** `*` within one path component, `**` across components, `?` one character. Pure. */
export function pathGlobToRegExp(glob: string): RegExp {
  let out = ''
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i]
    if (c === '*' && glob[i + 1] === '*') {
      out += '.*'
      i++
    } else if (c === '*') out += '[^/]*'
    else if (c === '?') out += '[^/]'
    else out += c.replace(/[.+^${}()|[\]\\]/g, '\\$&')
  }
  return new RegExp(`^${out.replace(/\/+$/, '')}/?$`)
}

/** Whether the user's own `trustedPaths` (user config only) cover a workspace's real path. */
export function matchesTrustedPaths(workspacePath: string, globs: readonly string[], env: NodeJS.ProcessEnv = process.env): boolean {
  return globs.some((glob) => {
    const expanded = expandHome(glob, env)
    const candidates = [expanded]
    // The glob's literal directory may be reached through a link (~ on a symlinked home): compare real paths too.
    const literal = expanded.slice(0, expanded.search(/[*?]|$/))
    const base = literal.slice(0, literal.lastIndexOf('/') + 1) || '/'
    try {
      const real = realpathSync(base)
      candidates.push(join(real, expanded.slice(base.length)))
    } catch {
      // no such directory: only the glob as written
    }
    return candidates.some((c) => pathGlobToRegExp(c).test(workspacePath))
  })
}

export type PartState = 'absent' | 'approved' | 'changed' | 'new'

export interface TrustAssessment {
  /** Approved because the workspace matches the user's `trustedPaths`. */
  byTrustedPaths: boolean
  record?: TrustRecord
  config: PartState
  /** The Dockerfile and the rest of the build context; `template` when the Dockerfile is init's template. */
  build: PartState | 'template'
  /** Files of the build context that differ from the approved ones. */
  buildChanged: string[]
}

function partState(record: TrustRecord | undefined, present: boolean, same: boolean): PartState {
  if (!present) return 'absent'
  if (!record) return 'new'
  return same ? 'approved' : 'changed'
}

/** Compare a snapshot with what the user approved. Pure apart from reading the store. */
export function assess(workspacePath: string, snapshot: Snapshot, userLayer: ConfigFile | undefined, store: TrustStore, env: NodeJS.ProcessEnv = process.env): TrustAssessment {
  const byTrustedPaths = matchesTrustedPaths(workspacePath, userLayer?.trustedPaths ?? [], env)
  const record = Object.hasOwn(store.workspaces, workspacePath) ? store.workspaces[workspacePath] : undefined
  const config = partState(record, snapshot.config !== undefined, record?.files[CONFIG_FILE] === snapshot.files[CONFIG_FILE])
  const names = new Set([...Object.keys(snapshot.files), ...Object.keys(record?.files ?? {})])
  names.delete(CONFIG_FILE)
  const buildChanged = [...names].filter((n) => record?.files[n] !== snapshot.files[n]).sort()
  const template = snapshot.dockerfile !== undefined && isTemplateDockerfile(snapshot.dockerfile.toString('utf8'))
  const build = template ? 'template' : partState(record, snapshot.dockerfile !== undefined, buildChanged.length === 0)
  return {byTrustedPaths, record, config, build, buildChanged}
}

/** The settings below the workspace file: defaults (the workspace's: load.ts workspaceDefaults) and the user's file. */
export function lowerSettings(userLayer: ConfigFile | undefined, defaults: Settings = DEFAULTS): LowerSettings {
  const {settings} = mergeLayers([
    ['default', defaults],
    ['user', userLayer],
  ])
  return settings
}

export interface ConfigTrust {
  state: 'trusted' | 'untrusted'
  /** Why it is trusted. */
  via?: 'store' | 'trustedPaths'
  /** The file's bytes changed since they were approved. */
  changed: boolean
  changes: ConfigChange[]
  /** Widening changes that must not apply (empty when trusted). */
  refused: ConfigChange[]
}

/** Decide what a workspace config file may change. */
export function configTrust(workspacePath: string, bytes: Buffer, layer: ConfigFile, userLayer: ConfigFile | undefined, env: NodeJS.ProcessEnv, defaults: Settings = DEFAULTS): ConfigTrust {
  const changes = workspaceChanges(layer, lowerSettings(userLayer, defaults))
  const widening = changes.filter((c) => c.widens)
  const hash = sha256Hex(bytes)
  const byTrustedPaths = matchesTrustedPaths(workspacePath, userLayer?.trustedPaths ?? [], env)
  // Without widening changes there is nothing to approve: read the store only when it matters.
  const record = widening.length && !byTrustedPaths ? readTrustStore(env).workspaces[workspacePath] : undefined
  const approved = record?.files[CONFIG_FILE] === hash
  if (byTrustedPaths || approved) return {state: 'trusted', via: byTrustedPaths ? 'trustedPaths' : 'store', changed: false, changes, refused: []}
  if (widening.length === 0) {
    const stored = readTrustStore(env).workspaces[workspacePath]
    if (stored?.files[CONFIG_FILE] === hash) return {state: 'trusted', via: 'store', changed: false, changes, refused: []}
    return {state: 'untrusted', changed: stored !== undefined, changes, refused: []}
  }
  return {state: 'untrusted', changed: record !== undefined, changes, refused: widening}
}

/** The one-line refusal: what widens, and the command that approves it. */
export function refusalError(file: string, workspacePath: string, trust: Pick<ConfigTrust, 'changed' | 'refused'>): ConfigError {
  const shown = trust.refused.slice(0, 3).map((c) => `${c.key} (${c.summary})`)
  const more = trust.refused.length > 3 ? `, and ${trust.refused.length - 3} more` : ''
  const why = trust.changed ? 'changed since you trusted it and now widens the sandbox' : 'is not trusted and would widen the sandbox'
  return new ConfigError(`${file} ${why}: ${shown.join(', ')}${more}`, {hint: `review and approve it with: agent-sandbox trust ${quoteArg(workspacePath)}`})
}

/** The Dockerfile (or build context) may be built: template, approved, or the user's own tree. */
export function assertBuildTrusted(workspacePath: string, env: NodeJS.ProcessEnv = process.env): void {
  const snapshot = snapshotDir(workspacePath)
  const userLayer = readConfigFile(userConfigPath(env))
  if (matchesTrustedPaths(workspacePath, userLayer?.trustedPaths ?? [], env)) return
  const trust = assess(workspacePath, snapshot, userLayer, readTrustStore(env), env)
  if (trust.build !== 'new' && trust.build !== 'changed') return
  const what = trust.build === 'changed' ? `changed since you trusted it (${trust.buildChanged.join(', ')})` : 'is not the template and is not trusted'
  throw new ConfigError(`${join(agentSandboxDir(workspacePath), DOCKERFILE)} ${what}: its build steps run on your engine with an open network`, {
    hint: `review and approve it with: agent-sandbox trust ${quoteArg(workspacePath)}`,
  })
}


/** Record the reviewed bytes as approved. Returns the store's path. */
export function recordTrust(workspacePath: string, snapshot: Snapshot, by: TrustRecord['by'], env: NodeJS.ProcessEnv = process.env): string {
  const store = readTrustStore(env)
  store.workspaces[workspacePath] = {
    files: snapshot.files,
    approvedAt: new Date().toISOString(),
    by,
    ...(snapshot.dockerfile ? {dockerfile: snapshot.dockerfile.toString('utf8')} : {}),
  }
  return writeTrustStore(store, env)
}

/**
 * The user changed an approved config.json through the CLI (`firewall allow
 * --save`): the new bytes stay approved. An unapproved file stays unapproved.
 */
export function carryConfigApproval(workspacePath: string, before: string | undefined, after: string, env: NodeJS.ProcessEnv = process.env): boolean {
  const store = readTrustStore(env)
  const record = Object.hasOwn(store.workspaces, workspacePath) ? store.workspaces[workspacePath] : undefined
  if (!record || before === undefined || record.files[CONFIG_FILE] !== sha256Hex(before)) return false
  record.files[CONFIG_FILE] = sha256Hex(after)
  writeTrustStore(store, env)
  return true
}

/** Forget a workspace's approval; false when there was none. */
export function revokeTrust(workspacePath: string, env: NodeJS.ProcessEnv = process.env): boolean {
  const store = readTrustStore(env)
  if (!Object.hasOwn(store.workspaces, workspacePath)) return false
  delete store.workspaces[workspacePath]
  writeTrustStore(store, env)
  return true
}

export interface TrustedWorkspace {
  path: string
  approvedAt: string
  by: TrustRecord['by']
  /** `trusted`: the files are the approved ones; `changed`: some differ; `missing`: .agent-sandbox/ is gone. */
  status: 'trusted' | 'changed' | 'missing'
}

export function listTrusted(env: NodeJS.ProcessEnv = process.env): {workspaces: TrustedWorkspace[]; trustedPaths: string[]} {
  const store = readTrustStore(env)
  const workspaces = Object.entries(store.workspaces)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([path, record]) => {
      let status: TrustedWorkspace['status']
      try {
        const files = snapshotDir(path).files
        status = Object.keys(files).length === 0 ? 'missing' : JSON.stringify(files) === JSON.stringify(record.files) ? 'trusted' : 'changed'
      } catch {
        status = 'missing'
      }
      return {path, approvedAt: record.approvedAt, by: record.by, status}
    })
  return {workspaces, trustedPaths: readConfigFile(userConfigPath(env))?.trustedPaths ?? []}
}

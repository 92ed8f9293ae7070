/**
 * The low-level pieces of the settings layers: where the files are, reading and
 * validating one file or the environment, the workspace's defaults, and the
 * pure merge of layers. loadSettings (load.ts) and the trust decisions
 * (trust.ts) both build on these.
 */
import {readFileSync} from 'node:fs'
import {homedir} from 'node:os'
import {join} from 'node:path'
import {ConfigError} from '../errors.js'
import {workspaceGithubRules} from '../github/remotes.js'
import {mergeHttpRules} from '../network/gateway/rules.js'
import {secretName} from '../network/gateway/secrets.js'
import {checkConfigFile, DEFAULTS, type ConfigFile, type ConfigIssue, type Settings} from './schema.js'

export type Source = 'flag' | 'env' | 'workspace' | 'user' | 'default' | 'workspace (trusted)' | 'workspace (untrusted)' | 'workspace (untrusted: refused)'

/** Merged settings and where each came from. */
export interface LayeredSettings {
  settings: Settings
  /** Where each top-level key's value came from (for lists: every layer that added to it). */
  sources: Record<keyof Settings, Source[]>
  files: {workspace: string; user: string}
}

export function workspaceConfigPath(workspacePath: string): string {
  return join(workspacePath, '.agent-sandbox', 'config.json')
}

export function userConfigPath(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_CONFIG_HOME || join(env.HOME || homedir(), '.config')
  return join(base, 'agent-sandbox', 'config.json')
}

/** Read and validate one config file; a missing file is an empty layer. */
export function readConfigFile(path: string): ConfigFile | undefined {
  return readConfigBytes(path)?.layer
}

/** The file's exact bytes (what trust is decided on) and the layer parsed from them. */
export function readConfigBytes(path: string): {bytes: Buffer; layer: ConfigFile} | undefined {
  let bytes: Buffer
  try {
    bytes = readFileSync(path)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw new ConfigError(`cannot read ${path}: ${(error as Error).message}`, {cause: error})
  }
  return {bytes, layer: parseConfigText(bytes.toString('utf8'), path)}
}

export function parseConfigText(text: string, path: string): ConfigFile {
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (error) {
    throw new ConfigError(`${path}: not valid JSON: ${(error as Error).message}`, {
      cause: error,
      hint: 'fix the JSON syntax (a trailing comma or a missing quote is the usual cause)',
    })
  }
  const parsed = checkConfigFile(json)
  if (!parsed.success) throw configErrorFrom(parsed.issue, path)
  return parsed.data
}

function configErrorFrom(issue: ConfigIssue, path: string): ConfigError {
  return new ConfigError(`${path}: field "${issue.field || '(top level)'}": ${issue.message}`, {hint: 'see docs/configuration.md for the fields and their types'})
}

/** Settings from AGENT_SANDBOX_* variables, validated like a config file. */
export function envLayer(env: NodeJS.ProcessEnv): ConfigFile {
  const raw: Record<string, unknown> = {}
  const list = (value: string) =>
    value
      .split(/[,\s]+/)
      .map((v) => v.trim())
      .filter(Boolean)
  if (env.AGENT_SANDBOX_BASE_TAG) raw.baseTag = env.AGENT_SANDBOX_BASE_TAG
  if (env.AGENT_SANDBOX_NETWORK) raw.network = env.AGENT_SANDBOX_NETWORK
  if (env.AGENT_SANDBOX_DOCKER_NETWORK) raw.dockerNetwork = env.AGENT_SANDBOX_DOCKER_NETWORK
  if (env.AGENT_SANDBOX_SELINUX_RELABEL) raw.selinuxRelabel = env.AGENT_SANDBOX_SELINUX_RELABEL
  if (env.AGENT_SANDBOX_ALLOW_DOMAINS) raw.allowDomains = list(env.AGENT_SANDBOX_ALLOW_DOMAINS)
  if (env.AGENT_SANDBOX_REGISTRIES) raw.registries = list(env.AGENT_SANDBOX_REGISTRIES)
  if (env.AGENT_SANDBOX_PROTECTED_PATHS) raw.protectedPaths = list(env.AGENT_SANDBOX_PROTECTED_PATHS)
  if (env.AGENT_SANDBOX_PROTECTED_BRANCHES) raw.protectedBranches = list(env.AGENT_SANDBOX_PROTECTED_BRANCHES)
  const limits: Record<string, unknown> = {}
  if (env.AGENT_SANDBOX_MEMORY) limits.memory = env.AGENT_SANDBOX_MEMORY
  if (env.AGENT_SANDBOX_CPUS) limits.cpus = Number(env.AGENT_SANDBOX_CPUS)
  if (env.AGENT_SANDBOX_PIDS_LIMIT) limits.pids = Number(env.AGENT_SANDBOX_PIDS_LIMIT)
  if (Object.keys(limits).length) raw.limits = limits
  const github: Record<string, unknown> = {}
  const int = (value: string) => (/^\d+$/.test(value) ? Number(value) : value)
  if (env.AGENT_SANDBOX_GITHUB_APP_ID) github.appId = int(env.AGENT_SANDBOX_GITHUB_APP_ID)
  if (env.AGENT_SANDBOX_GITHUB_INSTALLATION_ID) github.installationId = int(env.AGENT_SANDBOX_GITHUB_INSTALLATION_ID)
  if (env.AGENT_SANDBOX_GITHUB_PRIVATE_KEY_PATH) github.privateKeyPath = env.AGENT_SANDBOX_GITHUB_PRIVATE_KEY_PATH
  if (env.AGENT_SANDBOX_GITHUB_API_URL) github.apiUrl = env.AGENT_SANDBOX_GITHUB_API_URL
  if (env.AGENT_SANDBOX_GITHUB_GIT_URL) github.gitUrl = env.AGENT_SANDBOX_GITHUB_GIT_URL
  if (env.AGENT_SANDBOX_GITHUB_REFRESH_MARGIN_SECONDS) github.refreshMarginSeconds = int(env.AGENT_SANDBOX_GITHUB_REFRESH_MARGIN_SECONDS)
  if (Object.keys(github).length) raw.github = github
  if (env.AGENT_SANDBOX_PROTECT_HOOK_CONFIG) raw.protectHookConfig = !/^(0|false|no)$/i.test(env.AGENT_SANDBOX_PROTECT_HOOK_CONFIG)
  if (env.AGENT_SANDBOX_SHARED_AGENT_CONFIG) raw.sharedAgentConfig = !/^(0|false|no)$/i.test(env.AGENT_SANDBOX_SHARED_AGENT_CONFIG)
  if (env.AGENT_SANDBOX_NESTED_CONTAINERS) raw.nestedContainers = !/^(0|false|no)$/i.test(env.AGENT_SANDBOX_NESTED_CONTAINERS)
  const parsed = checkConfigFile(raw)
  if (!parsed.success) throw configErrorFrom(parsed.issue, 'environment (AGENT_SANDBOX_*)')
  return parsed.data
}

/**
 * The defaults for one workspace: DEFAULTS, with the GitHub rules its remotes
 * call for (github/remotes.ts) beside the npm rule. The GitHub service comes
 * from the user's file and the environment only (a workspace file may not set
 * github.apiUrl or gitUrl), and the remotes from the host's git config.
 */
export function workspaceDefaults(workspacePath: string, userLayer: ConfigFile | undefined, env: NodeJS.ProcessEnv): Settings {
  const github = {...DEFAULTS.github, ...userLayer?.github, ...envLayer(env).github}
  const rules = workspaceGithubRules(workspacePath, github)
  return rules.length ? {...DEFAULTS, httpRules: mergeHttpRules(DEFAULTS.httpRules, rules)} : DEFAULTS
}
const LIST_KEYS = ['protectedPaths', 'ports', 'allowDomains', 'protectedBranches', 'registries'] as const
const SCALAR_KEYS = ['baseTag', 'network', 'dockerNetwork', 'sharedAgentConfig', 'nestedContainers', 'selinuxRelabel', 'protectHookConfig'] as const

/** Pure merge of layers given lowest first; a `default` layer (DEFAULTS, or workspaceDefaults) is the base. */
export function mergeLayers(layers: Array<[Source, ConfigFile | Settings | undefined]>, files = {workspace: '', user: ''}): LayeredSettings {
  const base = layers.find(([source]) => source === 'default')?.[1] as Settings | undefined
  const settings: Settings = structuredClone(base ?? DEFAULTS)
  const sources = Object.fromEntries(Object.keys(DEFAULTS).map((k) => [k, ['default']])) as Record<keyof Settings, Source[]>
  for (const [source, layer] of layers) {
    if (!layer || source === 'default') continue
    for (const key of SCALAR_KEYS) {
      if (layer[key] !== undefined) {
        ;(settings as unknown as Record<string, unknown>)[key] = layer[key]
        sources[key] = [source]
      }
    }
    for (const key of LIST_KEYS) {
      const value = layer[key]
      if (value?.length) {
        // One key at a time, so each list keeps its own element type (registries are presets, not strings).
        ;(settings[key] as string[]) = [...new Set<string>([...settings[key], ...value])]
        sources[key] = sources[key][0] === 'default' ? [source] : [...sources[key], source]
      }
    }
    if (layer.secretEnv?.length) {
      // By name: a higher layer's entry for a name replaces a lower one's (masking it, or not).
      const names = new Set(layer.secretEnv.map(secretName))
      settings.secretEnv = [...settings.secretEnv.filter((e) => !names.has(secretName(e))), ...layer.secretEnv]
      sources.secretEnv = sources.secretEnv[0] === 'default' ? [source] : [...sources.secretEnv, source]
    }
    if (layer.httpRules?.length) {
      settings.httpRules = mergeHttpRules(settings.httpRules, layer.httpRules)
      sources.httpRules = sources.httpRules[0] === 'default' ? [source] : [...sources.httpRules, source]
    }
    if (layer.env && Object.keys(layer.env).length) {
      settings.env = {...settings.env, ...layer.env}
      sources.env = sources.env[0] === 'default' ? [source] : [...sources.env, source]
    }
    if (layer.github && Object.keys(layer.github).length) {
      settings.github = {...settings.github, ...layer.github}
      sources.github = sources.github[0] === 'default' ? [source] : [...sources.github, source]
    }
    if (layer.gateway?.inspectAll !== undefined) {
      settings.gateway = {...settings.gateway, inspectAll: layer.gateway.inspectAll}
      sources.gateway = [source]
    }
    if (layer.limits && Object.keys(layer.limits).length) {
      settings.limits = {...settings.limits, ...layer.limits}
      sources.limits = sources.limits[0] === 'default' ? [source] : [...sources.limits, source]
    }
  }
  return {settings, sources, files}
}

/** Whether `watch` notifies each new pending approval: the user's own file's `watchNotify` (default off). */
export function userWatchNotify(env: NodeJS.ProcessEnv = process.env): boolean {
  return readConfigFile(userConfigPath(env))?.watchNotify ?? false
}

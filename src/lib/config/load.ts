/**
 * The one settings loader. Layers, highest first: flags, AGENT_SANDBOX_*
 * environment variables, the workspace's .agent-sandbox/config.json, the
 * user's ~/.config/agent-sandbox/config.json, defaults. Scalars come from the
 * highest layer that sets them; lists are concatenated and de-duplicated and
 * `env` maps are merged, so a workspace adds to what the user set.
 *
 * The workspace file is the repository's, not the user's: a setting that
 * widens the sandbox applies only from a trusted file (trust.ts); otherwise
 * loading refuses (ConfigError), or with `untrusted: 'report'` says so in
 * `workspaceTrust` and the sources (for `config`).
 */
import {readFileSync} from 'node:fs'
import {homedir} from 'node:os'
import {join} from 'node:path'
import {ConfigError} from '../errors.js'
import {mergeHttpRules} from '../network/gateway/rules.js'
import {secretName} from '../network/gateway/secrets.js'
import {checkConfigFile, DEFAULTS, type ConfigFile, type ConfigIssue, type Settings} from './schema.js'
import {assertRegularAgentSandbox, configTrust, refusalError, type ConfigTrust} from './trust.js'
import {workspaceGithubRules} from '../github/remotes.js'

export type Source = 'flag' | 'env' | 'workspace' | 'user' | 'default' | 'workspace (trusted)' | 'workspace (untrusted)' | 'workspace (untrusted: refused)'

export interface LoadedSettings {
  settings: Settings
  /** Where each top-level key's value came from (for lists: every layer that added to it). */
  sources: Record<keyof Settings, Source[]>
  files: {workspace: string; user: string}
  /** The workspace file's trust, when there is one. */
  workspaceTrust?: ConfigTrust
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

export interface LoadOptions {
  workspacePath?: string
  flags?: ConfigFile
  env?: NodeJS.ProcessEnv
  /** An untrusted workspace file that widens the sandbox: `refuse` (ConfigError, the default) or `report` it. */
  untrusted?: 'refuse' | 'report'
}

export function loadSettings(options: LoadOptions = {}): LoadedSettings {
  const env = options.env ?? process.env
  const files = {
    workspace: options.workspacePath ? workspaceConfigPath(options.workspacePath) : '',
    user: userConfigPath(env),
  }
  const user = readConfigFile(files.user)
  // The workspace's file must be a regular file: a link's bytes are never the approved ones, and it could point anywhere.
  if (options.workspacePath) assertRegularAgentSandbox(options.workspacePath)
  const workspace = files.workspace ? readConfigBytes(files.workspace) : undefined
  refuseWorkspaceGithub(workspace?.layer, files.workspace)
  refuseUserOnly(workspace?.layer, files.workspace)
  let trust: ConfigTrust | undefined
  const defaults = options.workspacePath ? workspaceDefaults(options.workspacePath, user, env) : DEFAULTS
  if (workspace && options.workspacePath) {
    trust = configTrust(options.workspacePath, workspace.bytes, workspace.layer, user, env, defaults)
    if (trust.refused.length && options.untrusted !== 'report') throw refusalError(files.workspace, options.workspacePath, trust)
  }
  const wsSource: Source = trust?.state === 'trusted' ? 'workspace (trusted)' : 'workspace (untrusted)'
  const layers: Array<[Source, ConfigFile | undefined]> = [
    ['default', defaults],
    ['user', user],
    [wsSource, workspace?.layer],
    ['env', envLayer(env)],
    ['flag', options.flags],
  ]
  const loaded = mergeLayers(layers, files)
  if (trust) {
    loaded.workspaceTrust = trust
    for (const change of trust.refused) {
      const key = change.key.split('.')[0] as keyof Settings
      if (loaded.sources[key]) loaded.sources[key] = loaded.sources[key].map((s) => (s === 'workspace (untrusted)' ? 'workspace (untrusted: refused)' : s))
    }
  }
  return loaded
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

/** `trustedPaths` says which workspaces the user trusts: only the user's own file may say it. */
function refuseUserOnly(layer: ConfigFile | undefined, where: string): void {
  if (layer?.trustedPaths === undefined) return
  throw new ConfigError(`${where}: field "trustedPaths" is only read from the user config`, {
    hint: 'move it to ~/.config/agent-sandbox/config.json (a repository must not decide which workspaces are trusted)',
  })
}

/**
 * A repository must not choose where the user's App key signs in, nor which
 * key file is read: only installationId and refreshMarginSeconds may come
 * from a workspace file.
 */
function refuseWorkspaceGithub(layer: ConfigFile | undefined, path: string): void {
  const keys = Object.keys(layer?.github ?? {}).filter((k) => k !== 'installationId' && k !== 'refreshMarginSeconds')
  if (keys.length) {
    throw new ConfigError(`${path}: field "github.${keys[0]}" is only read from the user config or the environment`, {
      hint: 'move it to ~/.config/agent-sandbox/config.json (a repository must not choose the GitHub App key or where it signs in)',
    })
  }
}

const LIST_KEYS = ['protectedPaths', 'ports', 'allowDomains', 'protectedBranches', 'registries'] as const
const SCALAR_KEYS = ['baseTag', 'network', 'dockerNetwork', 'sharedAgentConfig', 'nestedContainers', 'selinuxRelabel', 'protectHookConfig'] as const

/** Pure merge of layers given lowest first; a `default` layer (DEFAULTS, or workspaceDefaults) is the base. */
export function mergeLayers(layers: Array<[Source, ConfigFile | Settings | undefined]>, files = {workspace: '', user: ''}): LoadedSettings {
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

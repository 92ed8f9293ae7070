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
import {ConfigError} from '../errors.js'
import {envLayer, mergeLayers, readConfigBytes, readConfigFile, userConfigPath, workspaceConfigPath, workspaceDefaults, type LayeredSettings, type Source} from './layers.js'
import {DEFAULTS, type ConfigFile, type Settings} from './schema.js'
import {assertRegularAgentSandbox, configTrust, refusalError, type ConfigTrust} from './trust.js'

export interface LoadedSettings extends LayeredSettings {
  /** The workspace file's trust, when there is one. */
  workspaceTrust?: ConfigTrust
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
  const loaded: LoadedSettings = mergeLayers(layers, files)
  if (trust) {
    loaded.workspaceTrust = trust
    for (const change of trust.refused) {
      const key = change.key.split('.')[0] as keyof Settings
      if (loaded.sources[key]) loaded.sources[key] = loaded.sources[key].map((s) => (s === 'workspace (untrusted)' ? 'workspace (untrusted: refused)' : s))
    }
  }
  return loaded
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

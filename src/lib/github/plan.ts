/** What a sandbox needs for the GitHub App: computed from settings without touching anything. */
import type {GithubSettings} from '../config/schema.js'
import type {GhappSpec} from '../sandbox/spec.js'
import type {Workspace} from '../workspace.js'
import {appHosts, ghHost, resolveAppConfig, urlOrigin} from './app.js'
import type {AppRecord} from './refresher.js'
import {tokenPaths, type Owner} from './token-store.js'

export interface GhappPlan {
  name: string
  spec: GhappSpec
  record: AppRecord
}

/**
 * The uid that reads the token inside: `node` is renumbered to the workspace
 * owner, except for a root-owned workspace, where it stays 1000.
 */
export function tokenOwner(ws: Workspace): Owner {
  return ws.uid === 0 ? {uid: 1000, gid: 1000} : {uid: ws.uid, gid: ws.gid}
}

/** Undefined when no App is configured; a ConfigError when half of one is. */
export function planGhapp(ws: Workspace, github: GithubSettings, name: string, env: NodeJS.ProcessEnv): GhappPlan | undefined {
  const config = resolveAppConfig(github, env)
  if (!config) return undefined
  return {
    name,
    spec: {secretsDir: tokenPaths(name, env).secretsDir, gitOrigin: urlOrigin(config.gitUrl), ghHost: ghHost(config), allowDomains: appHosts(config)},
    record: {config, owner: tokenOwner(ws), workspace: ws.path},
  }
}

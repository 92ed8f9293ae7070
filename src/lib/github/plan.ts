/** What a sandbox needs for the GitHub App: computed from settings without touching anything. */
import {ConfigError} from '../errors.js'
import type {MaskedSecret} from '../network/gateway/secrets.js'
import type {Workspace} from '../workspace.js'
import {appHosts, ghHost, resolveAppConfig, urlOrigin, type AppConfig, type GithubAppSettings} from './app.js'
import {siteOf} from './remotes.js'
import {readSurrogate, readToken, tokenPaths, type AppRecord, type Owner} from './token-store.js'

export interface GhappSpec {
  /** Host directory holding only `ghapp_token`, the token's surrogate (the gateway holds the token); mounted read-only at /run/secrets. */
  secretsDir: string
  /** `scheme://host[:port]` the askpass helper answers for. */
  gitOrigin: string
  /** The host `gh` talks to. */
  ghHost: string
  /** The API and git hosts, added to the firewall allowlist. */
  allowDomains: string[]
}

export interface GhappPlan {
  name: string
  spec: GhappSpec
  record: AppRecord
  /** Where the egress gateway puts the real token in place of the surrogate: the git host, the API `gh` uses, github.apiUrl's host. */
  hosts: string[]
}

/** The masked secret's name in the gateway (not an environment variable: it cannot meet a secretEnv name). */
export const GHAPP_SECRET = 'github-app-token'

/** The hosts the App token is for, as the gateway matches them. */
export function ghappHosts(config: AppConfig): string[] {
  const git = new URL(config.gitUrl).hostname.toLowerCase()
  return [...new Set([git, siteOf(git).apiHost, ...appHosts(config)])]
}

/**
 * The gateway sees the sandbox's HTTPS on port 443 only (the firewall sends
 * nothing else to it) and never puts a secret in cleartext: a git URL
 * elsewhere could not get the token at all. A ConfigError says so before
 * anything starts.
 */
export function assertGatewayCanCarry(config: AppConfig): void {
  const url = new URL(config.gitUrl)
  if (url.protocol === 'https:' && (url.port === '' || url.port === '443')) return
  throw new ConfigError(`github.gitUrl ${config.gitUrl} is not HTTPS on port 443: the egress gateway, which alone holds the GitHub App token, cannot put it in requests there`, {
    hint: 'set github.gitUrl (or AGENT_SANDBOX_GITHUB_GIT_URL) to an https:// URL on the default port; see docs/github-app.md',
  })
}

/** What the gateway needs for the App: the surrogate the sandbox sends and the current real token, read from the host's files now. */
export function ghappSecret(plan: Pick<GhappPlan, 'name' | 'hosts'>, env: NodeJS.ProcessEnv): MaskedSecret | undefined {
  const paths = tokenPaths(plan.name, env)
  const value = readToken(paths)
  const surrogate = readSurrogate(paths)
  return value && surrogate ? {name: GHAPP_SECRET, hosts: plan.hosts, surrogate, value} : undefined
}

/**
 * The uid that reads the token inside: `node` is renumbered to the workspace
 * owner, except for a root-owned workspace, where it stays 1000.
 */
export function tokenOwner(ws: Workspace): Owner {
  return ws.uid === 0 ? {uid: 1000, gid: 1000} : {uid: ws.uid, gid: ws.gid}
}

/** Undefined when no App is configured; a ConfigError when half of one is. */
export function planGhapp(ws: Workspace, github: GithubAppSettings, name: string, env: NodeJS.ProcessEnv): GhappPlan | undefined {
  const config = resolveAppConfig(github, env)
  if (!config) return undefined
  return {
    name,
    spec: {secretsDir: tokenPaths(name, env).secretsDir, gitOrigin: urlOrigin(config.gitUrl), ghHost: ghHost(config), allowDomains: appHosts(config)},
    record: {config, owner: tokenOwner(ws), workspace: ws.path},
    hosts: ghappHosts(config),
  }
}

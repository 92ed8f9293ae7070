/**
 * GitHub App settings and installation tokens. The private key is read on the
 * host, for each mint, and only ever handed to @octokit/auth-app (loaded
 * lazily), which signs the App JWT and exchanges it for an installation token.
 * Nothing here prints or returns the key or the JWT.
 */
import {readFileSync} from 'node:fs'
import {isIP} from 'node:net'
import {homedir} from 'node:os'
import {join} from 'node:path'
import {ConfigError, isTlsFailure, SandboxError, UsageError} from '../errors.js'
import {extraTrust} from '../util/tls.js'
import {lazyImport} from '../util/lazy-import.js'

/** Minting or refreshing a token failed (network, GitHub's answer, the key). */
export class GithubAppError extends SandboxError {}

export interface AppConfig {
  appId: number | string
  installationId: number
  /** Absolute path on the host. */
  privateKeyPath: string
  apiUrl: string
  /** Base URL git clones from (no trailing slash). */
  gitUrl: string
  refreshMarginSeconds: number
}

export interface MintedToken {
  token: string
  /** ISO 8601. */
  expiresAt: string
}

/**
 * The GitHub App settings this area reads: the `github` key of the merged
 * settings (config/schema.ts), with the API URL and the refresh margin defaulted.
 */
export interface GithubAppSettings {
  appId?: number | string
  installationId?: number
  privateKeyPath?: string
  apiUrl: string
  gitUrl?: string
  refreshMarginSeconds: number
}

export type TokenMinter = (config: AppConfig) => Promise<MintedToken>

const REQUIRED = ['appId', 'installationId', 'privateKeyPath'] as const
const ENV_NAME = {appId: 'AGENT_SANDBOX_GITHUB_APP_ID', installationId: 'AGENT_SANDBOX_GITHUB_INSTALLATION_ID', privateKeyPath: 'AGENT_SANDBOX_GITHUB_PRIVATE_KEY_PATH'}

/**
 * The App settings, or undefined when none of appId/installationId/privateKeyPath
 * is set. Half a configuration is an error naming what is missing.
 */
export function resolveAppConfig(github: GithubAppSettings, env: NodeJS.ProcessEnv = process.env): AppConfig | undefined {
  const set = REQUIRED.filter((k) => github[k] !== undefined)
  if (set.length === 0) return undefined
  const missing = REQUIRED.find((k) => github[k] === undefined)
  if (missing) {
    throw new ConfigError(`github.${missing} is not set, but github.${set[0]} is`, {
      hint: `set github.${missing} in ~/.config/agent-sandbox/config.json (or ${ENV_NAME[missing]}); see docs/github-app.md`,
    })
  }
  const keyPath = github.privateKeyPath as string
  return {
    appId: github.appId as number | string,
    installationId: github.installationId as number,
    privateKeyPath: keyPath.startsWith('~/') ? join(env.HOME || homedir(), keyPath.slice(2)) : keyPath,
    apiUrl: github.apiUrl.replace(/\/+$/, ''),
    gitUrl: (github.gitUrl ?? gitBaseUrl(github.apiUrl)).replace(/\/+$/, ''),
    refreshMarginSeconds: github.refreshMarginSeconds,
  }
}

/**
 * Where git clones from, given the REST API URL: api.github.com → github.com,
 * api.<x>.ghe.com → <x>.ghe.com, a GHES `https://ghe.example/api/v3` →
 * `https://ghe.example`; anything else keeps the API's origin.
 */
export function gitBaseUrl(apiUrl: string): string {
  const url = new URL(apiUrl)
  if (url.hostname === 'api.github.com') return `${url.protocol}//github.com`
  if (/^api\.[^.]+\.ghe\.com$/.test(url.hostname)) return `${url.protocol}//${url.hostname.slice(4)}`
  return url.origin
}

/** `scheme://host[:port]`, the form git's askpass prompts use. */
export function urlOrigin(url: string): string {
  return new URL(url).origin
}

/**
 * The hosts the firewall must allow for the App: the API's and git's. The
 * firewall allows names, not addresses, so an IP literal is left out (it
 * stays reachable from the host, which is where tokens are minted).
 */
export function appHosts(config: AppConfig): string[] {
  const hosts = [new URL(config.apiUrl).hostname, new URL(config.gitUrl).hostname]
  return [...new Set(hosts.filter((h) => !isIP(h.replace(/^\[|\]$/g, ''))).map((h) => h.toLowerCase()))]
}

/** The host `gh` talks to (GH_HOST); github.com for the public service. */
export function ghHost(config: AppConfig): string {
  return new URL(config.gitUrl).host
}

/** `owner/repo` (a trailing `.git` is dropped), as `init --clone` takes it. */
export function parseRepoSlug(text: string): {owner: string; repo: string} {
  const match = /^([A-Za-z0-9](?:[A-Za-z0-9-]{0,38}))\/([A-Za-z0-9._-]{1,100}?)(?:\.git)?$/.exec(text.trim())
  if (!match || match[2] === '.' || match[2] === '..') {
    throw new UsageError(`not a GitHub repository: ${JSON.stringify(text)}`, {hint: 'give it as owner/repo, e.g. --clone octocat/hello-world'})
  }
  return {owner: match[1], repo: match[2]}
}

export function cloneUrl(config: AppConfig, slug: {owner: string; repo: string}): string {
  return `${config.gitUrl}/${slug.owner}/${slug.repo}.git`
}

/** Read the key file; errors name the file and never quote its contents. */
export function readPrivateKey(path: string): string {
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (error) {
    throw new ConfigError(`cannot read the GitHub App private key ${path}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`, {
      hint: "set github.privateKeyPath to the .pem file downloaded from the App's settings page",
    })
  }
  if (!/-----BEGIN (RSA )?PRIVATE KEY-----/.test(text)) {
    throw new ConfigError(`${path} is not a PEM private key`, {hint: "use the .pem file downloaded from the App's settings page (Generate a private key)"})
  }
  return text
}

/** One line about why minting failed, with no key, JWT or token in it. */
export function describeMintFailure(error: unknown, config: AppConfig): string {
  const e = error as {status?: number; message?: string; response?: unknown; cause?: {code?: string; message?: string}}
  let text: string
  if (e?.cause && e.response === undefined) {
    // @octokit/request reports a failed fetch as status 500 with no response: the message is the socket's.
    text = `cannot reach ${config.apiUrl}: ${e.message ?? e.cause.code ?? e.cause.message}`
  } else if (typeof e?.status === 'number') {
    text = `${config.apiUrl} answered ${e.status}${e.message ? `: ${e.message}` : ''}`
  } else {
    text = e?.message ?? String(error)
  }
  // Belt and braces: never let key material or a bearer token through.
  text = text.replace(/-----BEGIN[\s\S]*?(-----END[^-]*-----|$)/g, '<key>').replace(/\b(ey[A-Za-z0-9_-]{10,}\.[A-Za-z0-9._-]+|gh[a-z]_[A-Za-z0-9]+)/g, '<redacted>')
  return text.split('\n')[0].slice(0, 300)
}

/** Mint a fresh installation token (never a cached one) through @octokit/auth-app. */
export const mintInstallationToken: TokenMinter = async (config) => {
  const privateKey = readPrivateKey(config.privateKeyPath)
  const [{createAppAuth}, {request}, trusting] = await Promise.all([
    lazyImport<typeof import('@octokit/auth-app')>('@octokit/auth-app'),
    lazyImport<typeof import('@octokit/request')>('@octokit/request'),
    trustingFetch(),
  ])
  const auth = createAppAuth({
    appId: config.appId,
    privateKey,
    installationId: config.installationId,
    request: request.defaults({baseUrl: config.apiUrl, headers: {'user-agent': 'agent-sandbox'}, request: trusting ? {fetch: trusting.fetch} : {}}),
    log: {warn: () => undefined},
  })
  try {
    const result = await auth({type: 'installation', refresh: true})
    return {token: result.token, expiresAt: result.expiresAt}
  } catch (error) {
    throw new GithubAppError(`cannot get a GitHub App installation token: ${describeMintFailure(error, config)}`, {
      hint: tlsFailureIn(error)
        ? `add the CA that signs ${config.apiUrl}'s certificate (behind a TLS-inspecting proxy: the proxy's) to the file NODE_EXTRA_CA_CERTS names`
        : 'check github.appId, github.installationId, the key file and github.apiUrl (agent-sandbox config); see docs/github-app.md',
    })
  } finally {
    await trusting?.close()
  }
}

/** Whether a TLS verification failure is somewhere in an error's cause chain (fetch wraps the socket's error). */
function tlsFailureIn(error: unknown): boolean {
  for (let e = error as {code?: unknown; cause?: unknown} | undefined, depth = 0; e && depth < 5; e = e.cause as typeof e, depth++) {
    if (isTlsFailure(e.code)) return true
  }
  return false
}

/**
 * With NODE_EXTRA_CA_CERTS set (a TLS-inspecting proxy, a GitHub Enterprise
 * server with a private CA), a fetch that trusts it: node started without the
 * file (../tls.ts), and node 20's global fetch takes no trust list, so this is
 * undici (the same fetch) with its own connection pool. Undefined otherwise.
 */
async function trustingFetch(): Promise<{fetch: typeof globalThis.fetch; close: () => Promise<void>} | undefined> {
  const ca = extraTrust()
  if (!ca) return undefined
  const undici = await lazyImport<typeof import('undici')>('undici')
  const dispatcher = new undici.Agent({connect: {ca}})
  const fetch = ((url: string, init?: Record<string, unknown>) => undici.fetch(url, {...init, dispatcher})) as unknown as typeof globalThis.fetch
  return {fetch, close: () => dispatcher.close()}
}

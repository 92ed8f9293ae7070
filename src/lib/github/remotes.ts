/**
 * The default httpRules for GitHub (docs/design.md, "The egress gateway"):
 * when the workspace's remotes are on GitHub, the git host is limited to the
 * paths of those repositories and the API host (the one `gh` uses) to their
 * `/repos/owner/repo` paths. The remotes come from the host's own git config
 * (a clone does not carry remotes, and the agent cannot write the host's
 * .git), so they are as trusted as the user's own config. Pure but for
 * reading that file.
 */
import {readFileSync, statSync} from 'node:fs'
import {isAbsolute, join, resolve} from 'node:path'
import type {HttpRule} from '../network/gateway/rules.js'
import {gitBaseUrl, type GithubAppSettings} from './app.js'

export interface RepoSlug {
  owner: string
  repo: string
}

/** A GitHub service as `gh` sees it: where git goes, and where its API is. */
export interface GithubSite {
  gitHost: string
  apiHost: string
  /** The REST API's path prefix on apiHost: '' for api.github.com, `/api/v3` for GitHub Enterprise Server. */
  apiPrefix: string
}

/** The URLs of every `[remote "…"]` (url and pushurl) in a git config file's text. */
export function parseRemoteUrls(configText: string): string[] {
  const urls: string[] = []
  let inRemote = false
  for (const raw of configText.split('\n')) {
    const line = raw.trim()
    if (line.startsWith('[')) {
      inRemote = /^\[remote\s+"[^"]*"\]/i.test(line)
      continue
    }
    if (!inRemote) continue
    const m = /^(url|pushurl)\s*=\s*(.*?)\s*$/i.exec(line)
    if (m) urls.push(m[2].replace(/^"(.*)"$/, '$1'))
  }
  return urls
}

/**
 * The repository a remote URL names on `host`: `https://host/o/r(.git)`,
 * `ssh://git@host[:port]/o/r`, `git@host:o/r`. Undefined for another host or
 * a path that is not owner/repo.
 */
export function repoOfUrl(url: string, host: string): RepoSlug | undefined {
  let urlHost: string
  let path: string
  const scp = /^(?:[^@/]+@)?([^:/]+):(?!\/)(.*)$/.exec(url)
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(url)) {
    try {
      const u = new URL(url)
      urlHost = u.hostname
      path = decodeURIComponent(u.pathname)
    } catch {
      return undefined
    }
  } else if (scp) {
    urlHost = scp[1]
    path = `/${scp[2]}`
  } else return undefined
  if (urlHost.toLowerCase() !== host.toLowerCase()) return undefined
  const m = /^\/+([A-Za-z0-9](?:[A-Za-z0-9-]{0,38}))\/([A-Za-z0-9._-]{1,100}?)(?:\.git)?\/*$/.exec(path)
  if (!m || m[2] === '.' || m[2] === '..') return undefined
  return {owner: m[1], repo: m[2]}
}

/** The API `gh` uses for a git host: api.github.com, api.<x>.ghe.com, or GitHub Enterprise Server's own /api/v3. */
export function siteOf(gitHost: string): GithubSite {
  const host = gitHost.toLowerCase()
  if (host === 'github.com') return {gitHost: host, apiHost: 'api.github.com', apiPrefix: ''}
  if (/^[^.]+\.ghe\.com$/.test(host)) return {gitHost: host, apiHost: `api.${host}`, apiPrefix: ''}
  return {gitHost: host, apiHost: host, apiPrefix: '/api/v3'}
}

/** github.com, and the service the github settings point at (GitHub Enterprise), by its git host. */
export function githubSites(github: Pick<GithubAppSettings, 'apiUrl' | 'gitUrl'>): GithubSite[] {
  const hosts = ['github.com']
  try {
    hosts.push(new URL(github.gitUrl ?? gitBaseUrl(github.apiUrl)).hostname.toLowerCase())
  } catch {
    // an invalid URL is the schema's to report
  }
  return [...new Set(hosts)].map(siteOf)
}

/**
 * The rules: for each site with a remote on it, the git host admits the
 * repositories' paths (`/o/r`, `/o/r/*`, `/o/r.git`, `/o/r.git/*`) and the
 * API host their `/repos/o/r` paths (and GET /meta, which the firewall may
 * read for GitHub's address ranges). GraphQL is not admitted: one endpoint
 * for every repository the token opens, so a path rule cannot hold it to
 * these (docs/design.md).
 */
export function githubRules(urls: readonly string[], sites: readonly GithubSite[]): HttpRule[] {
  const rules: HttpRule[] = []
  for (const site of sites) {
    const bySlug = new Map<string, RepoSlug>()
    for (const url of urls) {
      const r = repoOfUrl(url, site.gitHost)
      if (r) bySlug.set(`${r.owner}/${r.repo}`, r)
    }
    const repos = [...bySlug.values()]
    if (!repos.length) continue
    const api = repos.flatMap(({owner, repo}) => [`${site.apiPrefix}/repos/${owner}/${repo}`, `${site.apiPrefix}/repos/${owner}/${repo}/*`])
    const git = repos.flatMap(({owner, repo}) => [`/${owner}/${repo}`, `/${owner}/${repo}/*`, `/${owner}/${repo}.git`, `/${owner}/${repo}.git/*`])
    if (site.apiHost === site.gitHost) rules.push({host: site.gitHost, paths: [...git, ...api]})
    else {
      rules.push({host: site.gitHost, paths: git}, {host: site.apiHost, paths: api})
      if (site.apiHost === 'api.github.com') rules.push({host: site.apiHost, methods: ['GET', 'HEAD'], paths: ['/meta']})
    }
  }
  return rules
}

/** The host's git config of a workspace: `.git/config`, or the common directory's for a `gitdir:` file (a worktree). */
export function workspaceGitConfig(workspacePath: string): string | undefined {
  const read = (p: string) => {
    try {
      return readFileSync(p, 'utf8')
    } catch {
      return undefined
    }
  }
  const dotGit = join(workspacePath, '.git')
  let gitDir = dotGit
  try {
    if (!statSync(dotGit).isDirectory()) {
      const m = /^gitdir:\s*(.+?)\s*$/m.exec(read(dotGit) ?? '')
      if (!m) return undefined
      gitDir = isAbsolute(m[1]) ? m[1] : resolve(workspacePath, m[1])
      const common = read(join(gitDir, 'commondir'))?.trim()
      if (common) gitDir = isAbsolute(common) ? common : resolve(gitDir, common)
    }
  } catch {
    return undefined
  }
  return read(join(gitDir, 'config'))
}

/** The GitHub rules of a workspace from its remotes (none without a repository or a GitHub remote). */
export function workspaceGithubRules(workspacePath: string, github: Pick<GithubAppSettings, 'apiUrl' | 'gitUrl'>): HttpRule[] {
  const config = workspaceGitConfig(workspacePath)
  return config ? githubRules(parseRemoteUrls(config), githubSites(github)) : []
}

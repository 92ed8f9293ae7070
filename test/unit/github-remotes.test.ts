/**
 * The default GitHub httpRules (github/remotes.ts): the workspace's remotes on
 * GitHub, the rules derived from them, and how they sit among the config
 * layers (defaults the user may replace, a repository's file may not widen).
 */
import {mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterEach, beforeEach, describe, expect, it} from 'vitest'
import {loadSettings} from '../../src/lib/config/load.js'
import {githubRules, githubSites, parseRemoteUrls, repoOfUrl, siteOf, workspaceGitConfig, workspaceGithubRules} from '../../src/lib/github/remotes.js'
import {judgeHttpRules} from '../../src/lib/network/gateway/rules.js'
import {ghappHosts, assertGatewayCanCarry} from '../../src/lib/github/plan.js'
import type {AppConfig} from '../../src/lib/github/app.js'

const GIT_CONFIG = `[core]
\trepositoryformatversion = 0
[remote "origin"]
\turl = https://github.com/acme/widgets.git
\tfetch = +refs/heads/*:refs/remotes/origin/*
[remote "fork"]
\turl = git@github.com:me/widgets
\tpushurl = "ssh://git@github.com/me/widgets-push.git"
[branch "main"]
\turl = https://github.com/not/a-remote.git
[remote "elsewhere"]
\turl = https://gitlab.com/acme/widgets.git
`

describe('remotes', () => {
  it('reads url and pushurl of remotes only', () => {
    expect(parseRemoteUrls(GIT_CONFIG)).toEqual([
      'https://github.com/acme/widgets.git',
      'git@github.com:me/widgets',
      'ssh://git@github.com/me/widgets-push.git',
      'https://gitlab.com/acme/widgets.git',
    ])
  })

  it('names the repository of https, ssh and scp-like URLs on the host, nothing else', () => {
    expect(repoOfUrl('https://github.com/acme/widgets.git', 'github.com')).toEqual({owner: 'acme', repo: 'widgets'})
    expect(repoOfUrl('https://x-access-token@GitHub.com/acme/widgets/', 'github.com')).toEqual({owner: 'acme', repo: 'widgets'})
    expect(repoOfUrl('git@github.com:acme/w.x', 'github.com')).toEqual({owner: 'acme', repo: 'w.x'})
    expect(repoOfUrl('ssh://git@github.com:22/acme/widgets.git', 'github.com')).toEqual({owner: 'acme', repo: 'widgets'})
    expect(repoOfUrl('https://gitlab.com/acme/widgets.git', 'github.com')).toBeUndefined()
    expect(repoOfUrl('https://github.com/acme', 'github.com')).toBeUndefined()
    expect(repoOfUrl('https://github.com/acme/widgets/extra', 'github.com')).toBeUndefined()
    expect(repoOfUrl('https://github.com/acme/..', 'github.com')).toBeUndefined()
    expect(repoOfUrl('/srv/git/acme/widgets.git', 'github.com')).toBeUndefined()
  })

  it('knows the API gh uses for github.com, ghe.com and GitHub Enterprise Server', () => {
    expect(siteOf('github.com')).toEqual({gitHost: 'github.com', apiHost: 'api.github.com', apiPrefix: ''})
    expect(siteOf('acme.ghe.com')).toEqual({gitHost: 'acme.ghe.com', apiHost: 'api.acme.ghe.com', apiPrefix: ''})
    expect(siteOf('ghe.example')).toEqual({gitHost: 'ghe.example', apiHost: 'ghe.example', apiPrefix: '/api/v3'})
    expect(githubSites({apiUrl: 'https://api.github.com'})).toEqual([siteOf('github.com')])
    expect(githubSites({apiUrl: 'https://ghe.example/api/v3'}).map((s) => s.gitHost)).toEqual(['github.com', 'ghe.example'])
    expect(githubSites({apiUrl: 'http://10.0.0.1:8080', gitUrl: 'https://fake-gh'}).map((s) => s.gitHost)).toEqual(['github.com', 'fake-gh'])
  })
})

describe('githubRules', () => {
  const rules = githubRules(parseRemoteUrls(GIT_CONFIG), githubSites({apiUrl: 'https://api.github.com'}))

  it('limits github.com to the remotes’ repositories and api.github.com to their /repos paths', () => {
    expect(rules).toEqual([
      {
        host: 'github.com',
        paths: [
          '/acme/widgets', '/acme/widgets/*', '/acme/widgets.git', '/acme/widgets.git/*',
          '/me/widgets', '/me/widgets/*', '/me/widgets.git', '/me/widgets.git/*',
          '/me/widgets-push', '/me/widgets-push/*', '/me/widgets-push.git', '/me/widgets-push.git/*',
        ],
      },
      {host: 'api.github.com', paths: ['/repos/acme/widgets', '/repos/acme/widgets/*', '/repos/me/widgets', '/repos/me/widgets/*', '/repos/me/widgets-push', '/repos/me/widgets-push/*']},
      {host: 'api.github.com', methods: ['GET', 'HEAD'], paths: ['/meta']},
    ])
  })

  it('admits the workspace’s repository (fetch, push, its API) and refuses its twin elsewhere', () => {
    const ok = (host: string, method: string, path: string) => judgeHttpRules(host, method, path, rules).allowed
    expect(ok('github.com', 'GET', '/acme/widgets.git/info/refs')).toBe(true)
    expect(ok('github.com', 'POST', '/acme/widgets.git/git-receive-pack')).toBe(true)
    expect(ok('github.com', 'GET', '/acme/widgets/pulls')).toBe(true)
    expect(ok('api.github.com', 'POST', '/repos/acme/widgets/pulls')).toBe(true)
    expect(ok('api.github.com', 'GET', '/meta')).toBe(true)
    expect(ok('github.com', 'POST', '/acme/other.git/git-receive-pack')).toBe(false)
    expect(ok('github.com', 'GET', '/acme/widgets-evil.git/info/refs')).toBe(false)
    expect(ok('api.github.com', 'POST', '/repos/acme/other/pulls')).toBe(false)
    expect(ok('api.github.com', 'POST', '/graphql')).toBe(false)
    expect(ok('api.github.com', 'POST', '/meta')).toBe(false)
    expect(judgeHttpRules('github.com', 'POST', '/acme/other.git/git-receive-pack', rules)).toEqual({allowed: false, rule: `path /acme/other.git/git-receive-pack not in httpRules github.com paths ${rules[0].paths?.join(',')}`})
  })

  it('puts the API paths on the git host for GitHub Enterprise Server; nothing without a remote on GitHub', () => {
    const ghes = githubRules(['https://ghe.example/acme/widgets.git'], githubSites({apiUrl: 'https://ghe.example/api/v3'}))
    expect(ghes).toEqual([{host: 'ghe.example', paths: ['/acme/widgets', '/acme/widgets/*', '/acme/widgets.git', '/acme/widgets.git/*', '/api/v3/repos/acme/widgets', '/api/v3/repos/acme/widgets/*']}])
    expect(githubRules(['https://gitlab.com/acme/widgets.git', '/srv/x.git'], githubSites({apiUrl: 'https://api.github.com'}))).toEqual([])
  })
})

describe('the App token’s hosts and transport', () => {
  const app = (gitUrl: string, apiUrl = 'https://api.github.com'): AppConfig => ({appId: 1, installationId: 2, privateKeyPath: '/k', apiUrl, gitUrl, refreshMarginSeconds: 300})

  it('swaps at the git host, the API gh uses and github.apiUrl’s host (not an IP)', () => {
    expect(ghappHosts(app('https://github.com'))).toEqual(['github.com', 'api.github.com'])
    expect(ghappHosts(app('https://fake-gh', 'http://10.1.2.3:8080'))).toEqual(['fake-gh'])
    expect(ghappHosts(app('https://ghe.example', 'https://ghe.example/api/v3'))).toEqual(['ghe.example'])
  })

  it('needs HTTPS on 443 for git (what the gateway sees and may put a secret in)', () => {
    expect(() => assertGatewayCanCarry(app('https://github.com'))).not.toThrow()
    expect(() => assertGatewayCanCarry(app('https://ghe.example:443'))).not.toThrow()
    expect(() => assertGatewayCanCarry(app('http://fake-gh:8080'))).toThrow(/github\.gitUrl http:\/\/fake-gh:8080 is not HTTPS on port 443/)
    expect(() => assertGatewayCanCarry(app('https://ghe.example:8443'))).toThrow(/not HTTPS on port 443/)
  })
})

describe('in the settings', () => {
  let root: string
  let ws: string
  let env: NodeJS.ProcessEnv
  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'ghremotes-'))
    ws = join(root, 'ws')
    mkdirSync(join(ws, '.git'), {recursive: true})
    mkdirSync(join(ws, '.agent-sandbox'))
    writeFileSync(join(ws, '.git', 'config'), GIT_CONFIG)
    env = {HOME: join(root, 'home'), XDG_CONFIG_HOME: join(root, 'cfg'), XDG_STATE_HOME: join(root, 'state')}
  })
  afterEach(() => rmSync(root, {recursive: true, force: true}))

  const userConfig = (config: object) => {
    mkdirSync(join(root, 'cfg', 'agent-sandbox'), {recursive: true})
    writeFileSync(join(root, 'cfg', 'agent-sandbox', 'config.json'), JSON.stringify(config))
  }
  const workspaceConfig = (config: object) => writeFileSync(join(ws, '.agent-sandbox', 'config.json'), JSON.stringify(config))
  const hosts = (rules: Array<{host: string}>) => rules.map((r) => r.host)

  it('reads the remotes of a repository and of a worktree (gitdir: file, commondir)', () => {
    expect(workspaceGitConfig(ws)).toBe(GIT_CONFIG)
    const wt = join(root, 'wt')
    mkdirSync(join(ws, '.git', 'worktrees', 'wt'), {recursive: true})
    writeFileSync(join(ws, '.git', 'worktrees', 'wt', 'commondir'), '../..\n')
    mkdirSync(wt)
    writeFileSync(join(wt, '.git'), `gitdir: ${join(ws, '.git', 'worktrees', 'wt')}\n`)
    expect(workspaceGitConfig(wt)).toBe(GIT_CONFIG)
    expect(workspaceGitConfig(join(root, 'none'))).toBeUndefined()
  })

  it('are defaults beside the npm rule, for workspaces with a GitHub remote only', () => {
    const {settings, sources} = loadSettings({workspacePath: ws, env})
    expect(hosts(settings.httpRules)).toEqual(['registry.npmjs.org', 'github.com', 'api.github.com', 'api.github.com'])
    expect(sources.httpRules).toEqual(['default'])
    expect(settings.httpRules).toEqual([{host: 'registry.npmjs.org', methods: ['GET', 'HEAD']}, ...workspaceGithubRules(ws, settings.github)])
    rmSync(join(ws, '.git', 'config'))
    expect(hosts(loadSettings({workspacePath: ws, env}).settings.httpRules)).toEqual(['registry.npmjs.org'])
  })

  it('the user’s config replaces them per host (lifting github.com with a rule that restricts nothing)', () => {
    userConfig({httpRules: [{host: 'github.com'}]})
    const {settings} = loadSettings({workspacePath: ws, env})
    expect(settings.httpRules.filter((r) => r.host === 'github.com')).toEqual([{host: 'github.com'}])
    expect(judgeHttpRules('github.com', 'POST', '/other/repo.git/git-receive-pack', settings.httpRules).allowed).toBe(true)
    expect(judgeHttpRules('api.github.com', 'GET', '/repos/other/repo', settings.httpRules).allowed).toBe(false)
  })

  it('a repository’s own file cannot widen them (refused untrusted), and may restrict a host they leave alone', () => {
    workspaceConfig({httpRules: [{host: 'github.com', paths: ['/*']}]})
    expect(() => loadSettings({workspacePath: ws, env})).toThrow(/httpRules\.github\.com \(replaces the rules below/)
    workspaceConfig({httpRules: [{host: 'api.github.com'}]})
    expect(() => loadSettings({workspacePath: ws, env})).toThrow(/httpRules\.api\.github\.com/)
    workspaceConfig({httpRules: [{host: 'uploads.github.com', methods: ['GET']}]})
    expect(hosts(loadSettings({workspacePath: ws, env}).settings.httpRules)).toContain('uploads.github.com')
  })

  it('follow github.gitUrl from the user’s config or the environment (GitHub Enterprise)', () => {
    writeFileSync(join(ws, '.git', 'config'), '[remote "origin"]\n\turl = https://ghe.example/acme/widgets.git\n')
    expect(hosts(loadSettings({workspacePath: ws, env}).settings.httpRules)).toEqual(['registry.npmjs.org'])
    expect(hosts(loadSettings({workspacePath: ws, env: {...env, AGENT_SANDBOX_GITHUB_API_URL: 'https://ghe.example/api/v3'}}).settings.httpRules)).toEqual(['registry.npmjs.org', 'ghe.example'])
    userConfig({github: {gitUrl: 'https://ghe.example'}})
    expect(hosts(loadSettings({workspacePath: ws, env}).settings.httpRules)).toEqual(['registry.npmjs.org', 'ghe.example'])
  })
})

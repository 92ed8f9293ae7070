/** GitHub App settings: schema, env layer, merge, the workspace rule, and the pure URL mappings. */
import {mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterEach, describe, expect, it} from 'vitest'
import {envLayer, mergeLayers, parseConfigText} from '../../src/lib/config/layers.js'
import {loadSettings} from '../../src/lib/config/load.js'
import {DEFAULTS, type Settings} from '../../src/lib/config/schema.js'
import {ConfigError, UsageError} from '../../src/lib/errors.js'
import {appHosts, cloneUrl, describeMintFailure, gitBaseUrl, ghHost, parseRepoSlug, resolveAppConfig, type AppConfig} from '../../src/lib/github/app.js'
import {askpassScript, checkCloneTarget} from '../../src/lib/github/clone.js'
import {planGhapp, tokenOwner} from '../../src/lib/github/plan.js'
import {buildSpec} from '../../src/lib/sandbox/spec-sandbox.js'
import {toDockerRunArgs} from '../../src/lib/sandbox/spec-render.js'
import {describeWorkspace} from '../../src/lib/workspace.js'

const FILE = '/ws/.agent-sandbox/config.json'
const full = {appId: 12345, installationId: 678, privateKeyPath: '/keys/app.pem'}

function thrown(fn: () => unknown): Error {
  try {
    fn()
  } catch (error) {
    return error as Error
  }
  throw new Error('expected an error')
}

describe('github settings', () => {
  it('defaults to api.github.com and a 5 minute margin', () => {
    expect(DEFAULTS.github).toEqual({apiUrl: 'https://api.github.com', refreshMarginSeconds: 300})
  })

  it('validates the fields and rejects unknown ones', () => {
    expect(parseConfigText(JSON.stringify({github: {...full, apiUrl: 'https://ghe.example/api/v3'}}), FILE).github?.installationId).toBe(678)
    for (const [github, field] of [
      [{appId: -1}, 'github.appId'],
      [{installationId: 'x'}, 'github.installationId'],
      [{privateKeyPath: 'relative.pem'}, 'github.privateKeyPath'],
      [{apiUrl: 'ftp://x'}, 'github.apiUrl'],
      [{apiUrl: 'not a url'}, 'github.apiUrl'],
      [{refreshMarginSeconds: 0}, 'github.refreshMarginSeconds'],
      [{appID: 1}, 'github'],
    ] as const) {
      const error = thrown(() => parseConfigText(JSON.stringify({github}), FILE))
      expect(error).toBeInstanceOf(ConfigError)
      expect(error.message).toContain(`"${field}"`)
    }
  })

  it('reads AGENT_SANDBOX_GITHUB_* variables, numbers as numbers', () => {
    expect(
      envLayer({
        AGENT_SANDBOX_GITHUB_APP_ID: '12345',
        AGENT_SANDBOX_GITHUB_INSTALLATION_ID: '678',
        AGENT_SANDBOX_GITHUB_PRIVATE_KEY_PATH: '/k.pem',
        AGENT_SANDBOX_GITHUB_API_URL: 'https://ghe.example/api/v3',
        AGENT_SANDBOX_GITHUB_GIT_URL: 'http://stand-in:8080',
        AGENT_SANDBOX_GITHUB_REFRESH_MARGIN_SECONDS: '10',
      }).github,
    ).toEqual({appId: 12345, installationId: 678, privateKeyPath: '/k.pem', apiUrl: 'https://ghe.example/api/v3', gitUrl: 'http://stand-in:8080', refreshMarginSeconds: 10})
    expect(thrown(() => envLayer({AGENT_SANDBOX_GITHUB_INSTALLATION_ID: 'abc'})).message).toMatch(/environment.*github\.installationId/)
  })

  it('merges key by key, highest layer first', () => {
    const {settings, sources} = mergeLayers([
      ['default', DEFAULTS],
      ['user', {github: {...full, apiUrl: 'https://ghe.example/api/v3'}}],
      ['workspace', {github: {installationId: 999}}],
      ['env', {github: {refreshMarginSeconds: 30}}],
    ])
    expect(settings.github).toEqual({...full, installationId: 999, apiUrl: 'https://ghe.example/api/v3', refreshMarginSeconds: 30})
    expect(sources.github).toEqual(['user', 'workspace', 'env'])
  })

  describe('from files', () => {
    let root: string
    afterEach(() => rmSync(root, {recursive: true, force: true}))

    it('a workspace file may set installationId but not where the key signs in', () => {
      root = mkdtempSync(join(tmpdir(), 'ghcfg-'))
      mkdirSync(join(root, 'ws', '.agent-sandbox'), {recursive: true})
      const env = {HOME: join(root, 'home'), XDG_CONFIG_HOME: join(root, 'cfg')}
      writeFileSync(join(root, 'ws', '.agent-sandbox', 'config.json'), JSON.stringify({github: {installationId: 5}}))
      // Choosing the installation chooses whose repositories the token opens: only from a trusted file.
      expect(thrown(() => loadSettings({workspacePath: join(root, 'ws'), env})).message).toContain('github.installationId')
      mkdirSync(join(root, 'cfg', 'agent-sandbox'), {recursive: true})
      writeFileSync(join(root, 'cfg', 'agent-sandbox', 'config.json'), JSON.stringify({trustedPaths: [join(root, 'ws')]}))
      expect(loadSettings({workspacePath: join(root, 'ws'), env}).settings.github.installationId).toBe(5)
      for (const key of ['apiUrl', 'privateKeyPath', 'appId', 'gitUrl']) {
        const value = key === 'appId' ? 1 : key === 'privateKeyPath' ? '/etc/key.pem' : 'https://evil.example'
        writeFileSync(join(root, 'ws', '.agent-sandbox', 'config.json'), JSON.stringify({github: {[key]: value}}))
        const error = thrown(() => loadSettings({workspacePath: join(root, 'ws'), env}))
        expect(error).toBeInstanceOf(ConfigError)
        expect(error.message).toContain(`github.${key}`)
        expect((error as ConfigError).hint).toMatch(/~\/.config\/agent-sandbox\/config.json/)
      }
    })
  })
})

const github = (over: Partial<Settings['github']> = {}): Settings['github'] => ({...DEFAULTS.github, ...over})

describe('resolveAppConfig', () => {
  it('is undefined when no App is configured', () => {
    expect(resolveAppConfig(github())).toBeUndefined()
  })

  it('names the missing field of half a configuration', () => {
    const error = thrown(() => resolveAppConfig(github({appId: 1, privateKeyPath: '/k.pem'})))
    expect(error).toBeInstanceOf(ConfigError)
    expect(error.message).toBe('github.installationId is not set, but github.appId is')
    expect((error as ConfigError).hint).toContain('AGENT_SANDBOX_GITHUB_INSTALLATION_ID')
  })

  it('expands ~/ and derives the git URL from the API URL', () => {
    const config = resolveAppConfig(github({...full, privateKeyPath: '~/keys/app.pem'}), {HOME: '/home/me'})
    expect(config).toEqual({...full, privateKeyPath: '/home/me/keys/app.pem', apiUrl: 'https://api.github.com', gitUrl: 'https://github.com', refreshMarginSeconds: 300})
    expect(resolveAppConfig(github({...full, gitUrl: 'http://stand-in:8080/'}))?.gitUrl).toBe('http://stand-in:8080')
  })
})

describe('URL mappings', () => {
  it.each([
    ['https://api.github.com', 'https://github.com'],
    ['https://api.github.com/', 'https://github.com'],
    ['https://ghe.example/api/v3', 'https://ghe.example'],
    ['https://ghe.example:8443/api/v3', 'https://ghe.example:8443'],
    ['https://api.acme.ghe.com', 'https://acme.ghe.com'],
    ['http://stand-in:8080', 'http://stand-in:8080'],
  ])('gitBaseUrl(%s) = %s', (api, git) => {
    expect(gitBaseUrl(api)).toBe(git)
  })

  const config: AppConfig = {...full, apiUrl: 'https://ghe.example/api/v3', gitUrl: 'https://ghe.example', refreshMarginSeconds: 300}

  it('allows the API and git hosts, but never an IP literal (the firewall allows names)', () => {
    expect(appHosts(config)).toEqual(['ghe.example'])
    expect(appHosts({...config, apiUrl: 'https://api.github.com', gitUrl: 'https://github.com'})).toEqual(['api.github.com', 'github.com'])
    expect(appHosts({...config, apiUrl: 'http://172.18.0.2:8080', gitUrl: 'http://Stand-In:8080'})).toEqual(['stand-in'])
    expect(appHosts({...config, apiUrl: 'http://[::1]:8080', gitUrl: 'http://10.0.0.1'})).toEqual([])
  })

  it('gives gh the git host', () => {
    expect(ghHost({...config, gitUrl: 'https://github.com'})).toBe('github.com')
    expect(ghHost(config)).toBe('ghe.example')
  })

  it('parses owner/repo and builds the clone URL without credentials', () => {
    expect(parseRepoSlug('octocat/Hello-World.git')).toEqual({owner: 'octocat', repo: 'Hello-World'})
    expect(cloneUrl(config, parseRepoSlug('acme/widgets'))).toBe('https://ghe.example/acme/widgets.git')
    for (const bad of ['octocat', 'a/b/c', '-x/y', 'x/..', 'x/y z', 'https://github.com/a/b', '']) {
      expect(thrown(() => parseRepoSlug(bad))).toBeInstanceOf(UsageError)
    }
  })
})

describe('describeMintFailure', () => {
  const config: AppConfig = {...full, apiUrl: 'https://api.github.com', gitUrl: 'https://github.com', refreshMarginSeconds: 300}

  it('says whether the API could not be reached or what it answered', () => {
    expect(describeMintFailure(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), {status: 500, cause: new TypeError('fetch failed')}), config)).toBe(
      'cannot reach https://api.github.com: connect ECONNREFUSED 127.0.0.1:1',
    )
    expect(describeMintFailure(Object.assign(new Error('Bad credentials'), {status: 401, response: {}}), config)).toBe('https://api.github.com answered 401: Bad credentials')
  })

  it('never lets a key, a JWT or a token through', () => {
    const text = describeMintFailure(new Error('x -----BEGIN RSA PRIVATE KEY-----\nMIIabc\n-----END RSA PRIVATE KEY----- y eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOjF9.c2ln ghs_abcdef0123456789'), config)
    expect(text).not.toMatch(/MIIabc|eyJ|ghs_abc/)
  })
})

describe('the spec of a sandbox with the App', () => {
  const ws = describeWorkspace('/home/me/app', 1000, 1000)
  const settings: Settings = {...structuredClone(DEFAULTS), github: github(full)}

  it('mounts the secrets directory read-only at /run/secrets, sets GIT_ASKPASS, labels it and allows the hosts', () => {
    const plan = planGhapp(ws, settings.github, 'sbx', {XDG_RUNTIME_DIR: '/run/user/1000'})
    expect(plan?.spec).toEqual({secretsDir: '/run/user/1000/agent-sandbox/sbx/secrets', gitOrigin: 'https://github.com', ghHost: 'github.com', allowDomains: ['api.github.com', 'github.com']})
    const spec = buildSpec(ws, settings, {protectedPaths: [], ghapp: plan?.spec})
    expect(spec.mounts).toContainEqual({type: 'bind', source: '/run/user/1000/agent-sandbox/sbx/secrets', target: '/run/secrets', readOnly: true})
    const env = Object.fromEntries(spec.env.map((e) => [e.name, e.value]))
    expect(env.GIT_ASKPASS).toBe('/usr/local/bin/git-askpass-ghapp')
    expect(env.AGENT_SANDBOX_GHAPP_GIT_ORIGIN).toBe('https://github.com')
    expect(env.AGENT_SANDBOX_ALLOW_DOMAINS.split(',')).toEqual(expect.arrayContaining(['api.github.com', 'github.com']))
    expect(spec.labels['dev.agent-sandbox.ghapp']).toBe('1')
    expect(toDockerRunArgs(spec)).toContain('type=bind,source=/run/user/1000/agent-sandbox/sbx/secrets,target=/run/secrets,readonly')
  })

  it('has none of it without the App', () => {
    expect(planGhapp(ws, DEFAULTS.github, 'sbx', {})).toBeUndefined()
    const spec = buildSpec(ws, DEFAULTS, {protectedPaths: []})
    expect(spec.mounts.map((m) => m.target)).not.toContain('/run/secrets')
    expect(spec.env.map((e) => e.name)).not.toContain('GIT_ASKPASS')
    expect(spec.labels['dev.agent-sandbox.ghapp']).toBeUndefined()
  })

  it('gives the token to the uid node runs as', () => {
    expect(tokenOwner(describeWorkspace('/w', 1234, 1300))).toEqual({uid: 1234, gid: 1300})
    expect(tokenOwner(describeWorkspace('/w', 0, 0))).toEqual({uid: 1000, gid: 1000})
  })
})

describe('init --clone helpers', () => {
  it('refuses a non-empty target or a missing parent', () => {
    const root = mkdtempSync(join(tmpdir(), 'ghclone-'))
    try {
      expect(() => checkCloneTarget(join(root, 'new'))).not.toThrow()
      mkdirSync(join(root, 'empty'))
      expect(() => checkCloneTarget(join(root, 'empty'))).not.toThrow()
      writeFileSync(join(root, 'file'), '')
      expect(thrown(() => checkCloneTarget(join(root, 'file'))).message).toMatch(/not a directory/)
      mkdirSync(join(root, 'full'))
      writeFileSync(join(root, 'full', 'x'), '')
      expect(thrown(() => checkCloneTarget(join(root, 'full'))).message).toMatch(/already exists and is not empty/)
      expect(thrown(() => checkCloneTarget(join(root, 'no', 'such'))).message).toMatch(/does not exist/)
    } finally {
      rmSync(root, {recursive: true, force: true})
    }
  })

  it('quotes the helper path in the temporary askpass script', () => {
    expect(askpassScript("/opt/it's here/git-askpass-ghapp.sh")).toContain(`exec bash '/opt/it'\\''s here/git-askpass-ghapp.sh' "$@"`)
  })
})

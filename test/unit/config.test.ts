import {mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterEach, beforeEach, describe, expect, it} from 'vitest'
import {ConfigError} from '../../src/lib/errors.js'
import {envLayer, mergeLayers, parseConfigText, readConfigFile, userConfigPath, workspaceConfigPath, type Source} from '../../src/lib/config/layers.js'
import {loadSettings} from '../../src/lib/config/load.js'
import {checkConfigFile, DEFAULTS, type ConfigFile} from '../../src/lib/config/schema.js'

const FILE = '/ws/.agent-sandbox/config.json'

function configError(fn: () => unknown): ConfigError {
  try {
    fn()
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError)
    return error as ConfigError
  }
  throw new Error('expected a ConfigError')
}

describe('parseConfigText', () => {
  it('accepts a valid file', () => {
    const text = JSON.stringify({
      $schema: 'https://example.com/schema.json',
      baseTag: '2026-01-01',
      protectedPaths: ['secrets/', '.env'],
      env: {FOO: 'bar'},
      secretEnv: ['GITHUB_TOKEN'],
      ports: ['3000', '8080:3000', '127.0.0.1:8080:3000/udp', '[::1]:8080:3000'],
      allowDomains: ['example.com', '*.npmjs.org'],
      network: 'open',
      dockerNetwork: 'my-net',
      limits: {memory: '4g', cpus: 1.5, pids: 512},
      sharedAgentConfig: false,
    })
    expect(parseConfigText(text, FILE)).toMatchObject({baseTag: '2026-01-01', limits: {cpus: 1.5}, network: 'open'})
    expect(parseConfigText('{}', FILE)).toEqual({})
  })

  it('names the file on malformed JSON', () => {
    const error = configError(() => parseConfigText('{"network": "open",}', FILE))
    expect(error.message).toContain(FILE)
    expect(error.message).toMatch(/not valid JSON/)
    expect(error.hint).toBeTruthy()
    expect(error.exitCode).toBe(2)
  })

  it.each([
    [{limits: {cpus: '2'}}, 'limits.cpus'],
    [{limits: {pids: 3}}, 'limits.pids'],
    [{limits: {memory: 'lots'}}, 'limits.memory'],
    [{network: 'wide'}, 'network'],
    [{sharedAgentConfig: 'yes'}, 'sharedAgentConfig'],
    [{env: {'BAD-NAME': 'x'}}, 'env.BAD-NAME'],
    [{env: {OK: 1}}, 'env.OK'],
    [{allowDomains: ['example.com', 'not a domain']}, 'allowDomains.1'],
    [{allowDomains: ['http://example.com']}, 'allowDomains.0'],
    [{ports: ['3000', 'eighty']}, 'ports.1'],
    [{ports: ['3000:']}, 'ports.0'],
    [{protectedPaths: ['../outside']}, 'protectedPaths.0'],
    [{protectedPaths: ['a/../../b']}, 'protectedPaths.0'],
    [{protectedPaths: ['/etc/passwd']}, 'protectedPaths.0'],
    [{baseTag: 'bad tag'}, 'baseTag'],
    [{limits: []}, 'limits'],
    [{env: ['A']}, 'env'],
    [[1], '(top level)'],
    [null, '(top level)'],
    [{httpRules: [{methods: ['GET']}]}, 'httpRules.0.host'],
    [{secretEnv: [{name: 'X', hosts: ['a b']}]}, 'secretEnv.0.hosts.0'],
  ])('names the file and field for %j', (value, field) => {
    const error = configError(() => parseConfigText(JSON.stringify(value), FILE))
    expect(error.message).toContain(FILE)
    expect(error.message).toContain(`field "${field}"`)
  })

  it('names an unknown field', () => {
    const error = configError(() => parseConfigText(JSON.stringify({netwrok: 'open'}), FILE))
    expect(error.message).toContain(FILE)
    expect(error.message).toMatch(/unknown field "netwrok"/)
    const nested = configError(() => parseConfigText(JSON.stringify({limits: {cpu: 1}}), FILE))
    expect(nested.message).toMatch(/field "limits".*unknown field "cpu"/)
  })

  it('says what a value of the wrong type or a missing one should be, in one line', () => {
    const message = (value: unknown) => configError(() => parseConfigText(JSON.stringify(value), FILE)).message
    expect(message({limits: {cpus: '2'}})).toBe(`${FILE}: field "limits.cpus": must be a number, not "2"`)
    expect(message({network: 'wide'})).toBe(`${FILE}: field "network": must be one of "firewall", "none", "open", not "wide"`)
    expect(message({sharedAgentConfig: null})).toBe(`${FILE}: field "sharedAgentConfig": must be true or false, not null`)
    expect(message({github: {appId: true}})).toBe(`${FILE}: field "github.appId": must be a number or a string, not true`)
    expect(message({limits: []})).toBe(`${FILE}: field "limits": must be an object, not a list`)
    expect(message({httpRules: [{methods: ['GET']}]})).toBe(`${FILE}: field "httpRules.0.host": is required`)
    expect(message({secretEnv: [{name: 'X'}]})).toBe(`${FILE}: field "secretEnv.0.hosts": is required`)
    expect(message({secretEnv: [{name: 'X', hosts: ['x.com'], extra: 1}]})).toBe(`${FILE}: field "secretEnv.0": unknown field "extra"`)
    expect(message({secretEnv: [1]})).toMatch(/field "secretEnv\.0": must be a variable name, or \{"name"/)
    expect(message({github: {appId: [1]}})).toBe(`${FILE}: field "github.appId": must be a number or a string, not a list`)
    expect(message({limits: {pids: 1.5}})).toBe(`${FILE}: field "limits.pids": must be a whole number`)
  })

  it('refuses an env name it could not keep, rather than dropping it', () => {
    for (const name of ['__proto__', 'constructor', 'prototype']) {
      expect(configError(() => parseConfigText(`{"env": {"A": "1", "${name}": "x"}}`, FILE)).message).toContain('field "env": must not name __proto__, constructor or prototype')
    }
    expect(parseConfigText('{"env": {"A": "1", "Constructor": "x"}}', FILE)).toEqual({env: {A: '1', Constructor: 'x'}})
  })

  it('judges a URL the same on the first check and the ten-thousandth (node 20\'s URL.canParse does not, once optimised)', () => {
    const verdicts = new Set<string>()
    for (let i = 0; i < 10_000; i++) {
      verdicts.add(`${checkConfigFile({github: {apiUrl: 'https://bücher.example'}}).success} ${checkConfigFile({github: {apiUrl: 'https://\u00c3\u0080.com'}}).success}`)
    }
    expect([...verdicts]).toEqual(['true false'])
  })

  it('keeps what a file holds: no field it did not have, methods upper-cased', () => {
    expect(parseConfigText('{"limits": {"cpus": 2}}', FILE)).toEqual({limits: {cpus: 2}})
    expect(parseConfigText('{"httpRules": [{"host": "api.example.com", "methods": ["get"]}]}', FILE)).toEqual({httpRules: [{host: 'api.example.com', methods: ['GET']}]})
  })

  it('explains what a bad value should look like', () => {
    expect(configError(() => parseConfigText('{"allowDomains":["a b"]}', FILE)).message).toMatch(/host name/)
    expect(configError(() => parseConfigText('{"ports":["x"]}', FILE)).message).toMatch(/8080:3000/)
    expect(configError(() => parseConfigText('{"protectedPaths":[".."]}', FILE)).message).toMatch(/without "\.\."/)
  })
})

describe('envLayer', () => {
  it('reads AGENT_SANDBOX_* variables', () => {
    expect(
      envLayer({
        AGENT_SANDBOX_BASE_TAG: 'v2',
        AGENT_SANDBOX_NETWORK: 'none',
        AGENT_SANDBOX_DOCKER_NETWORK: 'corp',
        AGENT_SANDBOX_ALLOW_DOMAINS: 'a.com, b.com  c.com',
        AGENT_SANDBOX_PROTECTED_PATHS: 'x,y',
        AGENT_SANDBOX_MEMORY: '2g',
        AGENT_SANDBOX_CPUS: '2.5',
        AGENT_SANDBOX_PIDS_LIMIT: '256',
        AGENT_SANDBOX_SHARED_AGENT_CONFIG: 'false',
        UNRELATED: 'x',
      }),
    ).toEqual({
      baseTag: 'v2',
      network: 'none',
      dockerNetwork: 'corp',
      allowDomains: ['a.com', 'b.com', 'c.com'],
      protectedPaths: ['x', 'y'],
      limits: {memory: '2g', cpus: 2.5, pids: 256},
      sharedAgentConfig: false,
    })
  })

  it('is empty without variables', () => {
    expect(envLayer({})).toEqual({})
  })

  it('parses booleans', () => {
    for (const off of ['0', 'false', 'NO']) expect(envLayer({AGENT_SANDBOX_SHARED_AGENT_CONFIG: off}).sharedAgentConfig).toBe(false)
    for (const on of ['1', 'true', 'yes']) expect(envLayer({AGENT_SANDBOX_SHARED_AGENT_CONFIG: on}).sharedAgentConfig).toBe(true)
    expect(envLayer({AGENT_SANDBOX_PROTECT_HOOK_CONFIG: 'false'}).protectHookConfig).toBe(false)
    expect(envLayer({AGENT_SANDBOX_PROTECT_HOOK_CONFIG: '1'}).protectHookConfig).toBe(true)
    expect(mergeLayers([['workspace', {protectHookConfig: false}]]).settings.protectHookConfig).toBe(false)
    expect(mergeLayers([]).settings.protectHookConfig).toBe(true)
  })

  it.each([
    [{AGENT_SANDBOX_CPUS: 'two'}, 'limits.cpus'],
    [{AGENT_SANDBOX_PIDS_LIMIT: '1.5'}, 'limits.pids'],
    [{AGENT_SANDBOX_MEMORY: '4 gigs'}, 'limits.memory'],
    [{AGENT_SANDBOX_NETWORK: 'wide'}, 'network'],
    [{AGENT_SANDBOX_ALLOW_DOMAINS: 'ok.com,bad_domain!'}, 'allowDomains.1'],
  ])('rejects %j with a ConfigError naming the environment', (env, field) => {
    const error = configError(() => envLayer(env))
    expect(error.message).toContain('AGENT_SANDBOX_')
    expect(error.message).toContain(`field "${field}"`)
  })
})

describe('mergeLayers', () => {
  const layers = (user?: ConfigFile, workspace?: ConfigFile, env?: ConfigFile, flag?: ConfigFile): Array<[Source, ConfigFile | undefined]> => [
    ['default', DEFAULTS],
    ['user', user],
    ['workspace', workspace],
    ['env', env],
    ['flag', flag],
  ]

  it('returns the defaults without layers', () => {
    const {settings, sources} = mergeLayers(layers())
    expect(settings).toEqual(DEFAULTS)
    expect(sources.network).toEqual(['default'])
    expect(sources.allowDomains).toEqual(['default'])
  })

  it('merges httpRules per host: the npm default stays unless a layer names the registry; the highest layer naming a host wins', () => {
    expect(mergeLayers(layers()).settings.httpRules).toEqual([{host: 'registry.npmjs.org', methods: ['GET', 'HEAD']}])
    const added = mergeLayers(layers({httpRules: [{host: 'api.example.com', paths: ['/v1/*']}]}))
    expect(added.settings.httpRules).toEqual([{host: 'registry.npmjs.org', methods: ['GET', 'HEAD']}, {host: 'api.example.com', paths: ['/v1/*']}])
    expect(added.sources.httpRules).toEqual(['user'])
    const lifted = mergeLayers(layers({httpRules: [{host: 'registry.npmjs.org'}]}, {httpRules: [{host: 'api.example.com', methods: ['GET']}]}))
    expect(lifted.settings.httpRules).toEqual([{host: 'registry.npmjs.org'}, {host: 'api.example.com', methods: ['GET']}])
    expect(lifted.sources.httpRules).toEqual(['user', 'workspace'])
  })

  it('reads httpRules methods upper-cased, and refuses a path glob not starting with / and an empty list, naming the field', () => {
    expect(parseConfigText(JSON.stringify({httpRules: [{host: 'a.example', methods: ['get']}]}), FILE).httpRules).toEqual([{host: 'a.example', methods: ['GET']}])
    expect(configError(() => parseConfigText(JSON.stringify({httpRules: [{host: 'a.example', paths: ['v1/*']}]}), FILE)).message).toContain('httpRules')
    expect(configError(() => parseConfigText(JSON.stringify({httpRules: [{host: 'a.example', methods: []}]}), FILE)).message).toContain('httpRules')
    expect(configError(() => parseConfigText(JSON.stringify({httpRules: [{host: 'a.example', verbs: ['GET']}]}), FILE)).message).toContain('httpRules')
  })

  it('merges secretEnv by name: a higher layer masks (or unmasks) a lower layer\'s entry; the string form is still read', () => {
    const merged = mergeLayers(layers({secretEnv: ['A_TOKEN', 'B_TOKEN']}, {secretEnv: [{name: 'A_TOKEN', hosts: ['api.example.com']}]}))
    expect(merged.settings.secretEnv).toEqual(['B_TOKEN', {name: 'A_TOKEN', hosts: ['api.example.com']}])
    expect(parseConfigText(JSON.stringify({secretEnv: ['X', {name: 'Y', hosts: ['*.example.com']}]}), FILE).secretEnv).toEqual(['X', {name: 'Y', hosts: ['*.example.com']}])
    expect(configError(() => parseConfigText(JSON.stringify({secretEnv: [{name: 'Y', hosts: []}]}), FILE)).message).toContain('secretEnv')
    expect(configError(() => parseConfigText(JSON.stringify({secretEnv: [{name: 'Y'}]}), FILE)).message).toContain('secretEnv')
  })

  it('takes scalars from the highest layer: flag > env > workspace > user > default', () => {
    const all = mergeLayers(layers({network: 'open', baseTag: 'u'}, {network: 'none', baseTag: 'w'}, {network: 'firewall', baseTag: 'e'}, {network: 'open', baseTag: 'f'}))
    expect(all.settings.baseTag).toBe('f')
    expect(all.sources.baseTag).toEqual(['flag'])
    const noFlag = mergeLayers(layers({baseTag: 'u'}, {baseTag: 'w'}, {baseTag: 'e'}))
    expect(noFlag.settings.baseTag).toBe('e')
    expect(noFlag.sources.baseTag).toEqual(['env'])
    const noEnv = mergeLayers(layers({baseTag: 'u', network: 'open'}, {baseTag: 'w'}))
    expect(noEnv.settings.baseTag).toBe('w')
    expect(noEnv.sources.baseTag).toEqual(['workspace'])
    expect(noEnv.settings.network).toBe('open')
    expect(noEnv.sources.network).toEqual(['user'])
    expect(noEnv.settings.dockerNetwork).toBe('bridge')
    expect(noEnv.sources.dockerNetwork).toEqual(['default'])
  })

  it('keeps false booleans from a higher layer', () => {
    const {settings, sources} = mergeLayers(layers({sharedAgentConfig: true}, {sharedAgentConfig: false}))
    expect(settings.sharedAgentConfig).toBe(false)
    expect(sources.sharedAgentConfig).toEqual(['workspace'])
  })

  it('concatenates and de-duplicates lists, recording every layer that added', () => {
    const {settings, sources} = mergeLayers(
      layers({allowDomains: ['a.com', 'b.com']}, {allowDomains: ['b.com', 'c.com'], ports: ['3000']}, undefined, {allowDomains: ['a.com', 'd.com']}),
    )
    expect(settings.allowDomains).toEqual(['a.com', 'b.com', 'c.com', 'd.com'])
    expect(sources.allowDomains).toEqual(['user', 'workspace', 'flag'])
    expect(settings.ports).toEqual(['3000'])
    expect(sources.ports).toEqual(['workspace'])
    expect(sources.secretEnv).toEqual(['default'])
  })

  it('merges env maps and limits key by key, higher layers winning', () => {
    const {settings, sources} = mergeLayers(
      layers({env: {A: 'user', B: 'user'}, limits: {memory: '1g', cpus: 1}}, {env: {B: 'ws', C: 'ws'}}, {limits: {cpus: 4}}),
    )
    expect(settings.env).toEqual({A: 'user', B: 'ws', C: 'ws'})
    expect(sources.env).toEqual(['user', 'workspace'])
    expect(settings.limits).toEqual({memory: '1g', cpus: 4})
    expect(sources.limits).toEqual(['user', 'env'])
  })

  it('does not mutate DEFAULTS', () => {
    const before = structuredClone(DEFAULTS)
    mergeLayers(layers({allowDomains: ['x.com'], env: {A: '1'}, limits: {cpus: 2}}))
    expect(DEFAULTS).toEqual(before)
  })
})

describe('loadSettings', () => {
  let home: string
  let ws: string
  beforeEach(() => {
    home = mkdtempSync(join(tmpdir(), 'agent-sandbox-home-'))
    ws = mkdtempSync(join(tmpdir(), 'agent-sandbox-ws-'))
  })
  afterEach(() => {
    rmSync(home, {recursive: true, force: true})
    rmSync(ws, {recursive: true, force: true})
  })

  const write = (path: string, value: unknown) => {
    mkdirSync(join(path, '..'), {recursive: true})
    writeFileSync(path, typeof value === 'string' ? value : JSON.stringify(value))
  }

  it('finds the user file under HOME/.config or XDG_CONFIG_HOME', () => {
    expect(userConfigPath({HOME: home})).toBe(join(home, '.config', 'agent-sandbox', 'config.json'))
    expect(userConfigPath({HOME: home, XDG_CONFIG_HOME: join(home, 'xdg')})).toBe(join(home, 'xdg', 'agent-sandbox', 'config.json'))
    expect(workspaceConfigPath(ws)).toBe(join(ws, '.agent-sandbox', 'config.json'))
  })

  it('layers user, workspace, env and flags', () => {
    // The workspace adds a domain (widening): the user's trustedPaths approves it.
    write(join(home, '.config', 'agent-sandbox', 'config.json'), {allowDomains: ['user.com'], network: 'open', limits: {memory: '1g'}, env: {U: '1'}, trustedPaths: [ws]})
    write(join(ws, '.agent-sandbox', 'config.json'), {allowDomains: ['ws.com'], baseTag: 'ws-tag', env: {W: '2'}})
    const loaded = loadSettings({
      workspacePath: ws,
      env: {HOME: home, AGENT_SANDBOX_CPUS: '3', AGENT_SANDBOX_BASE_TAG: 'env-tag'},
      flags: {network: 'none'},
    })
    expect(loaded.files).toEqual({workspace: join(ws, '.agent-sandbox', 'config.json'), user: join(home, '.config', 'agent-sandbox', 'config.json')})
    expect(loaded.settings).toMatchObject({
      allowDomains: ['user.com', 'ws.com'],
      network: 'none',
      baseTag: 'env-tag',
      limits: {memory: '1g', cpus: 3},
      env: {U: '1', W: '2'},
      dockerNetwork: 'bridge',
    })
    expect(loaded.sources.network).toEqual(['flag'])
    expect(loaded.sources.baseTag).toEqual(['env'])
    expect(loaded.sources.allowDomains).toEqual(['user', 'workspace (trusted)'])
  })

  it('prefers XDG_CONFIG_HOME over HOME', () => {
    write(join(home, '.config', 'agent-sandbox', 'config.json'), {baseTag: 'home'})
    write(join(home, 'xdg', 'agent-sandbox', 'config.json'), {baseTag: 'xdg'})
    expect(loadSettings({env: {HOME: home, XDG_CONFIG_HOME: join(home, 'xdg')}}).settings.baseTag).toBe('xdg')
  })

  it('treats missing files as empty layers', () => {
    const loaded = loadSettings({workspacePath: ws, env: {HOME: home}})
    expect(loaded.settings).toEqual(DEFAULTS)
    expect(readConfigFile(join(ws, 'nope.json'))).toBeUndefined()
  })

  it('reports a broken workspace file by path', () => {
    const path = join(ws, '.agent-sandbox', 'config.json')
    write(path, '{"limits": {"cpus": "lots"}}')
    const error = configError(() => loadSettings({workspacePath: ws, env: {HOME: home}}))
    expect(error.message).toContain(path)
    expect(error.message).toContain('limits.cpus')
  })

  it('reports a config path that is not a regular file (a directory) as a ConfigError', () => {
    mkdirSync(join(ws, '.agent-sandbox', 'config.json'), {recursive: true})
    expect(configError(() => loadSettings({workspacePath: ws, env: {HOME: home}})).message).toMatch(/config\.json is a directory: agent-sandbox reads only regular files/)
  })
})

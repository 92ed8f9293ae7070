/**
 * A repository's own .agent-sandbox/ is untrusted input. Against the
 * real engine and the built CLI: every command that would apply a widening
 * setting from an untrusted (or changed) workspace file refuses with exit 2
 * before creating anything or reading a secret; `trust` approves the exact
 * bytes; a narrowing-only file applies untrusted; `init --clone` of a stand-in
 * GitHub repository that ships a hostile .agent-sandbox/ keeps it untrusted;
 * a merge on the host that widens the config is refused at the next start.
 *
 * Every CLI call here has its own trust store (XDG_STATE_HOME) and user config
 * (XDG_CONFIG_HOME) under the test's directory.
 */
import {generateKeyPairSync} from 'node:crypto'
import {chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {cleanupUnder, cli, docker, makeWorkspace, REPO, run, TEST_GID, TEST_ROOT, TEST_UID, type Result} from './helpers.js'

const SECRET_NAME = 'TRUST_IT_SECRET'
const SECRET = `s3cr3t-${Math.random().toString(36).slice(2)}-value`

let dir: string
let env: Record<string, string>
let ws: string
const outputs: string[] = []

async function sbx(args: string[], extra: Record<string, string> = {}): Promise<Result> {
  const r = await cli(args, {env: {...env, ...extra}})
  outputs.push(r.stdout, r.stderr)
  return r
}

function writeConfig(path: string, config: unknown): void {
  writeFileSync(join(path, '.agent-sandbox', 'config.json'), `${JSON.stringify(config, null, 2)}\n`)
  chownSync(join(path, '.agent-sandbox', 'config.json'), TEST_UID, TEST_GID)
}

function storeFile(): string {
  return join(env.XDG_STATE_HOME, 'agent-sandbox', 'trust.json')
}

/** Containers and volumes labelled with the workspace. */
async function createdFor(path: string): Promise<string> {
  const ps = await docker('ps', '-a', '--filter', `label=dev.agent-sandbox.workspace=${path}`, '--format', '{{.Names}}')
  const vols = await docker('volume', 'ls', '--filter', `label=dev.agent-sandbox.workspace=${path}`, '--format', '{{.Name}}')
  return `${ps.stdout}${vols.stdout}`.trim()
}

async function imageId(path: string): Promise<string> {
  const r = await docker('images', '--filter', `label=dev.agent-sandbox.workspace=${path}`, '--format', '{{.ID}}')
  return r.stdout.trim()
}

/** Run host git as the workspace's owner, as its user would. */
function userGit(path: string, ...args: string[]): Promise<Result> {
  return run('setpriv', ['--reuid', String(TEST_UID), '--regid', String(TEST_GID), '--clear-groups', 'git', '-C', path, '-c', 'user.name=Owner', '-c', 'user.email=owner@example.invalid', ...args], {
    env: {HOME: join(dir, 'owner-home'), PATH: process.env.PATH ?? '/usr/bin:/bin'},
  })
}

beforeAll(async () => {
  mkdirSync(TEST_ROOT, {recursive: true})
  dir = mkdtempSync(join(TEST_ROOT, 'trust-'))
  mkdirSync(join(dir, 'owner-home'))
  chownSync(join(dir, 'owner-home'), TEST_UID, TEST_GID)
  env = {XDG_STATE_HOME: join(dir, 'state'), XDG_CONFIG_HOME: join(dir, 'config'), [SECRET_NAME]: SECRET}
  ws = await makeWorkspace('repo')
  const init = await sbx(['init', ws])
  expect(init.exitCode, init.stderr).toBe(0)
})

afterAll(async () => {
  await cleanupUnder(TEST_ROOT)
  if (dir) rmSync(dir, {recursive: true, force: true})
})

describe('an untrusted workspace file', () => {
  // One entry per widening key: the file, and what the refusal must name.
  const widening: Array<[string, Record<string, unknown>, string]> = [
    ['network open', {network: 'open'}, 'network'],
    ['dockerNetwork', {dockerNetwork: 'trust-it-net'}, 'dockerNetwork'],
    ['secretEnv', {secretEnv: [SECRET_NAME]}, 'secretEnv'],
    ['allowDomains', {allowDomains: ['attacker.example']}, 'allowDomains'],
    ['ports beyond loopback', {ports: ['0.0.0.0:18080:3000']}, 'ports'],
    ['env NODE_OPTIONS', {env: {NODE_OPTIONS: '--require /workspace/x.js'}}, 'env.NODE_OPTIONS'],
    ['env LD_PRELOAD', {env: {LD_PRELOAD: '/workspace/x.so'}}, 'env.LD_PRELOAD'],
    ['env AGENT_SANDBOX_NETWORK', {env: {AGENT_SANDBOX_NETWORK: 'open'}}, 'env.AGENT_SANDBOX_NETWORK'],
    // root's curl in init-firewall.sh read $CURL_HOME/.curlrc (its output= overwrote a root script)
    ['env CURL_HOME', {env: {CURL_HOME: '/workspace/repo'}}, 'env.CURL_HOME'],
    ['env http_proxy', {env: {http_proxy: 'http://attacker.example:3128'}}, 'env.http_proxy'],
    ['sharedAgentConfig', {sharedAgentConfig: false}, 'sharedAgentConfig'],
    ['selinuxRelabel off', {selinuxRelabel: 'off'}, 'selinuxRelabel'],
    ['protectHookConfig false', {protectHookConfig: false}, 'protectHookConfig'],
    ['nestedContainers', {nestedContainers: true}, 'nestedContainers'],
    ['registries', {registries: ['docker.io']}, 'registries'],
    // httpRules restrict: replacing the default npm rule (read-only) with one that restricts nothing loosens it
    ['httpRules lifting the npm rule', {httpRules: [{host: 'registry.npmjs.org'}]}, 'httpRules.registry.npmjs.org'],
    ['httpRules adding a method to the npm rule', {httpRules: [{host: 'registry.npmjs.org', methods: ['GET', 'HEAD', 'PUT']}]}, 'httpRules.registry.npmjs.org'],
  ]
  const commands: Array<[string, string[]]> = [
    ['start', ['start']],
    ['run', ['run', '--', 'true']],
    ['exec', ['exec', '--', 'true']],
    ['shell', ['shell']],
    ['show-run', ['show-run']],
  ]

  it.each(widening)('%s: start, run, exec, shell and show-run refuse with exit 2 naming it; nothing is created', async (_name, config, key) => {
    writeConfig(ws, config)
    for (const [name, args] of commands) {
      const [command, ...rest] = args
      const r = await sbx([command, ws, ...rest])
      expect(r.exitCode, `${name}: ${r.stderr}`).toBe(2)
      expect(r.stderr, name).toContain(`${key} (`)
      expect(r.stderr, name).toContain(`agent-sandbox trust ${ws}`)
      expect(r.stderr.trim().split('\n'), name).toHaveLength(1)
    }
    expect(await createdFor(ws)).toBe('')
  })

  it('a limit above the user one is refused; below it applies', async () => {
    mkdirSync(join(env.XDG_CONFIG_HOME, 'agent-sandbox'), {recursive: true})
    writeFileSync(join(env.XDG_CONFIG_HOME, 'agent-sandbox', 'config.json'), JSON.stringify({limits: {memory: '1g'}}))
    try {
      writeConfig(ws, {limits: {memory: '2g'}})
      const up = await sbx(['show-run', ws])
      expect(up.exitCode).toBe(2)
      expect(up.stderr).toContain('limits.memory ("1g" -> "2g")')
      writeConfig(ws, {limits: {memory: '512m'}})
      const down = await sbx(['show-run', ws])
      expect(down.exitCode, down.stderr).toBe(0)
      expect(down.stdout).toContain(`--memory ${512 * 1024 * 1024}b`)
    } finally {
      rmSync(join(env.XDG_CONFIG_HOME, 'agent-sandbox', 'config.json'))
    }
  })

  it('no secret was read from the host environment, and none printed', () => {
    expect(outputs.join('\n')).not.toContain(SECRET)
  })

  it('a changed Dockerfile is not built (its steps would run with an open network); the image is unchanged', async () => {
    writeConfig(ws, {})
    const before = await imageId(ws)
    expect(before).not.toBe('')
    const dockerfile = join(ws, '.agent-sandbox', 'Dockerfile')
    const template = readFileSync(dockerfile, 'utf8')
    writeFileSync(dockerfile, `${template}RUN echo trust-it-build-step > /tmp/built\n`)
    try {
      const r = await sbx(['build', ws])
      expect(r.exitCode, r.stderr).toBe(2)
      // init approved the template it wrote: this is a change to approved bytes.
      expect(r.stderr).toContain('.agent-sandbox/Dockerfile changed since you trusted it (Dockerfile): its build steps run on your engine with an open network')
      expect(r.stderr).toContain(`agent-sandbox trust ${ws}`)
      expect(r.stdout + r.stderr).not.toContain('trust-it-build-step')
    } finally {
      writeFileSync(dockerfile, template)
    }
    expect(await imageId(ws)).toBe(before)
  })

  // A linked Dockerfile was recorded as no Dockerfile at all: `build` ran its RUN step unapproved.
  it.each(['Dockerfile', 'config.json'])('a linked .agent-sandbox/%s is refused with exit 2, one line naming it and the fix; nothing is built', async (name) => {
    writeConfig(ws, {})
    const before = await imageId(ws)
    const file = join(ws, '.agent-sandbox', name)
    const real = join(ws, '.agent-sandbox', `${name}.real`)
    const original = readFileSync(file)
    writeFileSync(real, name === 'Dockerfile' ? `${original.toString()}RUN echo trust-it-linked-step > /tmp/built\n` : JSON.stringify({network: 'open'}))
    rmSync(file)
    symlinkSync(`${name}.real`, file)
    try {
      for (const args of [['build', ws], ['show-run', ws], ['start', ws]]) {
        const r = await sbx(args)
        expect(r.exitCode, `${args[0]}: ${r.stderr}`).toBe(2)
        expect(r.stderr.trim().split('\n'), args[0]).toHaveLength(1)
        expect(r.stderr, args[0]).toContain(`${file} is a symbolic link: agent-sandbox reads only regular files in .agent-sandbox/`)
        expect(r.stderr, args[0]).toContain('replace the link with a copy of the file it points to')
        expect(r.stdout + r.stderr).not.toContain('trust-it-linked-step')
      }
      const trust = await sbx(['trust', ws, '--yes'])
      expect(trust.exitCode).toBe(2)
      expect(trust.stderr).toContain(`${file} is a symbolic link`)
    } finally {
      rmSync(file)
      rmSync(real)
      writeFileSync(file, original)
      chownSync(file, TEST_UID, TEST_GID)
    }
    expect(await imageId(ws)).toBe(before)
    expect(await createdFor(ws)).toBe('')
  })

  // {"memory":"0","cpus":1e-10} under the user's 2g and 2 CPUs once created Memory=0 NanoCpus=0: no limits.
  it("limits the engine would read as none are a config error naming the field; they never remove the user's", async () => {
    mkdirSync(join(env.XDG_CONFIG_HOME, 'agent-sandbox'), {recursive: true})
    writeFileSync(join(env.XDG_CONFIG_HOME, 'agent-sandbox', 'config.json'), JSON.stringify({limits: {memory: '2g', cpus: 2}}))
    try {
      for (const [limits, field] of [[{memory: '0', cpus: 1}, 'limits.memory'], [{memory: '1g', cpus: 1e-10}, 'limits.cpus']] as const) {
        writeConfig(ws, {limits})
        for (const command of ['show-run', 'start']) {
          const r = await sbx([command, ws])
          expect(r.exitCode, `${command}: ${r.stderr}`).toBe(2)
          expect(r.stderr).toContain(`field "${field}": must be at least`)
          expect(r.stderr.trim().split('\n')).toHaveLength(1)
        }
      }
      expect(await createdFor(ws)).toBe('')
      writeConfig(ws, {limits: {memory: '1g', cpus: 1}})
      const down = await sbx(['show-run', ws])
      expect(down.exitCode, down.stderr).toBe(0)
      expect(down.stdout).toContain(`--memory ${1024 ** 3}b`)
      expect(down.stdout).toMatch(/--cpus 1(\s|$)/)
    } finally {
      rmSync(join(env.XDG_CONFIG_HOME, 'agent-sandbox', 'config.json'))
    }
  })

  it('config reports (exit 0) what is refused, as text and as JSON', async () => {
    writeConfig(ws, {allowDomains: ['attacker.example'], limits: {pids: 256}})
    const text = await sbx(['config', ws])
    expect(text.exitCode, text.stderr).toBe(0)
    expect(text.stdout).toMatch(/allowDomains\s+\["attacker.example"\]\s+\(workspace \(untrusted: refused\)\)/)
    expect(text.stdout).toMatch(/limits\s+\{"pids":256\}\s+\(workspace \(untrusted\)\)/)
    expect(text.stdout).toContain(`refused until you trust it (agent-sandbox trust ${ws})`)
    const json = await sbx(['config', ws, '--json'])
    expect(json.exitCode, json.stderr).toBe(0)
    const parsed = JSON.parse(json.stdout)
    expect(parsed.sources.allowDomains).toEqual(['workspace (untrusted: refused)'])
    expect(parsed.sources.limits).toEqual(['workspace (untrusted)'])
    expect(parsed.workspaceTrust).toMatchObject({state: 'untrusted', refused: [{key: 'allowDomains', widens: true}]})
  })

  it('a narrowing-only file applies without trust', async () => {
    writeConfig(ws, {network: 'none', limits: {pids: 256}, protectedPaths: ['private'], env: {TRUST_IT_PLAIN: 'yes'}, baseTag: 'latest'})
    const r = await sbx(['show-run', ws])
    expect(r.exitCode, r.stderr).toBe(0)
    expect(r.stdout).toContain('--network none')
    expect(r.stdout).toContain('--pids-limit 256')
    expect(r.stdout).toContain(`target=/workspace/repo/private,readonly`)
    expect(r.stdout).toContain('TRUST_IT_PLAIN=yes')
  })

  it('httpRules for a host nothing restricts narrow: they apply without trust, next to the default npm rule', async () => {
    writeConfig(ws, {httpRules: [{host: 'api.trust-it.example', methods: ['GET']}]})
    const r = await sbx(['show-run', ws])
    expect(r.exitCode, r.stderr).toBe(0)
    const rules = /AGENT_SANDBOX_GATEWAY_RULES=(\[[^']*\])/.exec(r.stdout)?.[1] ?? '[]'
    expect(JSON.parse(rules)).toEqual([
      {host: 'registry.npmjs.org', methods: ['GET', 'HEAD']},
      {host: 'api.trust-it.example', methods: ['GET']},
    ])
  })
})

describe('trust', () => {
  it('asks for --yes without a terminal, records nothing', async () => {
    writeConfig(ws, {allowDomains: ['trust-it.example']})
    const r = await sbx(['trust', ws])
    expect(r.exitCode).toBe(2)
    expect(r.stderr).toContain('--yes')
    expect(r.stdout).toContain('widens   allowDomains: + trust-it.example')
    expect(existsSync(storeFile()) && JSON.parse(readFileSync(storeFile(), 'utf8')).workspaces[ws]?.by === 'trust').toBe(false)
  })

  it('--yes approves: the settings apply (show-run, start); the store is 0600 in a 0700 directory, replaced by rename', async () => {
    const inodeBefore = statSync(storeFile()).ino // init recorded its own files
    const r = await sbx(['trust', ws, '--yes'])
    expect(r.exitCode, r.stderr).toBe(0)
    expect(r.stdout).toContain(`trusted ${ws}`)
    expect(statSync(storeFile()).mode & 0o777).toBe(0o600)
    expect(statSync(join(storeFile(), '..')).mode & 0o777).toBe(0o700)
    expect(statSync(storeFile()).ino).not.toBe(inodeBefore)
    // no temporary file left beside the store (the gateways' CAs have a directory of their own there)
    expect(readdirSync(join(storeFile(), '..')).filter((f) => f !== 'gateway-ca')).toEqual(['trust.json'])
    const show = await sbx(['show-run', ws])
    expect(show.exitCode, show.stderr).toBe(0)
    expect(show.stdout).toMatch(/AGENT_SANDBOX_ALLOW_DOMAINS=\S*trust-it\.example/)
    const start = await sbx(['start', ws])
    expect(start.exitCode, start.stderr).toBe(0)
    const conf = await sbx(['config', ws, '--json'])
    expect(JSON.parse(conf.stdout).sources.allowDomains).toEqual(['workspace (trusted)'])
  })

  it('one changed byte is refused again, even with the sandbox running; --list shows it changed', async () => {
    const path = join(ws, '.agent-sandbox', 'config.json')
    writeFileSync(path, readFileSync(path, 'utf8').replace('trust-it.example', 'trust-it.exampla'))
    const r = await sbx(['start', ws])
    expect(r.exitCode).toBe(2)
    expect(r.stderr).toContain('changed since you trusted it and now widens the sandbox: allowDomains (+ trust-it.exampla)')
    const list = await sbx(['trust', '--list', '--json'])
    expect(list.exitCode, list.stderr).toBe(0)
    expect(JSON.parse(list.stdout).workspaces).toContainEqual(expect.objectContaining({path: ws, status: 'changed', by: 'trust'}))
    await sbx(['rm', ws, '--volumes', '--yes'])
    expect(await createdFor(ws)).toBe('')
  })

  it('--revoke forgets the approval', async () => {
    await sbx(['trust', ws, '--yes'])
    expect((await sbx(['show-run', ws])).exitCode).toBe(0)
    const r = await sbx(['trust', '--revoke', ws])
    expect(r.exitCode, r.stderr).toBe(0)
    expect((await sbx(['show-run', ws])).exitCode).toBe(2)
    const list = JSON.parse((await sbx(['trust', '--list', '--json'])).stdout)
    expect(list.workspaces.map((w: {path: string}) => w.path)).not.toContain(ws)
  })

  it("trustedPaths in the user's config approves; in a workspace file it is refused", async () => {
    writeConfig(ws, {allowDomains: ['trust-it.example'], trustedPaths: ['/']})
    const own = await sbx(['show-run', ws])
    expect(own.exitCode).toBe(2)
    expect(own.stderr).toContain('"trustedPaths" is only read from the user config')
    writeConfig(ws, {allowDomains: ['trust-it.example']})
    mkdirSync(join(env.XDG_CONFIG_HOME, 'agent-sandbox'), {recursive: true})
    writeFileSync(join(env.XDG_CONFIG_HOME, 'agent-sandbox', 'config.json'), JSON.stringify({trustedPaths: [join(ws, '..', '*')]}))
    try {
      const r = await sbx(['show-run', ws])
      expect(r.exitCode, r.stderr).toBe(0)
    } finally {
      rmSync(join(env.XDG_CONFIG_HOME, 'agent-sandbox', 'config.json'))
    }
  })
})

describe('dockerNetwork host and container:', () => {
  it('are refused from a trusted file and from the environment unless network is open and --allow-host-network is given', async () => {
    writeConfig(ws, {dockerNetwork: 'host'})
    await sbx(['trust', ws, '--yes'])
    const firewall = await sbx(['show-run', ws, '--allow-host-network'])
    expect(firewall.exitCode).toBe(2)
    expect(firewall.stderr).toContain('dockerNetwork "host" is refused with network "firewall"')
    const noFlag = await sbx(['show-run', ws, '--network', 'open'])
    expect(noFlag.exitCode).toBe(2)
    expect(noFlag.stderr).toContain('--allow-host-network')
    const allowed = await sbx(['show-run', ws, '--network', 'open', '--allow-host-network'])
    expect(allowed.exitCode, allowed.stderr).toBe(0)
    expect(allowed.stdout).toContain('--network host')
    writeConfig(ws, {})
    for (const args of [['run', ws, '--', 'true'], ['exec', ws, '--', 'true'], ['start', ws]]) {
      const r = await sbx(args, {AGENT_SANDBOX_DOCKER_NETWORK: 'container:some-other-sandbox'})
      expect(r.exitCode, args[0]).toBe(2)
      expect(r.stderr).toContain('refused from any source')
    }
    expect(await createdFor(ws)).toBe('')
  })
})

describe('a merge on the host', () => {
  it('that widens the config is refused at the next start (bind and branch mode), nothing created', async () => {
    const path = await makeWorkspace('merged')
    chmodSync(join(path, '..'), 0o755) // mkdtemp's 0700 would keep the owner out
    const init = await sbx(['init', path])
    expect(init.exitCode, init.stderr).toBe(0)
    const git = async (...args: string[]) => {
      const r = await userGit(path, ...args)
      expect(r.exitCode, `git ${args.join(' ')}: ${r.stderr}`).toBe(0)
      return r
    }
    await git('add', '.agent-sandbox')
    await git('commit', '-q', '-m', 'agent-sandbox set-up')
    expect((await sbx(['show-run', path])).exitCode).toBe(0)
    await git('checkout', '-q', '-b', 'feature')
    const config = JSON.parse(readFileSync(join(path, '.agent-sandbox', 'config.json'), 'utf8'))
    writeFileSync(join(path, '.agent-sandbox', 'config.json'), `${JSON.stringify({...config, network: 'open', secretEnv: [SECRET_NAME]}, null, 2)}\n`)
    chownSync(join(path, '.agent-sandbox', 'config.json'), TEST_UID, TEST_GID)
    await git('commit', '-q', '-am', 'open the network')
    await git('checkout', '-q', 'main')
    expect((await sbx(['show-run', path])).exitCode).toBe(0)
    await git('merge', '-q', '--no-edit', 'feature')
    for (const args of [['start', path], ['start', path, '--branch', 'feature']]) {
      const r = await sbx(args)
      expect(r.exitCode, r.stderr).toBe(2)
      expect(r.stderr).toContain('changed since you trusted it and now widens the sandbox: network ("firewall" -> "open"), secretEnv')
    }
    expect(await createdFor(path)).toBe('')
    expect(outputs.join('\n')).not.toContain(SECRET)
  })
})

// init --clone of a stand-in GitHub repository that ships its own .agent-sandbox/ (fixtures/fake-github, as in github-app.test.ts).
const PREFIX = `asbx-trust-${(process.env.AGENT_SANDBOX_IT_ID ?? 'main').toLowerCase().replace(/[^a-z0-9-]/g, '-')}`
const NET = `${PREFIX}-net`
const FAKE = `${PREFIX}-gh`

describe('init --clone of a repository that ships .agent-sandbox/', () => {
  let cloneEnv: Record<string, string>
  let fakeIp: string
  const hostileConfig = `${JSON.stringify({allowDomains: ['attacker.example'], secretEnv: [SECRET_NAME]}, null, 2)}\n`

  beforeAll(async () => {
    const pair = generateKeyPairSync('rsa', {modulusLength: 2048})
    const keyDir = join(dir, 'keys')
    mkdirSync(keyDir, {mode: 0o700})
    writeFileSync(join(keyDir, 'app.pem'), pair.privateKey.export({type: 'pkcs1', format: 'pem'}).toString(), {mode: 0o600})
    await docker('rm', '-f', FAKE)
    await docker('network', 'rm', NET)
    expect((await docker('network', 'create', '--label', `dev.agent-sandbox.test=${PREFIX}`, NET)).exitCode).toBe(0)
    const started = await docker(
      'run', '--detach', '--name', FAKE, '--network', NET, '--label', `dev.agent-sandbox.test=${PREFIX}`,
      '--mount', `type=bind,source=${join(REPO, 'test', 'integration', 'fixtures', 'fake-github')},target=/fixture,readonly`,
      '--env', `FAKE_GH_PUBLIC_KEY=${pair.publicKey.export({type: 'spki', format: 'pem'}).toString()}`,
      '--env', 'FAKE_GH_APP_ID=4242', '--env', 'FAKE_GH_INSTALLATION_ID=777',
      '--entrypoint', 'node', 'agent-sandbox-base:latest', '/fixture/server.mjs',
    )
    expect(started.exitCode, started.stderr).toBe(0)
    for (let i = 0; !(await docker('logs', FAKE)).stdout.includes('listening'); i++) {
      if (i > 120) throw new Error('the stand-in GitHub did not start')
      await new Promise((r) => setTimeout(r, 500))
    }
    fakeIp = (await docker('inspect', '--format', `{{(index .NetworkSettings.Networks "${NET}").IPAddress}}`, FAKE)).stdout.trim()
    // The repository gains a hostile .agent-sandbox/: widening settings, and a build step of its own.
    const template = readFileSync(join(REPO, 'templates', 'Dockerfile'), 'utf8')
    const pushed = await docker(
      'exec', '--env', `CFG=${hostileConfig}`, '--env', `DF=${template}RUN echo hostile-build-step\n`, FAKE, 'sh', '-c',
      'set -e; w=$(mktemp -d); /usr/bin/git clone -q /srv/git/acme/widgets.git "$w"; mkdir "$w/.agent-sandbox"; printf %s "$CFG" > "$w/.agent-sandbox/config.json"; printf %s "$DF" > "$w/.agent-sandbox/Dockerfile"; cd "$w"; /usr/bin/git add -A; /usr/bin/git -c user.name=Mallory -c user.email=m@example.invalid commit -q -m hostile; /usr/bin/git push -q origin main',
    )
    expect(pushed.exitCode, pushed.stderr).toBe(0)
    const configHome = join(dir, 'clone-config')
    mkdirSync(join(configHome, 'agent-sandbox'), {recursive: true})
    writeFileSync(
      join(configHome, 'agent-sandbox', 'config.json'),
      JSON.stringify({github: {appId: 4242, installationId: 777, privateKeyPath: join(keyDir, 'app.pem'), apiUrl: `http://${fakeIp}:8080`, gitUrl: `http://${FAKE}:8080`}}),
    )
    const runtimeDir = join(dir, 'runtime')
    mkdirSync(runtimeDir, {mode: 0o700})
    cloneEnv = {XDG_CONFIG_HOME: configHome, XDG_RUNTIME_DIR: runtimeDir, http_proxy: `http://${fakeIp}:8080`}
  })

  afterAll(async () => {
    await docker('rm', '-f', FAKE)
    await docker('network', 'rm', NET)
  })

  it('keeps the shipped files, trusts none of them, builds nothing; everything refuses until trust', async () => {
    const target = join(dir, 'widgets')
    const r = await sbx(['init', '--clone', 'acme/widgets', target], cloneEnv)
    expect(r.exitCode, r.stderr).toBe(0)
    expect(r.stdout).toContain('is kept, untrusted; no image built')
    expect(r.stderr).toContain('allowDomains')
    expect(r.stderr).toContain(`agent-sandbox trust ${target}`)
    expect(readFileSync(join(target, '.agent-sandbox', 'config.json'), 'utf8')).toBe(hostileConfig)
    expect(r.stdout + r.stderr).not.toContain('hostile-build-step')
    expect(await imageId(target)).toBe('')
    const store = existsSync(storeFile()) ? JSON.parse(readFileSync(storeFile(), 'utf8')) : {workspaces: {}}
    expect(store.workspaces[target]).toBeUndefined()
    for (const args of [['show-run', target], ['start', target, '--build'], ['run', target, '--', 'true']]) {
      const refused = await sbx(args, cloneEnv)
      expect(refused.exitCode, args.join(' ')).toBe(2)
      expect(refused.stderr).toContain('is not trusted and would widen the sandbox: secretEnv (+ TRUST_IT_SECRET), allowDomains (+ attacker.example)')
    }
    const build = await sbx(['build', target], cloneEnv)
    expect(build.exitCode).toBe(2)
    expect(build.stderr).toContain('Dockerfile is not the template and is not trusted')
    expect(await createdFor(target)).toBe('')
    expect(await imageId(target)).toBe('')

    const review = await sbx(['trust', target, '--yes'], cloneEnv)
    expect(review.exitCode, review.stderr).toBe(0)
    expect(review.stdout).toContain('--- template Dockerfile')
    expect(review.stdout).toContain('+RUN echo hostile-build-step')
    expect(review.stdout).toContain('widens   secretEnv: + TRUST_IT_SECRET')
    // A sandbox needs the App's git URL on HTTPS port 443 (the gateway puts the token in; docs/github-app.md):
    // this clone went over the stand-in's plain HTTP, so show-run is told the URL a real service has.
    const show = await sbx(['show-run', target], {...cloneEnv, AGENT_SANDBOX_GITHUB_GIT_URL: `https://${FAKE}`})
    expect(show.exitCode, show.stderr).toBe(0)
    expect(show.stdout).toContain(`--env ${SECRET_NAME}`)
    expect(show.stdout).not.toContain(SECRET)
    const built = await sbx(['build', target], cloneEnv)
    expect(built.exitCode, built.stderr).toBe(0)
    expect(await imageId(target)).not.toBe('')
  })
})

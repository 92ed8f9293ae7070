/**
 * `build-base` and the per-repo image on the real engine: pinned and
 * resolved versions, the tools in the image, init/build, cache, bad config.
 */
import {execa} from 'execa'
import {chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {afterAll, describe, expect, it} from 'vitest'
import {cleanupUnder, cli, docker, initWorkspace, makeWorkspace, removeWorkspace, TEST_ROOT, trustWorkspace} from './helpers.js'

const created: string[] = []
const tags: string[] = []
afterAll(async () => {
  await cleanupUnder(TEST_ROOT)
  for (const path of created) removeWorkspace(path)
  for (const tag of tags) await docker('rmi', `agent-sandbox-base:${tag}`)
})

async function labelVersions(image: string): Promise<Record<string, string>> {
  const r = await docker('image', 'inspect', '--format', '{{index .Config.Labels "dev.agent-sandbox.versions"}}', image)
  expect(r.exitCode, r.stderr).toBe(0)
  return JSON.parse(r.stdout)
}

async function toolVersions(image: string): Promise<string> {
  const script = [
    'claude --version',
    'codex --version',
    'ast-grep --version',
    'sg --version',
    'delta --version',
    'gh --version | head -1',
    'git --version',
    'node --version',
    'jq --version',
    'fzf --version',
    'iptables --version',
    'command -v ipset dnsmasq tcpdump',
    'dig -v 2>&1',
    'command -v git',
    'id node',
    'ls -d /workspace /home/node/.claude /home/node/.codex /commandhistory /.agent-sandbox',
  ].join(' && ')
  const r = await docker('run', '--rm', '--entrypoint', '/bin/bash', '--user', 'node', image, '-c', script)
  expect(r.exitCode, r.stderr).toBe(0)
  return r.stdout
}

describe('build-base', () => {
  it('resolves latest to concrete npm versions, and the tools answer --version', async () => {
    const tag = 'it-latest'
    tags.push(tag)
    const r = await cli(['build-base', '--tag', tag, '--json'], {env: {AGENT_SANDBOX_CA_CERTS: process.env.AGENT_SANDBOX_CA_CERTS ?? '/etc/ssl/certs/ca-certificates.crt'}})
    expect(r.exitCode, r.stderr.slice(-2000)).toBe(0)
    const result = JSON.parse(r.stdout)
    expect(result.image).toBe(`agent-sandbox-base:${tag}`)
    for (const v of [result.versions.claudeCode, result.versions.codex, result.versions.astGrep]) expect(v).toMatch(/^\d+\.\d+\.\d+/)
    const npm = await execa('npm', ['view', '@openai/codex@latest', 'version'])
    expect(result.versions.codex).toBe(npm.stdout.trim())
    expect(await labelVersions(result.image)).toMatchObject({codex: result.versions.codex, gitDelta: 'debian'})
    const out = await toolVersions(result.image)
    expect(out).toContain(result.versions.claudeCode)
    expect(out).toContain(result.versions.codex)
    expect(out).toMatch(new RegExp(`ast-grep ${result.versions.astGrep.replaceAll('.', '\\.')}[\\s\\S]*ast-grep ${result.versions.astGrep.replaceAll('.', '\\.')}`))
    expect(out).toMatch(/delta \d+\.\d+/)
    expect(out).toMatch(/gh version \d/)
    expect(out).toContain('/usr/local/bin/git')
    expect(out).toContain('uid=1000(node)')
    // Build output streams to stderr; stdout holds only the result.
    expect(r.stderr).toMatch(/Step \d+\/\d+|#\d+ /)
    // The build checks the image's git against the git wrapper's option tables (a step that may come
    // from the layer cache, so its line is not always in the output): the same check, in the image.
    const check = await docker('run', '--rm', '--entrypoint', '/usr/local/bin/git', result.image, '--agent-sandbox-check-version')
    expect(check.exitCode, check.stderr).toBe(0)
    expect(check.stdout).toMatch(/^git-wrapper: git version 2\.47\.\d+ matches its option tables \(git 2\.47\.x\)$/)
  })

  it('builds with pinned versions without asking the registry', async () => {
    const tag = 'it-pinned'
    tags.push(tag)
    const pinned = await labelVersions('agent-sandbox-base:latest')
    const r = await cli(
      ['build-base', '--tag', tag, '--json', '--claude-code-version', pinned.claudeCode, '--codex-version', pinned.codex, '--ast-grep-version', pinned.astGrep],
      // An unreachable registry proves that pinned versions are not looked up.
      {env: {npm_config_registry: 'http://127.0.0.1:9/', AGENT_SANDBOX_CA_CERTS: process.env.AGENT_SANDBOX_CA_CERTS ?? '/etc/ssl/certs/ca-certificates.crt'}},
    )
    expect(r.exitCode, r.stderr.slice(-2000)).toBe(0)
    expect(JSON.parse(r.stdout).versions).toMatchObject({claudeCode: pinned.claudeCode, codex: pinned.codex, astGrep: pinned.astGrep})
    expect(await labelVersions(`agent-sandbox-base:${tag}`)).toMatchObject({codex: pinned.codex})
  })

  it('refuses a missing CA file and an invalid tag before building', async () => {
    const ca = await cli(['build-base', '--tag', 'it-never', '--ca-cert', '/nonexistent/ca.pem'])
    expect(ca.exitCode).toBe(2)
    expect(ca.stderr).toMatch(/CA certificate file not found.*\/nonexistent\/ca\.pem/)
    const tag = await cli(['build-base', '--tag', 'bad tag!'])
    expect(tag.exitCode).toBe(2)
    expect((await docker('image', 'inspect', 'agent-sandbox-base:it-never')).exitCode).not.toBe(0)
  })

  it('reports a failed build with the engine’s own message and a non-zero exit', async () => {
    // An empty local image (no shell, no apt) makes the first RUN fail without any network.
    const empty = 'agent-sandbox-it-empty:1'
    await execa('sh', ['-c', `tar -cf - --files-from /dev/null | docker import - ${empty}`])
    try {
      const r = await cli(['build-base', '--tag', 'it-broken', '--base-image', empty, '--claude-code-version', '1.0.0', '--codex-version', '0.1.0', '--ast-grep-version', '0.1.0'])
      expect(r.exitCode).toBe(5)
      const last = r.stderr.trim().split('\n').pop()
      expect(last).toMatch(/building agent-sandbox-base:it-broken failed: .*(no such file|returned a non-zero code|executable file not found)/i)
      expect((await docker('image', 'inspect', 'agent-sandbox-base:it-broken')).exitCode).not.toBe(0)
      // Nothing half-made: the failed step's container is gone too.
      expect((await docker('ps', '-aq', '--filter', `ancestor=${empty}`)).stdout.trim()).toBe('')
    } finally {
      await docker('rmi', '-f', empty)
    }
  })
})

function snapshot(dir: string): string {
  return readdirSync(dir)
    .sort()
    .map((f) => `${f}:${statSync(join(dir, f)).mtimeMs}:${readFileSync(join(dir, f), 'utf8')}`)
    .join('\n')
}

describe('init and build', () => {
  it('init creates .agent-sandbox from the templates and builds the image; build uses the cache', async () => {
    const ws = await makeWorkspace('proj')
    created.push(ws)
    const init = await cli(['init', ws])
    expect(init.exitCode, init.stderr).toBe(0)
    const dockerfile = readFileSync(join(ws, '.agent-sandbox', 'Dockerfile'), 'utf8')
    expect(dockerfile).toMatch(/^ARG BASE_IMAGE_TAG=latest$/m)
    expect(dockerfile).toContain('FROM agent-sandbox-base:${BASE_IMAGE_TAG}')
    const config = JSON.parse(readFileSync(join(ws, '.agent-sandbox', 'config.json'), 'utf8'))
    expect(config).toHaveProperty('protectedPaths')
    const image = init.stdout.match(/image (\S+)/)?.[1]
    expect(image).toMatch(/^agent-sandbox-proj-[0-9a-f]{32}:latest$/)
    const first = await docker('image', 'inspect', '--format', '{{.Id}}', image!)
    const build = await cli(['build', ws, '--json'])
    expect(build.exitCode, build.stderr).toBe(0)
    expect(JSON.parse(build.stdout)).toMatchObject({image, baseTag: 'latest'})
    // Nothing changed, so nothing is built at all (not even a cache replay).
    expect(build.stderr).toContain(`${image!} is up to date`)
    expect(build.stderr).not.toMatch(/Step \d|Sending build context/)
    const second = await docker('image', 'inspect', '--format', '{{.Id}}', image!)
    expect(second.stdout).toBe(first.stdout)
  })

  it('build runs again when the Dockerfile, a context file, its mode or the base image changes, and always with --no-cache', async () => {
    const ws = await makeWorkspace('rebuild')
    created.push(ws)
    const baseTag = `it-rebuild-${process.pid}`
    tags.push(baseTag)
    expect((await docker('tag', 'agent-sandbox-base:latest', `agent-sandbox-base:${baseTag}`)).exitCode).toBe(0)
    const init = await cli(['init', ws, '--base-tag', baseTag])
    expect(init.exitCode, init.stderr).toBe(0)
    const image = init.stdout.match(/image (\S+)/)![1]
    const imageId = async () => (await docker('image', 'inspect', '--format', '{{.Id}}', image)).stdout.trim()
    const build = async (...extra: string[]) => {
      // Each change to the build context is the test's own: approve it, as its user would.
      await trustWorkspace(ws)
      const before = await imageId()
      const r = await cli(['build', ws, '--base-tag', baseTag, ...extra])
      expect(r.exitCode, r.stderr).toBe(0)
      expect(r.stdout.trim()).toBe(image)
      const upToDate = r.stderr.includes('is up to date')
      // A skipped build never touches the image; a real one says so in its output.
      if (upToDate) expect(await imageId()).toBe(before)
      else expect(r.stderr).toMatch(/Step \d/)
      return {upToDate, stderr: r.stderr}
    }
    expect((await build()).upToDate).toBe(true)

    const dockerfile = join(ws, '.agent-sandbox', 'Dockerfile')
    writeFileSync(dockerfile, `${readFileSync(dockerfile, 'utf8')}RUN echo one > /tmp/marker\n`)
    expect((await build()).upToDate).toBe(false)
    expect((await build()).upToDate).toBe(true)
    expect((await docker('run', '--rm', '--entrypoint', 'cat', image, '/tmp/marker')).stdout.trim()).toBe('one')

    const extra = join(ws, '.agent-sandbox', 'setup.sh')
    writeFileSync(extra, 'echo a\n')
    expect((await build()).upToDate).toBe(false)
    expect((await build()).upToDate).toBe(true)
    chmodSync(extra, 0o755)
    expect((await build()).upToDate).toBe(false)
    expect((await build()).upToDate).toBe(true)

    // The same base tag on another image (e.g. after build-base) is a change.
    const other = join(ws, 'other-base')
    mkdirSync(other)
    writeFileSync(join(other, 'Dockerfile'), 'FROM agent-sandbox-base:latest\nLABEL it.rebuild=1\n')
    expect((await docker('build', '-q', '--tag', `agent-sandbox-base:${baseTag}`, other)).exitCode).toBe(0)
    expect((await build()).upToDate).toBe(false)
    expect((await build()).upToDate).toBe(true)

    const forced = await build('--no-cache')
    expect(forced.upToDate).toBe(false)
    expect(forced.stderr).not.toContain('Using cache')
    expect((await build()).upToDate).toBe(true)
  })

  it('init twice without --force fails and changes nothing; --force starts over', async () => {
    const ws = await makeWorkspace('twice')
    created.push(ws)
    await initWorkspace(ws)
    writeFileSync(join(ws, '.agent-sandbox', 'config.json'), '{"env": {"KEEP": "me"}}')
    const before = snapshot(join(ws, '.agent-sandbox'))
    const again = await cli(['init', ws])
    expect(again.exitCode).toBe(7)
    expect(again.stderr).toMatch(/already exists.*--force/)
    expect(snapshot(join(ws, '.agent-sandbox'))).toBe(before)
    expect((await cli(['start', ws])).exitCode).toBe(0)
    const forced = await cli(['init', ws, '--force'])
    expect(forced.exitCode, forced.stderr).toBe(0)
    expect(readFileSync(join(ws, '.agent-sandbox', 'config.json'), 'utf8')).not.toContain('KEEP')
    const ps = await docker('ps', '-aq', '--filter', `label=dev.agent-sandbox.workspace=${ws}`)
    expect(ps.stdout.trim()).toBe('')
  })

  it('a missing base image is named in the error with the exact command, and nothing is made', async () => {
    const ws = await makeWorkspace('nobase')
    created.push(ws)
    const r = await cli(['init', ws, '--base-tag', 'it-missing'])
    expect(r.exitCode).toBe(4)
    expect(r.stderr).toContain('agent-sandbox build-base --tag it-missing')
    expect(existsSync(join(ws, '.agent-sandbox'))).toBe(false)
  })

  it('a malformed config.json names the file, the field and the problem', async () => {
    const ws = await makeWorkspace('badconfig')
    created.push(ws)
    await initWorkspace(ws)
    const file = join(ws, '.agent-sandbox', 'config.json')
    writeFileSync(file, '{"limits": {"cpus": "two"}}')
    const wrongType = await cli(['build', ws])
    expect(wrongType.exitCode).toBe(2)
    expect(wrongType.stderr.trim().split('\n')).toHaveLength(1)
    expect(wrongType.stderr).toContain(file)
    expect(wrongType.stderr).toContain('limits.cpus')
    writeFileSync(file, '{"network": "firewall",}')
    const badJson = await cli(['start', ws])
    expect(badJson.exitCode).toBe(2)
    expect(badJson.stderr).toMatch(/config\.json: not valid JSON/)
    writeFileSync(file, '{"allowDomain": ["x.com"]}')
    const unknown = await cli(['config', ws])
    expect(unknown.exitCode).toBe(2)
    expect(unknown.stderr).toContain('"allowDomain"')
    // JSON a schema library could take loosely: a list where an object goes, an env key it would drop.
    for (const [text, message] of [
      ['{"limits": []}', 'field "limits": must be an object, not a list'],
      ['{"env": {"KEEP": "1", "__proto__": "x"}}', 'field "env": must not name __proto__, constructor or prototype'],
      ['{"secretEnv": [{"name": "TOKEN", "hosts": ["api.example.com"], "host": "x"}]}', 'field "secretEnv.0": unknown field "host"'],
    ]) {
      writeFileSync(file, text)
      const r = await cli(['start', ws])
      expect(r.exitCode, text).toBe(2)
      expect(r.stderr.trim().split('\n'), text).toHaveLength(1)
      expect(r.stderr).toContain(`${file}: ${message}`)
    }
    // Nothing was made for the refused starts.
    expect((await docker('ps', '-a', '--filter', `label=dev.agent-sandbox.workspace=${ws}`, '--format', '{{.Names}}')).stdout.trim()).toBe('')
  })

  it('config prints the effective settings and where each came from', async () => {
    const ws = await makeWorkspace('layers')
    created.push(ws)
    await initWorkspace(ws)
    writeFileSync(join(ws, '.agent-sandbox', 'config.json'), JSON.stringify({allowDomains: ['ws.example.com'], network: 'none'}))
    await trustWorkspace(ws)
    const r = await cli(['config', ws, '--json'], {env: {AGENT_SANDBOX_NETWORK: 'open'}})
    expect(r.exitCode, r.stderr).toBe(0)
    const out = JSON.parse(r.stdout)
    expect(out.settings.network).toBe('open')
    expect(out.sources.network).toEqual(['env'])
    expect(out.settings.allowDomains).toEqual(['ws.example.com'])
    expect(out.sources.allowDomains).toEqual(['workspace (trusted)'])
    expect(out.sources.baseTag).toEqual(['default'])
  })
})

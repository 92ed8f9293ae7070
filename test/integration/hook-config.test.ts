/**
 * Quality gates cannot be weakened by editing their configuration.
 * A real engine, the real frameworks (husky, lint-staged, commitlint,
 * lefthook, simple-git-hooks from npm; pre-commit from Debian in the
 * workspace's own image), one repository per framework whose hook FAILS,
 * owned by a non-root user, and each framework's installer run on the host as
 * that user, as a user would. Nothing is fetched from GitHub: pre-commit uses a
 * `repo: local` hook.
 */
import {cpSync, existsSync, mkdirSync, writeFileSync} from 'node:fs'
import {dirname, join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {cleanupUnder, cli, docker, initWorkspace, inspect, makeWorkspace, removeWorkspace, run, sbx, TEST_ROOT, TEST_UID, type Result, trustWorkspace} from './helpers.js'

const FRAMEWORK_PACKAGES = ['husky', 'lint-staged', '@commitlint/cli', '@commitlint/config-conventional', 'simple-git-hooks', 'lefthook']
let modules = ''
const workspaces: string[] = []

/** A command on the host as the workspace's owner, from the workspace. */
async function asUser(ws: string, command: string, ...args: string[]): Promise<Result> {
  return run('setpriv', ['--reuid', String(TEST_UID), '--regid', String(TEST_UID), '--clear-groups', 'env', `HOME=${join(dirname(ws), 'home')}`, `PATH=${process.env.PATH}`, 'GIT_CONFIG_NOSYSTEM=1', command, ...args], {cwd: ws})
}
async function userOk(ws: string, command: string, ...args: string[]): Promise<string> {
  const r = await asUser(ws, command, ...args)
  if (r.exitCode !== 0) throw new Error(`${command} ${args.join(' ')} failed on the host: ${r.stderr}`)
  return r.stdout.trim()
}

/**
 * A repository that uses a framework: its files committed, node_modules (not
 * committed) copied in, the user's git identity, `init`, the installer run by
 * the user, .agent-sandbox committed, and the sandbox started.
 */
async function frameworkRepo(name: string, files: Record<string, string>, options: {install?: string[][]; dockerfile?: string; preInstall?: (ws: string) => Promise<void>} = {}): Promise<string> {
  const ws = await makeWorkspace(name, {files: {'.gitignore': 'node_modules/\n', 'README.md': `# ${name}\n`, ...files}})
  workspaces.push(ws)
  mkdirSync(join(dirname(ws), 'home'))
  // verbatimSymlinks: node_modules/.bin's relative links must stay relative (they are read in the container too).
  if (modules) cpSync(join(modules, 'node_modules'), join(ws, 'node_modules'), {recursive: true, verbatimSymlinks: true})
  await run('chown', ['-R', `${TEST_UID}:${TEST_UID}`, dirname(ws)])
  await userOk(ws, 'git', 'config', 'user.name', 'Host User')
  await userOk(ws, 'git', 'config', 'user.email', 'user@example.invalid')
  await initWorkspace(ws)
  if (options.dockerfile !== undefined) {
    writeFileSync(join(ws, '.agent-sandbox', 'Dockerfile'), options.dockerfile)
    // The user's own Dockerfile: they approve it, as a user would (docs/security.md).
    await trustWorkspace(ws)
    const built = await cli(['build', ws])
    expect(built.exitCode, built.stderr).toBe(0)
  }
  await run('chown', ['-R', `${TEST_UID}:${TEST_UID}`, ws])
  if (options.preInstall) await options.preInstall(ws)
  for (const [command, ...args] of options.install ?? []) await userOk(ws, command, ...args)
  await userOk(ws, 'git', 'add', '-A')
  // The user's own set-up commit: their hooks fail by design here.
  await userOk(ws, 'git', 'commit', '-q', '--no-verify', '-m', 'agent-sandbox set-up')
  expect(await userOk(ws, 'git', 'status', '--porcelain'), 'a clean host checkout to start from').toBe('')
  const start = await cli(['start', ws])
  expect(start.exitCode, start.stderr).toBe(0)
  const setup = await sbx(ws, 'sh', '-c', 'git config user.name Agent && git config user.email agent@example.invalid')
  expect(setup.exitCode, setup.stderr).toBe(0)
  return ws
}

/** Inside, as the agent: a shell script from the work tree. */
function inside(ws: string, ...lines: string[]): Promise<Result> {
  return sbx(ws, 'sh', '-c', lines.join('\n'))
}

/** Inside: stage CONTENT as PATH without touching the (read-only) working file, as a commit that changes it would. */
function stageBlob(path: string, content: string): string {
  return `sha=$(printf '%s\\n' '${content}' | /usr/bin/git hash-object -w --stdin) && /usr/bin/git update-index --add --cacheinfo "100644,$sha,${path}"`
}

async function expectReadOnly(ws: string, path: string): Promise<void> {
  const r = await inside(ws, `echo '# weakened' >> ${path}`)
  expect(r.exitCode, `${path} must not be writable`).not.toBe(0)
  expect(r.stderr).toMatch(/Read-only file system/)
}

/** Push HEAD as a new branch to `host` and return the gate's stderr. */
async function pushFlagged(ws: string, branch: string): Promise<string> {
  const r = await inside(ws, `git push host HEAD:refs/heads/${branch}`)
  expect(r.exitCode, r.stderr).toBe(0)
  return r.stderr
}

beforeAll(async () => {
  // The frameworks from npm, once, on the host (lefthook's binary comes in an optional per-platform package).
  modules = join(TEST_ROOT, 'hook-frameworks')
  if (!existsSync(join(modules, 'node_modules', '.bin', 'lefthook'))) {
    mkdirSync(modules, {recursive: true})
    writeFileSync(join(modules, 'package.json'), '{"name":"hook-frameworks","private":true}\n')
    const r = await run('npm', ['install', '--no-audit', '--no-fund', ...FRAMEWORK_PACKAGES], {cwd: modules})
    if (r.exitCode !== 0) throw new Error(`npm install failed: ${r.stderr}`)
  }
})

afterAll(async () => {
  await cleanupUnder(TEST_ROOT)
  for (const ws of workspaces) removeWorkspace(ws)
})

describe('husky with lint-staged (package.json) and commitlint (commitlint.config.mjs)', () => {
  let ws: string
  beforeAll(async () => {
    ws = await frameworkRepo(
      'husky',
      {
        'package.json': `${JSON.stringify({name: 'husky-app', private: true, 'lint-staged': {'*.txt': 'false'}}, null, 2)}\n`,
        'commitlint.config.mjs': "export default {extends: ['@commitlint/config-conventional']}\n",
        '.husky/pre-commit': 'npx lint-staged\n',
        '.husky/commit-msg': 'npx --no -- commitlint --edit "$1"\n',
      },
      {install: [['node_modules/.bin/husky']]},
    )
  })

  it('detects husky, lint-staged and commitlint; config and doctor list them', async () => {
    const config = await cli(['config', ws, '--json'])
    expect(config.exitCode, config.stderr).toBe(0)
    const {hookConfig} = JSON.parse(config.stdout)
    expect(hookConfig.frameworks.map((f: {name: string}) => f.name)).toEqual(['husky', 'lint-staged', 'commitlint'])
    expect(hookConfig.protect).toEqual(['.husky', 'commitlint.config.mjs'])
    expect(hookConfig.embedded).toEqual(['lint-staged'])
    const text = await cli(['config', ws])
    expect(text.stdout).toMatch(/hook frameworks: +husky: core\.hooksPath \.husky\/_/)
    expect(text.stdout).toMatch(/read-only: +\.husky, commitlint\.config\.mjs/)
    const doctor = await cli(['doctor', ws, '--json'])
    const check = JSON.parse(doctor.stdout).checks.find((c: {name: string}) => c.name === 'hook-config')
    expect(check).toMatchObject({status: 'pass'})
    expect(check.detail).toMatch(/read-only: \.husky, commitlint\.config\.mjs/)
  })

  it('editing the hooks or commitlint\'s configuration from inside is refused (EROFS)', async () => {
    await expectReadOnly(ws, '.husky/pre-commit')
    await expectReadOnly(ws, 'commitlint.config.mjs')
    await expectReadOnly(ws, '.husky/commit-msg')
  })

  it('lint-staged in package.json: the edit succeeds, and the commit still runs the committed configuration and fails', async () => {
    const r = await inside(
      ws,
      `node -e 'const f="package.json";const p=JSON.parse(require("fs").readFileSync(f));p["lint-staged"]={"*.txt":"true"};require("fs").writeFileSync(f,JSON.stringify(p))'`,
      'sha256sum package.json > /tmp/pkg.sum',
      'echo work > work.txt && git add work.txt package.json',
      'git commit -q -m "feat: add work" && echo COMMITTED',
      'sha256sum -c --quiet /tmp/pkg.sum && echo RESTORED',
    )
    expect(r.stdout).not.toContain('COMMITTED')
    expect(r.stdout).toContain('RESTORED')
    expect(r.stderr).toMatch(/false/)
    expect(r.stderr).toContain('package.json "lint-staged" as committed in HEAD')
    // Control: the same commit with the real hooks directory and no dispatcher does pass the weakened configuration.
    const control = await inside(ws, `/usr/bin/git -c core.hooksPath="$(git config agent-sandbox.hooksDir)" commit -q -m "feat: add work" && echo COMMITTED && git reset -q --soft HEAD~1`)
    expect(control.stdout, control.stderr).toContain('COMMITTED')
    await inside(ws, 'git reset -q && git checkout -q -- package.json && rm -f work.txt')
  })

  it('commitlint: a bad message fails, a conventional one passes', async () => {
    const bad = await inside(ws, 'git commit -q --allow-empty -m "did stuff"')
    expect(bad.exitCode).not.toBe(0)
    expect(bad.stderr).toMatch(/subject may not be empty|type may not be empty/)
    const good = await inside(ws, 'git commit -q --allow-empty -m "chore: nothing"')
    expect(good.exitCode, good.stderr).toBe(0)
  })

  it('a commit that changes the configuration (package.json\'s key, commitlint.config.mjs) is flagged on push to host', async () => {
    const r = await inside(
      ws,
      'set -e',
      `node -e 'const f="package.json";const p=JSON.parse(require("fs").readFileSync(f));p["lint-staged"]={"*.txt":"true"};require("fs").writeFileSync(f,JSON.stringify(p))'`,
      stageBlob('commitlint.config.mjs', 'export default {}'),
      'git add package.json',
      'git commit -q -m "chore: relax the gates"',
    )
    expect(r.exitCode, r.stderr).toBe(0)
    const stderr = await pushFlagged(ws, 'agent-husky')
    expect(stderr).toMatch(/warning: refs\/heads\/agent-husky changes quality-gate configuration: .*commitlint\.config\.mjs/)
    expect(stderr).toMatch(/quality-gate configuration: .*package\.json/)
  })
})

describe('lefthook (lefthook.yml)', () => {
  let ws: string
  beforeAll(async () => {
    ws = await frameworkRepo('lefthook', {'lefthook.yml': 'pre-commit:\n  commands:\n    gate:\n      run: "false"\n'}, {install: [['node_modules/.bin/lefthook', 'install']]})
  })

  it('is detected from lefthook.yml and the installed hook', async () => {
    const {hookConfig} = JSON.parse((await cli(['config', ws, '--json'])).stdout)
    expect(hookConfig.frameworks).toEqual([{name: 'lefthook', evidence: expect.arrayContaining(['lefthook.yml', 'hook .git/hooks/pre-commit'])}])
    expect(hookConfig.protect).toEqual(['lefthook.yml'])
  })

  it('editing lefthook.yml is refused (EROFS), and the commit fails', async () => {
    await expectReadOnly(ws, 'lefthook.yml')
    const r = await inside(ws, 'echo work > work.txt && git add work.txt && git commit -q -m x')
    expect(r.exitCode, `${r.stdout}${r.stderr}`).not.toBe(0)
    expect(`${r.stdout}${r.stderr}`).toMatch(/gate/)
  })

  it('a lefthook-local.yml made inside does not skip the hook; without the dispatcher it would', async () => {
    await inside(ws, "printf 'pre-commit:\\n  skip: true\\n' > lefthook-local.yml")
    const r = await inside(ws, 'git commit -q -m x')
    expect(r.exitCode).not.toBe(0)
    expect(r.stderr).toMatch(/lefthook-local\.yml is hook configuration that is not the repository's own here/)
    const control = await inside(ws, '/usr/bin/git -c core.hooksPath=/host-git/hooks commit -q -m x && echo COMMITTED && git reset -q --soft HEAD~1')
    expect(control.stdout, control.stderr).toContain('COMMITTED')
    // And without it the commit fails as before (the gate's command runs).
    await inside(ws, 'rm -f lefthook-local.yml')
    const again = await inside(ws, '/usr/bin/git -c core.hooksPath=/host-git/hooks commit -q -m x')
    expect(again.exitCode).not.toBe(0)
    await inside(ws, 'git reset -q && rm -f work.txt')
  })

  it('a commit that changes lefthook.yml is flagged on push to host', async () => {
    const r = await inside(ws, 'set -e', stageBlob('lefthook.yml', 'pre-commit: {}'), '/usr/bin/git commit -q --no-verify -m "relax lefthook"')
    expect(r.exitCode, r.stderr).toBe(0)
    expect(await pushFlagged(ws, 'agent-lefthook')).toMatch(/changes quality-gate configuration: lefthook\.yml/)
  })
})

describe('simple-git-hooks (package.json)', () => {
  let ws: string
  beforeAll(async () => {
    ws = await frameworkRepo(
      'sgh',
      {'package.json': `${JSON.stringify({name: 'sgh-app', private: true, 'simple-git-hooks': {'pre-commit': 'echo simple-git-hooks gate >&2; false'}}, null, 2)}\n`},
      {install: [['node_modules/.bin/simple-git-hooks']]},
    )
  })

  it('the package.json edit succeeds; neither the commit nor a reinstall from inside gets the weakened hook', async () => {
    const r = await inside(
      ws,
      `node -e 'const f="package.json";const p=JSON.parse(require("fs").readFileSync(f));p["simple-git-hooks"]={"pre-commit":"true"};require("fs").writeFileSync(f,JSON.stringify(p))' && echo EDITED`,
      'npx --no simple-git-hooks >/dev/null 2>&1; echo reinstall=$?',
      'git commit -q --allow-empty -m x && echo COMMITTED',
    )
    expect(r.stdout).toContain('EDITED')
    expect(r.stdout).not.toContain('COMMITTED')
    expect(r.stderr).toContain('simple-git-hooks gate')
  })

  it('a commit that changes the simple-git-hooks key is flagged on push to host', async () => {
    const r = await inside(ws, 'set -e', 'git add package.json', '/usr/bin/git commit -q --no-verify -m "relax the hook"')
    expect(r.exitCode, r.stderr).toBe(0)
    expect(await pushFlagged(ws, 'agent-sgh')).toMatch(/changes quality-gate configuration: package\.json/)
  })
})

describe('pre-commit (.pre-commit-config.yaml, Debian\'s pre-commit in the workspace image)', () => {
  let ws: string
  const config = ['repos:', '  - repo: local', '    hooks:', '      - id: gate', '        name: pre-commit gate', '        entry: "false"', '        language: system', '        always_run: true', '        pass_filenames: false', ''].join('\n')
  beforeAll(async () => {
    ws = await frameworkRepo('precommit', {'.pre-commit-config.yaml': config}, {
      dockerfile: [
        'ARG BASE_IMAGE_TAG=latest',
        'FROM agent-sandbox-base:${BASE_IMAGE_TAG}',
        'RUN apt-get update && apt-get install -y --no-install-recommends pre-commit && rm -rf /var/lib/apt/lists/*',
        '',
      ].join('\n'),
      // pre-commit is not on this host: its installer runs as the user in the workspace's image, which writes the same hook.
      preInstall: async (path) => {
        const image = (await docker('images', '--filter', `label=dev.agent-sandbox.workspace=${path}`, '--format', '{{.ID}}')).stdout.split('\n')[0]
        expect(image, 'the workspace image').toBeTruthy()
        const r = await docker('run', '--rm', '--network', 'none', '--entrypoint', 'pre-commit', '-u', `${TEST_UID}:${TEST_UID}`, '-e', 'HOME=/tmp', '-v', `${path}:/w`, '-w', '/w', image, 'install')
        expect(r.exitCode, r.stderr).toBe(0)
      },
    })
  })

  it('editing .pre-commit-config.yaml is refused (EROFS), and the commit fails', async () => {
    await expectReadOnly(ws, '.pre-commit-config.yaml')
    const r = await inside(ws, 'git commit -q --allow-empty -m x')
    expect(r.exitCode).not.toBe(0)
    expect(`${r.stdout}${r.stderr}`).toMatch(/pre-commit gate\.+Failed/)
  })

  it('a commit that changes .pre-commit-config.yaml is flagged on push to host', async () => {
    const r = await inside(ws, 'set -e', stageBlob('.pre-commit-config.yaml', 'repos: []'), '/usr/bin/git commit -q --no-verify -m "drop the hooks"')
    expect(r.exitCode, r.stderr).toBe(0)
    expect(await pushFlagged(ws, 'agent-precommit')).toMatch(/changes quality-gate configuration: \.pre-commit-config\.yaml/)
  })
})

describe('a repository with no hook framework', () => {
  it('gets no extra mounts, no label, and config lists nothing', async () => {
    const ws = await makeWorkspace('plain', {files: {'README.md': '# plain\n', 'package.json': '{"name":"plain","scripts":{"test":"true"}}\n'}})
    workspaces.push(ws)
    await initWorkspace(ws)
    const start = await cli(['start', ws])
    expect(start.exitCode, start.stderr).toBe(0)
    const ps = await docker('ps', '--filter', `label=dev.agent-sandbox.workspace=${ws}`, '--filter', 'label=dev.agent-sandbox.kind=sandbox', '--format', '{{.Names}}')
    const info = await inspect(ps.stdout.trim())
    const mount = `/workspace/plain`
    const binds = info.Mounts.filter((m: {Type: string}) => m.Type === 'bind').map((m: {Destination: string}) => m.Destination).sort()
    expect(binds).toEqual([mount, `${mount}/.agent-precommit`, `${mount}/.agent-sandbox`, `${mount}/.husky`, '/host-git'].sort())
    expect(info.Config.Labels['dev.agent-sandbox.hook-config']).toBeUndefined()
    const {hookConfig} = JSON.parse((await cli(['config', ws, '--json'])).stdout)
    expect(hookConfig).toMatchObject({frameworks: [], protect: [], embedded: []})
  })
})

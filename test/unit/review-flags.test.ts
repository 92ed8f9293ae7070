import {describe, expect, it} from 'vitest'
import {parseGateLog} from '../../src/lib/git/gate-log.js'
import {isHookConfigPath} from '../../src/lib/git/hook-config.js'
import {homeOfUid, hostGitUser} from '../../src/lib/git/host-git.js'
import {pushRefusal} from '../../src/lib/git/review-approve.js'
import {
  diffstatOf,
  isCiPath,
  isLockfilePath,
  LARGE_FILE_BYTES,
  packageHookKeys,
  parseBatchCheck,
  parseRawNumstat,
  reviewFlags,
  type ChangedFile,
} from '../../src/lib/git/review-flags.js'
import {formatPushReview} from '../../src/cli/review-output.js'
import type {KeptPush} from '../../src/lib/git/review.js'

const Z = '0'.repeat(40)
const blob = (n: number) => n.toString(16).padStart(40, 'a')

/** A `git diff --raw --numstat -z --no-renames --no-abbrev` output from raw records and numstat records. */
function rawNumstat(raw: Array<[string, string, string, string, string, string]>, numstat: Array<[string, string, string]>): string {
  return [...raw.flatMap(([om, nm, ob, nb, st, path]) => [`:${om} ${nm} ${ob} ${nb} ${st}`, path]), ...numstat.map(([a, d, path]) => `${a}\t${d}\t${path}`)].join('\0') + '\0'
}

const file = (path: string, over: Partial<ChangedFile> = {}): ChangedFile => ({path, status: 'M', oldMode: '100644', newMode: '100644', oldBlob: blob(1), newBlob: blob(2), added: 1, deleted: 0, binary: false, ...over})

describe('parseRawNumstat', () => {
  it('joins raw and numstat records by path: modes, blobs, status, line counts, binary files', () => {
    const text = rawNumstat(
      [
        ['000000', '100755', Z, blob(1), 'A', 'bin/run.sh'],
        ['100644', '100644', blob(2), blob(3), 'M', 'dir with space/a\tb.txt'],
        ['100644', '000000', blob(4), Z, 'D', 'gone.png'],
        ['100644', '100755', blob(5), blob(5), 'M', 'mode-only'],
      ],
      [
        ['3', '0', 'bin/run.sh'],
        ['10', '2', 'dir with space/a\tb.txt'],
        ['-', '-', 'gone.png'],
        ['0', '0', 'mode-only'],
      ],
    )
    expect(parseRawNumstat(text)).toEqual([
      {path: 'bin/run.sh', status: 'A', oldMode: '000000', newMode: '100755', oldBlob: Z, newBlob: blob(1), added: 3, deleted: 0, binary: false},
      {path: 'dir with space/a\tb.txt', status: 'M', oldMode: '100644', newMode: '100644', oldBlob: blob(2), newBlob: blob(3), added: 10, deleted: 2, binary: false},
      {path: 'gone.png', status: 'D', oldMode: '100644', newMode: '000000', oldBlob: blob(4), newBlob: Z, binary: true},
      {path: 'mode-only', status: 'M', oldMode: '100644', newMode: '100755', oldBlob: blob(5), newBlob: blob(5), added: 0, deleted: 0, binary: false},
    ])
  })

  it('reads diff-tree output (raw records only) and an empty diff', () => {
    expect(parseRawNumstat(rawNumstat([['100644', '100644', blob(1), blob(2), 'T', 'x']], []))).toEqual([
      {path: 'x', status: 'T', oldMode: '100644', newMode: '100644', oldBlob: blob(1), newBlob: blob(2), binary: false},
    ])
    expect(parseRawNumstat('')).toEqual([])
  })
})

describe('parseBatchCheck', () => {
  it('reads blob sizes and skips missing objects and other types', () => {
    const sizes = parseBatchCheck(`${blob(1)} blob 12\n${blob(2)} missing\n${blob(3)} tree 40\n${blob(4)} blob 2000000\n`)
    expect([...sizes]).toEqual([
      [blob(1), 12],
      [blob(4), 2000000],
    ])
  })
})

describe('path classes', () => {
  it.each([
    '.github/workflows/ci.yml',
    '.github/actions/setup/action.yml',
    '.gitlab-ci.yml',
    '.circleci/config.yml',
    '.travis.yml',
    'azure-pipelines.yml',
    'Jenkinsfile',
    'ci/Jenkinsfile.release',
    '.buildkite/pipeline.yml',
    'bitbucket-pipelines.yml',
    '.drone.yml',
    '.woodpecker/build.yaml',
    '.gitea/workflows/x.yml',
    '.forgejo/workflows/x.yml',
    'appveyor.yml',
  ])('CI: %s', (path) => expect(isCiPath(path)).toBe(true))

  it.each(['.github/dependabot.yml', 'docs/.gitlab-ci.yml.md', 'src/workflows/ci.yml', 'README.md'])('not CI: %s', (path) => expect(isCiPath(path)).toBe(false))

  it.each(['package-lock.json', 'packages/a/yarn.lock', 'pnpm-lock.yaml', 'Cargo.lock', 'go.sum', 'poetry.lock', 'uv.lock', 'Gemfile.lock', 'flake.lock', 'infra/.terraform.lock.hcl', 'pylock.dev.toml'])(
    'lockfile: %s',
    (path) => expect(isLockfilePath(path)).toBe(true),
  )

  it.each(['package.json', 'yarn.lock.bak', 'lock/README', 'Cargo.toml'])('not a lockfile: %s', (path) => expect(isLockfilePath(path)).toBe(false))

  it.each(['.husky/pre-commit', '.pre-commit-config.yaml', 'lefthook.yml', '.lefthook/pre-commit/x.sh', '.config/lefthook.yaml', 'packages/a/.lintstagedrc.json', 'commitlint.config.js', '.overcommit.yml', '.git-hooks/pre-commit', '.simple-git-hooks.json'])(
    'hook configuration: %s',
    (path) => expect(isHookConfigPath(path)).toBe(true),
  )

  it.each(['husky.md', 'src/.husky', '.config/other.yml', 'package.json', 'docs/lefthook.md'])('not hook configuration: %s', (path) => expect(isHookConfigPath(path)).toBe(false))
})

describe('packageHookKeys', () => {
  it('changes only with the hook frameworks\' keys', () => {
    const before = packageHookKeys('{"name":"a","scripts":{"test":"x"},"lint-staged":{"*.ts":"eslint"}}')
    expect(packageHookKeys('{"name":"b","scripts":{"test":"y"},"lint-staged":{"*.ts":"eslint"}}')).toBe(before)
    expect(packageHookKeys('{"name":"a","lint-staged":{}}')).not.toBe(before)
    expect(packageHookKeys('{"husky":{"hooks":{}}}')).not.toBe(packageHookKeys('{}'))
    expect(packageHookKeys(undefined)).toBe(packageHookKeys('{}'))
    expect(packageHookKeys('not json')).not.toBe(packageHookKeys('{}'))
  })
})

describe('reviewFlags', () => {
  it('flags every kind, each path once, in a fixed order', () => {
    const files = [
      file('.github/workflows/ci.yml'),
      file('package-lock.json'),
      file('.pre-commit-config.yaml', {status: 'A', oldMode: '000000', oldBlob: Z}),
      file('.agent-sandbox/config.json'),
      file('assets/big.bin', {binary: true, added: undefined, deleted: undefined, newBlob: blob(9)}),
      file('run.sh', {status: 'A', oldMode: '000000', newMode: '100755', oldBlob: Z}),
      file('tool', {newMode: '100755'}),
      file('already-executable', {oldMode: '100755', newMode: '100755'}),
      file('.githooks/pre-push'),
      file('package.json'),
    ]
    const flags = reviewFlags(files, {sizes: new Map([[blob(9), LARGE_FILE_BYTES + 1]]), hooksDir: '.githooks', hookKeysChanged: ['package.json']})
    expect(flags).toEqual([
      {flag: 'ci', paths: ['.github/workflows/ci.yml']},
      {flag: 'lockfile', paths: ['package-lock.json']},
      {flag: 'hook-config', paths: ['.pre-commit-config.yaml', '.githooks/pre-push', 'package.json']},
      {flag: 'agent-sandbox', paths: ['.agent-sandbox/config.json']},
      {flag: 'large', paths: ['assets/big.bin']},
      {flag: 'binary', paths: ['assets/big.bin']},
      {flag: 'new-executable', paths: ['run.sh', 'tool']},
    ])
  })

  it('flags a removed workflow, but not a removed binary, large or executable file; a file of exactly 1 MiB is not large', () => {
    const files = [
      file('.github/workflows/ci.yml', {status: 'D', newMode: '000000', newBlob: Z}),
      file('old.bin', {status: 'D', newMode: '000000', newBlob: Z, binary: true, oldBlob: blob(7)}),
      file('exact.dat', {newBlob: blob(8)}),
    ]
    expect(reviewFlags(files, {sizes: new Map([[blob(7), 5 * LARGE_FILE_BYTES], [blob(8), LARGE_FILE_BYTES]])})).toEqual([{flag: 'ci', paths: ['.github/workflows/ci.yml']}])
  })

  it('does not take .git/hooks for a hooks directory in the tree, and flags nothing for ordinary files', () => {
    expect(reviewFlags([file('.git/hooks/x'), file('src/index.ts')], {sizes: new Map(), hooksDir: '.git/hooks'})).toEqual([])
  })

  it('sums a diffstat, binary files counted without lines', () => {
    expect(diffstatOf([file('a', {added: 3, deleted: 1}), file('b', {binary: true, added: undefined, deleted: undefined}), file('c', {added: 0, deleted: 4})])).toEqual({files: 3, insertions: 3, deletions: 5})
  })
})

describe('parseGateLog', () => {
  it('reads accepted updates, with or without the engine\'s time stamps, and nothing else', () => {
    const a = 'a'.repeat(40)
    const b = 'b'.repeat(40)
    const text = [
      'git-gate: serving /gate/ws on 127.0.0.1:19418 (bind mode); protected: main',
      `2026-01-02T03:04:05.123456789Z git-gate: accepted ${Z} ${a} refs/sandbox/main`,
      '2026-01-02T03:04:06.000000000Z git-gate: refused refs/heads/main: main is a protected branch; propose it',
      `git-gate: accepted ${a} ${b} refs/heads/feat/x`,
      'git-gate: warning: refs/heads/feat changes quality-gate configuration: .husky/pre-commit',
      '',
    ].join('\n')
    expect(parseGateLog(text)).toEqual([
      {at: '2026-01-02T03:04:05.123456789Z', old: Z, new: a, ref: 'refs/sandbox/main'},
      {old: a, new: b, ref: 'refs/heads/feat/x'},
    ])
  })
})

describe('pushRefusal', () => {
  it('names the reason git gives, and tells a moved branch from a refusal', () => {
    expect(pushRefusal('remote: nope\nTo .\n ! [remote rejected] abc -> main (pre-receive hook declined)\nerror: failed to push some refs to \'.\'\n')).toEqual({stale: false, reason: 'pre-receive hook declined'})
    expect(pushRefusal('To .\n ! [rejected]        abc -> main (stale info)\n')).toEqual({stale: true, reason: 'stale info'})
    expect(pushRefusal('fatal: something else\n')).toEqual({stale: false, reason: 'fatal: something else'})
  })
})

describe('host git as the user', () => {
  it('switches to the workspace\'s owner only when we are root and the owner is not', () => {
    expect(hostGitUser({uid: 1234, gid: 1235}, 0)).toEqual({uid: 1234, gid: 1235})
    expect(hostGitUser({uid: 0, gid: 0}, 0)).toBeUndefined()
    expect(hostGitUser({uid: 1234, gid: 1234}, 1234)).toBeUndefined()
    expect(hostGitUser({uid: 1234, gid: 1234}, 1000)).toBeUndefined()
  })

  it('finds a uid\'s home in a passwd file', () => {
    const passwd = 'root:x:0:0:root:/root:/bin/bash\nnode:x:1000:1000::/home/node:/bin/sh\nbad line\nnohome:x:7:7:::\n'
    expect(homeOfUid(passwd, 1000)).toBe('/home/node')
    expect(homeOfUid(passwd, 0)).toBe('/root')
    expect(homeOfUid(passwd, 7)).toBeUndefined()
    expect(homeOfUid(passwd, 42)).toBeUndefined()
  })
})

describe('formatPushReview', () => {
  const push: KeptPush = {
    branch: 'main',
    ref: 'refs/sandbox/main',
    commit: 'c'.repeat(40),
    hostCommit: 'h'.repeat(40),
    base: 'b'.repeat(40),
    fastForward: false,
    behind: 2,
    commits: [{commit: 'c'.repeat(40), author: 'Agent', date: '2026-01-01T00:00:00Z', subject: 'add CI'}],
    commitCount: 1,
    diffstat: {files: 2, insertions: 3, deletions: 0},
    files: [
      {path: '.github/workflows/ci.yml', status: 'A', added: 3, deleted: 0, binary: false},
      {path: 'logo.png', status: 'A', binary: true},
    ],
    flags: [
      {flag: 'ci', paths: ['.github/workflows/ci.yml']},
      {flag: 'binary', paths: ['logo.png']},
    ],
    pushedBy: {sandbox: 'agent-sandbox-app-123', sandboxBranch: '', at: '2026-01-02T03:04:05.1Z'},
  }

  it('shows commits, diffstat, flags, who pushed, and the commands that follow (with --merge when the host moved)', () => {
    expect(formatPushReview({workspace: '/w', kept: [push]}, './app').split('\n')).toEqual([
      `main  cccccccccccc  1 commit, not a fast-forward: main moved on the host since (2 commits the push has not); pushed by agent-sandbox-app-123 at 2026-01-02 03:04:05Z`,
      '  cccccccccccc add CI',
      '  2 files changed, 3 insertions(+), 0 deletions(-)',
      '    +3 -0         A .github/workflows/ci.yml',
      '    binary        A logo.png',
      '  flags:',
      '    CI workflow: .github/workflows/ci.yml',
      '    binary: logo.png',
      '  agent-sandbox review show main ./app | approve main ./app --merge | reject main ./app',
    ])
  })

  it('says when nothing waits, and lists what went through by sandbox', () => {
    const text = formatPushReview({
      workspace: '/w',
      kept: [],
      pushed: [{sandbox: 's1', sandboxBranch: 'feat', pushes: [{ref: 'refs/heads/feat', old: Z, new: 'd'.repeat(40), subject: 'first'}]}],
    })
    expect(text).toBe(
      [
        'no push waits for review in /w',
        '',
        "pushed straight through, by sandbox (from the gates' logs, since each sandbox last started):",
        '  s1 (branch feat)',
        '    feat  new dddddddddddd  first',
      ].join('\n'),
    )
  })
})

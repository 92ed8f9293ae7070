import {chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {dirname, join} from 'node:path'
import {afterEach, describe, expect, it} from 'vitest'
import {detectHookConfig, fsHookProbe, hooksDirOf, hooksPathFromConfig, referencedPaths, type HookProbe} from '../../src/lib/git/hook-config.js'

const WS = '/home/u/app'

/** A probe over a map of files (text) and directories (null). */
function probeOf(tree: Record<string, string | null>): HookProbe {
  const dirs = new Set<string>([''])
  for (const path of Object.keys(tree)) {
    const parts = path.split('/')
    for (let i = 1; i < parts.length; i++) dirs.add(parts.slice(0, i).join('/'))
    if (tree[path] === null) dirs.add(path)
  }
  return {
    kindOf: (r) => (dirs.has(r) ? 'dir' : typeof tree[r] === 'string' ? 'file' : 'missing'),
    read: (r) => (typeof tree[r] === 'string' ? (tree[r] as string) : undefined),
    list: (r) => [...new Set([...Object.keys(tree), ...dirs].filter((p) => p && dirname(p) === (r || '.')).map((p) => p.split('/').pop() as string))],
  }
}

const GIT = {'.git/HEAD': 'ref: refs/heads/main\n', '.git/config': '[core]\n\tbare = false\n', '.git/hooks/pre-commit.sample': '#!/bin/sh\nlefthook\n'}
const names = (r: ReturnType<typeof detectHookConfig>) => r.frameworks.map((f) => f.name)

describe('hooksPathFromConfig / hooksDirOf', () => {
  it('reads core.hooksPath, the last one winning, and ignores other sections', () => {
    expect(hooksPathFromConfig('[core]\n\tbare = false\n\thooksPath = .husky/_\n[remote "x"]\n\thooksPath = nope\n')).toBe('.husky/_')
    expect(hooksPathFromConfig('[core]\nhookspath = "a"\n[CORE]\n  HooksPath = b ; comment\n')).toBe('b')
    expect(hooksPathFromConfig('[user]\n\tname = x\n')).toBeUndefined()
  })
  it('maps it into the workspace, or nowhere when it is outside', () => {
    expect(hooksDirOf(undefined, WS)).toBe('.git/hooks')
    expect(hooksDirOf('./.githooks/', WS)).toBe('.githooks')
    expect(hooksDirOf(`${WS}/.husky/_`, WS)).toBe('.husky/_')
    expect(hooksDirOf('/etc/hooks', WS)).toBeUndefined()
    expect(hooksDirOf('../hooks', WS)).toBeUndefined()
    expect(hooksDirOf('~/hooks', WS)).toBeUndefined()
  })
})

describe('referencedPaths', () => {
  it('finds sourced and run helpers, with $0 as the hook\'s directory', () => {
    const text = [
      '#!/usr/bin/env sh',
      '. "$(dirname -- "$0")/_/husky.sh"',
      'source scripts/hook-env.sh',
      '. ./scripts/common.sh # helpers',
      'sh tools/check.sh --fast',
      'node scripts/verify.mjs',
      './bin/lint && echo ok',
      'exec ../outside.sh',
      '. "$HOME/.config/x.sh"',
      'sh -c "echo hi"',
      '# . commented.sh',
    ].join('\n')
    expect(referencedPaths(text, '.husky')).toEqual(['.husky/_/husky.sh', 'scripts/hook-env.sh', './scripts/common.sh', 'tools/check.sh', 'scripts/verify.mjs', './bin/lint', '../outside.sh'])
  })
})

describe('detectHookConfig', () => {
  it('a repository with no framework: nothing detected, nothing protected', () => {
    const r = detectHookConfig(probeOf({...GIT, 'package.json': '{"name":"x","scripts":{"test":"vitest"}}', 'src/a.ts': ''}), WS)
    expect(r).toEqual({hooksDir: '.git/hooks', frameworks: [], protect: [], embedded: []})
    // An empty .husky (the placeholder start makes for it) is no framework either.
    expect(detectHookConfig(probeOf({...GIT, '.husky': null, '.lefthook': null}), WS).frameworks).toEqual([])
  })

  it('every framework by its config files; package.json itself is never protected', () => {
    const r = detectHookConfig(
      probeOf({
        ...GIT,
        '.husky/pre-commit': 'npx lint-staged\n',
        'lefthook.yml': '',
        '.lefthook-local.yaml': '',
        'lefthook-local.toml': '',
        '.lefthook/pre-commit/x.sh': '',
        '.pre-commit-config.yaml': '',
        '.overcommit.yml': '',
        '.git-hooks/pre_commit/x.rb': '',
        '.lintstagedrc.json': '',
        'lint-staged.config.mjs': '',
        'commitlint.config.js': '',
        '.commitlintrc': '',
        '.simple-git-hooks.json': '',
        'simple-git-hooks.cjs': '',
        '.config/lefthook.yml': '',
        '.config/commitlintrc.json': '',
        '.config/other.yml': '',
        'lefthook.yml.bak': '',
        'package.json': '{"lint-staged":{"*":"false"},"commitlint":{},"simple-git-hooks":{},"husky":{"hooks":{}}}',
      }),
      WS,
    )
    expect(names(r)).toEqual(['husky', 'lefthook', 'pre-commit', 'overcommit', 'lint-staged', 'commitlint', 'simple-git-hooks'])
    expect([...r.protect].sort()).toEqual(
      [
        '.husky', 'lefthook.yml', '.lefthook-local.yaml', 'lefthook-local.toml', '.lefthook', '.pre-commit-config.yaml', '.overcommit.yml', '.git-hooks',
        '.lintstagedrc.json', 'lint-staged.config.mjs', 'commitlint.config.js', '.commitlintrc', '.simple-git-hooks.json', 'simple-git-hooks.cjs',
        '.config/lefthook.yml', '.config/commitlintrc.json',
      ].sort(),
    )
    expect(r.protect).not.toContain('package.json')
    expect(r.embedded).toEqual(['lint-staged', 'commitlint', 'simple-git-hooks', 'husky'])
  })

  it('frameworks from the installed hooks\' text, with no config file (package.json only)', () => {
    const r = detectHookConfig(
      probeOf({
        ...GIT,
        '.git/hooks/pre-commit': '#!/bin/sh\nif [ "$SKIP_SIMPLE_GIT_HOOKS" = "1" ]; then exit 0; fi\nnpx lint-staged\n',
        '.git/hooks/commit-msg': '#!/bin/sh\nnpx --no -- commitlint --edit "$1"\n',
        '.git/hooks/pre-push': '#!/usr/bin/env bash\n# File generated by pre-commit: https://pre-commit.com\n',
        '.git/hooks/post-checkout': '#!/bin/sh\ncall_lefthook run "post-checkout" "$@"\n',
        '.git/hooks/post-merge': '#!/usr/bin/env ruby\n# Overcommit hook\n',
        'package.json': '{"lint-staged":{"*.js":"false"},"commitlint":{"extends":["@commitlint/config-conventional"]}}',
      }),
      WS,
    )
    expect(names(r)).toEqual(['lefthook', 'pre-commit', 'overcommit', 'lint-staged', 'commitlint', 'simple-git-hooks'])
    expect(r.frameworks.find((f) => f.name === 'lint-staged')?.evidence).toEqual(['hook .git/hooks/pre-commit', 'package.json "lint-staged"'])
    expect(r.protect).toEqual([])
    expect(r.embedded).toEqual(['lint-staged', 'commitlint'])
  })

  it('husky 9 (core.hooksPath .husky/_): its scripts and the helpers they source in the tree', () => {
    const r = detectHookConfig(
      probeOf({
        ...GIT,
        '.git/config': '[core]\n\thooksPath = .husky/_\n',
        '.husky/_/pre-commit': '#!/usr/bin/env sh\n. "$(dirname "$0")/h"\n',
        '.husky/_/h': '#!/usr/bin/env sh\n',
        '.husky/pre-commit': '. scripts/hooks/env.sh\nsh ./scripts/hooks/check.sh\nnode node_modules/x/cli.js\nnpx lint-staged\n',
        'scripts/hooks/env.sh': '',
        'scripts/hooks/check.sh': '',
        'node_modules/x/cli.js': '',
        '.lintstagedrc': '',
      }),
      WS,
    )
    expect(r.hooksDir).toBe('.husky/_')
    expect(names(r)).toEqual(['husky', 'lint-staged'])
    expect(r.protect).toEqual(['.husky', '.lintstagedrc', 'scripts/hooks/env.sh', 'scripts/hooks/check.sh'])
  })

  it('a hooks directory in the work tree is protected; one outside the workspace is not read', () => {
    const inTree = detectHookConfig(probeOf({...GIT, '.git/config': '[core]\n\thooksPath = .githooks\n', '.githooks/pre-commit': 'exec lefthook run pre-commit\n'}), WS)
    expect(inTree.protect).toEqual(['.githooks'])
    expect(names(inTree)).toEqual(['lefthook'])
    const outside = detectHookConfig(probeOf({...GIT, '.git/config': '[core]\n\thooksPath = /etc/hooks\n'}), WS)
    expect(outside.hooksDir).toBeUndefined()
    expect(outside.protect).toEqual([])
  })

  it('ignores samples, symlinks, sourced paths outside the workspace or in .git, and bad package.json', () => {
    const probe = probeOf({
      ...GIT,
      '.git/hooks/pre-commit': '. ../../etc/profile\n. .git/hooks/lib.sh\n. "$X/y"\n. /etc/profile\n',
      'package.json': '{not json',
    })
    const kindOf = probe.kindOf
    probe.kindOf = (r) => (r === 'lefthook.yml' ? 'symlink' : kindOf(r))
    probe.list = ((list) => (r: string) => (r === '' ? [...list(r), 'lefthook.yml'] : list(r)))(probe.list)
    expect(detectHookConfig(probe, WS)).toEqual({hooksDir: '.git/hooks', frameworks: [], protect: [], embedded: []})
  })
})

describe('fsHookProbe', () => {
  let root = ''
  afterEach(() => rmSync(root, {recursive: true, force: true}))
  it('detects on a real tree the same way', () => {
    root = mkdtempSync(join(tmpdir(), 'hookcfg-'))
    mkdirSync(join(root, '.git', 'hooks'), {recursive: true})
    writeFileSync(join(root, '.git', 'HEAD'), 'ref: refs/heads/main\n')
    writeFileSync(join(root, '.git', 'config'), '[core]\n')
    writeFileSync(join(root, '.git', 'hooks', 'pre-commit'), '#!/bin/sh\nlefthook run pre-commit\n')
    chmodSync(join(root, '.git', 'hooks', 'pre-commit'), 0o755)
    writeFileSync(join(root, 'lefthook.yml'), 'pre-commit:\n')
    writeFileSync(join(root, 'package.json'), '{"name":"x"}')
    const r = detectHookConfig(fsHookProbe(root), root)
    expect(r.frameworks).toEqual([{name: 'lefthook', evidence: ['lefthook.yml', 'hook .git/hooks/pre-commit']}])
    expect(r.protect).toEqual(['lefthook.yml'])
  })
})

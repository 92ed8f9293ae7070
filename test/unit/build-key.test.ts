import {chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterEach, describe, expect, it} from 'vitest'
import {buildKey, externalImages, readBuildContext} from '../../src/lib/images/build-key.js'

describe('externalImages', () => {
  const template = 'ARG BASE_IMAGE_TAG=latest\nFROM agent-sandbox-base:${BASE_IMAGE_TAG}\nRUN echo hi\n'

  it('substitutes build arguments over ARG defaults', () => {
    expect(externalImages(template, {})).toEqual(['agent-sandbox-base:latest'])
    expect(externalImages(template, {BASE_IMAGE_TAG: '2026-11-22'})).toEqual(['agent-sandbox-base:2026-11-22'])
    expect(externalImages('ARG T\nFROM base:$T\n', {T: 'x'})).toEqual(['base:x'])
  })

  it('follows stages, --platform, COPY --from and RUN --mount from=, and leaves out its own stages and scratch', () => {
    const dockerfile = [
      'FROM --platform=linux/amd64 golang:1.23 AS Build',
      'RUN --mount=type=cache,target=/root/.cache go build',
      'FROM scratch AS empty',
      'FROM agent-sandbox-base:latest',
      'COPY --from=build /out /usr/local/bin/',
      'COPY --from=0 /x /x',
      'COPY --from=docker.io/library/busybox:1 /bin/busybox /bin/',
      'RUN --mount=type=bind,from=tools:2,source=/t,target=/t \\',
      '    cp /t/a /a',
    ].join('\n')
    expect(externalImages(dockerfile, {})).toEqual(['golang:1.23', 'agent-sandbox-base:latest', 'docker.io/library/busybox:1', 'tools:2'])
  })

  it('joins continuation lines and skips comments inside them', () => {
    expect(externalImages('FROM \\\n# a comment\n  base:1\n', {})).toEqual(['base:1'])
  })

  it.each([
    ['a remote ADD', 'FROM base:1\nADD https://example.invalid/x.tgz /x\n'],
    ['a git ADD', 'FROM base:1\nADD git@example.invalid:a/b.git /src\n'],
    ['a parser directive', '# syntax=docker/dockerfile:1\nFROM base:1\n'],
    ['an escape directive', '# escape=`\nFROM base:1\n'],
    ['an unresolved variable', 'FROM base:${NOPE}\n'],
    ['a FROM without an image', 'FROM\n'],
  ])('cannot tell with %s', (_what, dockerfile) => {
    expect(externalImages(dockerfile, {})).toBeUndefined()
  })
})

describe('readBuildContext and buildKey', () => {
  let dir = ''
  afterEach(() => rmSync(dir, {recursive: true, force: true}))

  const make = () => {
    dir = mkdtempSync(join(tmpdir(), 'build-key-'))
    writeFileSync(join(dir, 'Dockerfile'), 'FROM base:1\n')
    mkdirSync(join(dir, 'sub'))
    writeFileSync(join(dir, 'sub', 'a.sh'), 'echo a\n')
    symlinkSync('a.sh', join(dir, 'sub', 'link'))
    return dir
  }
  const keyOf = (args = ['build', '--tag', 'x'], ids = {'base:1': 'sha256:1'}) => buildKey({args, context: readBuildContext(dir), imageIds: ids})

  it('lists files, directories and links in a stable order', () => {
    make()
    expect(readBuildContext(dir).map((e) => `${e.kind}:${e.path}`)).toEqual(['file:Dockerfile', 'dir:sub', 'file:sub/a.sh', 'link:sub/link'])
  })

  it('leaves the settings file at the root out (config.json is no build input), not a config.json below it', () => {
    make()
    const key = keyOf()
    writeFileSync(join(dir, 'config.json'), '{"allowDomains": ["a.example"]}\n')
    expect(keyOf()).toBe(key)
    writeFileSync(join(dir, 'sub', 'config.json'), '{}\n')
    expect(keyOf()).not.toBe(key)
  })

  it('is stable, and changes with any input', () => {
    make()
    const key = keyOf()
    expect(keyOf()).toBe(key)
    const changed = new Set<string>([key])
    changed.add(keyOf(['build', '--tag', 'y']))
    changed.add(keyOf(undefined, {'base:1': 'sha256:2'}))
    writeFileSync(join(dir, 'sub', 'a.sh'), 'echo b\n')
    changed.add(keyOf())
    chmodSync(join(dir, 'sub', 'a.sh'), 0o755)
    changed.add(keyOf())
    rmSync(join(dir, 'sub', 'link'))
    symlinkSync('elsewhere', join(dir, 'sub', 'link'))
    changed.add(keyOf())
    writeFileSync(join(dir, '.dockerignore'), '*.md\n')
    changed.add(keyOf())
    expect(changed.size).toBe(7)
  })
})

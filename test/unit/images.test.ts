import {mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it, vi} from 'vitest'
import {BuildError, UsageError} from '../../src/lib/errors.js'
import {
  caCertPathsFromEnv,
  isConcreteVersion,
  parseArgDefaults,
  readCaCerts,
  resolveVersions,
  splitPem,
  type RegistryClient,
} from '../../src/lib/images/build.js'

function fakeRegistry(answers: Record<string, string>) {
  const resolve = vi.fn(async (pkg: string, spec: string) => {
    const answer = answers[`${pkg}@${spec}`]
    if (answer === undefined) throw new Error(`unexpected lookup ${pkg}@${spec}`)
    return answer
  })
  return {registry: {resolve} satisfies RegistryClient, resolve}
}

describe('resolveVersions', () => {
  it('resolves latest and ranges but not concrete versions', async () => {
    const {registry, resolve} = fakeRegistry({'@anthropic-ai/claude-code@latest': '2.1.0', '@openai/codex@^0.5': '0.5.7'})
    const versions = await resolveVersions({claudeCode: 'latest', codex: ' ^0.5 ', astGrep: '0.39.1'}, registry)
    expect(versions).toEqual({claudeCode: '2.1.0', codex: '0.5.7', astGrep: '0.39.1'})
    expect(resolve).toHaveBeenCalledTimes(2)
    expect(resolve).toHaveBeenCalledWith('@anthropic-ai/claude-code', 'latest')
    expect(resolve).toHaveBeenCalledWith('@openai/codex', '^0.5')
    expect(resolve).not.toHaveBeenCalledWith('@ast-grep/cli', expect.anything())
  })

  it('makes no lookup when every version is concrete', async () => {
    const {registry, resolve} = fakeRegistry({})
    expect(await resolveVersions({claudeCode: '1.0.0', codex: '0.1.0-alpha.2', astGrep: '0.2.0+build.7'}, registry)).toEqual({
      claudeCode: '1.0.0',
      codex: '0.1.0-alpha.2',
      astGrep: '0.2.0+build.7',
    })
    expect(resolve).not.toHaveBeenCalled()
  })

  it('starts every lookup before any answers (in parallel)', async () => {
    const pending: Array<{spec: string; done: (v: string) => void}> = []
    const resolve = vi.fn((_pkg: string, spec: string) => new Promise<string>((done) => pending.push({spec, done})))
    const result = resolveVersions({claudeCode: 'latest', codex: 'next', astGrep: '~0.3'}, {resolve})
    await new Promise((r) => setTimeout(r, 0))
    expect(resolve).toHaveBeenCalledTimes(3)
    expect(pending.map((p) => p.spec).sort()).toEqual(['latest', 'next', '~0.3'])
    for (const p of pending) p.done(`9.9.${p.spec.length}`)
    expect(await result).toEqual({claudeCode: '9.9.6', codex: '9.9.4', astGrep: '9.9.4'})
  })

  it.each(['latest; rm -rf /', '$(whoami)', '', '   ', 'a`b`', '1.0.0\n2.0.0'])('rejects the invalid spec %j with a UsageError', async (spec) => {
    const {registry} = fakeRegistry({'@openai/codex@latest': '1.0.0', '@ast-grep/cli@latest': '1.0.0'})
    const promise = resolveVersions({claudeCode: spec, codex: 'latest', astGrep: 'latest'}, registry)
    await expect(promise).rejects.toBeInstanceOf(UsageError)
    await expect(promise).rejects.toThrow(/@anthropic-ai\/claude-code/)
  })

  it('propagates a registry failure', async () => {
    const failure = new BuildError('cannot resolve @openai/codex@latest')
    const resolve = vi.fn(async (pkg: string) => {
      if (pkg === '@openai/codex') throw failure
      return '1.0.0'
    })
    await expect(resolveVersions({claudeCode: 'latest', codex: 'latest', astGrep: 'latest'}, {resolve})).rejects.toBe(failure)
  })
})

describe('isConcreteVersion', () => {
  it.each(['1.2.3', '0.0.1', '10.20.30', '1.0.0-beta.1', '1.0.0+sha.abc', '1.0.0-rc-1'])('%j is concrete', (v) => {
    expect(isConcreteVersion(v)).toBe(true)
  })
  it.each(['latest', '^1.2.3', '~1.2', '1.2', '1', 'v1.2.3', '>=1.0.0', '1.2.x', '1.2.3 || 2.0.0', ''])('%j is not concrete', (v) => {
    expect(isConcreteVersion(v)).toBe(false)
  })
})

describe('parseArgDefaults', () => {
  it('collects ARG NAME=value defaults only', () => {
    const dockerfile = [
      'ARG BASE_IMAGE=node:22-bookworm-slim',
      'FROM ${BASE_IMAGE}',
      '  ARG CLAUDE_CODE_VERSION=1.2.3  ',
      'ARG NO_DEFAULT',
      'arg LOWER=ignored',
      'ARG CODEX_VERSION=latest\r',
      '# ARG COMMENTED=1',
      'RUN echo ARG X=1',
      'ARG SPACED="a b"',
    ].join('\n')
    expect(parseArgDefaults(dockerfile)).toEqual({
      BASE_IMAGE: 'node:22-bookworm-slim',
      CLAUDE_CODE_VERSION: '1.2.3',
      CODEX_VERSION: 'latest',
    })
  })

  it('lets a later ARG override an earlier one', () => {
    expect(parseArgDefaults('ARG A=1\nARG A=2\n')).toEqual({A: '2'})
  })
})

const pem = (body: string) => `-----BEGIN CERTIFICATE-----\n${body}\n-----END CERTIFICATE-----`

describe('splitPem', () => {
  it('splits a bundle into its certificates', () => {
    const bundle = `# Root A\n${pem('AAAA')}\n\n# Root B\n${pem('BBBB\nBBBB')}\n${pem('CCCC')}\ntrailing junk\n`
    expect(splitPem(bundle)).toEqual([`${pem('AAAA')}\n`, `${pem('BBBB\nBBBB')}\n`, `${pem('CCCC')}\n`])
  })

  it('normalises CRLF line endings', () => {
    const crlf = `${pem('AAAA\nAAAA')}\n`.replaceAll('\n', '\r\n')
    const [cert] = splitPem(crlf)
    expect(cert).toBe(`${pem('AAAA\nAAAA')}\n`)
    expect(cert).not.toContain('\r')
  })

  it('returns [] when there is no certificate', () => {
    expect(splitPem('')).toEqual([])
    expect(splitPem('-----BEGIN PRIVATE KEY-----\nxx\n-----END PRIVATE KEY-----\n')).toEqual([])
    expect(splitPem('-----BEGIN CERTIFICATE-----\nunterminated')).toEqual([])
  })
})

describe('readCaCerts', () => {
  let dir: string
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'agent-sandbox-ca-'))
    writeFileSync(join(dir, 'a.pem'), `${pem('AAAA')}\n`)
    writeFileSync(join(dir, 'bundle.pem'), `${pem('AAAA')}\n${pem('BBBB')}\n`.replaceAll('\n', '\r\n'))
    writeFileSync(join(dir, 'empty.pem'), 'nothing here\n')
  })
  afterAll(() => rmSync(dir, {recursive: true, force: true}))

  it('reads and de-duplicates certificates across files', () => {
    expect(readCaCerts([join(dir, 'a.pem'), join(dir, 'bundle.pem')])).toEqual([`${pem('AAAA')}\n`, `${pem('BBBB')}\n`])
    expect(readCaCerts([])).toEqual([])
  })

  it('refuses a missing file with a UsageError naming it', () => {
    const missing = join(dir, 'missing.pem')
    expect(() => readCaCerts([join(dir, 'a.pem'), missing])).toThrow(UsageError)
    expect(() => readCaCerts([missing])).toThrow(missing)
  })

  it('refuses a file without a certificate', () => {
    expect(() => readCaCerts([join(dir, 'empty.pem')])).toThrow(/no PEM certificate/)
  })
})

describe('caCertPathsFromEnv', () => {
  it('splits AGENT_SANDBOX_CA_CERTS on commas and colons', () => {
    expect(caCertPathsFromEnv({AGENT_SANDBOX_CA_CERTS: '/a.pem, /b.pem:/c.pem,,'})).toEqual(['/a.pem', '/b.pem', '/c.pem'])
    expect(caCertPathsFromEnv({})).toEqual([])
    expect(caCertPathsFromEnv({AGENT_SANDBOX_CA_CERTS: ' '})).toEqual([])
  })
})

/**
 * The layering docs/design.md describes, checked on the sources:
 * src/commands → src/cli → src/lib/<area> → src/lib/engine, nothing pointing
 * back up, and a library that never exits, traps signals or writes to our
 * streams (the command layer does; the library takes a reporter and an
 * AbortSignal). Each rule is first shown to catch a violation (the controls).
 */
import {readdirSync, readFileSync} from 'node:fs'
import {join, relative, resolve} from 'node:path'
import {describe, expect, it} from 'vitest'

const ROOT = resolve(import.meta.dirname, '..', '..')
const sources = (dir: string) =>
  readdirSync(join(ROOT, dir), {recursive: true, encoding: 'utf8'})
    .filter((f) => f.endsWith('.ts'))
    .map((f) => join(dir, f))

/** Relative import specifiers of a TypeScript source, resolved to repository paths. */
function imports(file: string, text = readFileSync(join(ROOT, file), 'utf8')): string[] {
  const specs = [...text.matchAll(/(?:from|import\()\s*'(\.{1,2}\/[^']+)'/g)].map((m) => m[1])
  return specs.map((s) => relative(ROOT, resolve(ROOT, file, '..', s)))
}

/** What the library must not do to the process it runs in. */
const PROCESS_USE = /process\.(exit|on|once|addListener|prependListener|stdout|stderr|stdin)\b|console\.(log|error|warn|info)\(/

function upward(file: string, text?: string): string[] {
  return imports(file, text).filter((target) => target.startsWith('src/cli/') || target.startsWith('src/commands/'))
}

describe('layering', () => {
  it('controls: the checks catch an upward import and a process hook', () => {
    expect(upward('src/lib/sandbox/x.ts', "import {stdio} from '../../cli/output.js'")).toEqual(['src/cli/output.js'])
    expect(PROCESS_USE.test("process.once('SIGINT', abort)")).toBe(true)
    expect(PROCESS_USE.test('process.stdout.write(chunk)')).toBe(true)
    expect(PROCESS_USE.test('process.env.HOME')).toBe(false)
  })

  it('nothing in src/lib imports src/cli or src/commands', () => {
    const offenders = sources('src/lib').flatMap((f) => upward(f).map((t) => `${f} → ${t}`))
    expect(offenders).toEqual([])
  })

  it('nothing in src/cli imports src/commands, and only src/lib/engine reaches the engine API client', () => {
    const cli = sources('src/cli').flatMap((f) => imports(f).filter((t) => t.startsWith('src/commands/')).map((t) => `${f} → ${t}`))
    expect(cli).toEqual([])
    const api = [...sources('src/lib'), ...sources('src/cli'), ...sources('src/commands')]
      .filter((f) => !f.startsWith('src/lib/engine/'))
      .flatMap((f) => imports(f).filter((t) => /^src\/lib\/engine\/(api|ssh)\.js$/.test(t)).map((t) => `${f} → ${t}`))
    expect(api).toEqual([])
  })

  it('src/lib never exits, traps signals or writes to our streams', () => {
    const offenders = sources('src/lib').filter((f) => PROCESS_USE.test(readFileSync(join(ROOT, f), 'utf8').replace(/^\s*(\*|\/\/).*$/gm, '')))
    expect(offenders).toEqual([])
  })

  it('unit tests fake the engine through fake-engine.ts, type-checked: no `as unknown as` casts', () => {
    const offenders = sources('test/unit').filter((f) => /as unknown as/.test(readFileSync(join(ROOT, f), 'utf8')) && !f.endsWith('layering.test.ts'))
    expect(offenders).toEqual([])
  })
})

/**
 * The shape of src/, checked on the sources: files small enough to hold one
 * responsibility, no import cycles, no two areas of src/lib importing each
 * other, and one meaning per exported name in src/lib. Each check is first
 * shown to catch a violation on a small fixture (the controls).
 */
import {readdirSync, readFileSync} from 'node:fs'
import {dirname, join, relative, resolve} from 'node:path'
import {describe, expect, it} from 'vitest'

const ROOT = resolve(import.meta.dirname, '..', '..')
const MAX_LINES = 400

type Sources = Map<string, string>

function readSources(dir: string): Sources {
  const files = readdirSync(join(ROOT, dir), {recursive: true, encoding: 'utf8'}).filter((f) => f.endsWith('.ts'))
  return new Map(files.map((f) => [join(dir, f), readFileSync(join(ROOT, dir, f), 'utf8')]))
}

/** Relative imports of one file (values and types), as repository paths ending in .ts. */
function importsOf(file: string, text: string): string[] {
  const specs = [...text.matchAll(/(?:\bfrom|\bimport\(?)\s*'(\.{1,2}\/[^']+)'/g)].map((m) => m[1])
  return specs.map((s) => relative(ROOT, resolve(ROOT, dirname(file), s)).replace(/\.js$/, '.ts'))
}

function overLimit(sources: Sources): string[] {
  return [...sources]
    .filter(([, text]) => text.split('\n').length - (text.endsWith('\n') ? 1 : 0) > MAX_LINES)
    .map(([file]) => file)
}

/** Every import cycle, each once, as "a → b → a" (Tarjan's strongly connected components). */
function importCycles(sources: Sources): string[] {
  const graph = new Map([...sources].map(([file, text]) => [file, importsOf(file, text).filter((t) => sources.has(t))]))
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: string[] = []
  const onStack = new Set<string>()
  const cycles: string[] = []
  let next = 0
  const visit = (v: string): void => {
    index.set(v, next)
    low.set(v, next++)
    stack.push(v)
    onStack.add(v)
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w)
        low.set(v, Math.min(low.get(v)!, low.get(w)!))
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!))
    }
    if (low.get(v) !== index.get(v)) return
    const component: string[] = []
    let w: string
    do {
      w = stack.pop()!
      onStack.delete(w)
      component.push(w)
    } while (w !== v)
    if (component.length > 1 || graph.get(v)!.includes(v)) cycles.push(component.sort().join(' ↔ '))
  }
  for (const file of [...graph.keys()].sort()) if (!index.has(file)) visit(file)
  return cycles
}

/**
 * The area of a file under src/lib: the folder it sits in (network/gateway, the
 * server that runs in its own container, is an area of its own beside network),
 * or the file itself at the top (errors.ts, workspace.ts).
 */
function areaOf(file: string): string | undefined {
  const m = /^src\/lib\/(.+)$/.exec(file)
  if (!m) return undefined
  const slash = m[1].lastIndexOf('/')
  return slash < 0 ? m[1].replace(/\.ts$/, '') : m[1].slice(0, slash)
}

/** Pairs of src/lib areas that import each other, as "a ↔ b" with one example arrow each way. */
function twoWayAreas(sources: Sources): string[] {
  const arrows = new Map<string, string>()
  for (const [file, text] of sources) {
    const from = areaOf(file)
    if (!from) continue
    for (const target of importsOf(file, text)) {
      const to = areaOf(target)
      if (to && to !== from && !arrows.has(`${from}>${to}`)) arrows.set(`${from}>${to}`, `${file} → ${target}`)
    }
  }
  const pairs: string[] = []
  for (const [key, example] of arrows) {
    const [from, to] = key.split('>')
    if (from < to && arrows.has(`${to}>${from}`)) pairs.push(`${from} ↔ ${to}: ${example}; ${arrows.get(`${to}>${from}`)}`)
  }
  return pairs
}

/** Names exported (defined, not re-exported) by more than one file. */
function doubleExports(sources: Sources): string[] {
  const where = new Map<string, string[]>()
  for (const [file, text] of sources) {
    const names = [...text.matchAll(/^export\s+(?:declare\s+)?(?:default\s+)?(?:async\s+)?(?:abstract\s+)?(?:function\*?|class|const|let|var|interface|type|enum)\s+([A-Za-z_$][\w$]*)/gm)].map((m) => m[1])
    for (const name of new Set(names)) where.set(name, [...(where.get(name) ?? []), file])
  }
  return [...where].filter(([, files]) => files.length > 1).map(([name, files]) => `${name}: ${files.join(', ')}`)
}

describe('structure of src/', () => {
  const src = readSources('src')
  const lib = new Map([...src].filter(([file]) => file.startsWith('src/lib/')))

  it('controls: each check catches a small violation', () => {
    const long = new Map([['src/lib/a/big.ts', 'x\n'.repeat(MAX_LINES + 1)], ['src/lib/a/ok.ts', 'x\n'.repeat(MAX_LINES)]])
    expect(overLimit(long)).toEqual(['src/lib/a/big.ts'])
    expect(overLimit(new Map([...long].slice(1)))).toEqual([])

    const loop = new Map([
      ['src/lib/a/x.ts', "import {y} from './y.js'"],
      ['src/lib/a/y.ts', "import type {z} from './z.js'"],
      ['src/lib/a/z.ts', "export {x} from './x.js'"],
      ['src/lib/a/w.ts', "import {x} from './x.js'"],
    ])
    expect(importCycles(loop)).toEqual(['src/lib/a/x.ts ↔ src/lib/a/y.ts ↔ src/lib/a/z.ts'])
    expect(importCycles(new Map([['src/lib/a/x.ts', "import {y} from './y.js'"], ['src/lib/a/y.ts', '']]))).toEqual([])

    const areas = new Map([
      ['src/lib/git/x.ts', "import {S} from '../sandbox/spec.js'"],
      ['src/lib/sandbox/y.ts', "import {x} from '../git/x.js'"],
      ['src/lib/sandbox/z.ts', "import {e} from '../errors.js'"],
    ])
    expect(twoWayAreas(areas)).toEqual(['git ↔ sandbox: src/lib/git/x.ts → src/lib/sandbox/spec.ts; src/lib/sandbox/y.ts → src/lib/git/x.ts'])
    expect(twoWayAreas(new Map([...areas].slice(1)))).toEqual([])

    const twice = new Map([
      ['src/lib/a/x.ts', 'export function checkRules() {}\nexport interface Limits {}'],
      ['src/lib/b/y.ts', "export const checkRules = 1\nexport type Other = 1\nexport {Limits} from '../a/x.js'"],
    ])
    expect(doubleExports(twice)).toEqual(['checkRules: src/lib/a/x.ts, src/lib/b/y.ts'])
  })

  it(`no TypeScript file in src/ has more than ${MAX_LINES} lines`, () => {
    expect(overLimit(src)).toEqual([])
  })

  it('no import cycle in src/', () => {
    expect(importCycles(src)).toEqual([])
  })

  it('no two areas of src/lib import each other', () => {
    expect(twoWayAreas(lib)).toEqual([])
  })

  it('no exported name is defined twice in src/lib', () => {
    expect(doubleExports(lib)).toEqual([])
  })
})

import {describe, expect, it} from 'vitest'
import {FAST_COMMANDS, parseFast} from '../../src/cli/fast.js'
import Build from '../../src/commands/build.js'
import Checkout from '../../src/commands/checkout.js'
import Exec from '../../src/commands/exec.js'
import List from '../../src/commands/list.js'
import Run from '../../src/commands/run.js'
import Shell from '../../src/commands/shell.js'

describe('parseFast', () => {
  it('parses exec with a path, flags in both spellings, and the command after --', () => {
    expect(parseFast(['exec', '/w s', '--branch', 'feat/x', '--network=none', '--', 'sh', '-c', 'exit 3', '--', '--help'])).toEqual({
      name: 'exec',
      args: {path: '/w s'},
      flags: {branch: 'feat/x', network: 'none'},
      command: ['sh', '-c', 'exit 3', '--', '--help'],
    })
    expect(parseFast(['exec', '--engine', 'podman', '--', 'true'])).toEqual({name: 'exec', args: {}, flags: {engine: 'podman'}, command: ['true']})
  })

  it('parses checkout with its required branch and optional path', () => {
    expect(parseFast(['checkout', 'feat/x', '--json'])).toEqual({name: 'checkout', args: {branch: 'feat/x'}, flags: {json: true}, command: []})
    expect(parseFast(['checkout', 'b', '/w'])).toEqual({name: 'checkout', args: {branch: 'b', path: '/w'}, flags: {}, command: []})
  })

  it('parses run: repeatable --env, an integer --pids-limit, limits and the command after --', () => {
    expect(parseFast(['run', '/w', '--env', 'A', '--env=B', '--pids-limit', '64', '--memory', '1g', '--cpus', '1.5', '--keep', '--timeout', '10s', '--', 'make', '--', 'x'])).toEqual({
      name: 'run',
      args: {path: '/w'},
      flags: {env: ['A', 'B'], 'pids-limit': 64, memory: '1g', cpus: '1.5', keep: true, timeout: '10s'},
      command: ['make', '--', 'x'],
    })
    // A path after a repeatable flag is the path, not another value (oclif: multipleNonGreedy).
    expect(parseFast(['run', '--env', 'A', '/w', '--keep', '--', 'true'])).toEqual({name: 'run', args: {path: '/w'}, flags: {env: ['A'], keep: true}, command: ['true']})
    expect(parseFast(['run', '--network', 'none', '--branch', 'feat/x', '--', 'true'])).toEqual({
      name: 'run',
      args: {},
      flags: {network: 'none', branch: 'feat/x'},
      command: ['true'],
    })
  })

  it('parses shell and list', () => {
    expect(parseFast(['shell'])).toEqual({name: 'shell', args: {}, flags: {}, command: []})
    expect(parseFast(['shell', '--build', '--base-tag', '1.2', '.'])).toEqual({name: 'shell', args: {path: '.'}, flags: {build: true, 'base-tag': '1.2'}, command: []})
    expect(parseFast(['list', '--json'])).toEqual({name: 'list', args: {}, flags: {json: true}, command: []})
    expect(parseFast(['build', '--no-cache', 'my ws'])).toEqual({name: 'build', args: {path: 'my ws'}, flags: {'no-cache': true}, command: []})
  })

  it.each([
    [['start', '.']],
    [['exec', '.']],
    [['exec', '.', '--']],
    [['exec', '--help', '--', 'true']],
    [['exec', '-h', '--', 'true']],
    [['exec', '--bogus', '--', 'true']],
    [['exec', '--network', 'sideways', '--', 'true']],
    [['exec', '--engine=lxc', '--', 'true']],
    [['exec', '--branch', '--', 'true']],
    [['exec', '--branch', '', '--', 'true']],
    [['exec', '--branch', 'a', '--branch', 'b', '--', 'true']],
    [['exec', 'a', 'b', '--', 'true']],
    [['shell', '--build=yes']],
    [['shell', '--no-build']],
    [['shell', '--', 'ls']],
    [['list', '.']],
    [['list', '--help']],
    [['list', '--json', '--json']],
    [['checkout']],
    [['checkout', 'b', '.', 'extra']],
    [['run', '.']],
    [['run', '--']],
    [['run', '--pids-limit', '15', '--', 'true']],
    [['run', '--pids-limit', '1.5', '--', 'true']],
    [['run', '--pids-limit', 'many', '--', 'true']],
    [['run', '--pids-limit=-20', '--', 'true']],
    [['run', '--keep', '--keep', '--', 'true']],
    [['run', '--env', '--', 'true']],
    [['run', '--timeout', '1s', '--timeout', '2s', '--', 'true']],
    [['__proto__']],
    [['toString']],
  ])('leaves %j to oclif', (argv) => {
    expect(parseFast(argv)).toBeUndefined()
  })
})

describe('FAST_COMMANDS', () => {
  // The fast path must accept exactly the flags the oclif commands define, with the same options.
  it.each([
    ['exec', Exec],
    ['list', List],
    ['shell', Shell],
    ['build', Build],
    ['checkout', Checkout],
    ['run', Run],
  ] as const)('%s matches its oclif definition', (name, command) => {
    type Def = {type: string; options?: readonly string[]; char?: string; multiple?: boolean; multipleNonGreedy?: boolean; allowNo?: boolean; env?: string; min?: number; max?: number}
    const oclifFlags = {...command.baseFlags, ...command.flags} as Record<string, Def>
    const fast = FAST_COMMANDS[name]
    expect(Object.keys(fast.flags).sort()).toEqual(Object.keys(oclifFlags).sort())
    for (const [flag, def] of Object.entries(oclifFlags)) {
      // oclif's integer flags are options with a minimum (the only ones we define).
      const kind = def.type === 'boolean' ? 'boolean' : def.min === undefined ? 'string' : 'integer'
      expect(fast.flags[flag].kind, flag).toBe(kind)
      expect(fast.flags[flag].min, flag).toBe(def.min)
      expect(fast.flags[flag].options, flag).toEqual(def.options)
      expect(Boolean(fast.flags[flag].multiple), flag).toBe(Boolean(def.multiple))
      // The fast parser takes one value per repeatable flag: oclif must not be greedy either.
      if (def.multiple) expect(def.multipleNonGreedy, flag).toBe(true)
      // Spellings the fast parser does not know would silently fall back; none exist today.
      expect([def.char, def.allowNo, def.env, def.max].filter(Boolean), flag).toEqual([])
    }
    const args = Object.entries((command.args ?? {}) as Record<string, {required?: boolean}>)
    expect(fast.args).toEqual(args.map(([argName]) => argName))
    expect(fast.required).toBe(args.filter(([, def]) => def.required).length)
    // Required arguments come first, as the parser assumes.
    expect(args.slice(0, fast.required).every(([, def]) => def.required)).toBe(true)
  })
})
